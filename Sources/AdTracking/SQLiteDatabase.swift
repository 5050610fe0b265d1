import AdRuntime
import CSQLite
import Foundation
import Synchronization

/// A value bound to or read from SQLite.
public enum SQLiteValue: Sendable, Equatable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)

    public var integer: Int64? { if case .integer(let v) = self { v } else { nil } }
    public var real: Double? {
        switch self {
        case .real(let v): v
        case .integer(let v): Double(v)
        default: nil
        }
    }
    public var text: String? { if case .text(let v) = self { v } else { nil } }
}

public struct SQLiteError: Error, Sendable, CustomStringConvertible {
    public let code: Int32
    public let message: String
    public var description: String { "SQLite error \(code): \(message)" }

    /// Another connection holds the database (SQLITE_BUSY, SQLITE_LOCKED): try again, not damage.
    public var isBusy: Bool { code & 0xFF == SQLITE_BUSY || code & 0xFF == SQLITE_LOCKED }
}

/// What a box's state files must survive. The daemon's survive a `kill -9` and a power cut as
/// docs/operating.md says; a simulation's are thrown away at its end and survive nothing.
public enum StateDurability: Sendable, Equatable {
    /// Every commit synced (WAL, `synchronous=FULL`) unless a write says it may wait; a
    /// position saved each second and the ledger's heartbeat (their writers' promises).
    case crashSafe
    /// A run's private files: each database held in memory while the run goes and written to
    /// its file whole when the run lets go of it (`SQLiteDatabase.writeOut`: no write, sync or
    /// lock per transaction), and no write whose only purpose is surviving a crash (the position
    /// each second, the heartbeat). What the run itself reads back is the same.
    case runOnly
}

/// One SQLite connection. Not thread-safe by itself: its owner serializes every call
/// (the outbox holds it behind its lock).
package final class SQLiteDatabase {
    private var db: OpaquePointer?
    package let path: String
    /// The one thread allowed to use it, once confined (`confineToCurrentThread`).
    private let owner = Locked<pthread_t?>(nil)

    /// Tests: every statement that is not a read fails with this SQLite code (13: the disk is
    /// full), as a failing disk would make it.
    package var injectedWriteFailure: Int32?

    /// From now on only the calling thread may use this connection: debug builds trap on a
    /// call from any other (a connection opened `NOMUTEX` must never be used by two threads).
    /// Commits made by every connection of this process (each a write to the journal, and a
    /// sync when the connection syncs each commit): for the benchmarks.
    package static func transactionCount() -> Int { commits.load(ordering: .relaxed) }
    fileprivate static let commits = Atomic<Int>(0)

    package func confineToCurrentThread() { owner.withLock { $0 = pthread_self() } }

    /// Opens (creating if needed) `path` in WAL mode with full fsync: a row that
    /// `execute` returned from is on disk, also across `kill -9` and power loss (`.crashSafe`). Read-only:
    /// opens an existing database to read it (a read-only state folder can still be looked at).
    /// `durability` `.runOnly`: a run's private database (see `StateDurability`): in memory,
    /// `path` written by `writeOut`.
    package init(path: String, readOnly: Bool = false, busyTimeoutMilliseconds: Int32 = 5000, durability: StateDurability = .crashSafe) throws {
        self.path = path
        self.durability = readOnly ? .crashSafe : durability
        let flags = readOnly ? SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX : SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX
        // A run-only database lives in memory until `writeOut` (its folder is the run's own and new).
        let rc = sqlite3_open_v2(durability == .runOnly && !readOnly ? ":memory:" : path, &db, flags, nil)
        guard rc == SQLITE_OK else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(db)
            db = nil
            throw SQLiteError(code: rc, message: "\(path): \(message)")
        }
        sqlite3_busy_timeout(db, busyTimeoutMilliseconds)
        sqlite3_commit_hook(db, { _ in SQLiteDatabase.commits.add(1, ordering: .relaxed); return 0 }, nil)
        if !readOnly {
            switch durability {
            case .crashSafe:
                try execute("PRAGMA journal_mode=WAL")
                try execute("PRAGMA synchronous=FULL")
            case .runOnly:
                break   // in memory (its journal too: a transaction still rolls back)
            }
        }
    }

    /// See `StateDurability`.
    package let durability: StateDurability

    /// A `.runOnly` database written whole to its file (replacing it), for a reader of its
    /// own (a run's results read after the run, a kept state folder); the connection goes on in
    /// memory, and a later `writeOut` writes it again.
    package func writeOut() throws {
        guard durability == .runOnly, path != ":memory:" else { return }
        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(path + suffix) }
        try execute("VACUUM INTO ?", [.text(path)])
    }

    /// Runs `body` with its commits not synced each (`synchronous=NORMAL` under WAL: a crash or
    /// `kill -9` loses none of them; a power cut may lose those since the last synced commit),
    /// then syncs each commit again. A `.runOnly` connection never syncs: nothing to change.
    package func withoutSyncEachCommit<T>(_ body: () throws -> T) rethrows -> T {
        guard durability == .crashSafe else { return try body() }
        _ = try? execute("PRAGMA synchronous=NORMAL")
        defer { _ = try? execute("PRAGMA synchronous=FULL") }
        return try body()
    }

    /// Opens `path` for writing; a file that is not a usable database (corrupt, random bytes,
    /// emptied to 0 bytes behind our back) is moved aside — `onWarning` names both paths — and a
    /// fresh one is created, so that nothing waits on it. `salvage` gets the old file's path to
    /// read what it still can.
    package static func openRepairing(path: String, busyTimeoutMilliseconds: Int32 = 250, durability: StateDurability = .crashSafe,
                                      onWarning: (String) -> Void, salvage: (String) -> Void = { _ in }) throws -> SQLiteDatabase {
        // A run-only database starts empty in memory: nothing on disk is read, or repaired.
        if durability == .runOnly { return try SQLiteDatabase(path: path, durability: .runOnly) }
        let manager = FileManager.default
        var problem: String?
        if let size = (try? manager.attributesOfItem(atPath: path))?[.size] as? Int, size == 0,
           !manager.fileExists(atPath: path + "-wal") {
            problem = "is empty (0 bytes): emptied outside adplayerd; whatever it held is gone"
        } else if manager.fileExists(atPath: path) {
            do {
                let database = try SQLiteDatabase(path: path, busyTimeoutMilliseconds: busyTimeoutMilliseconds, durability: durability)
                let check = try database.execute("PRAGMA quick_check").first?.first?.text ?? "?"
                if check == "ok" {
                    // In WAL mode a writer's lock (an operator's `BEGIN EXCLUSIVE`, a backup)
                    // lets readers in: the check passes and the first write would wait, then
                    // fail. A write lock asked for now, within the short timeout, finds it.
                    try database.execute("BEGIN IMMEDIATE")
                    try database.execute("ROLLBACK")
                    database.setBusyTimeout(5000)
                    return database
                }
                problem = "failed its integrity check (\(check.prefix(200)))"
            } catch let error as SQLiteError where error.isBusy {
                // Busy or locked is "try again", never damage: the file is left as it is.
                throw SQLiteError(code: error.code, message: "\(path) is locked by another process (\(error.message)); it is not damaged and "
                                  + "was left as it is")
            } catch {
                problem = "is not a usable database (\(error))"
            }
        }
        guard let problem else { return try SQLiteDatabase(path: path, durability: durability) }
        let stamp = ISO8601DateFormatter().string(from: Date()).replacingOccurrences(of: ":", with: "")
        let aside = "\(path).bad-\(stamp)"
        do {
            try manager.moveItem(atPath: path, toPath: aside)
            for suffix in ["-wal", "-shm"] where manager.fileExists(atPath: path + suffix) {
                try? manager.moveItem(atPath: path + suffix, toPath: aside + suffix)
            }
        } catch {
            throw SQLiteError(code: -1, message: "\(path) \(problem), and it cannot be moved aside: \(error.localizedDescription)")
        }
        // Whoever opens a damaged file first reads back what it still holds, for every owner of
        // the file (the state's queue and positions, the outbox's beacons, proof of play): the
        // first to open it is not always the one whose rows matter most.
        let fresh = try SQLiteDatabase(path: path, durability: durability)
        let summary = fresh.readBack(from: aside)
        // Said to the file's owners too (the ledger starts a new chain segment that names it).
        _ = try? fresh.execute("CREATE TABLE IF NOT EXISTS repairs (at REAL NOT NULL, aside TEXT NOT NULL, summary TEXT NOT NULL, seen INTEGER NOT NULL DEFAULT 0)")
        _ = try? fresh.execute("INSERT INTO repairs (at, aside, summary) VALUES (?, ?, ?)",
                               [.real(Date().timeIntervalSince1970), .text(aside), .text("\(problem); \(summary)")])
        onWarning("\(path) \(problem); moved it to \(aside) and started a new one; \(summary)")
        salvage(aside)
        return fresh
    }

    /// Copies every table that can still be read from the database at `aside` into this one
    /// (its schema as it was; rows up to any damage, in rowid order, when a whole-table copy
    /// fails); a sentence saying what was read back and what was lost.
    func readBack(from aside: String) -> String {
        do {
            try execute("ATTACH DATABASE ? AS salvaged", [.text(aside)])
        } catch {
            return "nothing could be read back (\(error))"
        }
        defer { _ = try? execute("DETACH DATABASE salvaged") }
        let tables: [[SQLiteValue]]
        do {
            tables = try execute("SELECT name, sql FROM salvaged.sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        } catch {
            return "nothing could be read back: its list of tables is damaged (\(error))"
        }
        var read: [String] = [], lost: [String] = []
        for row in tables {
            guard let name = row[0].text, let sql = row[1].text else { continue }
            let quoted = "\"" + name.replacingOccurrences(of: "\"", with: "\"\"") + "\""
            _ = try? execute(sql)   // the table as it was (an owner's CREATE IF NOT EXISTS then finds it)
            do {
                try execute("INSERT OR IGNORE INTO main.\(quoted) SELECT * FROM salvaged.\(quoted)")
                read.append("\(name): \(changes) rows")
            } catch {
                // Row by row up to the damage.
                var copied = 0, last: Int64 = .min
                while let rows = try? execute("SELECT rowid FROM salvaged.\(quoted) WHERE rowid > ? ORDER BY rowid LIMIT 1000", [.integer(last)]),
                      !rows.isEmpty {
                    for rowid in rows.compactMap({ $0.first?.integer }) {
                        if (try? execute("INSERT OR IGNORE INTO main.\(quoted) SELECT * FROM salvaged.\(quoted) WHERE rowid = ?", [.integer(rowid)])) != nil {
                            copied += 1
                        }
                        last = rowid
                    }
                }
                lost.append("\(name): \(copied) rows read back before the damage (\(error))")
            }
        }
        let summary = "read back " + (read.isEmpty ? "nothing whole" : read.joined(separator: ", "))
        return lost.isEmpty ? summary : summary + "; in part: " + lost.joined(separator: ", ")
    }

    /// Rows the last statement changed.
    var changes: Int { Int(sqlite3_changes(db)) }

    func setBusyTimeout(_ milliseconds: Int32) { sqlite3_busy_timeout(db, milliseconds) }

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close(db)
    }

    /// Prepared statements by their SQL, kept for the next use (the outbox runs the same few
    /// statements a few times per beacon: parsing them each time was a third of its SQLite
    /// time). Bounded: SQL built with a varying shape is prepared, used and finalized.
    private var statements: [String: OpaquePointer] = [:]
    private static let maxStatements = 64

    @discardableResult
    package func execute(_ sql: String, _ parameters: [SQLiteValue] = []) throws -> [[SQLiteValue]] {
        assert(owner.withLock { $0.map { pthread_equal($0, pthread_self()) != 0 } ?? true },
               "SQLite connection \(path) used off the thread it is confined to")
        if let code = injectedWriteFailure, !sql.hasPrefix("SELECT"), !sql.hasPrefix("PRAGMA") {
            throw SQLiteError(code: code, message: "database or disk is full (injected)")
        }
        var statement = statements[sql]
        let cached = statement != nil
        if !cached { try check(sqlite3_prepare_v2(db, sql, -1, &statement, nil)) }
        defer {
            if cached {
                sqlite3_reset(statement)
                sqlite3_clear_bindings(statement)
            } else if statements.count < Self.maxStatements, let statement {
                sqlite3_reset(statement)
                sqlite3_clear_bindings(statement)
                statements[sql] = statement
            } else {
                sqlite3_finalize(statement)
            }
        }
        for (index, value) in parameters.enumerated() {
            let i = Int32(index + 1)
            switch value {
            case .null: try check(sqlite3_bind_null(statement, i))
            case .integer(let v): try check(sqlite3_bind_int64(statement, i, v))
            case .real(let v): try check(sqlite3_bind_double(statement, i, v))
            case .text(let v): try check(sqlite3_bind_text(statement, i, v, -1, csqlite_transient()))
            }
        }
        var rows: [[SQLiteValue]] = []
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { break }
            guard rc == SQLITE_ROW else { try check(rc); break }
            rows.append((0..<sqlite3_column_count(statement)).map { column in
                switch sqlite3_column_type(statement, column) {
                case SQLITE_INTEGER: .integer(sqlite3_column_int64(statement, column))
                case SQLITE_FLOAT: .real(sqlite3_column_double(statement, column))
                case SQLITE_TEXT: .text(String(cString: sqlite3_column_text(statement, column)))
                default: .null
                }
            })
        }
        return rows
    }

    package func transaction<T>(_ body: () throws -> T) throws -> T {
        try execute("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try execute("COMMIT")
            return result
        } catch {
            _ = try? execute("ROLLBACK")
            throw error
        }
    }

    private func check(_ rc: Int32) throws {
        guard rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE else {
            throw SQLiteError(code: rc, message: String(cString: sqlite3_errmsg(db)))
        }
    }
}
