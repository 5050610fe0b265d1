import AdRuntime
import Foundation

/// The control protocol (docs/protocol.md) in one place, for the daemon and its clients: the
/// version, every command with its arguments (decoded and validated here, once, for every
/// command — `subscribe` included), the replies, the error codes. The events are in
/// `Events.swift`. In the manner of MPD's `AllCommands.cxx`: one sorted table; adding a
/// command touches the table, `Request` and one handler.
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
    /// The ad kinds as the protocol names them (`kind` fields, `metrics`).
    public static let adKinds = AdKind.allCases.map(\.protocolName)
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
    case player
    case unavailable
    case lineTooLong = "line_too_long"
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
    /// Which events this client gets: names or prefixes (`ad.*`); nil: all.
    case subscribe(events: [String]?)
    case metrics
    /// Proof of play: the ads shown since a wall-clock time (seconds since 1970), oldest first.
    case plays(since: Double?)
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
    case screenshot(withAds: Bool)
}

/// One command of the table: its name, its arguments as docs/protocol.md writes them, and
/// how its arguments become a `Request`.
public struct Command: Sendable {
    public let name: String
    /// `path, content_id?, start?` — what `usage` and the documentation show.
    public let arguments: String
    let decode: @Sendable (Arguments) throws(ControlError) -> Request
}

/// A request line as it arrived: its id (echoed in the reply) and what it asks.
public struct Envelope: Sendable, Equatable {
    public let id: JSONValue
    public let request: Request
}

public enum Commands {
    /// The whole protocol, sorted by name.
    public static let all: [Command] = [
        Command(name: "audio-devices", arguments: "") { _ in .audioDevices },
        Command(name: "audio-track", arguments: "id") { args throws(ControlError) in .audioTrack(try args.track("id", off: false)) },
        Command(name: "background", arguments: "") { _ in .background },
        Command(name: "clear", arguments: "") { _ in .clear },
        Command(name: "close-ad", arguments: "") { _ in .closeAd },
        Command(name: "foreground", arguments: "") { _ in .foreground },
        Command(name: "jump", arguments: "index") { args throws(ControlError) in .jump(index: try args.index("index")) },
        Command(name: "loop", arguments: "on") { args throws(ControlError) in .loop(try args.bool("on")) },
        Command(name: "metrics", arguments: "") { _ in .metrics },
        Command(name: "move", arguments: "from, to") { args throws(ControlError) in .move(from: try args.index("from"), to: try args.index("to")) },
        Command(name: "mute", arguments: "on?") { args throws(ControlError) in .mute(args.has("on") ? try args.bool("on") : nil) },
        Command(name: "next", arguments: "") { _ in .next },
        Command(name: "open", arguments: "path, content_id?, start?") { args throws(ControlError) in
            .open(path: try args.path("path"), contentID: try args.contentID("content_id"),
                  start: try args.optionalSeconds("start", .position))
        },
        Command(name: "pause", arguments: "") { _ in .pause },
        Command(name: "play", arguments: "") { _ in .play },
        Command(name: "plays", arguments: "since?") { args throws(ControlError) in .plays(since: try args.instant("since")) },
        Command(name: "previous", arguments: "") { _ in .previous },
        Command(name: "queue", arguments: "paths") { args throws(ControlError) in .queue(paths: try args.paths("paths")) },
        Command(name: "remove", arguments: "index") { args throws(ControlError) in .remove(index: try args.index("index")) },
        Command(name: "repeat", arguments: "mode") { args throws(ControlError) in
            guard let text = args.fields["mode"]?.string, let mode = RepeatMode(rawValue: text) else {
                throw .badArgs("repeat needs {\"mode\": \"off\" | \"one\" | \"all\"}")
            }
            return .setRepeat(mode)
        },
        Command(name: "screenshot", arguments: "with_ads?") { args throws(ControlError) in
            .screenshot(withAds: args.has("with_ads") ? try args.bool("with_ads") : true)
        },
        Command(name: "shuffle", arguments: "on") { args throws(ControlError) in .shuffle(try args.bool("on")) },
        Command(name: "seek", arguments: "to | by") { args throws(ControlError) in
            switch (args.has("to"), args.has("by")) {
            case (true, false): return .seek(.to(try args.seconds("to", .position)))
            case (false, true): return .seek(.by(try args.seconds("by", .offset)))
            default: throw .badArgs("seek needs {\"to\": seconds} or {\"by\": seconds}")
            }
        },
        Command(name: "speed", arguments: "value") { args throws(ControlError) in
            let value = try args.number("value")
            guard value.isFinite, value >= 0.01, value <= 100 else { throw .badArgs("speed needs {\"value\": x} with 0.01 ≤ x ≤ 100") }
            return .speed(value)
        },
        Command(name: "status", arguments: "queue?") { args throws(ControlError) in .status(queue: args.has("queue") ? try args.bool("queue") : false) },
        Command(name: "stop", arguments: "") { _ in .stop },
        Command(name: "subscribe", arguments: "events?") { args throws(ControlError) in .subscribe(events: try args.eventNames("events")) },
        Command(name: "subtitle-track", arguments: "id") { args throws(ControlError) in .subtitleTrack(try args.track("id", off: true)) },
        Command(name: "toggle", arguments: "") { _ in .toggle },
        Command(name: "tracks", arguments: "") { _ in .tracks },
        Command(name: "version", arguments: "") { _ in .version },
        Command(name: "volume", arguments: "value | by") { args throws(ControlError) in
            switch (args.has("value"), args.has("by")) {
            case (true, false):
                let value = try args.number("value")
                guard value.isFinite, value >= 0, value <= 100 else { throw .badArgs("volume.value must be from 0 to 100") }
                return .volume(.to(value))
            case (false, true):
                let by = try args.number("by")
                guard by.isFinite, abs(by) <= 100 else { throw .badArgs("volume.by must be from -100 to 100") }
                return .volume(.by(by))
            default: throw .badArgs("volume needs {\"value\": 0…100} or {\"by\": ±n}")
            }
        },
    ]

    private static let byName: [String: Command] = Dictionary(uniqueKeysWithValues: all.map { ($0.name, $0) })

    /// Decodes one request: the id (absent, null, or an integer that fits in 64 bits), the
    /// command, its arguments. A failure carries the id when it could be read, for the reply.
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
            let arguments = Arguments(command: command.name, fields: fields)
            let request = try command.decode(arguments)
            try arguments.refuseUnknown(allowed: command.arguments)
            return .success(Envelope(id: id, request: request))
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
}

extension Request {
    /// The command's name in the table.
    public var name: String {
        switch self {
        case .status: "status"
        case .open: "open"
        case .queue: "queue"
        case .play: "play"
        case .pause: "pause"
        case .toggle: "toggle"
        case .seek: "seek"
        case .speed: "speed"
        case .next: "next"
        case .previous: "previous"
        case .stop: "stop"
        case .clear: "clear"
        case .loop: "loop"
        case .background: "background"
        case .foreground: "foreground"
        case .closeAd: "close-ad"
        case .subscribe: "subscribe"
        case .metrics: "metrics"
        case .plays: "plays"
        case .version: "version"
        case .volume: "volume"
        case .mute: "mute"
        case .setRepeat: "repeat"
        case .shuffle: "shuffle"
        case .remove: "remove"
        case .move: "move"
        case .jump: "jump"
        case .tracks: "tracks"
        case .audioTrack: "audio-track"
        case .subtitleTrack: "subtitle-track"
        case .audioDevices: "audio-devices"
        case .screenshot: "screenshot"
        }
    }

    /// Its arguments as sent (a client's side of `Commands.decode`).
    public var arguments: [String: JSONValue] {
        switch self {
        case .open(let path, let contentID, let start):
            var args: [String: JSONValue] = ["path": .string(path)]
            if let contentID { args["content_id"] = .string(contentID) }
            if let start { args["start"] = .number(start) }
            return args
        case .queue(let paths): return ["paths": .array(paths.map { .string($0) })]
        case .seek(.to(let seconds)): return ["to": .number(seconds)]
        case .seek(.by(let seconds)): return ["by": .number(seconds)]
        case .speed(let value): return ["value": .number(value)]
        case .loop(let on): return ["on": .bool(on)]
        case .subscribe(let events): return events.map { ["events": .array($0.map { .string($0) })] } ?? [:]
        case .plays(let since): return since.map { ["since": .number($0)] } ?? [:]
        case .volume(.to(let value)): return ["value": .number(value)]
        case .volume(.by(let by)): return ["by": .number(by)]
        case .mute(let on): return on.map { ["on": .bool($0)] } ?? [:]
        case .setRepeat(let mode): return ["mode": .string(mode.rawValue)]
        case .shuffle(let on): return ["on": .bool(on)]
        case .remove(let index), .jump(let index): return ["index": .int(Int64(index))]
        case .move(let from, let to): return ["from": .int(Int64(from)), "to": .int(Int64(to))]
        case .audioTrack(let choice), .subtitleTrack(let choice):
            switch choice {
            case .id(let id): return ["id": .int(Int64(id))]
            case .auto: return ["id": "auto"]
            case .off: return ["id": "off"]
            }
        case .screenshot(let withAds): return ["with_ads": .bool(withAds)]
        case .status(let queue): return queue ? ["queue": true] : [:]
        default: return [:]
        }
    }

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

/// A request's arguments, read and bounded. Each accessor names the command and the field.
public struct Arguments: Sendable {
    let command: String
    let fields: [String: JSONValue]

    func has(_ key: String) -> Bool { fields[key] != nil }

    private func fail(_ key: String, _ what: String) -> ControlError { .badArgs("\(command).\(key) must be \(what)") }

    func bool(_ key: String) throws(ControlError) -> Bool {
        guard let value = fields[key]?.bool else { throw fail(key, "true or false") }
        return value
    }

    func number(_ key: String) throws(ControlError) -> Double {
        guard let value = fields[key]?.number else { throw fail(key, "a number") }
        return value
    }

    func seconds(_ key: String, _ bounds: Seconds.Bounds) throws(ControlError) -> Double {
        guard let value = fields[key]?.number else { throw fail(key, "a number of seconds") }
        do {
            return try Seconds.check(value, bounds, field: "\(command).\(key)")
        } catch {
            throw .badArgs(error.description)
        }
    }

    func optionalSeconds(_ key: String, _ bounds: Seconds.Bounds) throws(ControlError) -> Double? {
        guard has(key), fields[key] != .null else { return nil }
        return try seconds(key, bounds)
    }

    /// An absolute path of at most 4 KiB, no NUL.
    func path(_ key: String) throws(ControlError) -> String {
        guard let value = fields[key]?.string else { throw .badArgs("\(command) needs {\"\(key)\": \"/a/file\"}") }
        try Self.checkPath(value, "\(command).\(key)")
        return value
    }

    static func checkPath(_ value: String, _ field: String) throws(ControlError) {
        guard value.hasPrefix("/") else { throw .badArgs("\(field): \(value.prefix(200)): an absolute path is needed") }
        guard value.utf8.count <= 4096, !value.utf8.contains(0) else { throw .badArgs("\(field): not a path of at most 4096 bytes") }
    }

    func paths(_ key: String) throws(ControlError) -> [String] {
        guard let list = fields[key]?.array, !list.isEmpty, list.count <= ControlProtocol.maxQueuePaths else {
            throw .badArgs("\(command) needs {\"\(key)\": [\"/a/file\", …]} with 1 to \(ControlProtocol.maxQueuePaths) paths")
        }
        var paths: [String] = []
        paths.reserveCapacity(list.count)
        for (index, value) in list.enumerated() {
            guard let path = value.string else { throw .badArgs("\(command).\(key)[\(index)] must be a string") }
            try Self.checkPath(path, "\(command).\(key)[\(index)]")
            paths.append(path)
        }
        return paths
    }

    /// A wall-clock instant: seconds since 1970, or ISO 8601 (`2026-12-01T05:30:00Z`, with
    /// fractional seconds or an offset).
    func instant(_ key: String) throws(ControlError) -> Double? {
        guard let value = fields[key], value != .null else { return nil }
        if let seconds = value.number, seconds.isFinite, abs(seconds) < 1e12 { return seconds }
        if let text = value.string, let seconds = ISO8601.parse(text) { return seconds }
        throw fail(key, "seconds since 1970 or an ISO 8601 time (2026-12-01T05:30:00Z)")
    }

    func contentID(_ key: String) throws(ControlError) -> String? {
        guard let value = fields[key], value != .null else { return nil }
        guard let id = value.string, !id.isEmpty, id.count <= 256, !id.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
            throw fail(key, "a non-empty string of at most 256 characters, without control characters")
        }
        return id
    }

    func eventNames(_ key: String) throws(ControlError) -> [String]? {
        guard let value = fields[key], value != .null else { return nil }
        guard let list = value.array, list.count <= ControlProtocol.maxSubscriptions else {
            throw fail(key, "an array of at most \(ControlProtocol.maxSubscriptions) event names")
        }
        var names: [String] = []
        for item in list {
            guard let name = item.string, !name.isEmpty, name.utf8.count <= 64 else { throw fail(key, "an array of event names") }
            names.append(name)
        }
        return names
    }

    /// A 0-based index into the queue (its bounds are the queue's, checked where it is).
    func index(_ key: String) throws(ControlError) -> Int {
        guard let value = fields[key]?.integer, value >= 0, value < Int64(ControlProtocol.maxQueueEntries) else {
            throw fail(key, "a whole number from 0 (the queue's first entry)")
        }
        return Int(value)
    }

    /// A track: mpv's id (a whole number from 1), `"auto"`, or (`off` allowed) `"off"`.
    func track(_ key: String, off: Bool) throws(ControlError) -> TrackChoice {
        if let id = fields[key]?.integer, id >= 1, id <= 10_000 { return .id(Int(id)) }
        switch fields[key]?.string {
        case "auto": return .auto
        case "off" where off: return .off
        default: throw fail(key, off ? "a track id, \"auto\" or \"off\"" : "a track id or \"auto\"")
        }
    }

    /// Arguments the command does not take are refused: a typo is an error, not a silent default.
    func refuseUnknown(allowed: String) throws(ControlError) {
        let names = Set(allowed.split(whereSeparator: { ", |?".contains($0) }).map(String.init))
        if let unknown = fields.keys.sorted().first(where: { !names.contains($0) }) {
            throw .badArgs("\(command) takes no argument \"\(unknown.prefix(64))\"" + (names.isEmpty ? "" : " (it takes \(allowed))"))
        }
    }
}

/// ISO 8601 times as the protocol reads and writes them.
public enum ISO8601 {
    /// `2026-12-01T05:30:00Z`, `2026-12-01T05:30:00.123+01:00`, `2026-12-01` (midnight UTC): seconds since 1970.
    public static func parse(_ text: String) -> Double? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.utf8.count <= 40 else { return nil }
        for options: ISO8601DateFormatter.Options in [[.withInternetDateTime, .withFractionalSeconds], [.withInternetDateTime], [.withFullDate]] {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = options
            if let date = formatter.date(from: trimmed) { return date.timeIntervalSince1970 }
        }
        return nil
    }

    /// Seconds since 1970 as `2026-12-01T05:30:00.123Z`.
    public static func format(_ seconds: Double) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: seconds))
    }
}
