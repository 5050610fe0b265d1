import AdRuntime
import AdSources
import Foundation

/// Sends one beacon; the outbox decides what the answer means.
public protocol BeaconSender: Sendable {
    /// The HTTP status, or an error when no answer came.
    func send(_ url: URL, timeout: Double) async -> Result<Int, any Error>
}

/// Beacons over HTTP(S) GET through the one bounded reader (64 KiB of answer at most).
public struct HTTPBeaconSender: BeaconSender {
    private let fetcher: any BoundedFetcher

    public init(fetcher: any BoundedFetcher = BoundedHTTP(threads: 4)) {
        self.fetcher = fetcher
    }

    public func send(_ url: URL, timeout: Double) async -> Result<Int, any Error> {
        do {
            let response = try await fetcher.exchange(HTTPRequest(url: url.absoluteString),
                                                      limits: HTTPLimits(maxBytes: 64 * 1024, deadline: timeout))
            return .success(response.status)
        } catch let error as FetchError where error.kind == .tooLarge {
            return .success(200)   // it answered; the body does not matter
        } catch {
            return .failure(error)
        }
    }
}

/// A beacon URL the outbox refuses.
public struct OutboxError: Error, Sendable, Equatable, CustomStringConvertible {
    public let url: String
    public var description: String { "\(url): not an http(s) URL; only those are sent" }
}

/// What the outbox did.
public enum OutboxEvent: Sendable, Equatable {
    case sent(url: String, attempts: Int)
    case retrying(url: String, attempts: Int, reason: String, inSeconds: Double)
    case dropped(url: String, ageSeconds: Double)
}

/// Tracking never loses a beacon (R17): every beacon is written to SQLite before its first
/// attempt, sent with retry, exponential backoff and jitter, and removed only after a 2xx.
/// A `kill -9` loses none: what was in flight then (at most `concurrency` beacons) is sent
/// again after the restart, once its backoff has passed (the interrupted attempt counts). A beacon older than `maxAge` is dropped — counted in the
/// database and reported, never silently.
///
/// Threading: any thread. The database is behind one lock; sends run concurrently (at most
/// `concurrency`) on Swift tasks, never holding the lock; `onEvent` is called with no lock held.
public final class BeaconOutbox: Sendable {
    public struct Configuration: Sendable {
        public var maxAge: Double = 7 * 24 * 3600
        /// First retry after about this long; doubling per attempt up to `maxDelay`; ±50 % jitter.
        public var baseDelay: Double = 2
        public var maxDelay: Double = 600
        public var concurrency = 8
        public var requestTimeout: Double = 10

        public init() {}
    }

    public struct Report: Sendable, Equatable {
        public var sent = 0
        public var failed = 0
        public var dropped = 0
    }

    /// The database, used only under `lock` (see the type).
    private final class Store: @unchecked Sendable {
        let db: SQLiteDatabase
        init(_ db: SQLiteDatabase) { self.db = db }
    }

    private let store: Store
    private let lock = Locked<Set<Int64>>([])   // ids being sent right now
    private let configuration: Configuration
    private let sender: any BeaconSender
    private let onEvent: @Sendable (OutboxEvent) -> Void
    private let now: @Sendable () -> Date
    private let enqueued = Locked<(@Sendable () -> Void)?>(nil)

    /// `action` runs (on the enqueuing thread, with no lock held) after each enqueue: a courier's
    /// wake-up.
    public func onEnqueued(_ action: @escaping @Sendable () -> Void) { enqueued.withLock { $0 = action } }

    /// Opens the outbox in the database at `path`. A database that is not usable (corrupt,
    /// emptied) is moved aside with a warning (`onWarning`, naming both files), the beacons it
    /// still holds are read into a new one, and the outbox works on: tracking never gates
    /// playback.
    public init(path: String, configuration: Configuration = Configuration(), sender: any BeaconSender = HTTPBeaconSender(),
                now: @escaping @Sendable () -> Date = { Date() }, onEvent: @escaping @Sendable (OutboxEvent) -> Void = { _ in },
                onWarning: @escaping @Sendable (String) -> Void = { _ in }) throws {
        var salvaged: [[SQLiteValue]] = []
        var salvageNote: String?
        let db = try SQLiteDatabase.openRepairing(path: path, onWarning: onWarning) { aside in
            (salvaged, salvageNote) = Self.salvage(aside)
        }
        try Self.createSchema(db)
        if !salvaged.isEmpty {
            try db.transaction {
                for row in salvaged {
                    try db.execute("INSERT INTO beacons (url, created_at, attempts, next_attempt_at) VALUES (?, ?, ?, ?)",
                                   [row[0], row[1], row[2], row[1]])
                }
            }
        }
        if let salvageNote { onWarning(salvageNote) }
        store = Store(db)
        self.configuration = configuration
        self.sender = sender
        self.now = now
        self.onEvent = onEvent
    }

    private static func createSchema(_ db: SQLiteDatabase) throws {
        try db.execute("""
            CREATE TABLE IF NOT EXISTS beacons (
                id INTEGER PRIMARY KEY AUTOINCREMENT,
                url TEXT NOT NULL,
                created_at REAL NOT NULL,
                attempts INTEGER NOT NULL DEFAULT 0,
                next_attempt_at REAL NOT NULL,
                last_error TEXT)
            """)
        try db.execute("CREATE INDEX IF NOT EXISTS beacons_due ON beacons(next_attempt_at)")
        try db.execute("CREATE TABLE IF NOT EXISTS outbox_counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)")
    }

    /// What can still be read of the beacons in a database moved aside, row by row until the
    /// damage stops the reading; and a sentence saying how that went.
    private static func salvage(_ path: String) -> ([[SQLiteValue]], String?) {
        guard let old = try? SQLiteDatabase(path: path, readOnly: true) else { return ([], nil) }
        let rows = (try? old.execute("SELECT url, created_at, attempts FROM beacons ORDER BY id")) ?? []
        let usable = rows.filter { row in
            row.count == 3 && row[0].text.map { URL(string: $0)?.scheme?.hasPrefix("http") == true } == true && row[1].real != nil
        }
        return (usable, "\(usable.count) beacons were read back from \(path) into the new outbox")
    }

    /// Pending and dropped counts of the outbox at `path`, read only: works on a read-only state
    /// folder and creates nothing. Nil pending when there is no outbox there yet.
    public static func status(path: String) throws -> (pending: Int, dropped: Int)? {
        guard FileManager.default.fileExists(atPath: path) else { return nil }
        let db = try SQLiteDatabase(path: path, readOnly: true)
        let pending = (try db.execute("SELECT COUNT(*) FROM beacons")).first?.first?.integer ?? 0
        let dropped = ((try? db.execute("SELECT value FROM outbox_counters WHERE name = 'dropped'"))?.first?.first?.integer) ?? 0
        return (Int(pending), Int(dropped))
    }

    /// Writes `urls` durably (one transaction) before any attempt. Only http(s) URLs
    /// (`OutboxError` otherwise: nothing of the batch is written).
    public func enqueue(_ urls: [String]) throws {
        for url in urls {
            guard url.utf8.count <= 16 * 1024, let parsed = URL(string: url),
                  ["http", "https"].contains(parsed.scheme?.lowercased() ?? ""), parsed.host != nil else {
                throw OutboxError(url: url)
            }
        }
        let t = now().timeIntervalSince1970
        try lock.withLock { _ in
            try store.db.transaction {
                for url in urls {
                    try store.db.execute("INSERT INTO beacons (url, created_at, next_attempt_at) VALUES (?, ?, ?)",
                                         [.text(url), .real(t), .real(t)])
                }
            }
        }
        enqueued.withLock { $0 }?()
    }

    /// Beacons not yet delivered.
    public func pendingCount() throws -> Int {
        try lock.withLock { _ in Int(try store.db.execute("SELECT COUNT(*) FROM beacons").first?.first?.integer ?? 0) }
    }

    /// Beacons dropped for age, ever.
    public func droppedCount() throws -> Int {
        try lock.withLock { _ in
            Int(try store.db.execute("SELECT value FROM outbox_counters WHERE name = 'dropped'").first?.first?.integer ?? 0)
        }
    }

    /// Seconds until the next beacon is due (0 if one is due now), nil if none is pending.
    public func nextDue() throws -> Double? {
        try lock.withLock { _ in
            guard let t = try store.db.execute("SELECT MIN(next_attempt_at) FROM beacons").first?.first?.real else { return nil }
            return max(0, t - now().timeIntervalSince1970)
        }
    }

    /// One pass: drops expired beacons, sends every due one (at most `concurrency` at a
    /// time), deletes the delivered, reschedules the rest.
    public func deliverDue() async throws -> Report {
        var report = Report()
        let t = now().timeIntervalSince1970
        var dropped: [OutboxEvent] = []
        let due: [(Int64, String, Int)] = try lock.withLock { inFlight in
            let expired = try store.db.execute("SELECT id, url, created_at FROM beacons WHERE created_at < ?",
                                               [.real(t - configuration.maxAge)])
            if !expired.isEmpty {
                try store.db.transaction {
                    for row in expired {
                        try store.db.execute("DELETE FROM beacons WHERE id = ?", [row[0]])
                    }
                    try store.db.execute("""
                        INSERT INTO outbox_counters (name, value) VALUES ('dropped', ?)
                        ON CONFLICT(name) DO UPDATE SET value = value + excluded.value
                        """, [.integer(Int64(expired.count))])
                }
                dropped = expired.map { row in .dropped(url: row[1].text ?? "", ageSeconds: t - (row[2].real ?? t)) }
                report.dropped = expired.count
            }
            let rows = try store.db.execute(
                "SELECT id, url, attempts FROM beacons WHERE next_attempt_at <= ? ORDER BY next_attempt_at, id LIMIT ?",
                [.real(t), .integer(Int64(max(64, configuration.concurrency * 16)))])
            let fresh = rows.compactMap { row -> (Int64, String, Int)? in
                guard let id = row[0].integer, !inFlight.contains(id) else { return nil }
                return (id, row[1].text ?? "", Int(row[2].integer ?? 0))
            }
            // The attempt is written before it is made: a beacon in flight when the process
            // dies counts it and waits its backoff after the restart, behind the others due,
            // rather than going first again into what may be the next crash.
            try store.db.transaction {
                for (id, _, attempts) in fresh {
                    try store.db.execute("UPDATE beacons SET attempts = ?, next_attempt_at = ? WHERE id = ?",
                                         [.integer(Int64(attempts + 1)), .real(t + backoff(after: attempts + 1)), .integer(id)])
                }
            }
            inFlight.formUnion(fresh.map(\.0))
            return fresh
        }
        dropped.forEach(onEvent)   // callbacks never run under the lock
        guard !due.isEmpty else { return report }

        // Each outcome is written as soon as it is known (its own small transaction), so a
        // `kill -9` mid-pass re-sends only what was in flight then — at most `concurrency`
        // beacons — never the whole pass; and it is told at once.
        var failure: (any Error)?
        await withTaskGroup(of: (Int64, String, Int, Result<Int, any Error>).self) { group in
            var next = due.makeIterator()
            for _ in 0..<max(1, configuration.concurrency) {
                guard let (id, url, attempts) = next.next() else { break }
                group.addTask { [sender, configuration] in
                    (id, url, attempts, await Self.send(sender, url, configuration.requestTimeout))
                }
            }
            while let outcome = await group.next() {
                do {
                    onEvent(try record(outcome, into: &report))   // the callback after the lock is released
                } catch {
                    failure = failure ?? error
                }
                if let (id, url, attempts) = next.next() {
                    group.addTask { [sender, configuration] in
                        (id, url, attempts, await Self.send(sender, url, configuration.requestTimeout))
                    }
                }
            }
        }
        if let failure { throw failure }
        return report
    }

    /// Writes what became of one delivery: deleted when the server took it (2xx), otherwise
    /// rescheduled with backoff. No longer in flight either way.
    private func record(_ outcome: (Int64, String, Int, Result<Int, any Error>), into report: inout Report) throws -> OutboxEvent {
        let (id, url, attempts, result) = outcome
        return try lock.withLock { inFlight -> OutboxEvent in
            defer { inFlight.remove(id) }
            if case .success(let status) = result, (200..<300).contains(status) {
                try store.db.execute("DELETE FROM beacons WHERE id = ?", [.integer(id)])
                report.sent += 1
                return .sent(url: url, attempts: attempts + 1)
            } else {
                let reason = switch result {
                case .success(let status): "HTTP \(status)"
                case .failure(let error): String(describing: error)
                }
                let delay = backoff(after: attempts + 1)
                try store.db.execute("UPDATE beacons SET attempts = ?, next_attempt_at = ?, last_error = ? WHERE id = ?",
                                     [.integer(Int64(attempts + 1)), .real(now().timeIntervalSince1970 + delay),
                                      .text(reason), .integer(id)])
                report.failed += 1
                return .retrying(url: url, attempts: attempts + 1, reason: reason, inSeconds: delay)
            }
        }
    }

    /// Delivers until nothing is pending or `until` passes; sleeps until the next due beacon.
    public func deliverAll(until deadline: Date = .distantFuture) async throws {
        while Date() < deadline {
            _ = try await deliverDue()
            guard let wait = try nextDue() else { return }
            if wait > 0 { try await Task.sleep(nanoseconds: UInt64(min(wait, max(0, deadline.timeIntervalSinceNow)) * 1e9)) }
        }
    }

    /// Exponential backoff with ±50 % jitter: base × 2^(attempts−1), capped.
    public func backoff(after attempts: Int) -> Double {
        let exponential = min(configuration.maxDelay, configuration.baseDelay * pow(2, Double(max(0, attempts - 1))))
        return exponential * Double.random(in: 0.5...1.5)
    }

    private static func send(_ sender: any BeaconSender, _ url: String, _ timeout: Double) async -> Result<Int, any Error> {
        guard let parsed = URL(string: url) else { return .failure(URLError(.badURL)) }
        return await sender.send(parsed, timeout: timeout)
    }
}
