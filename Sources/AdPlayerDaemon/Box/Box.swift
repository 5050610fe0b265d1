import AdRuntime
import AdSchedule
import AdSources
import AdTracking
import ControlProtocol
import Foundation

/// One box, assembled from a configuration and a stage (`BoxStage`) by one function — for the
/// daemon (`adplayerd`), `adplayerd simulate` and `schedule-check` alike (R24, R25): the state
/// store, the outbox and the proof-of-play ledger, tracking, the ad sources (`AdSourceFactory`),
/// the episode policy and the controller, the schedule, the display hours, the screen's witness,
/// the health verdict and the command table's router. What differs between them is the stage
/// alone; a difference that is not a stage parameter is a bug waiting for a customer.
///
/// In order (the services' order of swift-service-lifecycle): the state store → the outbox and
/// the courier → tracking → the screen's monitor → the ad source → the controller → the
/// schedule (or what plays instead) → the witness → health → the router. `start()` starts the
/// controller on the loop; `reload(_:)` re-reads what can change at a SIGHUP; `stop()` stops it
/// all in reverse.
///
/// Threading: `init`, `start`, `reload` and `stop` from one thread that is not the loop (the
/// daemon's main thread, a simulation's driver): they read files and wait for the loop.
public final class Box: @unchecked Sendable {
    // @unchecked: `configuration` and `source` change only in `reload`, on the thread that owns
    // the box (the sources behind their lock); everything else is immutable after `init`.
    public private(set) var configuration: Configuration
    public let stage: BoxStage
    public let log: Logger
    public let store: StateStore
    public let outbox: BeaconOutbox
    public let reporter: TrackingReporter
    public let metrics: Metrics
    public let controller: Controller
    public let router: CommandRouter
    public let health: HealthMonitor
    /// The ad source of the configuration (nil without `ads`, or when it cannot be made).
    public var source: AdSourceFactory.Made? { sources.withLock { $0 } }
    /// The schedule's problem now (it does not load), for the health's configuration check.
    public var scheduleProblem: String? { scheduleTrouble.withLock { $0 } }

    private let sources = Locked<AdSourceFactory.Made?>(nil)
    private let scheduleTrouble = Locked<String?>(nil)
    private let courier: OutboxCourier?
    private let witness: any ScreenWitness
    private let separation: AdSeparation?
    private let outputSize = OutputSize()
    private let offlineLists = OfflineLists()
    private let scheduleWorker: Workers
    private let computeTimeline: @Sendable (Schedule, Date, @escaping @Sendable (ScheduleTimeline) -> Void) -> Void
    private let contentRecorder: (@Sendable (ContentPlay) -> Void)?
    private let durable: Bool
    private var temporaryCache: String?
    private var saved: StateStore.Saved
    private var startSchedule: (ResolvedSchedule, ScheduleTimeline)?
    private var fallbackQueue: [QueueEntry] = []
    private var savedTakeover: ScheduleTakeover?
    private var savedAudit: [JSONValue] = []
    private var stopped = false

    /// Where the schedule that last loaded is kept (`SCHEDULE.last-good.json` in the state
    /// folder): played when the configured one does not load at a start.
    public static let lastGoodName = "schedule.last-good.json"

    /// Builds the box. `onReload`: what `reload` (the command) asks of the owner (a SIGHUP's
    /// path). Throws only what the daemon cannot start without (a state file that cannot be
    /// made even in memory); anything else — a state folder that cannot be used, an ad source that
    /// cannot be made, a schedule that does not load — is said in the log and played around.
    /// `adObserver`: hears each ad event as tracking does (a simulation's rules; it changes
    /// nothing). `contentObserver`: hears each item the schedule plays, at its start and at its
    /// end (`schedule-check`'s listing; it changes nothing).
    public init(configuration: Configuration, stage: BoxStage, events: BoxEvents, log: Logger,
                onReload: (@Sendable () -> Void)? = nil, adObserver: (@Sendable (AdEvent) -> Void)? = nil,
                contentObserver: (@Sendable (ContentPlay) -> Void)? = nil) throws {
        self.configuration = configuration
        self.stage = stage
        self.log = log
        let environment = stage.environment

        // 1. The state store (the outbox shares its file). A state folder that cannot be used
        //    costs persistence, never playback.
        var durable = stage.stateFolder != nil
        let statePath = stage.stateFolder.map { $0 + "/adplayerd.sqlite" } ?? ":memory:"
        // A run-only state is in memory (`StateDurability.runOnly`): the store's and the
        // outbox's databases are two, the outbox's written to the file at the end.
        let storePath = stage.durability == .runOnly ? ":memory:" : statePath
        if let folder = stage.stateFolder {
            do {
                try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
                guard access(folder, W_OK) == 0 else { throw UsageError("\(folder) is not writable") }
            } catch {
                log.error("state: \(error); running without a state folder: nothing will survive a restart")
                durable = false
            }
        }
        self.durable = durable
        let store: StateStore
        do {
            store = try StateStore(path: durable ? storePath : ":memory:", log: log, environment: environment, durability: stage.durability)
        } catch let error as SQLiteError where error.isBusy {
            // Locked by another process: not damage — left as it is. Playback does not wait for
            // it (a quarter of a second at most); the queue and positions of this run are kept in
            // memory, while tracking keeps beacons and plays in memory and writes them to the
            // file once it opens, or beside it at a stop (BeaconOutbox+Waiting.swift).
            log.error("state: \(statePath): \(error); this run's queue and positions are not saved (nothing in the file is lost: it is used "
                      + "again at the next start); beacons and proof of play are written to it once it opens")
            store = try StateStore(path: ":memory:", log: log, environment: environment, durability: stage.durability)
        } catch {
            log.error("state: \(statePath): \(error); running without saved state this time")
            store = try StateStore(path: ":memory:", log: log, environment: environment, durability: stage.durability)
            durable = false
        }
        self.store = store

        // 2. The outbox (beacons and the ledger), its courier, tracking.
        let metrics = Metrics()
        self.metrics = metrics
        var outboxConfiguration = configuration.outbox
        outboxConfiguration.ownsLedger = true   // the box owns the ledger: it closes what a kill left open
        outboxConfiguration.environment = environment
        outboxConfiguration.durability = stage.durability
        outbox = try BeaconOutbox(path: durable ? statePath : ":memory:", configuration: outboxConfiguration, sender: stage.beaconSender,
                                  clock: stage.trackingClock, onEvent: { event in Self.tell(event, log: log, events: events) },
                                  onWarning: { log.warning("tracking: \($0)") })
        metrics.report(outbox)
        if stage.courierThread {
            let courier = OutboxCourier(outbox: outbox) { log.error($0) }
            outbox.onEnqueued { [weak courier] in courier?.wake() }   // weak: the courier holds the outbox
            self.courier = courier
        } else {
            courier = nil
        }
        var policy = configuration.macroPolicy
        policy.environment = environment
        var placement = TrackingReporter.Placement()
        placement.venueID = configuration.venueID
        placement.impressionsPerPlay = configuration.impressionsPerPlay
        placement.latLong = configuration.macroPolicy.latLong
        placement.popDeadline = configuration.popDeadline
        placement.requireDisplay = configuration.popRequireDisplay
        placement.displayWait = configuration.popDisplayWait
        let reporter = TrackingReporter(outbox: outbox, policy: policy, clock: stage.trackingClock, metrics: metrics, placement: placement)
        self.reporter = reporter

        // 3. The ad source. Without a state folder, creatives are cached in one private
        //    temporary folder for the box's life (a reload's new source uses it too).
        if !durable {
            do {
                temporaryCache = try CreativeCache.temporary(maxBytes: configuration.cacheMaxBytes).folder
            } catch {
                log.error("ads: \(error); VAST creatives cannot be cached")
            }
        }
        // Competitive separation across every source, for the box's life (read at start).
        separation = configuration.adSeparation > 0
            ? AdSeparation(seconds: configuration.adSeparation, clock: SystemScheduleClock(environment)) : nil
        scheduleWorker = Workers(name: "adplayerd-schedule", environment: environment)

        // 4. The controller, its episodes' ads and the policy.
        let workers = Workers(name: "adplayerd-ads", threads: 2, environment: environment)
        var adsConfiguration = VideoAdsConfiguration()
        adsConfiguration.executor = workers
        adsConfiguration.viewabilityMeasurable = stage.viewabilityMeasurable
        adsConfiguration.pauseAdMaxShowing = configuration.pauseAdMax
        adsConfiguration.screensaverRotation = configuration.screensaverRotate
        adsConfiguration.environment = environment
        // Loudness (R28): each creative and episode measured once, kept beside the state; a
        // virtual simulation measures flat out on its own thread (its time stands still).
        adsConfiguration.loudness = configuration.adLoudness
        adsConfiguration.loudnessSource = LoudnessBook(path: durable ? stage.stateFolder.map { $0 + "/loudness.tsv" } : nil,
                                                       pace: stage.virtualTime ? 1 : 0.5, environment: stage.virtualTime ? environment : .system,
                                                       note: { log.warning("loudness: \($0)") })
        var reporting = AdReporting(record: { event in
            adObserver?(event)
            reporter.record(event)
        }, recordStart: { event, then in
            adObserver?(event)
            reporter.recordStart(event, then: then)
        })
        let outputSize = self.outputSize
        reporting.playerSize = { width, height in
            outputSize.set(width: width, height: height)
            reporter.setPlayerSize(width: width, height: height)
        }
        controller = Controller(player: stage.player, surface: stage.surface, store: store, log: log, source: nil,
                                pauseAdDelay: configuration.pauseAdDelay, adsConfiguration: adsConfiguration, emit: events.one,
                                emitMany: events.many, reporting: reporting, metrics: metrics)
        saved = store.load()

        // 5. The schedule: read and resolved here (the disk), its timeline worked out off the loop;
        //    with one, it decides what plays (the saved queue is not resumed). One that does not
        //    load: the last that did (kept in the state folder), else the library; said in the
        //    log, in health and in `schedule`.
        let scheduleWorker = self.scheduleWorker
        computeTimeline = { schedule, from, done in scheduleWorker.execute { done(ScheduleTimeline.compute(schedule, from: from)) } }
        let recordContent = configuration.recordContentPlays
        if recordContent || contentObserver != nil {
            contentRecorder = { (play: ContentPlay) in
                contentObserver?(play)
                guard recordContent else { return }
                reporter.recordContent(id: play.id, contentID: play.contentID, source: "schedule \(play.rule.kind.rawValue) \(play.rule.id)",
                                       startedWall: play.startedWall, endedWall: play.endedWall, seconds: play.seconds, reason: play.reason)
            }
        } else {
            contentRecorder = nil
        }

        // 6. The screen's witness and the health verdict; the router of the command table.
        witness = stage.screen.witness { info, evidence in reporter.recordDisplay(info, evidence) }
        var healthSources = HealthMonitor.Sources(
            loop: stage.loop, controller: controller, metrics: metrics, outbox: outbox,
            folders: durable ? [("state", stage.stateFolder!)] + (configuration.ads.isEmpty ? [] : [("cache", Self.cacheFolder(configuration, stage))])
                // A state folder that could not be used is still the box's: its check says why (failing).
                : stage.backgroundChecks ? [("state", stage.stateFolder ?? configuration.stateDir)] : stage.stateFolder.map { [("state", $0)] } ?? [],
            configurationProblems: { [] }, clockSynchronized: { stage.trackingClock.wallClockSynchronized() })
        healthSources.onWarning = { log.warning($0) }
        healthSources.screenDark = stage.screen.dark
        let trouble = scheduleTrouble
        let arguments = configuration.rereadArguments
        healthSources.configurationProblems = {
            var problems: [String] = []
            if let arguments {
                do {
                    problems = try Configuration.load(arguments: arguments).localProblems()
                } catch {
                    problems = ["the configuration file does not load (the running one is kept): \(error)"]
                }
            }
            if let schedule = trouble.withLock({ $0 }) { problems.append(schedule) }
            return problems
        }
        health = HealthMonitor(healthSources)
        router = CommandRouter(loop: stage.loop, controller: controller, library: configuration.library, metrics: metrics, outbox: outbox,
                               screenshots: stage.stateFolder.map { $0 + "/screenshots" },
                               extras: CommandRouter.Extras(health: health, log: log, reload: onReload), environment: environment)

        // Now the sources (they may fetch), the schedule, the saved state checked.
        do {
            let made = try makeSource(configuration)
            sources.withLock { $0 = made }
        } catch {
            log.error("ads: \(error); episodes play without ads")
        }
        startSchedule = loadScheduleOrFallback(configuration, atStart: true)
        if startSchedule != nil || configuration.schedule != nil {
            saved.queue = []
            saved.current = nil
        } else {
            saved = Self.checked(saved, library: configuration.library, log: log)
        }
        if let text = saved.takeover, startSchedule != nil {
            (savedTakeover, savedAudit) = Self.restoreTakeover(text, library: configuration.library, now: environment.date(), log: log)
        }
        savedAudit = saved.scheduleAudit.flatMap { try? JSONValue.parse(Array($0.utf8)) }?.array ?? savedAudit
    }

    deinit {
        if let temporaryCache { try? FileManager.default.removeItem(atPath: temporaryCache) }
    }

    /// The creative cache's folder (durable: the configuration's; else the private temporary one).
    private static func cacheFolder(_ configuration: Configuration, _ stage: BoxStage) -> String {
        configuration.cacheDirectory ?? (stage.stateFolder ?? configuration.stateDir) + "/creatives"
    }

    /// Starts it: the services of the stage, then the controller on the loop — the saved
    /// state resumed, or the schedule (or what plays instead).
    public func start() throws {
        if stage.backgroundChecks {
            stage.screen.start()
            health.start()
        }
        courier?.start()
        let controller = self.controller, configuration = self.configuration, saved = self.saved
        let source = self.source?.source, separation = self.separation, witness = self.witness
        let schedule = startSchedule, fallback = fallbackQueue, takeover = savedTakeover, audit = savedAudit
        let computeTimeline = self.computeTimeline, contentRecorder = self.contentRecorder
        let trouble = scheduleTrouble.withLock { $0 }, displayPower = stage.displayPower, now = stage.environment
        let repeatMode = configuration.repeatMode ?? (configuration.loop ? .one : nil)
        let store = self.store
        try stage.loop.sync {
            controller.displayWitness = witness
            controller.pauseAdRotate = configuration.pauseAdRotate
            controller.screensaverAfter = configuration.screensaverAfter
            controller.separation = separation
            controller.reload(source: source, pauseAdDelay: configuration.pauseAdDelay)
            controller.start(resuming: saved)
            if let repeatMode { _ = try? controller.setRepeat(repeatMode) }
            controller.configureDisplay(hours: configuration.displayHours, cec: displayPower, now: { now.date() })
            controller.setScheduleProblem(trouble)
            if let (resolved, timeline) = schedule {
                controller.configureSchedule(resolved, timeline: timeline, now: { now.date() }, compute: computeTimeline, onContent: contentRecorder,
                                             restoring: takeover, audit: audit, persist: { takeover, audit in
                                                 store.saveSetting("takeover", takeover ?? "")
                                                 store.saveSetting("schedule-audit", audit)
                                             })
            } else if !fallback.isEmpty {
                // The schedule does not load and none did before: the library plays.
                _ = try? controller.setRepeat(.all)
                _ = try? controller.open(fallback, start: 0)
            }
        }
    }

    /// A SIGHUP (or `reload`): what can change while it runs — the library, the log level, the
    /// ad source (kept when the new one cannot be made), the pause ad's delay, the display hours,
    /// the schedule (kept when the new one does not load). Returns what it says in the log.
    @discardableResult
    public func reload(_ reloaded: Configuration) -> String {
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
        if !kept { sources.withLock { $0?.cleanup(); $0 = made } }
        // A schedule that does not load keeps the one that plays (said in health and `schedule`).
        let newSchedule = loadScheduleOrFallback(reloaded, atStart: false)
        if reloaded.schedule == nil, configuration.schedule != nil { log.notice("SIGHUP: schedule: removing it takes effect at the next start") }
        let running = source?.source
        let hours = reloaded.displayHours, delay = reloaded.pauseAdDelay
        let controller = self.controller, computeTimeline = self.computeTimeline, contentRecorder = self.contentRecorder
        let trouble = scheduleTrouble.withLock { $0 }
        try? stage.loop.sync {
            controller.reload(source: running, pauseAdDelay: delay)
            controller.setDisplayHours(hours)
            controller.setScheduleProblem(trouble)
            if let (resolved, timeline) = newSchedule {
                controller.configureSchedule(resolved, timeline: timeline, compute: computeTimeline, onContent: contentRecorder)
            }
        }
        configuration = reloaded
        return kept ? "SIGHUP: configuration reloaded; the ad source kept" : "SIGHUP: configuration and ad source reloaded"
    }

    /// Stops it in reverse order: what is on screen ends (positions saved), tracking writes
    /// what it holds (`flushing` seconds at most), the courier delivers for `delivering` more
    /// seconds, the outbox closes, the checks stop, the state store writes what waits.
    public func stop(flushing: Double = 5, delivering: Double = 2) {
        guard !stopped else { return }
        stopped = true
        let controller = self.controller
        try? stage.loop.sync { controller.stop() }
        if !reporter.flush(timeout: flushing) {
            log.error("tracking: the ads' last events were not all written within \(Int(flushing)) s (a slow or hung disk); "
                      + "proof of play and beacons of the last moments may be missing")
        }
        courier?.stop(flushingFor: delivering)
        outbox.finish()   // a database still locked: what this run kept goes beside it
        witness.close()
        health.stop()
        stage.screen.stop()
    }

    /// After the player is shut down: the state store writes what waits; the sources let go.
    public func finish() {
        store.flush()
        sources.withLock { $0?.cleanup() }
        do {
            try outbox.writeOut()   // a run-only outbox (in memory) to its file, for the run's readers
        } catch {
            log.error("tracking: \(error): the run's ledger and beacons could not be written to its state folder")
        }
    }

    // MARK: The parts

    /// The ad source of `configuration`: nil without `ads`; throws when it cannot be made.
    private func makeSource(_ configuration: Configuration) throws -> AdSourceFactory.Made? {
        guard !configuration.ads.isEmpty else { return nil }
        var options = AdSourceFactory.Options(fetcher: stage.fetcher, counters: store)
        options.token = configuration.adsToken
        var policy = configuration.macroPolicy
        policy.environment = stage.environment
        options.policy = policy
        options.cacheFolder = durable ? Self.cacheFolder(configuration, stage) : temporaryCache
        options.cacheMaxBytes = configuration.cacheMaxBytes
        options.vast.offlineLifetime = configuration.offlineAdLifetime
        options.vast.offlineLists = offlineLists
        options.popDeadline = configuration.popDeadline
        options.requireDisplay = configuration.popRequireDisplay
        options.screenDark = stage.screen.dark
        options.timeZone = configuration.timeZone
        options.clock = SystemScheduleClock(stage.environment)
        options.separation = separation
        let metrics = self.metrics, log = self.log, reporter = self.reporter
        options.onPassedOver = { kind, reason in metrics.increment("adplayerd_ads_passed_over_total", ["kind": kind.protocolName, "reason": reason]) }
        options.outputSize = outputSize
        options.onProblem = { log.warning("ads: \($0)") }
        options.onErrorURLs = { urls, context in reporter.recordErrorURLs(urls, context) }
        options.onNotUsed = { urls, context in reporter.recordNotUsedURLs(urls, context) }
        let made = try AdSourceFactory.make(configuration.ads, options)
        log.notice("ads from " + made.chain.joined(separator: ", then "))
        return made
    }

    /// The configured schedule, resolved (the disk), with its timeline. One that does not load
    /// is said (`scheduleTrouble`): at a start, the last one that loaded plays instead (kept in
    /// the state folder), else the library (`fallbackQueue`); at a reload, the one that plays
    /// is kept (nil). One that loads is kept as the last good one.
    private func loadScheduleOrFallback(_ configuration: Configuration, atStart: Bool) -> (ResolvedSchedule, ScheduleTimeline)? {
        guard let file = configuration.schedule else {
            scheduleTrouble.withLock { $0 = nil }
            return nil
        }
        let now = stage.environment.date()
        let lastGood = stage.stateFolder.map { $0 + "/" + Self.lastGoodName }
        do {
            let resolved = try ScheduleLoader.load(path: file, library: configuration.library, timeZone: configuration.timeZone, measure: stage.measure)
            scheduleTrouble.withLock { $0 = nil }
            if let lastGood, durable, let data = try? SafeFile.read(file, maxBytes: Schedule.maxFileBytes) {
                do {
                    try AtomicFile.write(data, to: lastGood, durable: true)
                } catch {
                    log.warning("schedule: the last good schedule cannot be kept in \(lastGood): \(error)")
                }
            }
            return (resolved, ScheduleTimeline.compute(resolved.schedule, from: now))
        } catch {
            let problems = (error as? ScheduleError)?.problems ?? ["\(error)"]
            let said = "\(file) does not load: " + problems.prefix(5).joined(separator: "; ") + (problems.count > 5 ? "; and \(problems.count - 5) more" : "")
            guard atStart else {
                log.error("SIGHUP: schedule: \(said); keeping the schedule that plays")
                scheduleTrouble.withLock { $0 = "the schedule \(said) (the running schedule is kept)" }
                return nil
            }
            if let lastGood, FileManager.default.fileExists(atPath: lastGood),
               let resolved = try? ScheduleLoader.load(path: lastGood, library: configuration.library, timeZone: configuration.timeZone, measure: stage.measure) {
                log.error("schedule: \(said); playing the last schedule that loaded (\(lastGood))")
                scheduleTrouble.withLock { $0 = "the schedule \(said) (the last schedule that loaded plays)" }
                return (resolved, ScheduleTimeline.compute(resolved.schedule, from: now))
            }
            let files = (try? Library.resolveFiles(configuration.library, under: configuration.library).get().paths) ?? []
            fallbackQueue = files.map { QueueEntry(path: $0) }
            log.error("schedule: \(said); " + (files.isEmpty ? "no schedule loaded before and the library has nothing to play"
                                                              : "no schedule loaded before: the library plays (\(files.count) files, repeat all)"))
            scheduleTrouble.withLock { $0 = "the schedule \(said) (" + (files.isEmpty ? "nothing plays" : "the library plays") + ")" }
            return nil
        }
    }

    /// The saved queue passes the checks `open` makes (an edited state file must not play a file
    /// outside the library, or hang on a FIFO): what does not is left out, said once.
    static func checked(_ saved: StateStore.Saved, library: [String], log: Logger) -> StateStore.Saved {
        guard !saved.queue.isEmpty else { return saved }
        var checked = saved
        var kept: [QueueEntry] = []
        var current: Int?
        var refused: [String] = []
        for (index, entry) in saved.queue.enumerated() {
            switch Library.resolveFiles([entry.path], under: library) {
            case .success(let files) where files.paths.count == 1:
                if index == saved.current { current = kept.count }
                kept.append(QueueEntry(path: files.paths[0], contentID: entry.contentID, length: entry.length))
            case .success:
                refused.append("\(entry.path): a folder")
            case .failure(let error):
                refused.append(error.message)
            }
        }
        if !refused.isEmpty {
            log.warning("state: \(refused.count) saved queue entr\(refused.count == 1 ? "y is" : "ies are") left out: "
                        + refused.prefix(3).map { OneLine.escape(String($0.prefix(300))) }.joined(separator: "; "))
        }
        checked.queue = kept
        checked.current = current
        return checked
    }

    /// A takeover saved by the last run, still on: checked against the library as a new one is.
    static func restoreTakeover(_ text: String, library: [String], now: Date, log: Logger) -> (ScheduleTakeover?, [JSONValue]) {
        guard !text.isEmpty, let value = try? JSONValue.parse(Array(text.utf8)), let takeover = ScheduleTakeover(json: value) else { return (nil, []) }
        if let until = takeover.until, until <= now { return (nil, []) }
        var files: [ResolvedSchedule.File] = []
        for file in takeover.files {
            guard case .success(let checked) = Library.resolveFiles([file.path], under: library, extensions: Library.playableExtensions.union(Library.imageExtensions)),
                  checked.paths.count == 1 else {
                log.warning("schedule: the takeover of \(OneLine.escape(takeover.target)) saved by the last run names \(OneLine.escape(file.path)), "
                            + "which is not a file of the library now: left out")
                continue
            }
            files.append(ResolvedSchedule.File(path: checked.paths[0], seconds: file.seconds))
        }
        guard !files.isEmpty else { return (nil, []) }
        var restored = takeover
        restored.files = files
        log.notice("schedule: the takeover of \(OneLine.escape(takeover.target)) by \(OneLine.escape(takeover.who)) goes on after the restart")
        return (restored, [])
    }

    /// The outbox's events, as the log and the clients hear them.
    private static func tell(_ event: OutboxEvent, log: Logger, events: BoxEvents) {
        switch event {
        case .sent(let url, let attempts):
            events.one(.beaconSent(url: url, attempts: attempts))
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
    }
}
