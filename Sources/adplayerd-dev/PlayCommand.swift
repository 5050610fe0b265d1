import AdPlayerDaemon
import AdPlayerMpv
import AdRuntime
import AdSources
import AdTracking
import ControlProtocol
import Foundation
import MpvPlayerAdapter

/// `adplayerd play [--vo VO] [--ao AO] [--ads SOURCE]... [--state-dir DIR] [--pause-ad-delay S] [--demo] FILE…`:
/// plays the files one after another in the foreground, with the daemon's ad policy, and
/// prints the player model's changes and the ads' events as a timeline. Exit 0 when every
/// file played, 1 when one could not, 2 on bad usage. SIGTERM/SIGINT stop it cleanly (the
/// ads end, the outbox gets 2 s, mpv shuts down); a second one at once.
struct PlayCommand {
    struct Options {
        var files: [String] = []
        var vo = "null"
        var ao = "null"
        var demo = false
        var ads: [String] = []
        var stateDir: String?
        var pauseAdDelay = 1.0

        static func parse(_ args: [String]) throws -> Options {
            let parsed = try CommandLineArguments(args, spec: ["vo": .value, "ao": .value, "demo": .flag, "ads": .value,
                                                               "state-dir": .value, "pause-ad-delay": .value, "help": .flag])
            if parsed.flag("help") { throw UsageError("help") }
            var options = Options()
            options.vo = parsed.value("vo") ?? options.vo
            options.ao = parsed.value("ao") ?? options.ao
            options.demo = parsed.flag("demo")
            options.ads = parsed.values("ads")
            options.stateDir = parsed.value("state-dir")
            if let text = parsed.value("pause-ad-delay") {
                do {
                    options.pauseAdDelay = try Seconds.parse(text, .delay, field: "--pause-ad-delay")
                } catch {
                    throw UsageError("\(error)")
                }
            }
            options.files = parsed.positional
            if options.files.isEmpty { throw UsageError("no file to play") }
            return options
        }
    }

    static let usage = """
        usage: adplayerd-dev play [--vo VO] [--ao AO] [--ads SOURCE]... [--state-dir DIR] [--pause-ad-delay S] [--demo] FILE...
          Plays FILEs through libmpv with the daemon's ad policy and prints a timeline. Exit 0: every file
          played; 1: some file could not; 2: bad usage.
          --vo, --ao          mpv's video and audio outputs (default: null, null)
          --ads SOURCE        a catalog folder (catalog.json), a VAST tag URL, or the slots API (an URL ending
                              in /v1/ads; token in $ADPLAYERD_ADS_TOKEN); repeat it for a fallback chain
          --state-dir DIR     keep the tracking outbox (R17) in DIR/adplayerd.sqlite and deliver it, and
                              VAST creatives in DIR/creatives
          --pause-ad-delay S  seconds of pause before a pause ad (default 1)
          --demo              pause, resume, change speed and seek during the first file
        """

    let options: Options

    func run() throws -> Int32 {
        let log = Logger(level: .warning)
        let done = BlockingQueue<Int32>()
        let stopping = Locked(false)
        Signals.watch { signal in
            guard signal != SIGHUP else { return }
            if stopping.withLock({ s in defer { s = true }; return s }) { _exit(1) }
            done.put(0)   // an orderly stop: exit 0 (1 if a file could not be played)
        }
        // Files given here are checked as the daemon checks its library's: regular files.
        var files: [String] = []
        var failures = 0
        for file in options.files {
            do {
                files.append(try SafeFile.check(file).path)
            } catch {
                print("          \(Logger.escape(error.description))")
                failures += 1
            }
        }
        if files.isEmpty { return 1 }

        var configuration = MpvPlayerConfiguration()
        configuration.vo = options.vo
        configuration.ao = options.ao
        configuration.inputBindings = options.vo != "null"
        configuration.extraOptions = [("title", "adplayerd")]
        let player = try MpvPlayer(configuration: configuration) { message in
            log.mpv(message)
        }
        defer { player.shutdown() }
        let surface = MpvAdSurface(player: player)
        let http = BoundedHTTP(threads: 2)
        let printer = TimelinePrinter()

        // Tracking: with --state-dir, durable; a folder that cannot be used costs tracking only.
        let outbox: BeaconOutbox? = options.stateDir.flatMap { stateDir in
            do {
                try FileManager.default.createDirectory(atPath: stateDir, withIntermediateDirectories: true)
                var configuration = BeaconOutbox.Configuration()
                configuration.ownsLedger = true   // the player of this state folder, as the daemon is
                return try BeaconOutbox(path: stateDir + "/adplayerd.sqlite", configuration: configuration,
                                        sender: HTTPBeaconSender(fetcher: http), onEvent: { event in
                    if case .sent(let url, _) = event { printer.note("beacon sent \(url)") }
                }, onWarning: { log.warning("tracking: \($0)") })
            } catch {
                log.error("tracking: \(stateDir): \(error); playing without tracking")
                return nil
            }
        }
        let courier = outbox.map { OutboxCourier(outbox: $0) { log.error($0) } }
        if let courier, let outbox { outbox.onEnqueued { [weak courier] in courier?.wake() }; courier.start() }
        let reporter = outbox.map { TrackingReporter(outbox: $0) }

        let store = try StateStore(path: ":memory:", log: log)
        var source: AdSourceFactory.Made?
        if !options.ads.isEmpty {
            var sourceOptions = AdSourceFactory.Options(fetcher: http, counters: store)
            sourceOptions.token = ProcessInfo.processInfo.environment["ADPLAYERD_ADS_TOKEN"]
            sourceOptions.cacheFolder = options.stateDir.map { $0 + "/creatives" }
            sourceOptions.onProblem = { log.warning("ads: \($0)") }
            sourceOptions.onErrorURLs = { urls, context in reporter?.recordErrorURLs(urls, context) }
            source = try AdSourceFactory.make(options.ads, sourceOptions)
        }
        defer { source?.cleanup() }
        let failed = Locked(failures)
        var adsConfiguration = VideoAdsConfiguration()
        let workers = Workers(name: "adplayerd-ads", threads: 2)
        adsConfiguration.executor = workers
        adsConfiguration.viewabilityMeasurable = options.vo != "null"   // vo=null shows nothing to anyone
        let controller = Controller(player: player, surface: surface, store: store, log: log, source: source?.source,
                                    pauseAdDelay: options.pauseAdDelay, adsConfiguration: adsConfiguration,
                                    emit: { event in if event.name == .playerFailed { failed.withLock { $0 += 1 } } },
                                    reporting: AdReporting(record: { event in printer.print(event); reporter?.record(event) }),
                                    onQueueDone: { done.put(0) })
        let timeline = TimelineObserver(printer)   // observers are held weakly: keep it
        let observation = player.addObserver(timeline)
        defer {
            observation.cancel()
            withExtendedLifetime(timeline) {}
        }
        try player.loop.sync {
            controller.start(resuming: StateStore.Saved())
            _ = try controller.enqueue(files.map { QueueEntry(path: $0) })
        }
        if options.demo { runDemo(player, printer) }

        let code = done.take() ?? 0
        stopping.withLock { $0 = true }
        try? player.loop.sync { controller.stop() }
        reporter?.flush()
        courier?.stop(flushingFor: code == 0 ? 5 : 2)   // what is due goes out before we stop
        log.flush()
        if code != 0 { return code }
        return failed.withLock { $0 } > 0 ? 1 : 0
    }

    private func runDemo(_ player: MpvPlayer, _ printer: TimelinePrinter) {
        let steps: [(Double, String, @Sendable (MpvPlayer) throws -> Void)] = [
            (1.5, "pause", { try $0.pause() }),
            (3.2, "play", { try $0.play() }),
            (3.7, "speed 2", { try $0.setSpeed(2) }),
            (4.2, "seek 1.0", { try $0.seek(1.0) }),
            (4.6, "speed 1", { try $0.setSpeed(1) }),
        ]
        let demo = Workers(name: "adplayerd-demo")
        demo.execute {
            let start = MonotonicTime.now()
            for (at, name, step) in steps {
                let wait = at - Double(MonotonicTime.now() - start) / 1e9
                if wait > 0 { usleep(UInt32(wait * 1_000_000)) }
                printer.note(">>> \(name)")
                do { try step(player) } catch { printer.note("\(name): \(error)") }
            }
        }
    }
}

/// A player observer that prints the timeline.
final class TimelineObserver: PlayerObserver {
    private let printer: TimelinePrinter
    init(_ printer: TimelinePrinter) { self.printer = printer }
    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) { printer.print(event) }
}
