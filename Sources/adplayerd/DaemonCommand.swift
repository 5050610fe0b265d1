import AdPlayerDaemon
import AdPlayerMpv
import AdRuntime
import AdSources
import AdTracking
import ControlProtocol
import CSystem
import Foundation
import MpvPlayerAdapter

/// `adplayerd [--config FILE] [--library DIR]… [--ads SOURCE]… …`: the daemon. A set of
/// services started in order and stopped in reverse (in the manner of swift-service-lifecycle):
///
///     logger → state store → mpv → ad runtime (source, outbox, policy) → control socket → D-Bus (MPRIS, sleep) → READY=1
///
/// SIGTERM/SIGINT (and SIGQUIT) stop it in reverse order — ads ended, positions saved, the
/// outbox given 2 s to deliver, mpv shut down (R5) — and it exits 0; a second signal exits at
/// once. SIGHUP reloads the configuration file and the ad source; a burst of them is one
/// reload, and a stop goes ahead of any reload still waiting (`DaemonRequests`).
/// Configuration: docs/configuration.md; protocol: docs/protocol.md.
struct DaemonCommand {
    /// Every configuration key as a flag (`Configuration.flagsUsage`).
    static let usage: String = {
        let flags = Configuration.flagsUsage()
        return (["usage: adplayerd " + flags[0]] + flags.dropFirst().map { String(repeating: " ", count: 17) + $0 }
            + ["  Runs the daemon (docs/configuration.md; tracking, proof of play, metrics: docs/reporting.md);",
               "  adplayerctl controls it (docs/protocol.md). --mpv-ipc-socket is unsafe (tests and debugging)."]).joined(separator: "\n")
    }()

    let arguments: [String]

    func run() throws -> Int32 {
        var configuration = try Configuration.load(arguments: arguments)
        let log = Logger(level: configuration.logLevel)
        let notifier = SystemdNotifier()
        let requests = DaemonRequests()
        let stopping = Locked(false)
        Signals.watch { signal in
            switch signal {
            case SIGHUP:
                requests.reload()
            default:
                let again = stopping.withLock { stopping -> Bool in
                    defer { stopping = true }
                    return stopping
                }
                if again { _exit(1) }   // a second signal: at once
                log.notice("\(Signals.name(signal)): stopping")
                requests.stop()
            }
        }
        log.notice("adplayerd starting (pid \(getpid()))")
        // Clients, files and mpv's threads all take descriptors: the soft limit up to the hard one.
        let files = csystem_raise_file_limit()
        if files >= 0 && files < 256 { log.warning("only \(files) file descriptors may be open (ulimit -n): clients may wait") }

        // 0. One daemon a socket and a state folder, refused before anything plays (exit 2): a
        //    second daemon must not start mpv and resume the first one's queue.
        if ControlServer.someoneAnswers(configuration.socket) {
            throw ConfigurationError(source: "socket", reason: "\(configuration.socket): another adplayerd answers on it")
        }

        // 1. The state folder: one daemon a folder (its lock); one that cannot be used costs
        //    persistence, never playback (the box says so and keeps its state in memory).
        var stateFolder: String? = configuration.stateDir
        do {
            try FileManager.default.createDirectory(atPath: configuration.stateDir, withIntermediateDirectories: true)
            guard access(configuration.stateDir, W_OK) == 0 else { throw UsageError("\(configuration.stateDir) is not writable") }
        } catch {
            log.error("state: \(error); running without a state folder: nothing will survive a restart")
            stateFolder = nil
        }
        let stateLock = stateFolder != nil ? try StateLock(folder: configuration.stateDir) : nil
        defer { withExtendedLifetime(stateLock) {} }

        // 2. The stage: mpv, its output, the screen, the network. 3. The box on it: state,
        //    tracking, the ad source, the controller, the schedule, health, the router — the
        //    same assembly `adplayerd simulate` and `schedule-check` run (Box.swift).
        let clients = ClientEvents()
        let (stage, player) = try MpvStage.make(configuration, stateFolder: stateFolder, log: log) { announcement in
            clients.send(Self.describe(announcement))
        }
        defer { player.shutdown() }
        let box = try Box(configuration: configuration, stage: stage, events: BoxEvents(one: clients.send, many: clients.send), log: log,
                          onReload: { requests.reload() })
        let metricsFile = configuration.metricsFile.map { MetricsFile(path: $0, every: configuration.metricsInterval, metrics: box.metrics, log: log) }
        try box.start()
        let controller = box.controller

        // 4. The control socket.
        let control = try ControlServer(path: configuration.socket, group: configuration.socketGroup,
                                        groupTier: configuration.socketGroupTier, log: log) { _, request, reply in
            box.router.handle(request, reply: reply)
        }
        try control.start()
        clients.connect(control)
        // What is wrong on this machine is said at start (the daemon still starts: a folder may
        // appear later, a USB stick be plugged in); `adplayerd check-config` says the same and more.
        for problem in configuration.localProblems() { log.warning(problem) }
        log.notice("listening on \(configuration.socket)")

        // 5. The desktop and the system: MPRIS2 (--mpris) and logind's PrepareForSleep. Without
        //    a bus, playback and the socket go on.
        var desktop: DesktopService?
        do {
            let service = try DesktopService(mpris: configuration.mpris, loop: player.loop, controller: controller, log: log)
            service.start()
            try player.loop.sync {
                controller.onDesktopChange = { state, seekedTo in service.update(state, seekedTo: seekedTo) }
                service.update(controller.desktopState(), seekedTo: nil)
            }
            desktop = service
            if configuration.mpris { log.notice("MPRIS2: org.mpris.MediaPlayer2.adplayerd on the session bus") }
        } catch {
            if configuration.mpris {
                log.error("MPRIS2: \(error); media keys, headsets and playerctl will not reach adplayerd")
            } else {
                log.info("\(error)")
            }
        }

        // 6. Ready; the watchdog is fed from the loop itself (it proves the loop turns).
        notifier?.send("READY=1\nSTATUS=playing from \(configuration.library.joined(separator: ", ")); control socket \(configuration.socket)")
        if let notifier, let interval = SystemdNotifier.watchdogInterval() {
            try player.loop.sync { Self.feedWatchdog(notifier, every: interval / 2, on: player.loop) }
        }

        // Run until stopped; SIGHUP reloads.
        var exitCode: Int32 = 0
        waiting: while true {
            switch requests.next() {
            case .stop(let code):
                exitCode = code
                break waiting
            case .reload:
                notifier?.send("RELOADING=1")
                do {
                    let reloaded = try Configuration.load(arguments: arguments)
                    log.notice(box.reload(reloaded))
                    configuration = reloaded
                } catch {
                    log.error("SIGHUP: \(error); keeping the running configuration")
                }
                notifier?.send("READY=1")
            }
        }

        // Stop in reverse order.
        notifier?.send("STOPPING=1")
        desktop?.stop()
        control.stop()
        clients.connect(nil)   // events from here on go nowhere (and the server's references go)
        box.stop(flushing: 5, delivering: 2)
        metricsFile?.stop()   // written once more: what the stop did
        player.shutdown()
        box.finish()
        log.notice("stopped")
        log.flush()
        return exitCode
    }

    static func describe(_ announcement: HTMLCreativeAnnouncement) -> ControlEvent {
        func rect(_ r: AdRect) -> [String: JSONValue] { ["x": .int(r.x), "y": .int(r.y), "width": .int(r.width), "height": .int(r.height)] }
        switch announcement {
        case .show(let id, let url, let place, let output, let duration, _, let creativeID):
            return .adHTMLShow(instance: id, adID: creativeID, url: url, rect: rect(place), output: rect(output), duration: duration)
        case .hide(let id):
            return .adHTMLHide(instance: id)
        }
    }

    /// `WATCHDOG=1` from a timer on the player's loop: if the loop stops turning, systemd
    /// stops hearing from it.
    private static func feedWatchdog(_ notifier: SystemdNotifier, every seconds: Double, on loop: any PlayerLoop) {
        notifier.send("WATCHDOG=1")
        _ = loop.schedule(after: seconds) { feedWatchdog(notifier, every: seconds, on: loop) }
    }
}
