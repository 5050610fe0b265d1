import CSQLite
import Foundation

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
}

/// One SQLite connection. Not thread-safe by itself: its owner serializes every call
/// (the outbox holds it behind its lock).
final class SQLiteDatabase {
    private var db: OpaquePointer?

    /// Opens (creating if needed) `path` in WAL mode with full fsync: a row that
    /// `execute` returned from is on disk, also across `kill -9` and power loss.
    init(path: String) throws {
        let rc = sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nil)
        guard rc == SQLITE_OK else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "cannot open"
            sqlite3_close(db)
            throw SQLiteError(code: rc, message: "\(path): \(message)")
        }
        sqlite3_busy_timeout(db, 5000)
        try execute("PRAGMA journal_mode=WAL")
        try execute("PRAGMA synchronous=FULL")
    }

    deinit { sqlite3_close(db) }

    @discardableResult
    func execute(_ sql: String, _ parameters: [SQLiteValue] = []) throws -> [[SQLiteValue]] {
        var statement: OpaquePointer?
        try check(sqlite3_prepare_v2(db, sql, -1, &statement, nil))
        defer { sqlite3_finalize(statement) }
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

    func transaction<T>(_ body: () throws -> T) throws -> T {
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
