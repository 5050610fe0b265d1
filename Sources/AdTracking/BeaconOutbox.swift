import AdRuntime
import AdSources
import Foundation

/// Sends one beacon; the outbox decides what the answer means.
public protocol BeaconSender: Sendable {
    /// The HTTP status, or an error when no answer came. `url` is sent exactly as given.
    func send(_ url: String, timeout: Double) async -> Result<Int, any Error>
}

/// Beacons over HTTP(S) GET through the one bounded reader (64 KiB of answer at most).
public struct HTTPBeaconSender: BeaconSender {
    private let fetcher: any BoundedFetcher

    public init(fetcher: any BoundedFetcher = BoundedHTTP(threads: 4)) {
        self.fetcher = fetcher
    }

    public func send(_ url: String, timeout: Double) async -> Result<Int, any Error> {
        do {
            let response = try await fetcher.exchange(HTTPRequest(url: url), limits: HTTPLimits(maxBytes: 64 * 1024, deadline: timeout))
            return .success(response.status)
        } catch let error as FetchError where error.kind == .tooLarge {
            return .success(200)   // it answered; the body does not matter
        } catch {
            return .failure(error)
        }
    }
}

/// One beacon to deliver: its URL (every macro filled but `[TIMESTAMP]`, which is filled when
/// it is sent, from `recorded`), the event it reports, the play it belongs to.
public struct Beacon: Sendable, Equatable {
    public var url: String
    /// `impression`, `start`, `firstQuartile`, `error`, …
    public var event: String
    /// The play (proof of play) it belongs to: the ad's instance.
    public var play: String?
    /// Billable (an impression): when the outbox is full, these are dropped last.
    public var billable: Bool
    public var recorded: RecordedTime

    public init(url: String, event: String, play: String? = nil, billable: Bool = false, recorded: RecordedTime) {
        self.url = url
        self.event = event
        self.play = play
        self.billable = billable
        self.recorded = recorded
    }
}

/// What the outbox did.
public enum OutboxEvent: Sendable, Equatable {
    case sent(url: String, attempts: Int)
    case retrying(url: String, attempts: Int, reason: String, inSeconds: Double)
    /// Dropped for `reason` (`DropReason`): never silently.
    case dropped(url: String, reason: String)
    /// The disk refused a write (full, an I/O error, read-only): beacons wait in memory.
    case diskFailing(String)
    /// The disk takes writes again: what waited in memory is written.
    case diskRecovered(written: Int)
}

/// Why a beacon was not delivered. Every one is counted (`OutboxStatus.dropped`), reported
/// (`OutboxEvent.dropped`) and, when it belongs to a play, counted on that play.
public enum DropReason: String, Sendable, CaseIterable {
    /// Refused alone, before it was queued (`BeaconRefusal`).
    case notHTTP = "not_http", noHost = "no_host", tooLong = "too_long", malformed, tooMany = "too_many"
    /// The outbox was at its bound (rows or bytes): the oldest non-billable went first.
    case outboxFull = "outbox_full"
    /// Older than the outbox's age bound, in time the box has run.
    case expired
    /// The disk refused writes and the memory queue was at its bound too.
    case memoryFull = "memory_full"

    public init(_ refusal: BeaconRefusal) { self = DropReason(rawValue: refusal.rawValue)! }
}

/// What `beacons status`, `metrics` and the tests see of the outbox.
public struct OutboxStatus: Sendable, Equatable {
    /// Beacons not yet delivered: on disk and waiting in memory.
    public var pending = 0
    public var pendingInMemory = 0
    public var pendingBytes = 0
    public var sent = 0
    /// Attempts that failed (each retried, with backoff).
    public var failedAttempts = 0
    /// Beacons dropped, by `DropReason`.
    public var dropped: [String: Int] = [:]
    /// The disk refuses writes now.
    public var diskFailing = false
    public init() {}
}

/// Tracking never loses a beacon silently (R17). Every beacon is written to SQLite before its
/// first attempt, sent with retry, exponential backoff and jitter, and removed only after a
/// 2xx. A `kill -9` loses none: what was in flight then (at most `concurrency`) is sent again
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

        public init() {}
    }

    private struct Pending: Sendable {
        let id: Int64
        var beacon: Beacon
        var createdRun: Double
        var attempts: Int
        var nextRun: Double
    }

    private struct State {
        let db: SQLiteDatabase
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
        var unsavedPlays: [String: (sent: Int, dropped: Int, total: Int)] = [:]
        /// Plays the disk did not take yet.
        var pendingPlays: [String: Play] = [:]
        var playsSincePrune = 0
        /// When a write was last tried while the disk fails (run time).
        var lastRecoveryAttempt = -Double.infinity
        /// The schedule of on-disk beacons whose attempt the disk did not take (`attempts`,
        /// `next_run` on disk are stale): it wins over the disk's, and is written back once the
        /// disk takes writes again. So backoff holds whatever the disk does.
        var schedule: [Int64: (attempts: Int, nextRun: Double)] = [:]
    }

    private let state: Locked<State>
    private let configuration: Configuration
    private let sender: any BeaconSender
    private let clock: any TrackingClock
    private let onEvent: @Sendable (OutboxEvent) -> Void
    private let enqueued = Locked<(@Sendable () -> Void)?>(nil)

    /// `action` runs (on the enqueuing thread, with no lock held) after each enqueue: a courier's
    /// wake-up.
    public func onEnqueued(_ action: @escaping @Sendable () -> Void) { enqueued.withLock { $0 = action } }

    /// Opens the outbox in the database at `path`. A database that is not usable (corrupt,
    /// emptied) is moved aside with a warning (`onWarning`, naming both files), the beacons it
    /// still holds are read into a new one, and the outbox works on: tracking never gates
    /// playback. An outbox of an earlier version is carried over.
    public init(path: String, configuration: Configuration = Configuration(), sender: any BeaconSender = HTTPBeaconSender(),
                clock: any TrackingClock = SystemTrackingClock(), onEvent: @escaping @Sendable (OutboxEvent) -> Void = { _ in },
                onWarning: @escaping @Sendable (String) -> Void = { _ in }) throws {
        var salvaged: [String] = []
        var salvageNote: String?
        let db = try SQLiteDatabase.openRepairing(path: path, onWarning: onWarning) { aside in
            (salvaged, salvageNote) = Self.salvage(aside)
        }
        try OutboxSchema.create(db)
        let saved = (try? db.execute("SELECT value FROM outbox_meta WHERE key = 'run_seconds'"))?.first?.first?.text.flatMap(Double.init) ?? 0
        var state = State(db: db, run: RunClock(saved: saved, clock: clock))
        let now = state.run.now()
        try OutboxSchema.migrate(db, runNow: now, clock: clock)
        if !salvaged.isEmpty {
            let recorded = RecordedTime.now(clock)
            try db.transaction {
                for url in salvaged {
                    try Self.insert(db, Beacon(url: url, event: "salvaged", recorded: recorded), createdRun: now, attempts: 0, nextRun: now)
                }
            }
        }
        if let salvageNote { onWarning(salvageNote) }
        let totals = try db.execute("SELECT COUNT(*), COALESCE(SUM(LENGTH(url)), 0) FROM beacons").first
        state.rows = Int(totals?[0].integer ?? 0)
        state.bytes = Int(totals?[1].integer ?? 0)
        for row in try db.execute("SELECT name, value FROM outbox_counters") {
            if let name = row[0].text, let value = row[1].integer { state.counters[name] = Int(value) }
        }
        self.state = Locked(state)
        self.configuration = configuration
        self.sender = sender
        self.clock = clock
        self.onEvent = onEvent
    }

    /// The URLs that can still be read from a database moved aside, row by row until the damage
    /// stops the reading; and a sentence saying how that went.
    private static func salvage(_ path: String) -> ([String], String?) {
        guard let old = try? SQLiteDatabase(path: path, readOnly: true) else { return ([], nil) }
        let rows = (try? old.execute("SELECT url FROM beacons ORDER BY id")) ?? []
        let usable = rows.compactMap { $0.first?.text }.filter { BeaconURL.refusal(Macros.fillTimestamp($0, nil)) == nil }
        return (usable, "\(usable.count) beacons were read back from \(path) into the new outbox")
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

    private static func apply(_ name: String, _ value: Int, to status: inout OutboxStatus) {
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
        if !accepted.isEmpty { enqueued.withLock { $0 }?() }
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
            if let play { state.unsavedPlays[play, default: (0, 0, 0)].dropped += count; state.unsavedPlays[play]!.total += count }
            saveCounters(&state)
        }
    }

    /// Writes `beacons` (or keeps them in memory); makes room first when the outbox is at its
    /// bound. Under the lock.
    private func store(_ beacons: [Beacon], _ state: inout State) -> [OutboxEvent] {
        var events: [OutboxEvent] = []
        let now = state.run.now()
        for beacon in beacons where beacon.play != nil {
            state.unsavedPlays[beacon.play!, default: (0, 0, 0)].total += 1
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

    private static func insert(_ db: SQLiteDatabase, _ beacon: Beacon, createdRun: Double, attempts: Int, nextRun: Double) throws {
        try db.execute("""
            INSERT INTO beacons (url, event, play, billable, created_run, wall, mono, boot, synced, attempts, next_run)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, [.text(beacon.url), .text(beacon.event), beacon.play.map { .text($0) } ?? .null, .integer(beacon.billable ? 1 : 0),
                  .real(createdRun), .real(beacon.recorded.wall), .real(beacon.recorded.monotonic), .text(beacon.recorded.boot),
                  .integer(beacon.recorded.synchronized ? 1 : 0), .integer(Int64(attempts)), .real(nextRun)])
    }

    /// At the bound (rows or bytes), makes room for `incoming`: the oldest non-billable beacons
    /// go first — those on disk, then the incoming ones — then the oldest billable ones, the same
    /// way. Returns the incoming beacons that are kept; every drop is counted. Under the lock.
    private func makeRoom(for incoming: [Beacon], _ state: inout State, dropped events: inout [OutboxEvent]) throws -> [Beacon] {
        var rowsOver = state.rows + incoming.count - configuration.maxRows
        var bytesOver = state.bytes + incoming.reduce(0) { $0 + $1.url.utf8.count } - configuration.maxBytes
        guard rowsOver > 0 || bytesOver > 0 else { return incoming }
        var kept = incoming
        func drop(_ url: String, _ play: String?) {
            rowsOver -= 1
            bytesOver -= url.utf8.count
            add("dropped:\(DropReason.outboxFull.rawValue)", 1, &state)
            if let play { state.unsavedPlays[play, default: (0, 0, 0)].dropped += 1 }
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

    private func keepInMemory(_ pending: Pending, _ state: inout State) -> [OutboxEvent] {
        let size = pending.beacon.url.utf8.count
        guard state.memory.count < configuration.memoryRows, state.memoryBytes + size <= configuration.memoryBytes else {
            add("dropped:\(DropReason.memoryFull.rawValue)", 1, &state)
            if let play = pending.beacon.play { state.unsavedPlays[play, default: (0, 0, 0)].dropped += 1 }
            return [.dropped(url: pending.beacon.url, reason: DropReason.memoryFull.rawValue)]
        }
        state.memory.append(pending)
        state.memoryBytes += size
        return []
    }

    private func diskFailed(_ error: any Error, _ state: inout State) -> OutboxEvent {
        state.diskFailing = true
        return .diskFailing("\(error)")
    }

    /// While the disk fails, tries again to write what waits in memory. Under the lock.
    private func flushMemory(_ state: inout State) -> [OutboxEvent] {
        guard !state.memory.isEmpty || !state.delivered.isEmpty || !state.pendingPlays.isEmpty || !state.schedule.isEmpty || state.diskFailing
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

    private func add(_ name: String, _ value: Int, _ state: inout State) {
        state.counters[name, default: 0] += value
        state.unsaved[name, default: 0] += value
    }

    private func saveCounters(_ state: inout State) {
        guard !state.diskFailing, !state.unsaved.isEmpty else { return }
        do {
            try state.db.transaction { try writeCounters(state) }
            state.unsaved = [:]
        } catch {
            state.diskFailing = true
        }
    }

    /// The counters not yet on disk, added to theirs; inside the caller's transaction.
    private func writeCounters(_ state: State) throws {
        for (name, value) in state.unsaved {
            try state.db.execute("""
                INSERT INTO outbox_counters (name, value) VALUES (?, ?)
                ON CONFLICT(name) DO UPDATE SET value = value + excluded.value
                """, [.text(name), .integer(Int64(value))])
        }
    }

    private func savePlays(_ state: inout State) {
        guard !state.diskFailing, !state.unsavedPlays.isEmpty else { return }
        do {
            try state.db.transaction { try writePlays(state) }
            state.unsavedPlays = [:]
        } catch {
            state.diskFailing = true
        }
    }

    /// The plays' beacon counts not yet on disk; inside the caller's transaction.
    private func writePlays(_ state: State) throws {
        for (play, counts) in state.unsavedPlays {
            try state.db.execute("""
                UPDATE plays SET beacons_total = beacons_total + ?, beacons_sent = beacons_sent + ?,
                                 beacons_dropped = beacons_dropped + ? WHERE id = ?
                """, [.integer(Int64(counts.total)), .integer(Int64(counts.sent)), .integer(Int64(counts.dropped)), .text(play)])
        }
    }

    private func saveRun(_ state: inout State) throws {
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
            guard let next = [disk, scheduled, memory].compactMap({ $0 }).min() else { return state.memory.isEmpty ? nil : 5 }
            // While beacons wait in memory, come back now and then to write them to the disk.
            return min(max(0, next - now), state.memory.isEmpty ? .infinity : 5)
        }
    }

    // MARK: Delivering

    public struct Report: Sendable, Equatable {
        public var sent = 0
        public var failed = 0
        public var dropped = 0
    }

    /// One pass: drops expired beacons, sends every due one (at most `concurrency` at a time),
    /// deletes the delivered, reschedules the rest.
    public func deliverDue() async -> Report {
        var report = Report()
        let (due, events) = state.withLock { state -> ([Pending], [OutboxEvent]) in
            var events = flushMemory(&state)
            let now = state.run.now()
            events += expire(now, &state)
            report.dropped = events.filter { if case .dropped = $0 { true } else { false } }.count
            var due: [Pending] = []
            let limit = max(64, configuration.concurrency * 16)
            // On-disk beacons whose schedule the disk did not take are due by the schedule kept here.
            let rescheduled = state.schedule.filter { $0.value.nextRun <= now }.map(\.key)
            if let rows = try? state.db.execute("""
                SELECT id, url, event, play, billable, created_run, wall, mono, boot, synced, attempts, next_run
                FROM beacons WHERE (next_run <= ? AND id NOT IN (SELECT value FROM json_each(?))) OR id IN (SELECT value FROM json_each(?))
                ORDER BY next_run, id LIMIT ?
                """, [.real(now), .text(Self.idList(state.schedule.keys)), .text(Self.idList(rescheduled)),
                      .integer(Int64(limit + state.inFlight.count + state.delivered.count))]) {
                for row in rows {
                    guard var pending = Self.pending(row), !state.inFlight.contains(pending.id), !state.delivered.contains(pending.id) else { continue }
                    if let entry = state.schedule[pending.id] { (pending.attempts, pending.nextRun) = entry }
                    due.append(pending)
                    if due.count >= limit { break }
                }
            }
            for pending in state.memory where pending.nextRun <= now && !state.inFlight.contains(pending.id) && due.count < limit {
                due.append(pending)
            }
            // A beacon that wants [TIMESTAMP] waits for an unsynchronised clock (a while), looked
            // at again every few seconds — all those of a pass in the pass's one transaction: a
            // box that never syncs its clock must not write (and sync) a row per beacon a second.
            var held: [Pending] = []
            due = due.filter { pending in
                guard Macros.wantsTimestamp(pending.beacon.url), pending.beacon.recorded.corrected(clock) == nil,
                      now - pending.createdRun < configuration.timeSyncWait else { return true }
                held.append(pending)
                return false
            }
            for pending in held where pending.id < 0 {
                if let index = state.memory.firstIndex(where: { $0.id == pending.id }) { state.memory[index].nextRun = now + Self.heldRecheck }
            }
            // The attempt is written before it is made: a beacon in flight when the process dies
            // counts it and waits its backoff after the restart, behind the others due.
            var planned: [Int64: (attempts: Int, nextRun: Double)] = [:]
            for pending in held where pending.id > 0 { planned[pending.id] = (pending.attempts, now + Self.heldRecheck) }
            for pending in due where pending.id > 0 { planned[pending.id] = (pending.attempts + 1, now + backoff(after: pending.attempts + 1)) }
            var written = false
            if !state.diskFailing, !planned.isEmpty {
                do {
                    try state.db.transaction {
                        for (id, entry) in planned {
                            try state.db.execute("UPDATE beacons SET attempts = ?, next_run = ? WHERE id = ?",
                                                 [.integer(Int64(entry.attempts)), .real(entry.nextRun), .integer(id)])
                        }
                        try saveRun(&state)
                    }
                    written = true
                } catch {
                    events.append(diskFailed(error, &state))
                }
            }
            // What the disk did not take is kept here: the backoff holds all the same.
            for (id, entry) in planned {
                if written { state.schedule[id] = nil } else { state.schedule[id] = entry }
            }
            state.inFlight.formUnion(due.map(\.id))
            return (due, events)
        }
        events.forEach(onEvent)
        guard !due.isEmpty else { return report }

        // Each outcome is written as soon as it is known (its own small transaction), so a
        // `kill -9` mid-pass re-sends only what was in flight then; and it is told at once.
        await withTaskGroup(of: (Pending, String, Result<Int, any Error>).self) { group in
            var next = due.makeIterator()
            let clock = self.clock
            func start(_ pending: Pending) {
                let url = Macros.fillTimestamp(pending.beacon.url, pending.beacon.recorded.corrected(clock)
                                                  .map { Date(timeIntervalSince1970: $0) } ?? Date(timeIntervalSince1970: pending.beacon.recorded.wall))
                group.addTask { [sender, configuration] in (pending, url, await sender.send(url, timeout: configuration.requestTimeout)) }
            }
            for _ in 0..<max(1, configuration.concurrency) {
                guard let pending = next.next() else { break }
                start(pending)
            }
            while let (pending, url, result) = await group.next() {
                onEvent(record(pending, url, result, into: &report))   // the callback after the lock is released
                if let pending = next.next() { start(pending) }
            }
        }
        return report
    }

    private static func pending(_ row: [SQLiteValue]) -> Pending? {
        guard row.count == 12, let id = row[0].integer, let url = row[1].text else { return nil }
        let recorded = RecordedTime(wall: row[6].real ?? 0, monotonic: row[7].real ?? 0, boot: row[8].text ?? "", synchronized: row[9].integer == 1)
        let beacon = Beacon(url: url, event: row[2].text ?? "", play: row[3].text, billable: row[4].integer == 1, recorded: recorded)
        return Pending(id: id, beacon: beacon, createdRun: row[5].real ?? 0, attempts: Int(row[10].integer ?? 0), nextRun: row[11].real ?? 0)
    }

    /// Seconds (run time) between two looks at a beacon held for the clock's synchronisation.
    static let heldRecheck = 5.0
    /// When the database cannot be read, the courier looks again after this long (never sleeps unbounded).
    static let unreadableRecheck = 5.0

    /// Ids as a JSON array, for `json_each` (SQLite's JSON functions are built in since 3.38).
    private static func idList<S: Sequence>(_ ids: S) -> String where S.Element == Int64 {
        "[" + ids.map(String.init).joined(separator: ",") + "]"
    }

    /// Drops what is older than `maxAge` (run time), counting each. Under the lock.
    private func expire(_ now: Double, _ state: inout State) -> [OutboxEvent] {
        let limit = now - configuration.maxAge
        var events: [OutboxEvent] = []
        if !state.diskFailing, let rows = try? state.db.execute("SELECT id, url, play FROM beacons WHERE created_run < ? LIMIT 10000",
                                                               [.real(limit)]), !rows.isEmpty {
            let doomed = rows.filter { $0[0].integer.map { !state.inFlight.contains($0) } ?? false }
            do {
                try state.db.transaction {
                    for row in doomed { try state.db.execute("DELETE FROM beacons WHERE id = ?", [row[0]]) }
                }
                for row in doomed {
                    let url = row[1].text ?? ""
                    state.rows -= 1
                    state.bytes -= url.utf8.count
                    add("dropped:\(DropReason.expired.rawValue)", 1, &state)
                    if let play = row[2].text { state.unsavedPlays[play, default: (0, 0, 0)].dropped += 1 }
                    events.append(.dropped(url: url, reason: DropReason.expired.rawValue))
                }
            } catch {
                events.append(diskFailed(error, &state))
            }
        }
        let old = state.memory.filter { $0.createdRun < limit && !state.inFlight.contains($0.id) }
        if !old.isEmpty {
            let ids = Set(old.map(\.id))
            state.memory.removeAll { ids.contains($0.id) }
            state.memoryBytes -= old.reduce(0) { $0 + $1.beacon.url.utf8.count }
            for pending in old {
                add("dropped:\(DropReason.expired.rawValue)", 1, &state)
                if let play = pending.beacon.play { state.unsavedPlays[play, default: (0, 0, 0)].dropped += 1 }
                events.append(.dropped(url: pending.beacon.url, reason: DropReason.expired.rawValue))
            }
        }
        saveCounters(&state)
        savePlays(&state)
        return events
    }

    /// Writes what became of one delivery: deleted when the server took it (2xx), otherwise
    /// rescheduled with backoff. No longer in flight either way.
    /// An outcome's writes (the delivered beacon deleted, a retry's schedule, the counters) are
    /// not synced to the disk each (`synchronous=NORMAL` under WAL: a crash or `kill -9` loses
    /// none of them; a power cut may lose the last few, and then re-sends those beacons — a
    /// duplicate, never a loss — and the next synced write, a beacon queued, makes them
    /// durable). A beacon queued is synced before anything is sent. At 10,000 beacons a minute
    /// this is ~25,000 fewer fsyncs a minute (docs/benchmarks.md §6).
    private func record(_ pending: Pending, _ url: String, _ result: Result<Int, any Error>, into report: inout Report) -> OutboxEvent {
        state.withLock { state -> OutboxEvent in
            defer { state.inFlight.remove(pending.id) }
            _ = try? state.db.execute("PRAGMA synchronous=NORMAL")
            defer { _ = try? state.db.execute("PRAGMA synchronous=FULL") }
            let now = state.run.now()
            if case .success(let status) = result, (200..<300).contains(status) {
                state.schedule[pending.id] = nil
                report.sent += 1
                add("sent", 1, &state)
                if let play = pending.beacon.play { state.unsavedPlays[play, default: (0, 0, 0)].sent += 1 }
                if pending.id < 0 {
                    state.memory.removeAll { $0.id == pending.id }
                    state.memoryBytes -= pending.beacon.url.utf8.count
                } else {
                    do {
                        try state.db.execute("DELETE FROM beacons WHERE id = ?", [.integer(pending.id)])
                        state.rows -= 1
                        state.bytes -= pending.beacon.url.utf8.count
                    } catch {
                        state.delivered.insert(pending.id)   // never sent again; deleted when the disk takes writes
                        state.diskFailing = true
                    }
                }
                saveCounters(&state)
                savePlays(&state)
                return .sent(url: url, attempts: pending.attempts + 1)
            }
            let reason = switch result {
            case .success(let status): "HTTP \(status)"
            case .failure(let error): String(describing: error)
            }
            report.failed += 1
            add("failed_attempts", 1, &state)
            let delay = backoff(after: pending.attempts + 1)
            if pending.id < 0 {
                if let index = state.memory.firstIndex(where: { $0.id == pending.id }) {
                    state.memory[index].attempts += 1
                    state.memory[index].nextRun = now + delay
                }
            } else {
                let entry = (attempts: pending.attempts + 1, nextRun: now + delay)
                let written = !state.diskFailing && (try? state.db.execute("UPDATE beacons SET attempts = ?, next_run = ?, last_error = ? WHERE id = ?",
                                                                             [.integer(Int64(entry.attempts)), .real(entry.nextRun),
                                                                              .text(String(reason.prefix(500))), .integer(pending.id)])) != nil
                if !written {
                    state.diskFailing = true
                    state.schedule[pending.id] = entry
                } else {
                    state.schedule[pending.id] = nil
                }
            }
            saveCounters(&state)
            return .retrying(url: url, attempts: pending.attempts + 1, reason: reason, inSeconds: delay)
        }
    }

    /// Delivers until nothing is pending or `until` passes; sleeps until the next due beacon.
    public func deliverAll(until deadline: Date = .distantFuture) async {
        while Date() < deadline {
            _ = await deliverDue()
            guard let wait = nextDue() else { return }
            if wait > 0 { try? await Task.sleep(nanoseconds: UInt64(min(wait, max(0, deadline.timeIntervalSinceNow)) * 1e9)) }
        }
    }

    /// Exponential backoff with ±50 % jitter: base × 2^(attempts−1), capped.
    public func backoff(after attempts: Int) -> Double {
        let exponential = min(configuration.maxDelay, configuration.baseDelay * pow(2, Double(max(0, attempts - 1))))
        return exponential * Double.random(in: 0.5...1.5)
    }

    // MARK: Proof of play

    /// An ad went on screen: its row, written (durably) before `record` returns.
    public func recordPlayStart(_ play: Play) {
        state.withLock { state in
            do {
                try state.db.execute("""
                    INSERT OR IGNORE INTO plays (id, ad_id, kind, source, content_id, started_wall, started_run)
                    VALUES (?, ?, ?, ?, ?, ?, ?)
                    """, [.text(play.id), .text(play.adID), .text(play.kind), play.source.map { .text($0) } ?? .null,
                          .text(play.contentID), .real(play.startedWall), .real(state.run.now())])
                prunePlays(&state)
            } catch {
                state.diskFailing = true
                state.pendingPlays[play.id] = play
            }
        }
    }

    /// It ended: when, why, how long it was on screen, whether it was viewable.
    public func recordPlayEnd(id: String, endedWall: Double, seconds: Double?, reason: String, viewable: String?) {
        state.withLock { state in
            if var waiting = state.pendingPlays[id] {
                waiting.ended = (endedWall, state.run.now(), seconds, reason, viewable)
                state.pendingPlays[id] = waiting
                return
            }
            do {
                try state.db.execute("""
                    UPDATE plays SET ended_wall = ?, ended_run = ?, seconds = ?, reason = ?, viewable = COALESCE(?, viewable) WHERE id = ?
                    """, [.real(endedWall), .real(state.run.now()), seconds.map { .real($0) } ?? .null, .text(reason),
                          viewable.map { .text($0) } ?? .null, .text(id)])
            } catch {
                state.diskFailing = true
            }
        }
    }

    /// Its viewability, when it was decided before the end.
    public func recordViewability(id: String, _ viewable: String) {
        state.withLock { state in
            if state.pendingPlays[id] != nil {
                state.pendingPlays[id]?.viewable = viewable
                return
            }
            _ = try? state.db.execute("UPDATE plays SET viewable = ? WHERE id = ?", [.text(viewable), .text(id)])
        }
    }

    /// Writes the plays the disk did not take. Under the lock.
    private func flushPlays(_ state: inout State) {
        guard !state.pendingPlays.isEmpty else { return }
        let waiting = state.pendingPlays
        do {
            try state.db.transaction {
                for play in waiting.values {
                    try state.db.execute("""
                        INSERT OR IGNORE INTO plays (id, ad_id, kind, source, content_id, started_wall, started_run)
                        VALUES (?, ?, ?, ?, ?, ?, ?)
                        """, [.text(play.id), .text(play.adID), .text(play.kind), play.source.map { .text($0) } ?? .null,
                              .text(play.contentID), .real(play.startedWall), .real(state.run.now())])
                    if let ended = play.ended {
                        try state.db.execute("""
                            UPDATE plays SET ended_wall = ?, ended_run = ?, seconds = ?, reason = ?, viewable = ? WHERE id = ?
                            """, [.real(ended.wall), .real(ended.run), ended.seconds.map { .real($0) } ?? .null, .text(ended.reason),
                                  (ended.viewable ?? play.viewable).map { .text($0) } ?? .null, .text(play.id)])
                    } else if let viewable = play.viewable {
                        try state.db.execute("UPDATE plays SET viewable = ? WHERE id = ?", [.text(viewable), .text(play.id)])
                    }
                }
            }
            state.pendingPlays = [:]
        } catch {
            state.diskFailing = true
        }
    }

    /// Keeps proof of play within its bounds (rows, age in run time); now and then. Under the lock.
    private func prunePlays(_ state: inout State) {
        state.playsSincePrune += 1
        guard state.playsSincePrune >= 100 else { return }
        state.playsSincePrune = 0
        _ = try? state.db.execute("DELETE FROM plays WHERE started_run < ?", [.real(state.run.now() - configuration.playsMaxAge)])
        _ = try? state.db.execute("DELETE FROM plays WHERE rowid IN (SELECT rowid FROM plays ORDER BY rowid DESC LIMIT -1 OFFSET ?)",
                                  [.integer(Int64(configuration.playsMaxRows))])
    }

    /// The plays that started at or after `since` (wall clock), oldest first, at most `limit`.
    public func plays(since: Double? = nil, limit: Int = 10_000) -> [PlayRecord] {
        state.withLock { state in
            flushPlays(&state)
            savePlays(&state)
            let rows = (try? state.db.execute("""
                SELECT id, ad_id, kind, source, content_id, started_wall, ended_wall, seconds, reason, viewable,
                       beacons_total, beacons_sent, beacons_dropped FROM plays WHERE started_wall >= ? ORDER BY started_wall, rowid LIMIT ?
                """, [.real(since ?? -1e18), .integer(Int64(limit))])) ?? []
            return rows.map(PlayRecord.init(row:))
        }
    }
}
