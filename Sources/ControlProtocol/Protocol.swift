// The protocol's users get `ISO8601`, `CSV` and `Seconds` with it.
@_exported import BoundsCore
#if canImport(Glibc)
import Glibc
#endif

/// The control protocol (docs/protocol.md) in one place, for the daemon and its clients: the
/// version, every command with its arguments (decoded and validated here, once, for every
/// command — `subscribe` included), the replies, the error codes. The events are in
/// `Events.swift`. In the manner of MPD's `AllCommands.cxx`: one table (`CommandTable.swift`),
/// sorted by name, a row per command with its typed arguments, permission tier, venue and
/// `adplayerctl` form, how its request is built from its checked arguments and sent again
/// (`encode`); adding a command touches its row, `Request`'s case and its handler.
public enum ControlProtocol {
    public static let version = 2
    /// A request line longer than this is refused (`line_too_long`) and the connection closed.
    public static let maxLineBytes = 1024 * 1024
    /// Most paths in one `queue`.
    public static let maxQueuePaths = 1000
    /// Most entries in the queue (`QueueEntry.maxEntries` says the same).
    public static let maxQueueEntries = 10_000
    /// Most names in one `subscribe`.
    public static let maxSubscriptions = 64
    /// Most log lines `logs` returns (and the daemon keeps).
    public static let maxLogLines = 1000
    /// The ad kinds as the protocol names them (`kind` fields, `metrics`): the runtime's
    /// `AdKind.protocolName`, checked equal by a test (this module knows no runtime).
    public static let adKinds = ["overlay", "pause", "postroll", "preroll", "midroll", "squeezeback", "screensaver"]
}

/// What a program matches in an error reply.
public enum ErrorCode: String, CaseIterable, Sendable {
    case malformed
    case unknownCommand = "unknown_command"
    case badArgs = "bad_args"
    case notFound = "not_found"
    case notAFile = "not_a_file"
    case notReadable = "not_readable"
    case tooLarge = "too_large"
    case badName = "bad_name"
    case outsideLibrary = "outside_library"
    case noLibrary = "no_library"
    case notPlaying = "not_playing"
    case emptyQueue = "empty_queue"
    case queueFull = "queue_full"
    case adPlaying = "ad_playing"
    case noPrevious = "no_previous"
    case noAd = "no_ad"
    case notSkippable = "not_skippable"
    case player
    case unavailable
    case lineTooLong = "line_too_long"
    case forbidden
    case internalError = "internal"
}

/// A control-protocol error: a code a program matches, a sentence a person reads.
public struct ControlError: Error, Sendable, Equatable, CustomStringConvertible {
    public let code: ErrorCode
    public let message: String

    public init(_ code: ErrorCode, _ message: String) {
        self.code = code
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(message)" }

    public static func malformed(_ message: String) -> ControlError { ControlError(.malformed, message) }
    public static func badArgs(_ message: String) -> ControlError { ControlError(.badArgs, message) }
}

/// A seek: to a content time, or by an offset.
public enum SeekTarget: Sendable, Equatable {
    case to(Double)
    case by(Double)
}

/// A volume change: to a level (0–100), or by an amount (±).
public enum VolumeChange: Sendable, Equatable {
    case to(Double)
    case by(Double)
}

/// What the queue does at the end of an episode: `one` plays it again (each pass another
/// item, R14), `all` starts the queue over at its end.
public enum RepeatMode: String, Sendable, Equatable, CaseIterable {
    case off, one, all
}

/// `display`: the display's power held on or off until the next boundary of the operating
/// hours (`display-hours`), or back to the schedule.
public enum DisplayMode: String, Sendable, Equatable, CaseIterable {
    case on, off, auto
}

/// A track of the item: one by mpv's id, mpv's own choice (by the language preferences), or
/// none (subtitles).
public enum TrackChoice: Sendable, Equatable {
    case id(Int)
    case auto
    case off
}

/// A decoded, validated request. Every value in it has passed its bounds.
public enum Request: Sendable, Equatable {
    /// `queue`: with the queue's paths (otherwise its length only: a reply never carries a
    /// 10,000-entry queue unasked).
    case status(queue: Bool)
    case open(path: String, contentID: String?, start: Double?)
    case queue(paths: [String])
    case play, pause, toggle
    case seek(SeekTarget)
    case speed(Double)
    case next, previous, stop, clear
    case loop(Bool)
    case background, foreground
    case closeAd
    /// The viewer skips the linear ad that plays, past its skip offset.
    case skip
    /// Which events this client gets: names or prefixes (`ad.*`); nil: all.
    case subscribe(events: [String]?)
    case metrics
    /// Proof of play, oldest first: the ads shown since a wall-clock time (seconds since 1970),
    /// and/or after the play numbered `afterRow` (each play's `row`: a cursor that only grows);
    /// at most `limit` (`newest`: the last `limit` of them, still oldest first).
    /// `afterChain`: the plays closed after that chain position, in chain order (a feed that
    /// publishes each play once it closes, with its link).
    case plays(since: Double?, afterRow: Int64? = nil, limit: Int? = nil, newest: Bool = false, afterChain: Int64? = nil)
    case version
    case volume(VolumeChange)
    /// nil: toggle.
    case mute(Bool?)
    case setRepeat(RepeatMode)
    case shuffle(Bool)
    /// Queue editing, by 0-based index.
    case remove(index: Int)
    case move(from: Int, to: Int)
    case jump(index: Int)
    case tracks
    case audioTrack(TrackChoice)
    case subtitleTrack(TrackChoice)
    case audioDevices
    /// `inline`: the PNG in the reply (base64), for a client that cannot read the daemon's files.
    case screenshot(withAds: Bool, inline: Bool = false)
    /// The box's verdict on itself (docs/web.md): ok, degraded or failing, check by check.
    case health
    /// The daemon's last log lines (a bounded ring), oldest first.
    case logs(lines: Int)
    /// A label on the screen (box, address, a short code) for `seconds`: which screen is which.
    case identify(seconds: Double)
    /// Reads the configuration file again, as SIGHUP does.
    case reload
    /// The display's power (operating hours, HDMI-CEC): an override, or the schedule again.
    case display(DisplayMode)
    /// What the schedule plays and why, its next change (`status.schedule`).
    case schedule
    /// The schedule rules again (after a person's commands overrode it until its next boundary).
    case scheduleAuto
    /// A file or a schedule's playlist, now, above the schedule: for `seconds` (nil: until
    /// `takeover end`), at `priority` (nil: above every slot). `by`: who, for the audit (the
    /// client fills it; the page and the bridge put their own).
    case takeover(target: String, seconds: Double?, priority: Int?, by: String?)
    case takeoverEnd(by: String?)

    /// The request with `who` as its auditor, for the commands that are audited (takeover):
    /// what the page and the bridge say of the person or topic a command came from.
    public func audited(by who: String) -> Request {
        switch self {
        case .takeover(let target, let seconds, let priority, _): .takeover(target: target, seconds: seconds, priority: priority, by: String(who.prefix(320)))
        case .takeoverEnd: .takeoverEnd(by: String(who.prefix(320)))
        default: self
        }
    }

    /// Who the request says sent it, for an audit (`takeover`, `takeover-end`); nil otherwise.
    public var auditedBy: String? {
        switch self {
        case .takeover(_, _, _, let by): by
        case .takeoverEnd(let by): by
        default: nil
        }
    }

    /// The queue entry the request names (`remove`, `jump`), nil for the others.
    public var entryIndex: Int? {
        switch self {
        case .remove(let index), .jump(let index): index
        default: nil
        }
    }
}

/// A request line as it arrived: its id (echoed in the reply) and what it asks.
public struct Envelope: Sendable, Equatable {
    public let id: JSONValue
    public let request: Request
}

public enum Commands {
    private static let byName: [String: Command] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })
    private static let byWord: [String: Command] = Dictionary(uniqueKeysWithValues: all.map { ($0.commandLine.word, $0) })

    /// The row of a command by its protocol name.
    public static func named(_ name: String) -> Command? { byName[name] }

    /// The row of a request (every request has one: `ProtocolTests` round-trips each): the row
    /// whose `encode` takes it, found once for each of `Request`'s cases and kept.
    public static func row(of request: Request) -> Command? {
        let label = Mirror(reflecting: request).children.first?.label ?? String(describing: request)
        if let known = rowsByCase.withLock({ $0[label] }) { return known }
        guard let found = all.first(where: { $0.encode(request) != nil }) else { return nil }
        rowsByCase.withLock { $0[label] = found }
        return found
    }

    private static let rowsByCase = Locked<[String: Command]>([:])

    /// The row `adplayerctl` runs for its word (`events` is `subscribe`).
    public static func commandLine(_ word: String) -> Command? { byWord[word] }

    /// Why a client of `tier` may not make `request`, or nil if it may.
    public static func refusal(_ request: Request, tier: Tier) -> ControlError? {
        guard let command = row(of: request) else { return ControlError(.internalError, "\(request.name) has no row in the command table") }
        guard command.tier > tier else { return nil }
        return ControlError(.forbidden, "\(command.name) needs the \(command.tier) tier; this client has \(tier) (socket-group-tier)")
    }

    /// Decodes one request: the id (absent, null, or an integer that fits in 64 bits), the
    /// command, its arguments — each checked by its kind. A failure carries the id when it
    /// could be read, for the reply.
    public static func decode(_ line: JSONValue) -> Result<Envelope, Failure> {
        guard let object = line.object else { return .failure(Failure(id: .null, error: .malformed("a request is a JSON object"))) }
        let id = object["id"] ?? .null
        guard id == .null || id.integer != nil else {
            return .failure(Failure(id: .null, error: .malformed("id must be an integer that fits in 64 bits")))
        }
        guard let name = object["cmd"]?.string else { return .failure(Failure(id: id, error: .malformed("cmd must be a string"))) }
        let args = object["args"] ?? .object([:])
        guard let fields = args.object else { return .failure(Failure(id: id, error: .malformed("args must be an object"))) }
        guard let command = byName[name] else {
            return .failure(Failure(id: id, error: ControlError(.unknownCommand, "\"\(name.prefix(64))\" is not a command (\(all.map(\.name).joined(separator: ", ")))")))
        }
        do {
            let values = try ArgumentDecoder(command: command, fields: fields).decode()
            return .success(Envelope(id: id, request: try command.build(values)))
        } catch {
            return .failure(Failure(id: id, error: error))
        }
    }

    public struct Failure: Error, Sendable, Equatable {
        public let id: JSONValue
        public let error: ControlError

        public init(id: JSONValue, error: ControlError) {
            self.id = id
            self.error = error
        }
    }

    /// `adplayerctl`'s words as a request: the command's row parses them.
    public static func parse(commandLine input: CommandLineInput, word: String) throws(UsageError) -> Request {
        guard let command = byWord[word] else { throw UsageError("unknown command \(word.prefix(64))") }
        let allowed = Set(command.commandLine.options.keys).union(commonOptions.keys)
        if let stray = input.arguments.options.first(where: { !allowed.contains($0.name) }) {
            throw UsageError("\(word) takes no option \(stray.source)")
        }
        do {
            return try command.commandLine.parse(input)
        } catch let error as UsageError {
            throw error
        } catch {
            throw UsageError("\(error)")
        }
    }

    /// The options every `adplayerctl` command takes.
    public static let commonOptions: [String: CommandLineArguments.Kind] = ["socket": .value, "json": .flag, "help": .flag, "version": .flag]

    /// Every option of `adplayerctl`: the common ones and each command's.
    public static var commandLineOptions: [String: CommandLineArguments.Kind] {
        all.reduce(into: commonOptions) { options, command in options.merge(command.commandLine.options) { first, _ in first } }
    }

    /// `adplayerctl`'s list of commands, one row each, from the table.
    public static var commandLineHelp: String {
        var lines: [String] = []
        for command in all.sorted(by: { $0.commandLine.word < $1.commandLine.word }) {
            let form = command.commandLine
            let help = form.help.split(separator: "\n").map(String.init)
            let head = "  " + form.synopsis
            if head.count <= 30 {
                lines.append(head + String(repeating: " ", count: 31 - head.count) + (help.first ?? ""))
            } else {
                lines.append(head)
                lines.append(String(repeating: " ", count: 31) + (help.first ?? ""))
            }
            for more in help.dropFirst() { lines.append(String(repeating: " ", count: 31) + more) }
        }
        return lines.joined(separator: "\n")
    }
}

extension Request {
    /// The command's name: its row's (`Commands.row(of:)`).
    public var name: String { Commands.row(of: self)?.name ?? "?" }

    /// Its arguments as sent (a client's side of `Commands.decode`): its row's `encode`.
    public var arguments: [String: JSONValue] { Commands.row(of: self)?.encode(self) ?? [:] }

    /// The request line for `id`.
    public func json(id: Int64) -> JSONValue {
        let args = arguments
        return args.isEmpty ? ["id": .int(id), "cmd": .string(name)] : ["id": .int(id), "cmd": .string(name), "args": .object(args)]
    }
}

/// Replies (docs/protocol.md): `{"id", "ok": true, "result"}` or `{"id", "ok": false, "error": {code, message}}`.
public enum Reply {
    public static func ok(_ id: JSONValue, _ result: JSONValue) -> JSONValue { ["id": id, "ok": true, "result": result] }

    public static func error(_ id: JSONValue, _ error: ControlError) -> JSONValue {
        ["id": id, "ok": false, "error": ["code": .string(error.code.rawValue), "message": .string(error.message)]]
    }
}

/// Checks a request's `args` against its command's parameters, each value by its kind.
struct ArgumentDecoder {
    let command: Command
    let fields: [String: JSONValue]

    func decode() throws(ControlError) -> ArgumentValues {
        let parameters = command.parameters
        let known = Set(parameters.all.map(\.name))
        // Arguments the command does not take are refused: a typo is an error, not a silent default.
        if let unknown = fields.keys.sorted().first(where: { !known.contains($0) }) {
            throw .badArgs("\(command.name) takes no argument \"\(unknown.prefix(64))\""
                           + (known.isEmpty ? "" : " (it takes \(parameters.signature))"))
        }
        // null is the same as absent.
        let given = fields.filter { $0.value != .null }
        if case .oneOf(let choices) = parameters, choices.filter({ given[$0.name] != nil }).count != 1 {
            throw .badArgs("\(command.name) needs one of " + choices.map { "{\"\($0.name)\": \($0.kind.summary)}" }.joined(separator: " or "))
        }
        var values: [String: ArgumentValue] = [:]
        for argument in parameters.all {
            guard let value = given[argument.name] else {
                if case .fields = parameters, !argument.optional {
                    throw .badArgs("\(command.name) needs {\"\(argument.name)\": \(argument.kind.summary)}")
                }
                continue
            }
            values[argument.name] = try check(value, argument)
        }
        return ArgumentValues(command: command.name, values: values)
    }

    private func fail(_ argument: Argument) -> ControlError { .badArgs("\(command.name).\(argument.name) must be \(argument.kind.summary)") }

    private func check(_ value: JSONValue, _ argument: Argument) throws(ControlError) -> ArgumentValue {
        let field = "\(command.name).\(argument.name)"
        switch argument.kind {
        case .bool:
            guard let on = value.bool else { throw fail(argument) }
            return .bool(on)
        case .number(let range):
            guard let number = value.number, number.isFinite, range.contains(number) else { throw fail(argument) }
            return .number(number)
        case .seconds(let bounds):
            guard let number = value.number else { throw .badArgs("\(field) must be a number of seconds") }
            do {
                return .number(try Seconds.check(number, bounds, field: field))
            } catch {
                throw .badArgs(error.description)
            }
        case .instant:
            if let seconds = value.number, seconds.isFinite, abs(seconds) < 1e12 { return .number(seconds) }
            if let text = value.string, let seconds = ISO8601.parse(text) { return .number(seconds) }
            throw fail(argument)
        case .path:
            guard let path = value.string else { throw fail(argument) }
            try Self.checkPath(path, field)
            return .text(path)
        case .paths(let max):
            guard let list = value.array, !list.isEmpty, list.count <= max else { throw fail(argument) }
            var paths: [String] = []
            paths.reserveCapacity(list.count)
            for (index, item) in list.enumerated() {
                guard let path = item.string else { throw .badArgs("\(field)[\(index)] must be a string") }
                try Self.checkPath(path, "\(field)[\(index)]")
                paths.append(path)
            }
            return .texts(paths)
        case .contentID:
            guard let id = value.string, !id.isEmpty, id.count <= 256,
                  !id.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else { throw fail(argument) }
            return .text(id)
        case .eventNames:
            guard let list = value.array, list.count <= ControlProtocol.maxSubscriptions else { throw fail(argument) }
            var names: [String] = []
            for item in list {
                guard let name = item.string, !name.isEmpty, name.utf8.count <= 64 else { throw fail(argument) }
                names.append(name)
            }
            return .texts(names)
        case .index:
            guard let index = value.integer, index >= 0, index < Int64(ControlProtocol.maxQueueEntries) else { throw fail(argument) }
            return .index(Int(index))
        case .track(let off):
            if let id = value.integer, id >= 1, id <= 10_000 { return .track(.id(Int(id))) }
            switch value.string {
            case "auto": return .track(.auto)
            case "off" where off: return .track(.off)
            default: throw fail(argument)
            }
        case .choice(let words):
            guard let word = value.string, words.contains(word) else { throw fail(argument) }
            return .text(word)
        case .integer(let range):
            guard let number = value.integer, range.contains(number) else { throw fail(argument) }
            return .integer(number)
        }
    }

    /// An absolute path of at most 4 KiB, no NUL.
    static func checkPath(_ value: String, _ field: String) throws(ControlError) {
        guard value.hasPrefix("/") else { throw .badArgs("\(field): \(value.prefix(200)): an absolute path is needed") }
        guard value.utf8.count <= 4096, !value.utf8.contains(0) else { throw .badArgs("\(field): not a path of at most 4096 bytes") }
    }
}
