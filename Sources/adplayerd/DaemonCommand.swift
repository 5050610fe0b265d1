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

        // 1. The state store (the outbox shares its file). A state folder that cannot be used
        //    costs persistence, never playback.
        let statePath = "\(configuration.stateDir)/adplayerd.sqlite"
        var durable = true
        do {
            try FileManager.default.createDirectory(atPath: configuration.stateDir, withIntermediateDirectories: true)
            guard access(configuration.stateDir, W_OK) == 0 else { throw UsageError("\(configuration.stateDir) is not writable") }
        } catch {
            log.error("state: \(error); running without a state folder: nothing will survive a restart")
            durable = false
        }
        let stateLock = durable ? try StateLock(folder: configuration.stateDir) : nil
        defer { withExtendedLifetime(stateLock) {} }
        let store: StateStore
        do {
            store = try StateStore(path: durable ? statePath : ":memory:", log: log)
        } catch let error as SQLiteError where error.isBusy {
            // Locked by another process: not damage — left as it is. Playback does not wait for
            // it (a quarter of a second at most); the queue and positions of this run are kept in
            // memory, while tracking keeps beacons and plays in memory and writes them to the
            // file once it opens, or beside it at a stop (BeaconOutbox+Waiting.swift).
            log.error("state: \(statePath): \(error); this run's queue and positions are not saved (nothing in the file is lost: it is used "
                      + "again at the next start); beacons and proof of play are written to it once it opens")
            store = try StateStore(path: ":memory:", log: log)
        } catch {
            log.error("state: \(statePath): \(error); running without saved state this time")
            store = try StateStore(path: ":memory:", log: log)
            durable = false
        }

        // 2. mpv.
        var playerConfiguration = MpvPlayerConfiguration()
        playerConfiguration.vo = configuration.vo
        playerConfiguration.ao = configuration.ao
        playerConfiguration.inputBindings = configuration.vo != "null"
        playerConfiguration.ipcSocket = configuration.mpvIPCSocket
        // External subtitles next to an episode (episode.srt, episode.en.srt); the box's choices.
        playerConfiguration.extraOptions = [("title", "adplayerd"), ("sub-auto", "exact")]
        if let device = configuration.audioDevice { playerConfiguration.extraOptions.append(("audio-device", device)) }
        if let languages = configuration.audioLanguages { playerConfiguration.extraOptions.append(("alang", languages)) }
        if let languages = configuration.subtitleLanguages { playerConfiguration.extraOptions.append(("slang", languages)) }
        playerConfiguration.extraOptions += configuration.mpvOptions
        if configuration.mpvIPCSocket != nil {
            log.warning("--mpv-ipc-socket \(configuration.mpvIPCSocket!): mpv's own IPC is open; anyone who can reach it drives the player (unsafe, for tests and debugging)")
        }
        let player = try MpvPlayer(configuration: playerConfiguration) { message in
            log.mpv(message)
        }
        defer { player.shutdown() }
        player.setAdAudio(volumePercent: configuration.adVolume, loudnorm: configuration.adLoudnorm)

        // 3. The ad runtime: HTTP, the outbox, the source.
        let http = BoundedHTTP(threads: 4)
        let clients = ClientEvents()
        // HTML creatives (the slots API's) are for a UI shell to draw: announced on the socket,
        // a hide in the turn that takes the creative down (docs/benchmarks.md §5).
        let surface = MpvAdSurface(player: player, hideAtOnce: true) { announcement in
            clients.send(Self.describe(announcement))
        }
        let metrics = Metrics()
        var outboxConfiguration = configuration.outbox
        outboxConfiguration.ownsLedger = true   // the daemon owns the ledger: it closes what a kill left open
        let outbox = try BeaconOutbox(path: durable ? statePath : ":memory:", configuration: outboxConfiguration,
                                      sender: HTTPBeaconSender(fetcher: http), onEvent: { event in
            switch event {
            case .sent(let url, let attempts):
                clients.send(.beaconSent(url: url, attempts: attempts))
            case .retrying(let url, let attempts, let reason, _):
                log.info("beacon \(url): attempt \(attempts) failed (\(reason)); it will be retried")
            case .dropped(let url, let reason):
                log.event(.warning, "beacon dropped (\(reason)): \(url)", id: .beaconDropped, fields: ["BEACON_URL": url, "DROP_REASON": reason])
            case .diskFailing(let why):
                log.error("tracking: the state disk refuses writes (\(why)); beacons wait in memory until it takes them again")
            case .diskRecovered(let written):
                log.notice("tracking: the state disk takes writes again; \(written) beacons written from memory")
            case .databaseLocked(let why):
                log.error("tracking: \(why)")
            case .databaseOpened(let beacons, let plays, let from):
                log.notice("tracking: the state database took what was kept \(from == "memory" ? "in memory" : "in \(from)"): "
                           + "\(beacons) beacons, \(plays) plays")
            }
        }, onWarning: { log.warning("tracking: \($0)") })
        metrics.report(outbox)
        let courier = OutboxCourier(outbox: outbox) { log.error($0) }
        outbox.onEnqueued { [weak courier] in courier?.wake() }   // weak: the courier holds the outbox
        courier.start()
        var placement = TrackingReporter.Placement()
        placement.venueID = configuration.venueID
        placement.impressionsPerPlay = configuration.impressionsPerPlay
        placement.latLong = configuration.macroPolicy.latLong
        placement.popDeadline = configuration.popDeadline
        placement.requireDisplay = configuration.popRequireDisplay
        placement.displayWait = configuration.popDisplayWait
        let reporter = TrackingReporter(outbox: outbox, policy: configuration.macroPolicy, metrics: metrics, placement: placement)
        let outputSize = OutputSize()
        // The screen's own evidence (issue 36): the connector and the panel, read off the loop.
        let display = DisplayMonitor(connector: configuration.displayConnector, sysfsRoot: configuration.drmSysfsRoot,
                                     cecCommand: configuration.cecCommand, interval: configuration.displayCheckInterval, log: log)
        display.start()
        defer { display.stop() }
        let source = Locked<AdSourceFactory.Made?>(nil)
        // Without a state folder, creatives are cached in one private temporary folder for the
        // daemon's life: a reload's new source uses it too, so an episode that still plays with
        // the old source keeps the creatives it prefetched there. Removed at exit.
        var temporaryCache: String?
        if !durable {
            do {
                temporaryCache = try CreativeCache.temporary(maxBytes: configuration.cacheMaxBytes).folder
            } catch {
                log.error("ads: \(error); VAST creatives cannot be cached")
            }
        }
        defer { if let temporaryCache { try? FileManager.default.removeItem(atPath: temporaryCache) } }
        // Competitive separation across every source, for the daemon's life (read at start).
        let separation = configuration.adSeparation > 0 ? AdSeparation(seconds: configuration.adSeparation) : nil
        /// The ad source of `configuration`: nil without `ads`; throws when it cannot be made.
        func makeSource(_ configuration: Configuration) throws -> AdSourceFactory.Made? {
            guard !configuration.ads.isEmpty else { return nil }
            var options = AdSourceFactory.Options(fetcher: http, counters: store)
            options.token = configuration.adsToken
            options.policy = configuration.macroPolicy
            options.cacheFolder = durable ? configuration.creativeCacheFolder : temporaryCache
            options.cacheMaxBytes = configuration.cacheMaxBytes
            options.vast.offlineLifetime = configuration.offlineAdLifetime
            options.popDeadline = configuration.popDeadline
            options.requireDisplay = configuration.popRequireDisplay
            options.screenDark = { display.dark() }
            options.timeZone = configuration.timeZone
            options.separation = separation
            options.onPassedOver = { kind, reason in metrics.increment("adplayerd_ads_passed_over_total", ["kind": kind.protocolName, "reason": reason]) }
            options.outputSize = outputSize
            options.onProblem = { log.warning("ads: \($0)") }
            options.onErrorURLs = { urls, context in reporter.recordErrorURLs(urls, context) }
            options.onNotUsed = { urls, context in reporter.recordNotUsedURLs(urls, context) }
            let made = try AdSourceFactory.make(configuration.ads, options)
            log.notice("ads from " + made.chain.joined(separator: ", then "))
            return made
        }
        do {
            let made = try makeSource(configuration)
            source.withLock { $0 = made }
        } catch {
            log.error("ads: \(error); episodes play without ads")
        }
        let workers = Workers(name: "adplayerd-ads", threads: 2)
        var adsConfiguration = VideoAdsConfiguration()
        adsConfiguration.executor = workers
        adsConfiguration.viewabilityMeasurable = configuration.vo != "null"   // vo=null shows nothing to anyone
        adsConfiguration.pauseAdMaxShowing = configuration.pauseAdMax
        var reporting = AdReporting(record: { reporter.record($0) }, recordStart: { event, then in reporter.recordStart(event, then: then) })
        reporting.playerSize = { width, height in
            outputSize.set(width: width, height: height)
            reporter.setPlayerSize(width: width, height: height)
        }
        let controller = Controller(player: player, surface: surface, store: store, log: log,
                                    source: source.withLock { $0?.source }, pauseAdDelay: configuration.pauseAdDelay,
                                    adsConfiguration: adsConfiguration, emit: clients.send,
                                    emitMany: clients.send, reporting: reporting, metrics: metrics)
        let metricsFile = configuration.metricsFile.map { MetricsFile(path: $0, every: configuration.metricsInterval, metrics: metrics, log: log) }
        var saved = store.load()
        // The schedule (issue 37): read and resolved here (the disk), its timeline worked out
        // off the loop; with one, it decides what plays (the saved queue is not resumed).
        let scheduleWorker = Workers(name: "adplayerd-schedule")
        let computeTimeline: @Sendable (Schedule, Date, @escaping @Sendable (ScheduleTimeline) -> Void) -> Void = { schedule, from, done in
            scheduleWorker.execute { done(ScheduleTimeline.compute(schedule, from: from)) }
        }
        var recordContent: (@Sendable (ContentPlay) -> Void)?
        if configuration.recordContentPlays {
            recordContent = { (play: ContentPlay) in
                reporter.recordContent(id: play.id, contentID: play.contentID, source: "schedule \(play.rule.kind.rawValue) \(play.rule.id)",
                                       startedWall: play.startedWall, endedWall: play.endedWall, seconds: play.seconds, reason: play.reason)
            }
        }
        let contentRecorder = recordContent
        func loadSchedule(_ configuration: Configuration) throws -> (ResolvedSchedule, ScheduleTimeline)? {
            guard let file = configuration.schedule else { return nil }
            let resolved = try ScheduleLoader.load(path: file, library: configuration.library, timeZone: configuration.timeZone, measure: { MediaProbe.duration($0) })
            return (resolved, ScheduleTimeline.compute(resolved.schedule, from: Date()))
        }
        var startSchedule: (ResolvedSchedule, ScheduleTimeline)?
        do {
            startSchedule = try loadSchedule(configuration)
        } catch {
            log.error("schedule: \(configuration.schedule ?? ""): \(error); playing without a schedule")
        }
        if startSchedule != nil {
            saved.queue = []
            saved.current = nil
        }
        // The display's power (operating hours, HDMI-CEC): switched off the loop.
        let cec = configuration.cecCommand.map { CECControl(command: $0, log: log) }
        let displayHours = configuration.displayHours
        var switchDisplay: (@Sendable (Bool) -> Void)?
        if let cec { switchDisplay = { (on: Bool) in cec.set(on: on) } }
        let rotate = configuration.pauseAdRotate, loopOne = configuration.loop, cecSwitch = switchDisplay
        let witness = DisplayWitness(loop: player.loop, output: .mpv(player: player, surface: surface, vo: configuration.vo),
                                     monitor: display) { info, evidence in reporter.recordDisplay(info, evidence) }
        defer { witness.close() }
        try player.loop.sync {
            controller.displayWitness = witness
            controller.pauseAdRotate = rotate
            controller.separation = separation
            controller.start(resuming: saved)
            if loopOne { _ = try? controller.setRepeat(.one) }   // `loop = yes`: each start loops the episode
            controller.configureDisplay(hours: displayHours, cec: cecSwitch)
            if let (resolved, timeline) = startSchedule {
                controller.configureSchedule(resolved, timeline: timeline, compute: computeTimeline, onContent: contentRecorder)
            }
        }

        // 4. The control socket.
        let clock = SystemTrackingClock()
        let arguments = self.arguments
        var healthSources = HealthMonitor.Sources(
            loop: player.loop, controller: controller, metrics: metrics, outbox: outbox,
            folders: durable ? [("state", configuration.stateDir)] + (configuration.ads.isEmpty ? [] : [("cache", configuration.creativeCacheFolder)])
                : [("state", configuration.stateDir)],
            configurationProblems: {
                do {
                    return try Configuration.load(arguments: arguments).localProblems()
                } catch {
                    return ["the configuration file does not load (the running one is kept): \(error)"]
                }
            },
            clockSynchronized: { clock.wallClockSynchronized() })
        healthSources.onWarning = { log.warning($0) }
        healthSources.screenDark = { display.dark() }
        let health = HealthMonitor(healthSources)
        health.start()
        defer { health.stop() }
        let router = CommandRouter(loop: player.loop, controller: controller, library: configuration.library, metrics: metrics, outbox: outbox,
                                   screenshots: configuration.stateDir + "/screenshots",
                                   extras: CommandRouter.Extras(health: health, log: log, reload: { requests.reload() }))
        let control = try ControlServer(path: configuration.socket, group: configuration.socketGroup,
                                        groupTier: configuration.socketGroupTier, log: log) { _, request, reply in
            router.handle(request, reply: reply)
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
                    if reloaded.socket != configuration.socket || reloaded.stateDir != configuration.stateDir
                        || reloaded.vo != configuration.vo || reloaded.ao != configuration.ao || reloaded.mpris != configuration.mpris {
                        log.notice("SIGHUP: socket, state-dir, vo, ao and mpris take effect at the next start")
                    }
                    log.level = reloaded.logLevel
                    router.setLibrary(reloaded.library)
                    // An ad source that cannot be made (a catalog that no longer parses) keeps the
                    // running one, as a configuration that does not parse keeps the running one.
                    var made: AdSourceFactory.Made?
                    var kept = false
                    do {
                        made = try makeSource(reloaded)
                    } catch {
                        log.error("SIGHUP: ads: \(error); keeping the running ad source")
                        kept = true
                    }
                    if !kept {
                        source.withLock { $0?.cleanup(); $0 = made }
                    }
                    // A schedule that does not load keeps the one that plays.
                    var newSchedule: (ResolvedSchedule, ScheduleTimeline)?
                    do {
                        newSchedule = try loadSchedule(reloaded)
                        if reloaded.schedule == nil, configuration.schedule != nil { log.notice("SIGHUP: schedule: removing it takes effect at the next start") }
                    } catch {
                        log.error("SIGHUP: schedule: \(reloaded.schedule ?? ""): \(error); keeping the schedule that plays")
                    }
                    let running = source.withLock { $0?.source }
                    let hours = reloaded.displayHours
                    try? player.loop.sync {
                        controller.reload(source: running, pauseAdDelay: reloaded.pauseAdDelay)
                        controller.setDisplayHours(hours)
                        if let (resolved, timeline) = newSchedule {
                            controller.configureSchedule(resolved, timeline: timeline, compute: computeTimeline, onContent: contentRecorder)
                        }
                    }
                    configuration = reloaded
                    log.notice(kept ? "SIGHUP: configuration reloaded; the ad source kept" : "SIGHUP: configuration and ad source reloaded")
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
        try? player.loop.sync { controller.stop() }
        if !reporter.flush(timeout: 5) {
            log.error("tracking: the ads' last events were not all written within 5 s (a slow or hung disk); "
                      + "proof of play and beacons of the last moments may be missing")
        }
        courier.stop(flushingFor: 2)
        outbox.finish()   // a database still locked: what this run kept goes beside it
        metricsFile?.stop()   // written once more: what the stop did
        player.shutdown()
        store.flush()
        source.withLock { $0?.cleanup() }
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
