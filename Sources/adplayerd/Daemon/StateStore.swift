import AdRuntime
import AdSources
import AdTracking
import Foundation

/// An episode in the queue.
struct QueueEntry: Sendable, Equatable {
    var path: String
    /// The id ad servers know the episode by: the file name without its extension, unless
    /// `open` named one.
    var contentID: String

    init(path: String, contentID: String? = nil) {
        self.path = path
        self.contentID = contentID ?? URL(fileURLWithPath: path).deletingPathExtension().lastPathComponent
    }

    /// The most the queue holds: entries, and bytes of their paths — so that a status line
    /// (which lists the queue) stays well under the 8 MiB a client may have waiting.
    static let maxEntries = 10_000
    static let maxPathBytes = 4 << 20

    /// Whether the entries of `parts`, one after the other, are within both bounds (no copy).
    static func fits(_ parts: [QueueEntry]...) -> Bool {
        parts.reduce(0) { $0 + $1.count } <= maxEntries
            && parts.joined().reduce(0) { $0 + $1.path.utf8.count } <= maxPathBytes
    }

    /// The longest start of `queue` within both bounds, in one pass.
    static func fitting(_ queue: [QueueEntry]) -> [QueueEntry] {
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
/// Threading: reads at start-up (`load`) on the caller's thread; every write is handed to a
/// writer thread of its own, in order, so the player's loop never waits for the disk (R18).
/// The frequency counters are also kept in memory (read by ad requests off the loop).
final class StateStore: FrequencyCounters, @unchecked Sendable {
    // @unchecked: `database` is used only on `writer` (after `init`/`load`, which run before
    // anything is handed to it); `counters` is behind its lock.
    struct Saved: Equatable {
        var queue: [QueueEntry] = []
        var current: Int?
        var position: Double = 0
        var loop = false
    }

    private let database: SQLiteDatabase
    private let writer = Workers(name: "adplayerd-state")
    private let counters = Locked<[String: Int]>([:])
    private let log: Logger

    init(path: String, log: Logger) throws {
        self.log = log
        database = try SQLiteDatabase.openRepairing(path: path, onWarning: { log.warning("state: \($0)") })
        try database.execute("CREATE TABLE IF NOT EXISTS queue (position INTEGER PRIMARY KEY, path TEXT NOT NULL, content_id TEXT NOT NULL)")
        try database.execute("CREATE TABLE IF NOT EXISTS playback (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        try database.execute("CREATE TABLE IF NOT EXISTS positions (path TEXT PRIMARY KEY, seconds REAL NOT NULL)")
        try database.execute("""
            CREATE TABLE IF NOT EXISTS frequency (content_id TEXT NOT NULL, entry TEXT NOT NULL, count INTEGER NOT NULL,
                                                  PRIMARY KEY (content_id, entry))
            """)
        let rows = try database.execute("SELECT content_id, entry, count FROM frequency")
        counters.withLock { counters in
            for row in rows {
                if let content = row[0].text, let entry = row[1].text, let count = row[2].integer { counters[Self.key(content, entry)] = Int(count) }
            }
        }
    }

    /// What was saved: the queue, the entry that played and where.
    func load() -> Saved {
        var saved = Saved()
        saved.queue = QueueEntry.fitting(((try? database.execute("SELECT path, content_id FROM queue ORDER BY position LIMIT ?",
                                                                 [.integer(Int64(QueueEntry.maxEntries))])) ?? [])
            .compactMap { row in row[0].text.map { QueueEntry(path: $0, contentID: row[1].text) } })
        let values = ((try? database.execute("SELECT key, value FROM playback")) ?? [])
            .reduce(into: [String: String]()) { $0[$1[0].text ?? ""] = $1[1].text }
        if let text = values["current"], let index = Int(text), saved.queue.indices.contains(index) {
            saved.current = index
            saved.position = position(of: saved.queue[index].path)
        }
        saved.loop = values["loop"] == "yes"
        return saved
    }

    /// Where `path` was left (0 if never, or if it played to its end).
    func position(of path: String) -> Double {
        let seconds = (try? database.execute("SELECT seconds FROM positions WHERE path = ?", [.text(path)]))?.first?.first?.real ?? 0
        return (try? Seconds.check(seconds, .position, field: "saved position")) ?? 0
    }

    func saveQueue(_ queue: [QueueEntry], current: Int?) {
        write { db in
            try db.transaction {
                try db.execute("DELETE FROM queue")
                for (index, entry) in queue.enumerated() {
                    try db.execute("INSERT INTO queue (position, path, content_id) VALUES (?, ?, ?)",
                                   [.integer(Int64(index)), .text(entry.path), .text(entry.contentID)])
                }
                if let current {
                    try db.execute("INSERT OR REPLACE INTO playback (key, value) VALUES ('current', ?)", [.text(String(current))])
                } else {
                    try db.execute("DELETE FROM playback WHERE key = 'current'")
                }
            }
        }
    }

    /// `path` is at `seconds`; nil: it played to its end (the next time starts from 0).
    func savePosition(_ path: String, _ seconds: Double?) {
        write { db in
            if let seconds, seconds.isFinite, seconds > 0 {
                try db.execute("INSERT OR REPLACE INTO positions (path, seconds) VALUES (?, ?)", [.text(path), .real(seconds)])
            } else {
                try db.execute("DELETE FROM positions WHERE path = ?", [.text(path)])
            }
        }
    }

    func saveLoop(_ on: Bool) {
        write { db in try db.execute("INSERT OR REPLACE INTO playback (key, value) VALUES ('loop', ?)", [.text(on ? "yes" : "no")]) }
    }

    /// Waits until every write handed over so far is on disk (at shutdown; never on the loop).
    func flush(timeout: Double = 5) {
        let done = Handover<Bool>()
        writer.execute { done.fulfil(true) }
        _ = done.wait(timeout: timeout)
    }

    private func write(_ body: @escaping @Sendable (SQLiteDatabase) throws -> Void) {
        // The connection is used on the writer thread only (see the type).
        let database = Unchecked(self.database), log = self.log
        writer.execute {
            do { try body(database.value) } catch { log.error("state: cannot save: \(error)") }
        }
    }

    // MARK: FrequencyCounters (per viewing of an episode: reset when it starts from the beginning)

    private static func key(_ content: String, _ entry: String) -> String { "\(content)\u{1}\(entry)" }

    func count(content: String, entry: String) -> Int {
        counters.withLock { $0[Self.key(content, entry), default: 0] }
    }

    func increment(content: String, entry: String) {
        let count = counters.withLock { counters -> Int in
            counters[Self.key(content, entry), default: 0] += 1
            return counters[Self.key(content, entry)]!
        }
        write { db in
            try db.execute("INSERT OR REPLACE INTO frequency (content_id, entry, count) VALUES (?, ?, ?)",
                           [.text(content), .text(entry), .integer(Int64(count))])
        }
    }

    /// A new viewing of `content` starts: its entries may be served again.
    func resetCounters(content: String) {
        counters.withLock { counters in
            for key in counters.keys where key.hasPrefix(content + "\u{1}") { counters[key] = nil }
        }
        write { db in try db.execute("DELETE FROM frequency WHERE content_id = ?", [.text(content)]) }
    }
}
