import AdRuntime
import AdSources
import Foundation

/// Tracking never loses a beacon silently (R17). Every beacon is written to SQLite before its
/// first attempt (or, while the disk refuses writes, kept in a bounded memory queue: below),
/// sent with retry, exponential backoff and jitter, and removed only after a 2xx. A `kill -9` loses none: what was in flight then (at most `concurrency`) is sent again
/// after the restart, once its backoff has passed.
///
/// - **Bounded**: `maxRows` and `maxBytes` (configurable). At the bound, room is made by
///   dropping the oldest non-billable beacons first, then the oldest billable ones — each drop
///   counted (`outbox_full`).
/// - **Aged by the time the box has run** (`RunClock`, saved with every write), not by the wall
///   clock: a box that boots with a wrong clock and then syncs drops nothing for it.
/// - **`[TIMESTAMP]`** is filled when a beacon is sent, from when it was recorded, corrected if
///   the wall clock was not synchronised then (`RecordedTime.corrected`); a beacon that needs
///   it waits for the clock up to `timeSyncWait` of run time.
/// - **A failing disk** (full, an I/O error, read-only): beacons wait in a bounded memory queue
///   (`memoryRows`, `memoryBytes`), are sent from there, and are written once the disk takes
///   writes again; one that cannot be kept is counted (`memory_full`).
/// - **Proof of play** lives in the same database (`plays`), so that a play's beacon outcomes
///   are counted in the same transactions.
///
/// Threading: any thread. The database is behind one lock; sends run concurrently (at most
/// `concurrency`) on Swift tasks, never holding the lock; `onEvent` is called with no lock held.
///
/// One store — the connection, the counters, the lock — by concern: the beacon types and the
/// sender in Beacon.swift; queueing, the bounds and a failing disk here; delivery and backoff in
/// BeaconOutbox+Delivery.swift; the play ledger (proof of play) in BeaconOutbox+Plays.swift.
public final class BeaconOutbox: Sendable {
    public struct Configuration: Sendable {
        /// Dropped older than this, in seconds the box has run.
        public var maxAge: Double = 7 * 24 * 3600
        /// First retry after about this long; doubling per attempt up to `maxDelay`; ±50 % jitter.
        public var baseDelay: Double = 2
        public var maxDelay: Double = 600
        public var concurrency = 8
        public var requestTimeout: Double = 10
        /// The outbox's bounds on disk.
        public var maxRows = 100_000
        public var maxBytes = 64 << 20
        /// The bounds of the memory queue used while the disk refuses writes.
        public var memoryRows = 10_000
        public var memoryBytes = 8 << 20
        /// How long (run time) a beacon whose URL wants `[TIMESTAMP]` waits for an unsynchronised
        /// wall clock to be synchronised before it is sent with the time it has.
        public var timeSyncWait: Double = 300
        /// Proof-of-play rows kept: at most this many, none older than `playsMaxAge` (run time).
        public var playsMaxRows = 100_000
        public var playsMaxAge: Double = 90 * 24 * 3600
        /// The ledger's owner (the daemon): at open, plays a previous run left open are closed
        /// `interrupted`, and while a play is open the run clock — the last moment known on
        /// screen — is saved every `heartbeat` seconds. Tools that open the file beside a
        /// running daemon leave this off.
        public var ownsLedger = false
        public var heartbeat: Double = 5
        /// What the file must survive: `.runOnly` (a simulation's private file) has no
        /// heartbeat and no syncs (`StateDurability`).
        public var durability = StateDurability.crashSafe
        /// The box's randomness (the ledger's id, retries' jitter): a simulation's is seeded.
        public var environment = AdEnvironment.system

        public init() {}
    }

    struct Pending: Sendable {
        let id: Int64
        var beacon: Beacon
        var createdRun: Double
        var attempts: Int
        var nextRun: Double
    }

    struct State {
        /// The database; while the file is locked by another process at open (`waiting`), one
        /// in memory that is written into the file once it opens.
        var db: SQLiteDatabase
        var waiting: Waiting?
        var run: RunClock
        var rows = 0
        var bytes = 0
        /// Beacons the disk did not take: sent from here, written when it takes writes again.
        var memory: [Pending] = []
        var memoryBytes = 0
        var nextMemoryID: Int64 = -1
        var inFlight: Set<Int64> = []
        /// Delivered, but the disk refused their deletion: never sent again, deleted later.
        var delivered: Set<Int64> = []
        var diskFailing = false
        /// Counters not yet on disk (all of them while the disk fails).
        var unsaved: [String: Int] = [:]
        var counters: [String: Int] = [:]
        /// Plays' beacon outcomes not yet on disk.
        var unsavedPlays: [String: (sent: Int, dropped: Int, total: Int, deadline: Int)] = [:]
        /// Plays the disk did not take yet.
        var pendingPlays: [String: Play] = [:]
        /// Ends and viewability of plays on disk that the disk did not take yet (written with
        /// the plays when it takes writes again).
        var pendingUpdates: [String: PlayUpdate] = [:]
        var playsSincePrune = 0
        /// The ledger's sequence and chain (`LedgerHead`).
        var ledger: LedgerHead
        /// Plays of this run on screen (their end not yet recorded), and when the run clock was
        /// last saved (run time): the heartbeat (`keepAlive`).
        var openPlays: Set<String> = []
        var lastAliveSaved = -Double.infinity
        var heartbeats = 0
        /// When a write was last tried while the disk fails (run time).
        var lastRecoveryAttempt = -Double.infinity
        /// The schedule of on-disk beacons whose attempt the disk did not take (`attempts`,
        /// `next_run` on disk are stale): it wins over the disk's, and is written back once the
        /// disk takes writes again. So backoff holds whatever the disk does.
        var schedule: [Int64: (attempts: Int, nextRun: Double)] = [:]
    }

    /// What the disk did not take of a play already on it.
    struct PlayUpdate {
        var ended: PlayEnd?
        var viewable: String?
        var display: DisplayEvidence?
        /// The audience it counts for, when it changed after the start (0: its impression withheld).
        var impressions: Double?
    }

    let state: Locked<State>
    let configuration: Configuration
    let sender: any BeaconSender
    let clock: any TrackingClock
    let onEvent: @Sendable (OutboxEvent) -> Void
    let onWarning: @Sendable (String) -> Void
    let enqueued = Hook<Void>()

    /// `action` runs (on the enqueuing thread, with no lock held) after each enqueue: a courier's
    /// wake-up.
    public func onEnqueued(_ action: @escaping @Sendable () -> Void) { enqueued.set { _ in action() } }

    /// Opens the outbox in the database at `path`. A database that is not usable (corrupt,
    /// emptied) is moved aside with a warning (`onWarning`, naming both files), the beacons it
    /// still holds are read into a new one, and the outbox works on: tracking never gates
    /// playback. An outbox of an earlier version is carried over.
    public init(path: String, configuration: Configuration = Configuration(), sender: any BeaconSender = HTTPBeaconSender(),
                clock: any TrackingClock = SystemTrackingClock(), onEvent: @escaping @Sendable (OutboxEvent) -> Void = { _ in },
                onWarning: @escaping @Sendable (String) -> Void = { _ in }) throws {
        // A damaged file is read back whole by `openRepairing` (every table, for every owner).
        // One locked by another process is "later", never "never": memory until it opens.
        let db: SQLiteDatabase
        var waiting: Waiting?
        do {
            db = try SQLiteDatabase.openRepairing(path: path, durability: configuration.durability, onWarning: onWarning)
        } catch let error as SQLiteError where error.isBusy && configuration.ownsLedger {
            db = try SQLiteDatabase(path: ":memory:")
            waiting = Waiting(path: path, lastTry: clock.monotonicNow())
            onEvent(.databaseLocked("\(path) is locked by another process (\(error.message)): beacons and proof of play are kept in memory, "
                                    + "within the outbox's bounds, and written to it once it opens (tried every \(Int(Waiting.retry)) s)"))
        }
        let (saved, ledger) = try Self.prepare(db, clock: clock, configuration: configuration, onWarning: onWarning)
        var state = State(db: db, run: RunClock(saved: saved, clock: clock), ledger: ledger)
        state.waiting = waiting
        // The newest wall time this box recorded: a clock that says earlier is evidently wrong.
        if let evidence = clock.evidence {
            for query in ["SELECT MAX(wall) FROM beacons WHERE synced > 0", "SELECT MAX(started_wall) FROM plays"] {
                if let newest = (try? db.execute(query))?.first?.first?.real { evidence.saw(newest) }
            }
        }
        try Self.count(&state)
        self.state = Locked(state)
        self.configuration = configuration
        self.sender = sender
        self.clock = clock
        self.onEvent = onEvent
        self.onWarning = onWarning
        // What a stop left beside the file while it was locked: imported now.
        if waiting == nil, configuration.ownsLedger { importSideFile() }
    }

    /// The tables, their migrations and the ledger of `db` (the plays a previous run left open
    /// closed); returns the run clock it saved and the ledger's head.
    static func prepare(_ db: SQLiteDatabase, clock: any TrackingClock, configuration: Configuration,
                        onWarning: @Sendable (String) -> Void) throws -> (saved: Double, ledger: LedgerHead) {
        try OutboxSchema.create(db)
        let saved = (try? db.execute("SELECT value FROM outbox_meta WHERE key = 'run_seconds'"))?.first?.first?.text.flatMap(Double.init) ?? 0
        let (ledger, interrupted) = try OutboxSchema.openLedger(db, lastAlive: saved, closingLeftOpen: configuration.ownsLedger,
                                                                 environment: configuration.environment)
        if interrupted > 0 {
            onWarning("proof of play: \(interrupted) play\(interrupted == 1 ? "" : "s") left open by the previous run (a kill, a power cut) "
                      + "closed as interrupted, ended at the last moment it was known on screen")
        }
        try OutboxSchema.migrate(db, runNow: saved, clock: clock)
        return (saved, ledger)
    }

    /// The beacons' rows and bytes, and the counters, as the database has them. Under the lock.
    static func count(_ state: inout State) throws {
        let totals = try state.db.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(url)), 0) FROM beacons").first
        state.rows = Int(totals?[0].integer ?? 0)
        state.bytes = Int(totals?[1].integer ?? 0)
        state.counters = [:]
        for row in try state.db.execute("SELECT name, value FROM outbox_counters") {
            if let name = row[0].text, let value = row[1].integer { state.counters[name] = Int(value) }
        }
    }

    /// The outbox at `path`, read only: works on a read-only state folder and creates nothing.
    /// Nil when there is no outbox there yet.
    public static func status(path: String) throws -> OutboxStatus? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let db = try SQLiteDatabase(path: path, readOnly: true)
        var status = OutboxStatus()
        let totals = try db.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(url)), 0) FROM beacons").first
        status.pending = Int(totals?[0].integer ?? 0)
        status.pendingBytes = Int(totals?[1].integer ?? 0)
        for row in (try? db.execute("SELECT name, value FROM outbox_counters")) ?? [] {
            guard let name = row[0].text, let value = row[1].integer.map(Int.init) else { continue }
            Self.apply(name, value, to: &status)
        }
        return status
    }

    static func apply(_ name: String, _ value: Int, to status: inout OutboxStatus) {
        switch name {
        case "sent": status.sent = value
        case "failed_attempts": status.failedAttempts = value
        case let drop where drop.hasPrefix("dropped:"): status.dropped[String(drop.dropFirst(8))] = value
        default: break
        }
    }

    // MARK: Queueing

    /// Queues `beacons`, each judged alone: a URL that cannot be sent is refused and counted
    /// (with its play); the others are written — before any attempt — or, while the disk
    /// refuses writes, kept in memory. Returns how many were queued.
    @discardableResult
    public func enqueue(_ beacons: [Beacon]) -> Int {
        var events: [OutboxEvent] = []
        var accepted: [Beacon] = []
        for beacon in beacons {
            if let refusal = BeaconURL.refusal(Macros.fillTimestamp(beacon.url, nil)) {
                events.append(.dropped(url: beacon.url, reason: refusal.rawValue))
                countDrop(DropReason(refusal), play: beacon.play)
            } else {
                accepted.append(beacon)
            }
        }
        if !accepted.isEmpty {
            events += state.withLock { state in store(accepted, &state) }
        }
        events.forEach(onEvent)
        if !accepted.isEmpty { enqueued(()) }
        return accepted.count
    }

    /// `enqueue` for URLs without an event or a play (`adplayerd beacons add`, error beacons of
    /// a source). Returns the URLs refused.
    @discardableResult
    public func enqueue(urls: [String], event: String = "manual") -> Int {
        let recorded = RecordedTime.now(clock)
        return enqueue(urls.map { Beacon(url: $0, event: event, recorded: recorded) })
    }

    /// Counts beacons dropped before they reached the outbox (a URL over an event's bound).
    public func countDrop(_ reason: DropReason, play: String?, count: Int = 1) {
        guard count > 0 else { return }
        state.withLock { state in
            add("dropped:\(reason.rawValue)", count, &state)
            if let play { state.unsavedPlays[play, default: (0, 0, 0, 0)].dropped += count; state.unsavedPlays[play]!.total += count }
            saveCounters(&state)
        }
    }

    /// Writes `beacons` (or keeps them in memory); makes room first when the outbox is at its
    /// bound. Under the lock.
    func store(_ beacons: [Beacon], _ state: inout State) -> [OutboxEvent] {
        var events: [OutboxEvent] = []
        let now = state.run.now()
        for beacon in beacons where beacon.play != nil {
            state.unsavedPlays[beacon.play!, default: (0, 0, 0, 0)].total += 1
        }
        // A failing disk is tried again (at most once a second): what waits in memory first.
        if !state.diskFailing || now - state.lastRecoveryAttempt >= 1 {
            state.lastRecoveryAttempt = now
            events += flushMemory(&state)
        }
        var kept = beacons
        if !state.diskFailing {
            do {
                var dropped: [OutboxEvent] = []
                kept = try makeRoom(for: beacons, &state, dropped: &dropped)
                events += dropped
                // One transaction, so one sync: the beacons, the run clock, the counters and the
                // plays' beacon counts (an event of an ad costs one fsync, not four).
                try state.db.transaction {
                    for beacon in kept { try Self.insert(state.db, beacon, createdRun: now, attempts: 0, nextRun: now) }
                    try saveRun(&state)
                    try writeCounters(state)
                    try writePlays(state)
                }
                state.unsaved = [:]
                state.unsavedPlays = [:]
                state.rows += kept.count
                state.bytes += kept.reduce(0) { $0 + $1.url.utf8.count }
                return events
            } catch {
                events.append(diskFailed(error, &state))
            }
        }
        for beacon in kept {
            events += keepInMemory(Pending(id: state.nextMemoryID, beacon: beacon, createdRun: now, attempts: 0, nextRun: now), &state)
            state.nextMemoryID -= 1
        }
        return events
    }

    static func insert(_ db: SQLiteDatabase, _ beacon: Beacon, createdRun: Double, attempts: Int, nextRun: Double) throws {
        try db.execute("""
            INSERT INTO beacons (url, event, play, billable, created_run, wall, mono, boot, synced, attempts, next_run, deadline_run)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, [.text(beacon.url), .text(beacon.event), beacon.play.map { .text($0) } ?? .null, .integer(beacon.billable ? 1 : 0),
                  .real(createdRun), .real(beacon.recorded.wall), .real(beacon.recorded.monotonic), .text(beacon.recorded.boot),
                  .integer(Int64(beacon.recorded.trust.rawValue)), .integer(Int64(attempts)), .real(nextRun),
                  beacon.deadline.map { .real(createdRun + $0) } ?? .null])
    }

    /// At the bound (rows or bytes), makes room for `incoming`: the oldest non-billable beacons
    /// go first — those on disk, then the incoming ones — then the oldest billable ones, the same
    /// way. Returns the incoming beacons that are kept; every drop is counted. Under the lock.
    func makeRoom(for incoming: [Beacon], _ state: inout State, dropped events: inout [OutboxEvent]) throws -> [Beacon] {
        var rowsOver = state.rows + incoming.count - configuration.maxRows
        var bytesOver = state.bytes + incoming.reduce(0) { $0 + $1.url.utf8.count } - configuration.maxBytes
        guard rowsOver > 0 || bytesOver > 0 else { return incoming }
        var kept = incoming
        func drop(_ url: String, _ play: String?) {
            rowsOver -= 1
            bytesOver -= url.utf8.count
            add("dropped:\(DropReason.outboxFull.rawValue)", 1, &state)
            if let play { state.unsavedPlays[play, default: (0, 0, 0, 0)].dropped += 1 }
            events.append(.dropped(url: url, reason: DropReason.outboxFull.rawValue))
        }
        for billable in [false, true] where rowsOver > 0 || bytesOver > 0 {
            // On disk, oldest first.
            let candidates = try state.db.execute("SELECT id, url, play FROM beacons WHERE billable = ? ORDER BY id LIMIT ?",
                                                  [.integer(billable ? 1 : 0), .integer(Int64(max(rowsOver, 0) + 1024))])
            var victims: [Int64] = []
            for row in candidates where rowsOver > 0 || bytesOver > 0 {
                guard let id = row[0].integer, let url = row[1].text, !state.inFlight.contains(id) else { continue }
                victims.append(id)
                state.rows -= 1
                state.bytes -= url.utf8.count
                drop(url, row[2].text)
            }
            if !victims.isEmpty {
                try state.db.transaction {
                    for id in victims { try state.db.execute("DELETE FROM beacons WHERE id = ?", [.integer(id)]) }
                }
            }
            // Then the incoming ones of the same class, in order.
            var index = 0
            while index < kept.count, rowsOver > 0 || bytesOver > 0 {
                if kept[index].billable == billable {
                    let beacon = kept.remove(at: index)
                    drop(beacon.url, beacon.play)
                } else {
                    index += 1
                }
            }
        }
        return kept
    }

    func keepInMemory(_ pending: Pending, _ state: inout State) -> [OutboxEvent] {
        let size = pending.beacon.url.utf8.count
        guard state.memory.count < configuration.memoryRows, state.memoryBytes + size <= configuration.memoryBytes else {
            add("dropped:\(DropReason.memoryFull.rawValue)", 1, &state)
            if let play = pending.beacon.play { state.unsavedPlays[play, default: (0, 0, 0, 0)].dropped += 1 }
            return [.dropped(url: pending.beacon.url, reason: DropReason.memoryFull.rawValue)]
        }
        state.memory.append(pending)
        state.memoryBytes += size
        return []
    }

    func diskFailed(_ error: any Error, _ state: inout State) -> OutboxEvent {
        state.diskFailing = true
        return .diskFailing("\(error)")
    }

    /// While the disk fails, tries again to write what waits in memory. Under the lock.
    func flushMemory(_ state: inout State) -> [OutboxEvent] {
        guard !state.memory.isEmpty || !state.delivered.isEmpty || !state.pendingPlays.isEmpty || !state.pendingUpdates.isEmpty
                || !state.schedule.isEmpty || state.diskFailing
        else { return [] }
        let waiting = state.memory.filter { !state.inFlight.contains($0.id) }
        do {
            try state.db.transaction {
                for pending in waiting {
                    try Self.insert(state.db, pending.beacon, createdRun: pending.createdRun, attempts: pending.attempts, nextRun: pending.nextRun)
                }
                for id in state.delivered { try state.db.execute("DELETE FROM beacons WHERE id = ?", [.integer(id)]) }
                for (id, entry) in state.schedule where !state.delivered.contains(id) {
                    try state.db.execute("UPDATE beacons SET attempts = ?, next_run = ? WHERE id = ?",
                                         [.integer(Int64(entry.attempts)), .real(entry.nextRun), .integer(id)])
                }
                try saveRun(&state)
            }
        } catch {
            return state.diskFailing ? [] : [diskFailed(error, &state)]
        }
        state.schedule = [:]
        let wasFailing = state.diskFailing
        state.diskFailing = false
        let written = Set(waiting.map(\.id))
        state.memory.removeAll { written.contains($0.id) }
        state.rows += waiting.count - state.delivered.count
        state.bytes += waiting.reduce(0) { $0 + $1.beacon.url.utf8.count }
        state.memoryBytes = state.memory.reduce(0) { $0 + $1.beacon.url.utf8.count }
        state.delivered = []
        flushPlays(&state)
        saveCounters(&state)
        savePlays(&state)
        return wasFailing ? [.diskRecovered(written: waiting.count)] : []
    }

    // MARK: Counters and the run clock (under the lock)

    func add(_ name: String, _ value: Int, _ state: inout State) {
        state.counters[name, default: 0] += value
        state.unsaved[name, default: 0] += value
    }

    func saveCounters(_ state: inout State) {
        guard !state.diskFailing, !state.unsaved.isEmpty else { return }
        do {
            try state.db.transaction { try writeCounters(state) }
            state.unsaved = [:]
        } catch {
            state.diskFailing = true
        }
    }

    /// The counters not yet on disk, added to theirs; inside the caller's transaction.
    func writeCounters(_ state: State) throws {
        for (name, value) in state.unsaved {
            try state.db.execute("""
                INSERT INTO outbox_counters (name, value) VALUES (?, ?)
                ON CONFLICT(name) DO UPDATE SET value = value + excluded.value
                """, [.text(name), .integer(Int64(value))])
        }
    }

    func savePlays(_ state: inout State) {
        guard !state.diskFailing, !state.unsavedPlays.isEmpty else { return }
        do {
            try state.db.transaction { try writePlays(state) }
            state.unsavedPlays = [:]
        } catch {
            state.diskFailing = true
        }
    }

    /// The plays' beacon counts not yet on disk; inside the caller's transaction.
    func writePlays(_ state: State) throws {
        for (play, counts) in state.unsavedPlays {
            try state.db.execute("""
                UPDATE plays SET beacons_total = beacons_total + ?, beacons_sent = beacons_sent + ?,
                                 beacons_dropped = beacons_dropped + ?, beacons_deadline = beacons_deadline + ? WHERE id = ?
                """, [.integer(Int64(counts.total)), .integer(Int64(counts.sent)), .integer(Int64(counts.dropped)),
                      .integer(Int64(counts.deadline)), .text(play)])
        }
    }

    func saveRun(_ state: inout State) throws {
        try state.db.execute("INSERT OR REPLACE INTO outbox_meta (key, value) VALUES ('run_seconds', ?)",
                             [.text(String(state.run.now()))])
    }

    /// Tests: makes every write of the outbox fail as a full disk does (SQLite error 13), or stop failing.
    package func injectWriteFailures(_ on: Bool) {
        state.withLock { $0.db.injectedWriteFailure = on ? 13 : nil }
    }

    // MARK: Reading

    /// Beacons not yet delivered (on disk and in memory).
    public func pendingCount() -> Int { state.withLock { $0.rows - $0.delivered.count + $0.memory.count } }

    public func status() -> OutboxStatus {
        state.withLock { state in
            var status = OutboxStatus()
            status.pending = state.rows - state.delivered.count + state.memory.count
            status.pendingInMemory = state.memory.count
            status.pendingBytes = state.bytes + state.memoryBytes
            status.diskFailing = state.diskFailing
            for (name, value) in state.counters { Self.apply(name, value, to: &status) }
            return status
        }
    }

    /// Seconds until the next beacon is due (0 if one is due now), nil if none is pending.
    public func nextDue() -> Double? {
        state.withLock { state in
            let now = state.run.now()
            // A query that fails reads as "look again soon", never as "nothing pending".
            let disk: Double?
            do {
                disk = try state.schedule.isEmpty
                    ? state.db.execute("SELECT MIN(next_run) FROM beacons").first?.first?.real
                    : state.db.execute("SELECT MIN(next_run) FROM beacons WHERE id NOT IN (SELECT value FROM json_each(?))",
                                       [.text(Self.idList(state.schedule.keys))]).first?.first?.real
            } catch {
                return Self.unreadableRecheck
            }
            let scheduled = state.schedule.filter { !state.inFlight.contains($0.key) }.map(\.value.nextRun).min()
            let memory = state.memory.filter { !state.inFlight.contains($0.id) }.map(\.nextRun).min()
            // A deadline that passes is a drop to count then (not at the beacon's next attempt).
            // Dropped once the deadline is past (`expire`: strictly before now), so looked at just after it:
            // on virtual time, a look at the deadline's own instant would find nothing to drop, again and again.
            let deadline = ((try? state.db.execute("SELECT MIN(deadline_run) FROM beacons").first?.first?.real) ?? nil).map { $0 + 0.001 }
            let memoryDeadline = state.memory.compactMap { pending in pending.beacon.deadline.map { pending.createdRun + $0 + 0.001 } }.min()
            guard let next = [disk, scheduled, memory, deadline, memoryDeadline].compactMap({ $0 }).min() else {
                return state.memory.isEmpty ? nil : 5
            }
            // While beacons wait in memory, come back now and then to write them to the disk.
            return min(max(0, next - now), state.memory.isEmpty ? .infinity : 5)
        }
    }
}
