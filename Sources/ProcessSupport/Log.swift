import Bounds
import CSystem
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// syslog's priorities, as journald reads them from a `<N>` prefix on each stderr line.
public enum LogLevel: Int, Comparable, Sendable, CaseIterable {
    case error = 3, warning = 4, notice = 5, info = 6, debug = 7

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }

    public var name: String {
        switch self {
        case .error: "error"
        case .warning: "warning"
        case .notice: "notice"
        case .info: "info"
        case .debug: "debug"
        }
    }

    public init?(name: String) {
        guard let level = Self.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
        self = level
    }
}

/// Messages a program can find in the journal by id (`journalctl MESSAGE_ID=…`).
public enum LogMessageID: String, Sendable {
    /// An ad went on screen (fields AD_ID, AD_KIND, CONTENT_ID, AD_INSTANCE).
    case adShown = "4f3a1c2b8d9e4e6fa1b2c3d4e5f60718"
    /// An ad could not be loaded or shown (fields AD_ID, AD_KIND, CONTENT_ID, AD_ERROR, VAST_ERROR).
    case adError = "7b6c5d4e3f2a41b0c9d8e7f6a5b4c3d2"
    /// A tracking beacon was dropped (fields BEACON_URL, DROP_REASON).
    case beaconDropped = "a1e2d3c4b5a64f78e9d0c1b2a3f4e5d6"
}

/// The one logger: one line per message on stderr (`StandardError`: `<N>` syslog priority first
/// for the journal's stream, `error: `/`warning: ` for a terminal or a pipe), newlines and control characters escaped so that no input can forge a line.
/// When stderr is the journal (`$JOURNAL_STREAM`), messages go through `sd_journal_send`
/// instead, with their priority, and events with a `MESSAGE_ID` and fields of their own
/// (`log.event`).
/// Lines are written by a thread of their own, so that a slow stderr (a pipe nobody reads)
/// never holds up the player's loop; past `maxQueued` lines waiting, new ones are counted
/// and dropped, and the count is logged when the writer catches up.
///
/// Threading: any thread; `level` may change at any time (SIGHUP).
public final class Logger: Sendable {
    private struct State {
        var level: LogLevel
        var queued = 0
        var dropped = 0
    }

    private let state: Locked<State>
    /// The last lines logged, for `logs` (a technician's view without journalctl).
    private let ring = Locked(LogRing())
    private let writer = Workers(name: "adplayerd-log")
    private let maxQueued = 10_000
    private let journal: Bool
    /// Tests: every accepted line, as it is logged.
    private let tap: (@Sendable (LogLevel, String) -> Void)?
    private let echo: Bool

    public init(level: LogLevel) {
        state = Locked(State(level: level))
        journal = StandardError.isJournal
        tap = nil
        echo = true
    }

    /// Tests: a logger that also hands every line it accepts to `tap`. Not `echo`ing: the
    /// lines go to `tap` alone (a simulation keeps them in its timeline, not on stderr).
    package init(level: LogLevel, echo: Bool = true, tap: @escaping @Sendable (LogLevel, String) -> Void) {
        state = Locked(State(level: level))
        journal = StandardError.isJournal
        self.tap = tap
        self.echo = echo
    }

    public var level: LogLevel {
        get { state.withLock { $0.level } }
        set { state.withLock { $0.level = newValue } }
    }

    public func error(_ message: String) { log(.error, message) }
    public func warning(_ message: String) { log(.warning, message) }
    public func notice(_ message: String) { log(.notice, message) }
    public func info(_ message: String) { log(.info, message) }
    public func debug(_ message: String) { log(.debug, message) }

    public func log(_ level: LogLevel, _ message: String) {
        event(level, message, id: nil, fields: [:])
    }

    /// A message that is also an event: in the journal with its `MESSAGE_ID` and `fields`
    /// (names in capitals, `AD_ID`); on a plain stderr, the message alone.
    public func event(_ level: LogLevel, _ message: String, id: LogMessageID?, fields: [String: String]) {
        let accepted = state.withLock { state -> Bool in
            guard level <= state.level else { return false }
            guard state.queued < maxQueued else {
                state.dropped += 1
                return false
            }
            state.queued += 1
            return true
        }
        guard accepted else { return }
        tap?(level, message)
        guard echo else {
            state.withLock { $0.queued -= 1 }
            return
        }
        let escaped = Self.escape(message)
        ring.withLock { $0.append(LogLine(wall: Date().timeIntervalSince1970, level: level, text: escaped)) }
        let journal = self.journal
        writer.execute { [state] in
            let dropped = state.withLock { state -> Int in
                state.queued -= 1
                defer { state.dropped = 0 }
                return state.dropped
            }
            // A journal that refuses a message (gone, full): the line goes to stderr instead.
            if journal, dropped == 0 || Self.journalSend(.warning, "logger: \(dropped) messages were dropped (the journal too slow)", nil, [:]),
               Self.journalSend(level, escaped, id, fields) {
                return
            }
            if dropped > 0 { StandardError.write(priority: LogLevel.warning.rawValue, "logger: \(dropped) lines were dropped (stderr too slow)") }
            StandardError.write(priority: level.rawValue, escaped)
        }
    }

    /// Whether the journal took the message.
    private static func journalSend(_ level: LogLevel, _ message: String, _ id: LogMessageID?, _ fields: [String: String]) -> Bool {
        var entries = ["MESSAGE=\(message)", "PRIORITY=\(level.rawValue)", "SYSLOG_IDENTIFIER=adplayerd"]
        if let id { entries.append("MESSAGE_ID=\(id.rawValue)") }
        for (name, value) in fields.sorted(by: { $0.key < $1.key }).prefix(24)
        where !name.isEmpty && name.allSatisfy({ ($0.isUppercase && $0.isASCII) || $0.isNumber || $0 == "_" }) {
            entries.append("\(name)=\(escape(String(value.prefix(4096))))")
        }
        var pointers = entries.map { strdup($0) }
        defer { pointers.forEach { free($0) } }
        return pointers.withUnsafeMutableBufferPointer { buffer in
            buffer.withMemoryRebound(to: UnsafePointer<CChar>?.self) { fields in
                csystem_journal_send(fields.baseAddress, Int32(fields.count)) >= 0
            }
        }
    }

    /// The last `count` lines logged (at most `LogRing.capacity`), oldest first.
    public func recent(_ count: Int) -> [LogLine] { ring.withLock { $0.last(count) } }

    /// Waits until every line logged so far is written (at exit).
    public func flush() {
        let done = Handover<Bool>()
        writer.execute { done.fulfil(true) }
        _ = done.wait(timeout: 2)
    }

    /// One line: `\n`, `\r`, other control characters and backslashes written as escapes.
    public static func escape(_ text: String) -> String { OneLine.escape(text) }
}

/// A line of the log as `logs` returns it: when, how grave, what (escaped to one line, at most
/// `LogRing.maxBytes`).
public struct LogLine: Sendable, Equatable {
    public let wall: Double
    public let level: LogLevel
    public let text: String
}

/// The last `capacity` lines, in a ring: memory bounded whatever is logged (1000 lines of at
/// most 2 KiB: 2 MiB at worst).
struct LogRing {
    static let capacity = 1000
    static let maxBytes = 2048
    private var lines: [LogLine] = []
    private var next = 0

    mutating func append(_ line: LogLine) {
        var line = line
        if line.text.utf8.count > Self.maxBytes {
            line = LogLine(wall: line.wall, level: line.level, text: String(decoding: line.text.utf8.prefix(Self.maxBytes), as: UTF8.self) + "…")
        }
        if lines.count < Self.capacity {
            lines.append(line)
        } else {
            lines[next] = line
            next = (next + 1) % Self.capacity
        }
    }

    func last(_ count: Int) -> [LogLine] {
        let ordered = Array(lines[next...] + lines[..<next])
        return Array(ordered.suffix(max(0, count)))
    }
}
