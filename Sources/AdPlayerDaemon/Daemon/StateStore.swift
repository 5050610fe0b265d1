import AdRuntime
import AdSources
import AdTracking
import ControlProtocol
import Foundation

/// An episode in the queue.
public struct QueueEntry: Sendable, Equatable {
    public var path: String
    /// The id ad servers know the episode by: the file name without its extension, unless
    /// `open` named one.
    public var contentID: String
    /// How long it plays at most (a schedule's image or capped item); nil: to its end. Not kept.
    public var length: Double?

    public init(path: String, contentID: String? = nil, length: Double? = nil) {
        self.path = path
        self.contentID = contentID ?? FilePath.stem(path)
        self.length = length
    }

    /// The most the queue holds: entries, and bytes of their paths — so that a status line
    /// (which lists the queue) stays well under the 8 MiB a client may have waiting.
    public static let maxEntries = ControlProtocol.maxQueueEntries
    public static let maxPathBytes = 4 << 20

    /// Whether the entries of `parts`, one after the other, are within both bounds (no copy).
    public static func fits(_ parts: [QueueEntry]...) -> Bool {
        parts.reduce(0) { $0 + $1.count } <= maxEntries
            && parts.joined().reduce(0) { $0 + $1.path.utf8.count } <= maxPathBytes
    }

    /// The longest start of `queue` within both bounds, in one pass.
    public static func fitting(_ queue: [QueueEntry]) -> [QueueEntry] {
        var bytes = 0
        let head = queue.prefix(maxEntries)
        let end = head.firstIndex { entry in
            bytes += entry.path.utf8.count
            return bytes > maxPathBytes
        } ?? head.endIndex
        return Array(queue[..<end])
    }
}

/// The daemon's state in its SQLite database (the same file as the beacon outbox, SPEC §6):
/// the queue and which entry plays, each episode's position, the catalog's frequency
/// counters. It survives a restart and a `kill -9` (WAL, full fsync).
///
/// Threading: the database is used by one thread only — the caller's during `init` and
/// `load` (at start-up, before anything is handed over), then the writer thread of its own,
/// which takes every write in order. The player's loop never reads the database (R18): what
/// it needs (the queue, the positions) it gets once from `load` and keeps in memory. The
/// frequency counters are also kept in memory, behind a lock (read by ad requests off the loop).
public final class StateStore: FrequencyCounters, @unchecked Sendable {
    // @unchecked: `database` is used only by the thread that runs `init` and `load`, then only
    // on `writer` (see the type); `counters` is behind its lock.
    public struct Saved: Equatable, Sendable {
        public var queue: [QueueEntry] = []
        public var current: Int?
        /// Where each episode was left, by path (at most `maxPositions`, the most recent).
        public var positions: [String: Double] = [:]
        /// What the queue does at its ends (`loop` of earlier versions: `one`).
        public var repeatMode = RepeatMode.off
        public var shuffle = false
        /// The content's volume (0–100) and mute, as the viewer left them.
        public var volume = 100.0
        public var mute = false
        /// A takeover on when the last run stopped (JSON), and the schedule's audit (a JSON
        /// array, the last 100): a takeover and its audit survive a restart until its end.
        public var takeover: String?
        public var scheduleAudit: String?

        public init() {}

        /// Where the current entry was left.
        public var position: Double { current.flatMap { positions[queue[$0].path] } ?? 0 }
    }

    /// Positions kept: the most recently saved; older ones are forgotten (a start from 0).
    public static let maxPositions = 10_000

    private let database: SQLiteDatabase
    /// What the file must survive (`.runOnly`: nothing; no position each second).
    public let durability: StateDurability
    private let writer: Workers
    private let counters = Locked<[String: Int]>([:])
    private let showLog = Locked<[String: [ShowTime]]>([:])
    private let log: Logger

    /// Its writer thread is of `environment` (a simulation's shares its one thread).
    /// `durability` `.runOnly`: `path` is the run's private file, this store's alone.
    public init(path: String, log: Logger, environment: AdEnvironment = .system, durability: StateDurability = .crashSafe) throws {
        writer = Workers(name: "adplayerd-state", environment: environment)
        self.log = log
        self.durability = durability
        database = try SQLiteDatabase.openRepairing(path: path, durability: durability, onWarning: { log.warning("state: \($0)") })
        try database.execute("CREATE TABLE IF NOT EXISTS queue (position INTEGER PRIMARY KEY, path TEXT NOT NULL, content_id TEXT NOT NULL)")
        try database.execute("CREATE TABLE IF NOT EXISTS playback (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        try database.execute("CREATE TABLE IF NOT EXISTS positions (path TEXT PRIMARY KEY, seconds REAL NOT NULL)")
        try database.execute("""
            CREATE TABLE IF NOT EXISTS frequency (content_id TEXT NOT NULL, entry TEXT NOT NULL, count INTEGER NOT NULL,
                                                  PRIMARY KEY (content_id, entry))
            """)
        // A catalog entry's shows, for its hourly and daily caps (kept across restarts).
        try database.execute("""
            CREATE TABLE IF NOT EXISTS shows (entry TEXT NOT NULL, wall REAL NOT NULL, mono REAL NOT NULL, boot TEXT NOT NULL)
            """)
        try database.execute("CREATE INDEX IF NOT EXISTS shows_entry ON shows(entry)")
        var log: [String: [ShowTime]] = [:]
        for row in try database.execute("SELECT entry, wall, mono, boot FROM shows ORDER BY rowid") {
            guard let entry = row[0].text else { continue }
            log[entry, default: []].append(ShowTime(wall: row[1].real ?? 0, monotonic: row[2].real ?? 0, boot: row[3].text ?? ""))
        }
        showLog.withLock { $0 = log.mapValues { Array($0.suffix(maxShows)) } }
        let rows = try database.execute("SELECT content_id, entry, count FROM frequency")
        counters.withLock { counters in
            for row in rows {
                if let content = row[0].text, let entry = row[1].text, let count = row[2].integer { counters[Self.key(content, entry)] = Int(count) }
            }
        }
    }

    /// What was saved: the queue (cut to its bounds), the entry that played, the positions.
    /// At start-up, on the calling thread, before any write is handed over.
    public func load() -> Saved {
        var saved = Saved()
        saved.queue = QueueEntry.fitting(((try? database.execute("SELECT path, content_id FROM queue ORDER BY position LIMIT ?",
                                                                 [.integer(Int64(QueueEntry.maxEntries + 1))])) ?? [])
            .compactMap { row in row[0].text.map { QueueEntry(path: $0, contentID: row[1].text) } })
        let values = ((try? database.execute("SELECT key, value FROM playback")) ?? [])
            .reduce(into: [String: String]()) { $0[$1[0].text ?? ""] = $1[1].text }
        if let text = values["current"], let index = Int(text), saved.queue.indices.contains(index) { saved.current = index }
        saved.repeatMode = values["repeat"].flatMap(RepeatMode.init(rawValue:)) ?? (values["loop"] == "yes" ? .one : .off)
        saved.shuffle = values["shuffle"] == "yes"
        if let text = values["volume"], let volume = Double(text), volume.isFinite, (0...100).contains(volume) { saved.volume = volume }
        saved.mute = values["mute"] == "yes"
        saved.takeover = values["takeover"].flatMap { $0.isEmpty ? nil : $0 }
        saved.scheduleAudit = values["schedule-audit"].flatMap { $0.isEmpty ? nil : $0 }
        // INSERT OR REPLACE gives a saved position a new rowid: the highest are the most recent.
        _ = try? database.execute("DELETE FROM positions WHERE rowid NOT IN (SELECT rowid FROM positions ORDER BY rowid DESC LIMIT ?)",
                                  [.integer(Int64(Self.maxPositions))])
        for row in (try? database.execute("SELECT path, seconds FROM positions")) ?? [] {
            guard let path = row[0].text, let seconds = row[1].real,
                  let checked = try? Seconds.check(seconds, .position, field: "saved position"), checked > 0 else { continue }
            saved.positions[path] = checked
        }
        handOverToWriter()
        return saved
    }

    /// From here on the connection is the writer thread's alone (checked in debug builds).
    private func handOverToWriter() {
        let database = Unchecked(self.database)   // handed to the writer thread, which alone uses it from now on
        writer.execute { database.value.confineToCurrentThread() }
    }

    /// The queue and the entry that plays. Saves waiting behind a slow disk are one: only the
    /// latest queue is written (a queue of 10,000 is 10,000 rows).
    public func saveQueue(_ queue: [QueueEntry], current: Int?) {
        let first = pending.withLock { pending -> Bool in
            defer { pending.queue = (queue, current) }
            return pending.queue == nil
        }
        guard first else { return }
        write { [pending] db in
            guard let (queue, current) = pending.withLock({ pending -> ([QueueEntry], Int?)? in
                defer { pending.queue = nil }
                return pending.queue
            }) else { return }
            try db.transaction {
                try db.execute("DELETE FROM queue")
                for (index, entry) in queue.enumerated() {
                    try db.execute("INSERT INTO queue (position, path, content_id) VALUES (?, ?, ?)",
                                   [.integer(Int64(index)), .text(entry.path), .text(entry.contentID)])
                }
                try Self.writeCurrent(current, db)
            }
        }
    }

    /// Only the entry that plays (a new episode of the same queue): one row, not the queue.
    /// Coalesced like the settings: the latest wins.
    public func saveCurrent(_ current: Int?) {
        saveLatest { $0.current = .some(current) }
    }

    private static func writeCurrent(_ current: Int?, _ db: SQLiteDatabase) throws {
        if let current {
            try db.execute("INSERT OR REPLACE INTO playback (key, value) VALUES ('current', ?)", [.text(String(current))])
        } else {
            try db.execute("DELETE FROM playback WHERE key = 'current'")
        }
    }

    /// `path` is at `seconds`; nil: it played to its end (the next time starts from 0).
    /// Positions come every second while playing: those waiting are written in one
    /// transaction, without a sync to the disk of their own (`synchronous=NORMAL` under WAL:
    /// a crash or `kill -9` loses nothing written; a power cut may lose the positions since the
    /// last synced write — the next queue change, setting or checkpoint).
    public func savePosition(_ path: String, _ seconds: Double?) {
        let first = pending.withLock { pending -> Bool in
            defer { pending.positions[path] = .some(seconds) }
            return pending.positions.isEmpty
        }
        guard first else { return }
        write { [pending] db in
            let positions = pending.withLock { pending -> [String: Double?] in
                defer { pending.positions = [:] }
                return pending.positions
            }
            guard !positions.isEmpty else { return }
            try db.withoutSyncEachCommit {
                try db.transaction {
                    for (path, seconds) in positions.sorted(by: { $0.key < $1.key }) {
                        if let seconds, seconds.isFinite, seconds > 0 {
                            try db.execute("INSERT OR REPLACE INTO positions (path, seconds) VALUES (?, ?)", [.text(path), .real(seconds)])
                        } else {
                            try db.execute("DELETE FROM positions WHERE path = ?", [.text(path)])
                        }
                    }
                }
            }
        }
    }

    /// Writes handed over and not yet taken by the writer: the latest of each kind. Bounded
    /// by kind: one queue, one current entry, a position a path, a value a setting.
    private struct Pending {
        var queue: ([QueueEntry], Int?)?
        var positions: [String: Double?] = [:]
        var current: Int??
        var settings: [String: String] = [:]

        var settingsWaiting: Bool { current != nil || !settings.isEmpty }
    }

    private let pending = Locked(Pending())
    /// The reason the last write failed, while writes fail (the writer's).
    private let failing = Locked<String?>(nil)

    /// A playback setting that outlives the process: `repeat`, `shuffle`, `volume`, `mute`.
    /// Coalesced: however many come while the disk is slow, one synced transaction writes the
    /// latest value of each (100,000 `volume` lines are one write, not 100,000), and what the
    /// writer has not taken yet is written at stop (`flush`).
    public func saveSetting(_ key: String, _ value: String) {
        saveLatest { $0.settings[key] = value }
    }

    /// Records the latest value and, if none of its kind was waiting, hands the writer one
    /// write that takes whatever is latest when it runs.
    private func saveLatest(_ update: (inout Pending) -> Void) {
        let first = pending.withLock { pending -> Bool in
            let waiting = pending.settingsWaiting
            update(&pending)
            return !waiting
        }
        guard first else { return }
        write { [pending] db in
            let (current, settings) = pending.withLock { pending -> (Int??, [String: String]) in
                defer { pending.current = nil; pending.settings = [:] }
                return (pending.current, pending.settings)
            }
            guard current != nil || !settings.isEmpty else { return }
            try db.transaction {
                if let current { try Self.writeCurrent(current, db) }
                for (key, value) in settings.sorted(by: { $0.key < $1.key }) {
                    try db.execute("INSERT OR REPLACE INTO playback (key, value) VALUES (?, ?)", [.text(key), .text(value)])
                }
            }
        }
    }

    /// Writes the writer has run (tests: that saves were coalesced).
    package var writesTaken: Int { taken.withLock { $0 } }
    private let taken = Locked(0)

    /// Tests: every write fails as on a full disk (SQLite error 13), or stops failing.
    package func injectWriteFailures(_ on: Bool) {
        let database = Unchecked(self.database)
        writer.execute { database.value.injectedWriteFailure = on ? 13 : nil }
    }

    /// Tests: the writer waits (as behind a slow disk) until the returned handover is fulfilled.
    package func holdWriter() -> Handover<Bool> {
        let release = Handover<Bool>()
        writer.execute { _ = release.wait() }
        return release
    }

    /// Waits until every write handed over so far is on disk (at shutdown; never on the loop).
    /// A run-only store (in memory) is written whole to its file then.
    public func flush(timeout: Double = 5) {
        let done = Handover<Bool>()
        let database = Unchecked(self.database)
        writer.execute {
            try? database.value.writeOut()
            done.fulfil(true)
        }
        _ = done.wait(timeout: timeout)
    }

    private func write(_ body: @escaping @Sendable (SQLiteDatabase) throws -> Void) {
        // The connection is used on the writer thread only (see the type).
        let database = Unchecked(self.database), log = self.log, taken = self.taken, failing = self.failing
        writer.execute {
            taken.withLock { $0 += 1 }
            // A disk that refuses writes (full, read-only) is said once, then when the reason
            // changes, and when it takes writes again — not once a write for as long as it lasts.
            do {
                try body(database.value)
                if let was = failing.withLock({ state in defer { state = nil }; return state }) {
                    log.notice("state: saving again (it had failed: \(was))")
                }
            } catch {
                let why = "\(error)"
                if failing.withLock({ state in defer { state = why }; return state != why }) {
                    log.error("state: cannot save: \(why); what plays goes on (said again when the reason changes or it saves again)")
                }
            }
        }
    }

    // MARK: FrequencyCounters (per viewing of an episode: reset when it starts from the beginning)

    private static func key(_ content: String, _ entry: String) -> String { "\(content)\u{1}\(entry)" }

    public func count(content: String, entry: String) -> Int {
        counters.withLock { $0[Self.key(content, entry), default: 0] }
    }

    public func increment(content: String, entry: String) {
        let count = counters.withLock { counters -> Int in
            counters[Self.key(content, entry), default: 0] += 1
            return counters[Self.key(content, entry)]!
        }
        write { db in
            try db.execute("INSERT OR REPLACE INTO frequency (content_id, entry, count) VALUES (?, ?, ?)",
                           [.text(content), .text(entry), .integer(Int64(count))])
        }
    }

    public func shows(entry: String) -> [ShowTime] { showLog.withLock { $0[entry] ?? [] } }

    public func recordShow(entry: String, at time: ShowTime) {
        let prune = showLog.withLock { log -> Bool in
            log[entry, default: []].append(time)
            guard log[entry]!.count > maxShows else { return false }
            log[entry]!.removeFirst(log[entry]!.count - maxShows)
            return true
        }
        write { db in
            try db.execute("INSERT INTO shows (entry, wall, mono, boot) VALUES (?, ?, ?, ?)",
                           [.text(entry), .real(time.wall), .real(time.monotonic), .text(time.boot)])
            if prune {
                try db.execute("""
                    DELETE FROM shows WHERE entry = ? AND rowid NOT IN (SELECT rowid FROM shows WHERE entry = ? ORDER BY rowid DESC LIMIT ?)
                    """, [.text(entry), .text(entry), .integer(Int64(maxShows))])
            }
        }
    }

    /// A new viewing of `content` starts: its entries may be served again.
    public func resetCounters(content: String) {
        counters.withLock { counters in
            for key in counters.keys where key.hasPrefix(content + "\u{1}") { counters[key] = nil }
        }
        write { db in try db.execute("DELETE FROM frequency WHERE content_id = ?", [.text(content)]) }
    }
}
