import AdPlayerDaemon
import AdRuntime
import AdSchedule
import AdSources
import AdTracking
import ControlProtocol
import Foundation
import ProcessSupport

/// `adplayerd simulate` (docs/simulate.md): the box the daemon runs — the one assembly, `Box`,
/// its controller, sources, caps, schedule, tracking, the outbox's own delivery and the
/// proof-of-play ledger — on a stage of its own (`SimulationStage`): the virtual player and
/// virtual time (or real mpv, fast), the network live or replayed and recorded, beacons
/// recorded (sent only when asked), a virtual screen. What it did is written as it goes
/// (`timeline.jsonl`, `requests.har`) and checked as it goes (`RuleBook`), so that a month
/// holds no more memory than a day.
///
/// How time moves (virtual): from one timer's deadline to the next (the viewer's steps, an
/// overlay's end, a quartile, the outbox's next beacon), and only once nothing is in flight
/// (`AdEnvironment.settled`) — what an ad server answers lands at the simulated instant it was
/// asked, however long the network took, and two runs with the same answers and seed write the
/// same bytes.
///
/// Threading: `run` on one thread (the driver), which moves time; everything else on the
/// simulation's one thread.
public final class Simulation: @unchecked Sendable {
    // @unchecked: the writers behind their locks; the rest is set up before `run` and then read.
    public struct Settings: Sendable {
        public var configuration: Configuration
        /// Simulated start, seconds since 1970, and how long.
        public var from: Double
        public var seconds: Double
        public var viewer = ViewerScript()
        /// The seed of the run's random choices (the stage's environment draws them): said in the timeline.
        public var seed: UInt64 = 1
        /// Where the outputs go (written as the run goes; their final names at the end).
        public var out: String
        public var caps: [String: SimulationRules.Cap] = [:]

        public init(configuration: Configuration, from: Double, seconds: Double, out: String) {
            self.configuration = configuration
            self.from = from
            self.seconds = seconds
            self.out = out
        }
    }

    /// What a run said: the rules' results, and what the summary counts.
    public struct Outcome: Sendable {
        public var results: [SimulationRules.Result]
        public var summary: String
        public var passed: Bool { results.allSatisfy(\.passed) }
    }

    private let settings: Settings
    private let stage: SimulationStage
    private let rules: RuleBook
    /// The timeline, the HAR and the rules, written and judged in order on a thread of their own.
    private let recorder = Recorder()
    private let timeline: LineWriter
    private let har: HAR.Writer
    private let counts = Locked((ads: 0, requests: 0, unanswered: 0, beacons: 0, entries: 0, loudness: SimulationReport.LoudnessTally()))
    private let observers: Observers
    /// The outbox's courier, as the daemon's: woken by a beacon queued (`poked`), or at the
    /// time the outbox said (simulated wall time).
    private let courier = Locked<(poked: Bool, delivering: Bool, wake: Double?)>((true, false, nil))
    /// The rules look at ads long done with once a simulated second.
    private var lastTick = 0.0

    /// What a caller hears as the run goes (`schedule-check`'s listing); it changes nothing.
    public struct Observers: Sendable {
        /// Each item the schedule plays, at its start and at its end.
        public var content: (@Sendable (ContentPlay) -> Void)?
        /// Each ad event, at its simulated wall time.
        public var ad: (@Sendable (Double, AdEvent) -> Void)?

        public init(content: (@Sendable (ContentPlay) -> Void)? = nil, ad: (@Sendable (Double, AdEvent) -> Void)? = nil) {
            self.content = content
            self.ad = ad
        }
    }

    public init(_ settings: Settings, stage: SimulationStage, observers: Observers = Observers()) throws {
        self.settings = settings
        self.stage = stage
        self.observers = observers
        var book = RuleBook.Settings()
        book.caps = settings.caps
        book.start = settings.from
        book.separation = settings.configuration.adSeparation
        book.popDeadline = settings.configuration.popDeadline
        book.sentBeacons = stage.beacons.sends
        book.scheduled = settings.configuration.schedule != nil
        book.personDark = settings.configuration.schedule != nil ? Controller.scheduleOverrideMax + 5 : nil
        rules = RuleBook(book)
        try FileManager.default.createDirectory(atPath: settings.out, withIntermediateDirectories: true)
        timeline = try LineWriter(path: settings.out + "/.timeline.jsonl.partial")
        har = try HAR.Writer(path: settings.out + "/.requests.har.partial", creator: Product.version)
    }

    /// The simulated wall time now.
    private func wallNow() -> Double { stage.box.environment.wall() }

    private func note(_ fields: [String: JSONValue], at: Double? = nil) {
        let at = at ?? wallNow()
        recorder.record { [self] in write(fields, at: at) }
    }

    /// A timeline entry, on the recorder's thread.
    private func write(_ fields: [String: JSONValue], at: Double) {
        var object = fields
        object["t"] = .string(ISO8601.format(at))
        object["s"] = .number(((at - settings.from) * 1000).rounded() / 1000)
        timeline.write(JSONValue.object(object).text)
        rules.timelineEntry()
    }

    // MARK: Running

    public func run() throws -> Outcome {
        let configuration = settings.configuration
        let stage = self.stage
        let rules = self.rules
        // The box's log: its warnings in the timeline (`ads.problem`, `log`), its errors problems too.
        let log = Logger(level: .warning, echo: false) { [weak self] level, message in
            guard let self else { return }
            if message.hasPrefix("ads: ") {
                note(["event": "ads.problem", "message": .string(String(message.dropFirst(5)))])
            } else {
                note(["event": "log", "level": .string(level.name), "message": .string(message)])
            }
        }
        let events = BoxEvents(one: { [weak self] event in self?.told(event) }, many: { [weak self] events in events.forEach { self?.told($0) } })
        let courier = self.courier
        stage.http.listen { [weak self] exchange in self?.recorded(exchange) }
        stage.beacons.listen { [weak self] exchange in self?.recorded(exchange) }
        stage.surface.watch { [weak self] id, shown in
            guard let self else { return }
            let at = wallNow()
            recorder.record { rules.surface(at, id, shown) }
        }
        let box = try Box(configuration: configuration, stage: stage.box, events: events, log: log,
                          adObserver: { [weak self] event in self?.adEvent(event) }, contentObserver: observers.content)
        if !stage.box.courierThread { box.outbox.onEnqueued { courier.withLock { $0.poked = true } } }
        let observer = Observer { [weak self] event in self?.playerEvent(event) }
        let viewer = ViewerRunner(script: settings.viewer, router: box.router, player: stage.box.player, start: stage.start) { [weak self] label, request, result in
            self?.viewerStep(label, request, result)
        }
        note(["event": "simulation.start", "from": .string(ISO8601.format(settings.from)), "seconds": .number(settings.seconds),
              "seed": .int(Int64(bitPattern: settings.seed))])
        var observation: PlayerObservation?
        try stage.box.loop.sync {
            observation = stage.box.player.addObserver(observer, phase: .report)
            viewer.arm()
        }
        try box.start()
        // The library plays as an operator starts it on a box without a schedule: `open` of its
        // first folder and `queue` of the others, through the command table (the daemon's order
        // and checks of `open DIR`); the configured repeat mode keeps it going.
        let folders = configuration.library
        if configuration.schedule == nil, let first = folders.first {
            let rest = Array(folders.dropFirst())
            try stage.box.loop.sync {
                viewer.run(.open(path: first, contentID: nil, start: nil), "open the library") { opened in
                    guard opened, !rest.isEmpty else { return }
                    viewer.run(.queue(paths: rest), "queue the library's other folders") { _ in }
                }
            }
        }

        // From deadline to deadline (virtual), or as time flows (real); each step settles what is
        // under way, delivers the beacons due (the outbox's own delivery), and judges ads done.
        let end = stage.start &+ LoopTime.nanoseconds(settings.seconds)
        stage.drive(end) { [unowned self] in step(box) }
        stepHere(box)
        // The end of the run: what is on screen ends as at a stop of the daemon.
        try? stage.box.loop.sync {
            viewer.cancel()
            observation?.cancel()
        }
        box.stop(flushing: 30, delivering: 0)
        stepHere(box)
        note(["event": "simulation.end"])
        stage.shutdown()
        box.finish()
        withExtendedLifetime((observer, viewer)) {}
        recorder.close()   // everything handed over written and judged
        for problem in stage.problems() { rules.problem(problem) }

        // The outputs: the streamed ones closed and renamed, the rest written whole.
        timeline.close()
        har.close()
        let statePath = (stage.box.stateFolder ?? settings.out) + "/adplayerd.sqlite"
        let plays = try Self.writePlays(statePath: statePath, to: settings.out + "/.plays.csv.partial")
        let results = rules.finish(at: wallNow())
        let counted = counts.withLock { $0 }
        let summary = SimulationReport.summary(results, from: settings.from, seconds: settings.seconds, ads: counted.ads, plays: plays,
                                               requests: counted.requests, unanswered: counted.unanswered, beacons: counted.beacons,
                                               loudness: counted.loudness)
        let report = SimulationReport.junit(results, from: settings.from, seconds: settings.seconds, configuration: configuration)
        try AtomicFile.replace([(settings.out + "/report.xml", Data(report.utf8)), (settings.out + "/summary.txt", Data(summary.utf8))],
                               mode: 0o644, durable: false)
        for name in ["timeline.jsonl", "requests.har", "plays.csv"] {
            _ = rename(settings.out + "/." + name + ".partial", settings.out + "/" + name)
        }
        return Outcome(results: results, summary: summary)
    }

    /// One step of the run, once nothing is under way (virtual: on the simulation's thread,
    /// between instants): when the outbox has something due (a beacon was queued, a retry's
    /// time came, the ledger's heartbeat) it delivers — through its own delivery, as the
    /// daemon's courier does when woken — and the step is asked again once that is done;
    /// else the ads done with are judged, and it says when the outbox wants to look again.
    private func step(_ box: Box) -> SimulationLoop.Step {
        let now = wallNow()
        let due = courier.withLock { courier -> Bool in
            guard !courier.delivering, courier.poked || courier.wake.map({ now >= $0 }) == true else { return false }
            courier.poked = false
            courier.delivering = true
            return true
        }
        if due {
            let outbox = box.outbox
            let courier = self.courier
            let environment = stage.box.environment
            Task.counted(in: environment) {
                let report = await outbox.deliverDue()
                let alive = outbox.keepAlive()
                var next = [outbox.nextDue(), alive].compactMap { $0 }.min()
                // A pass that did nothing and asks to be run again at once would hold virtual time
                // still for ever: it is run again a millisecond later.
                if report == BeaconOutbox.Report(), let wanted = next, wanted < 0.001 { next = 0.001 }
                let at = environment.wall()
                courier.withLock {
                    $0.wake = next.map { at + $0 }
                    $0.delivering = false
                }
            }
            return .again
        }
        if now - lastTick >= 1 {
            lastTick = now
            recorder.record { [rules] in rules.tick(now) }
        }
        return courier.withLock { courier in
            courier.poked || courier.delivering ? .again : .moveOn(wanted: courier.wake.map { max(0, $0 - now) })
        }
    }

    /// Steps until the outbox has nothing to do at this instant, from the driver's thread (the
    /// run's start and end).
    private func stepHere(_ box: Box) {
        for _ in 0..<1000 {
            settle()
            guard case .again = step(box) else { return }
        }
    }

    /// Waits (in real time, blocked) until nothing handed to the simulation's thread is under
    /// way. A request bounds itself (`SimulationHTTP.realWait`); past 10 minutes of real time
    /// the run goes on and says so.
    private func settle() {
        guard stage.isVirtual else { return }
        if !stage.box.environment.waitSettled(timeout: 600) {
            let problem = "work under way did not finish in 10 minutes of real time (at \(ISO8601.format(wallNow())))"
            recorder.record { [rules] in rules.problem(problem) }
        }
    }

    // MARK: What happened

    private func told(_ event: ControlEvent) {
        let at = wallNow()
        recorder.record { [self] in
            rules.event(at, event)
            write(event.json.objectFields, at: at)
        }
    }

    private func adEvent(_ event: AdEvent) {
        if case .started(let info) = event {
            counts.withLock { counted in
                counted.ads += 1
                if let loudness = info.loudness { counted.loudness.add(loudness) }
            }
        }
        let at = wallNow()
        recorder.record { [rules] in rules.adEvent(at, event) }
        observers.ad?(at, event)
    }

    private func playerEvent(_ event: PlayerEvent) {
        let at = wallNow()
        recorder.record { [rules] in rules.player(at, event.change, event.snapshot) }
    }

    private func viewerStep(_ label: String, _ request: Request, _ result: String) {
        let at = wallNow()
        recorder.record { [rules] in rules.viewer(at, request, ok: result == "ok") }
        var fields: [String: JSONValue] = ["event": "viewer", "do": .string(label), "cmd": .string(request.name), "result": .string(result)]
        if let args = Commands.row(of: request)?.encode(request), !args.isEmpty { fields["args"] = .object(args) }
        note(fields, at: at)
    }

    private func recorded(_ exchange: RecordedExchange) {
        recorder.record { [rules, har] in
            rules.exchange(exchange)
            har.add(exchange)
        }
        switch exchange.kind {
        case .request:
            counts.withLock {
                $0.requests += 1
                if exchange.waited != nil { $0.unanswered += 1 }
            }
        case .beacon:
            counts.withLock { $0.beacons += 1 }
            var fields: [String: JSONValue] = ["event": "beacon", "name": .string(exchange.event ?? ""), "url": .string(exchange.url),
                                               "sent": .bool(stage.beacons.sends)]
            if let play = exchange.play { fields["play"] = .string(play) }
            if let recorded = exchange.recordedAt { fields["recorded"] = .string(ISO8601.format(recorded)) }
            if stage.beacons.sends { fields["status"] = .int(Int64(exchange.status)) }
            note(fields, at: exchange.started)
        }
    }

    /// The ledger as `plays export --format dooh-csv` writes it (screen `simulation`), page by
    /// page (a month's ledger is not held whole). Returns how many plays.
    static func writePlays(statePath: String, to path: String) throws -> Int {
        let writer = try LineWriter(path: path)
        defer { writer.close() }
        let ledger = try PlayRecord.ledgerID(path: statePath) ?? ""
        writer.write(PlayLedger.doohColumns.joined(separator: ","))
        var after: Int64 = 0
        var count = 0
        while true {
            let page = try PlayRecord.readChain(path: statePath, afterChain: after, limit: 5_000)
            guard let last = page.last?.chainPosition else { break }
            for line in PlayLedger.doohLog(page, screen: "simulation", ledger: ledger).dropFirst() { writer.write(line) }
            count += page.count
            after = last
        }
        return count
    }

    private final class Observer: PlayerObserver, @unchecked Sendable {
        let handler: (PlayerEvent) -> Void
        init(_ handler: @escaping (PlayerEvent) -> Void) { self.handler = handler }
        func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) { handler(event) }
    }
}

/// Lines written to a file as they come (buffered), nothing kept.
final class LineWriter: @unchecked Sendable {
    // @unchecked: the handle and the buffer behind the lock.
    private let file = Locked<(handle: FileHandle, buffer: Data)?>(nil)

    init(path: String) throws {
        FileManager.default.createFile(atPath: path, contents: nil)
        guard let handle = FileHandle(forWritingAtPath: path) else { throw UsageError("\(path): cannot be written") }
        file.withLock { $0 = (handle, Data()) }
    }

    func write(_ line: String) {
        file.withLock { file in
            guard file != nil else { return }
            file!.buffer.append(contentsOf: line.utf8)
            file!.buffer.append(0x0A)
            if file!.buffer.count > 1 << 20 {
                file!.handle.write(file!.buffer)
                file!.buffer.removeAll(keepingCapacity: true)
            }
        }
    }

    func close() {
        file.withLock { file in
            guard let current = file else { return }
            current.handle.write(current.buffer)
            try? current.handle.close()
            file = nil
        }
    }
}

extension JSONValue {
    var objectFields: [String: JSONValue] {
        if case .object(let fields) = self { return fields }
        return [:]
    }
}
