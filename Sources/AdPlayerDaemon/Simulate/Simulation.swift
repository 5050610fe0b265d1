import AdRuntime
import AdSources
import AdTracking
import ControlProtocol
import Foundation

/// `adplayerd simulate --virtual` (docs/simulate.md): the daemon's controller, ad runtime,
/// policy, sources, caps, separation, dayparts, breaks, schedule and tracking — the same code —
/// on a scripted player and virtual time. Ad requests are real (or replayed), beacons are
/// recorded (sent once each with `sendBeacons`), and every event is kept with its simulated time.
///
/// How time moves: from one timer's deadline to the next (or the viewer's next step), and only
/// once nothing is in flight (`Workers.inFlight`: a request under way, a creative being
/// fetched, tracking writing) — so what an ad server answers lands at the simulated instant it
/// was asked, however long the network took, and two runs with the same answers and seed do
/// the same things in the same order.
///
/// Threading: `run` on one thread, which drives the virtual loop; everything else on the loop.
public final class Simulation: @unchecked Sendable {
    // @unchecked: the recorders are behind locks; the rest is set up before `run` and then read.
    public struct Settings: Sendable {
        public var configuration: Configuration
        /// Simulated start, seconds since 1970, and how long.
        public var from: Double
        public var seconds: Double
        public var seed: UInt64 = 1
        public var viewer = ViewerScript()
        public var sendBeacons = false
        public var replay: [RecordedExchange]?
        /// Where the state (ledger, outbox, counters) and the creative cache go: a private folder.
        public var workFolder: String
        /// Each content file's length as FFmpeg reads it (nil: it does not play).
        public var probe: @Sendable (String) -> Double?

        public init(configuration: Configuration, from: Double, seconds: Double, workFolder: String, probe: @escaping @Sendable (String) -> Double?) {
            self.configuration = configuration
            self.from = from
            self.seconds = seconds
            self.workFolder = workFolder
            self.probe = probe
        }
    }

    /// One line of `timeline.jsonl`.
    public struct TimelineEntry: Sendable {
        public var at: Double
        public var order: Int
        public var json: JSONValue
    }

    /// What a run gathered, for the outputs and the rules.
    public struct Outcome: Sendable {
        public var timeline: [TimelineEntry]
        public var exchanges: [RecordedExchange]
        public var adEvents: [(at: Double, event: AdEvent)]
        public var playerEvents: [(at: Double, change: PlayerChange, snapshot: PlayerSnapshot)]
        public var viewerSteps: [(at: Double, label: String, result: String)]
        /// Overlays and pause ads put on the surface (true) and taken off it, by ad id.
        public var surface: [(at: Double, id: UInt64, shown: Bool)]
        /// The state database (the ledger: plays.csv), closed.
        public var statePath: String
        public var popDeadline: Double?
        public var configuration: Configuration
        public var from: Double
        public var seconds: Double
        /// What did not go as a simulation should (a source that could not be made, work that
        /// never settled): said in the summary, and a failure of the run.
        public var problems: [String]
    }

    private let settings: Settings
    private let stage: SimulationStage
    private let loop: any PlayerLoop
    private let startInstant: UInt64
    private let timeline = Locked<[TimelineEntry]>([])
    private let adEvents = Locked<[(at: Double, event: AdEvent)]>([])
    private let playerEvents = Locked<[(at: Double, change: PlayerChange, snapshot: PlayerSnapshot)]>([])
    private let viewerSteps = Locked<[(at: Double, label: String, result: String)]>([])
    private let surfaceEvents = Locked<[(at: Double, id: UInt64, shown: Bool)]>([])
    private let problems = Locked<[String]>([])
    private let beaconExchanges = Locked<[RecordedExchange]>([])

    public init(_ settings: Settings, stage: SimulationStage = .virtual()) {
        self.settings = settings
        self.stage = stage
        loop = stage.loop
        startInstant = stage.loop.now()
    }

    /// The simulated wall time now.
    private func wallNow() -> Double { settings.from + Double(loop.now() &- startInstant) / 1e9 }

    private func note(_ json: [String: JSONValue]) {
        let at = wallNow()
        var object = json
        object["t"] = .string(ISO8601.format(at))
        object["s"] = .number(((at - settings.from) * 1000).rounded() / 1000)
        timeline.withLock { $0.append(TimelineEntry(at: at, order: $0.count, json: .object(object))) }
    }

    // MARK: Running

    public func run() throws -> Outcome {
        let configuration = settings.configuration
        ProcessRandom.seed(settings.seed)
        let loop = self.loop, from = settings.from, start = startInstant
        SimulatedTime.install { (from + Double(loop.now() &- start) / 1e9, Double(loop.now()) / 1e9) }
        let clock = SimulatedTrackingClock()

        try FileManager.default.createDirectory(atPath: settings.workFolder, withIntermediateDirectories: true)
        // The network's threads are the run's own; every other worker made from here on shares
        // the simulation's one thread (virtual time: a run repeats whatever the threads' timing).
        let http = SimulationHTTP(settings.replay.map { .replay($0) } ?? .live(BoundedHTTP(threads: 1)))
        beaconFetcher = settings.sendBeacons ? BoundedHTTP(threads: 1) : nil
        let workers = Workers(name: "adplayerd-sim", threads: 1)
        if stage.isVirtual {
            Workers.simulationPool.withLock { $0 = workers }
            Workers.tasksPreference.withLock { $0 = workers }
        }
        defer { Workers.simulationPool.withLock { $0 = nil } }
        let statePath = settings.workFolder + "/adplayerd.sqlite"
        let log = Logger(level: .error)
        // The queue, positions and frequency counters: in memory (a day of episodes saves its
        // position thousands of times; nothing of it outlives the run).
        let store = try StateStore(path: ":memory:", log: log)
        var outboxConfiguration = configuration.outbox
        outboxConfiguration.ownsLedger = true
        let outbox = try BeaconOutbox(path: statePath, configuration: outboxConfiguration, sender: NoBeaconSender(), clock: clock,
                                      onWarning: { [weak self] warning in self?.problems.withLock { $0.append("tracking: \(warning)") } })
        var placement = TrackingReporter.Placement()
        placement.venueID = configuration.venueID
        placement.impressionsPerPlay = configuration.impressionsPerPlay
        placement.latLong = configuration.macroPolicy.latLong
        placement.popDeadline = configuration.popDeadline
        // No screen in a simulation: its evidence is never awaited (docs/simulate.md).
        placement.requireDisplay = false
        let reporter = TrackingReporter(outbox: outbox, policy: configuration.macroPolicy, clock: clock, placement: placement)

        let separation = configuration.adSeparation > 0 ? AdSeparation(seconds: configuration.adSeparation) : nil
        var source: AdSourceFactory.Made?
        if !configuration.ads.isEmpty {
            var options = AdSourceFactory.Options(fetcher: http, counters: store)
            options.token = configuration.adsToken
            options.policy = configuration.macroPolicy
            options.cacheFolder = settings.workFolder + "/creatives"
            options.cacheMaxBytes = configuration.cacheMaxBytes
            options.vast.offlineLifetime = configuration.offlineAdLifetime
            options.popDeadline = configuration.popDeadline
            options.requireDisplay = false
            options.timeZone = configuration.timeZone
            options.separation = separation
            options.onProblem = { [weak self] problem in self?.note(["event": "ads.problem", "message": .string(problem)]) }
            options.onErrorURLs = { urls, context in reporter.recordErrorURLs(urls, context) }
            options.onNotUsed = { urls, context in reporter.recordNotUsedURLs(urls, context) }
            do {
                source = try AdSourceFactory.make(configuration.ads, options)
            } catch {
                problems.withLock { $0.append("ads: \(error)") }
            }
        }
        defer { source?.cleanup() }

        let player = stage.player
        let surface = WatchedAdSurface(stage.surface) { [weak self] id, shown in
            guard let self else { return }
            let at = wallNow()
            surfaceEvents.withLock { $0.append((at, id, shown)) }
        }
        var adsConfiguration = VideoAdsConfiguration()
        adsConfiguration.executor = workers
        adsConfiguration.viewabilityMeasurable = false   // nothing is shown to anyone
        adsConfiguration.pauseAdMaxShowing = configuration.pauseAdMax
        let reporting = AdReporting(record: { [weak self] event in
            self?.recordAd(event)
            reporter.record(event)
        }, recordStart: { [weak self] event, then in
            self?.recordAd(event)
            reporter.recordStart(event, then: then)
        })
        let emit: @Sendable (ControlEvent) -> Void = { [weak self] event in self?.note(event.json.objectFields) }
        let controller = Controller(player: player, surface: surface, store: store, log: log, source: source?.source,
                                    pauseAdDelay: configuration.pauseAdDelay, adsConfiguration: adsConfiguration,
                                    emit: emit, emitMany: { events in events.forEach(emit) }, reporting: reporting)

        // The content: the schedule's files, or every playable file of the library in order, looped.
        var schedule: (ResolvedSchedule, ScheduleTimeline)?
        if let file = configuration.schedule {
            let resolved = try ScheduleLoader.load(path: file, library: configuration.library, timeZone: configuration.timeZone, measure: settings.probe)
            schedule = (resolved, ScheduleTimeline.compute(resolved.schedule, from: Date(timeIntervalSince1970: from)))
            if let setMedia = stage.setMedia {
                for file in resolved.files.values.joined() { setMedia(file.path, file.seconds ?? settings.probe(file.path)) }
            }
        }
        let files = schedule == nil ? Self.libraryFiles(configuration.library) : []
        if let setMedia = stage.setMedia {
            for file in files { setMedia(file, settings.probe(file)) }
        }
        if schedule == nil, files.isEmpty { throw UsageError("nothing to play: no playable file in the library (\(configuration.library.joined(separator: ", ")))") }

        let observer = Observer { [weak self] event in self?.recordPlayer(event) }
        let observation = player.addObserver(observer, phase: .report)
        let viewer = ViewerRunner(script: settings.viewer, simulation: self, controller: controller, player: player, viewerPaused: stage.viewerPaused)
        note(["event": "simulation.start", "from": .string(ISO8601.format(from)), "seconds": .number(settings.seconds), "seed": .int(Int64(bitPattern: settings.seed))])
        try loop.sync {
            controller.separation = separation
            controller.pauseAdRotate = configuration.pauseAdRotate
            controller.start(resuming: StateStore.Saved())
            controller.configureDisplay(hours: configuration.displayHours, cec: nil, now: { SimulatedTime.date() })
            if let (resolved, timeline) = schedule {
                controller.configureSchedule(resolved, timeline: timeline, now: { SimulatedTime.date() },
                                             compute: { schedule, at, done in done(ScheduleTimeline.compute(schedule, from: at)) })
            } else {
                _ = try? controller.setRepeat(configuration.loop ? .one : .all)
                do {
                    _ = try controller.open(files.map { QueueEntry(path: $0) }, start: 0)
                } catch {
                    problems.withLock { $0.append("open: \(error)") }
                }
            }
            viewer.arm()
        }

        // Virtual: from deadline to deadline; real: as time flows.
        let end = startInstant &+ LoopTime.nanoseconds(settings.seconds)
        stage.drive(end) { settle(outbox: outbox, reporter: reporter) }
        settle(outbox: outbox, reporter: reporter)
        // The end of the run: what is on screen ends as at a stop of the daemon.
        try? loop.sync { controller.stop() }
        settle(outbox: outbox, reporter: reporter)
        _ = reporter.flush(timeout: 30)
        settle(outbox: outbox, reporter: reporter)
        note(["event": "simulation.end"])
        stage.shutdown()
        problems.withLock { $0 += stage.problems() }
        outbox.finish()
        store.flush()
        withExtendedLifetime((observer, observation, viewer, workers)) {}

        let requests = http.exchanges
        let beacons = beaconExchanges.withLock { $0 }
        // In the order they happened; ties in the order recorded (requests first: a beacon's
        // time is its event's, which its request preceded).
        let exchanges = (requests.enumerated().map { ($0.element, 0, $0.offset) } + beacons.enumerated().map { ($0.element, 1, $0.offset) })
            .sorted { ($0.0.started, $0.1, $0.2) < ($1.0.started, $1.1, $1.2) }.map(\.0)
        return Outcome(timeline: timeline.withLock { $0 }.sorted { ($0.at, $0.order) < ($1.at, $1.order) },
                       exchanges: exchanges, adEvents: adEvents.withLock { $0 }, playerEvents: playerEvents.withLock { $0 },
                       viewerSteps: viewerSteps.withLock { $0 }, surface: surfaceEvents.withLock { $0 }, statePath: statePath, popDeadline: configuration.popDeadline,
                       configuration: configuration, from: from, seconds: settings.seconds, problems: problems.withLock { $0 })
    }

    /// Waits (in real time) until nothing is in flight and the loop has run what was handed to
    /// it, then takes the beacons recorded meanwhile. A request that never ends is bounded by
    /// its own HTTP deadline; past 10 minutes of real time the run goes on and says so.
    private func settle(outbox: BeaconOutbox, reporter: TrackingReporter) {
        let started = MonotonicTime.now()
        var said = !stage.isVirtual   // real time: nothing waits for anything
        while true {
            var spins = 0
            while Workers.inFlight.load(ordering: .acquiring) > 0 {
                if !said, MonotonicTime.now() &- started > 600_000_000_000 {
                    said = true
                    problems.withLock { $0.append("work under way did not finish in 10 minutes of real time (at \(ISO8601.format(wallNow())))") }
                    break
                }
                // Most work in flight is a write of a few microseconds: yield first, sleep later
                // (a request's answer).
                spins += 1
                if spins < 1000 { sched_yield() } else { usleep(200) }
            }
            try? loop.sync {}
            if Workers.inFlight.load(ordering: .acquiring) == 0 || said { break }
        }
        guard outbox.pendingCount() > 0 else { return }
        for (beacon, url) in outbox.drainForSimulation() { deliver(beacon, url) }
    }

    /// A beacon as the box would send it: recorded, and sent once with `--send-beacons`.
    private func deliver(_ beacon: Beacon, _ url: String) {
        var exchange = RecordedExchange(kind: .beacon, started: beacon.recorded.wall, url: url)
        exchange.event = beacon.event
        exchange.play = beacon.play
        if settings.sendBeacons {
            guard let fetcher = beaconFetcher else { return }
            switch Blocking.run({ await HTTPBeaconSender(fetcher: fetcher).send(url, timeout: 10) }) {
            case .success(.success(let status)): exchange.status = status
            case .success(.failure(let error)), .failure(let error): exchange.failure = String(describing: error)
            }
        } else {
            exchange.comment = "not sent"
        }
        beaconExchanges.withLock { $0.append(exchange) }
        let at = beacon.recorded.wall
        timeline.withLock { list in
            var object: [String: JSONValue] = ["event": "beacon", "name": .string(beacon.event), "url": .string(url),
                                               "t": .string(ISO8601.format(at)), "s": .number(((at - settings.from) * 1000).rounded() / 1000),
                                               "sent": .bool(settings.sendBeacons)]
            if let play = beacon.play { object["play"] = .string(play) }
            if settings.sendBeacons { object["status"] = .int(Int64(exchange.status)) }
            list.append(TimelineEntry(at: at, order: list.count, json: .object(object)))
        }
    }

    /// Sends beacons (`--send-beacons`); made before the simulation's pool, its own thread.
    private var beaconFetcher: BoundedHTTP?

    private func recordAd(_ event: AdEvent) {
        adEvents.withLock { $0.append((wallNow(), event)) }
    }

    private func recordPlayer(_ event: PlayerEvent) {
        playerEvents.withLock { $0.append((wallNow(), event.change, event.snapshot)) }
    }

    func recordViewer(_ label: String, _ result: String) {
        let at = wallNow()
        viewerSteps.withLock { $0.append((at, label, result)) }
        note(["event": "viewer", "do": .string(label), "result": .string(result)])
    }

    /// The playable files of the library folders, in name order (each folder's own files).
    static func libraryFiles(_ folders: [String]) -> [String] {
        var files: [String] = []
        for folder in folders {
            let names = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            for name in names.sorted() where CommandRouter.playableExtensions.contains((name as NSString).pathExtension.lowercased()) {
                files.append(folder.hasSuffix("/") ? folder + name : folder + "/" + name)
            }
        }
        return files
    }

    private final class Observer: PlayerObserver, @unchecked Sendable {
        let handler: (PlayerEvent) -> Void
        init(_ handler: @escaping (PlayerEvent) -> Void) { self.handler = handler }
        func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) { handler(event) }
    }

    var startedAt: UInt64 { startInstant }
}

/// The clocks tracking reads in a simulation: simulated, synchronised, one boot.
struct SimulatedTrackingClock: TrackingClock {
    let bootID = "simulation"
    func wallNow() -> Date { SimulatedTime.date() }
    func monotonicNow() -> Double { SimulatedTime.monotonic() }
    func wallClockSynchronized() -> Bool { true }
}

/// The outbox's sender in a simulation, never called: the simulation drains the outbox itself.
struct NoBeaconSender: BeaconSender {
    func send(_ url: String, timeout: Double) async -> Result<Int, any Error> { .success(0) }
}

extension JSONValue {
    var objectFields: [String: JSONValue] {
        if case .object(let fields) = self { return fields }
        return [:]
    }
}
