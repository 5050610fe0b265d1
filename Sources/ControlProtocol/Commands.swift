import BoundsCore
#if canImport(Glibc)
import Glibc
#endif

/// Who may run a command, as MPD's command table has permissions. A client of the control
/// socket has one tier (the daemon's user and root: `admin`; `socket-group` members:
/// `socket-group-tier`), and may run the commands of its tier and those below it.
public enum Tier: Int, Sendable, Comparable, CaseIterable, CustomStringConvertible {
    /// Looks: status, metrics, proof of play, the event stream.
    case read
    /// Drives playback: transport, queue, volume, tracks, screenshots.
    case control
    /// Changes what the box keeps beyond playback: emptying the queue.
    case admin

    public var name: String {
        switch self {
        case .read: "read"
        case .control: "control"
        case .admin: "admin"
        }
    }

    public var description: String { name }

    public init?(name: String) {
        guard let tier = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = tier
    }

    public static func < (a: Tier, b: Tier) -> Bool { a.rawValue < b.rawValue }
}

/// Where the daemon runs a command.
public enum Venue: String, Sendable, CaseIterable {
    /// Answered by the control socket's thread itself (it owns subscriptions).
    case socket
    /// On the player's loop (SPEC R18): what reads or drives the player; nothing that blocks.
    case loop
    /// On a worker: reads the database or the metrics, never the player.
    case worker
    /// Files are checked or made on a worker (the file system may be slow), then the loop runs it.
    case filesThenLoop
}

/// What one argument takes. Each kind is checked, and bounded, in `Commands.decode` — the
/// one place a value from a client is validated — before a `Request` is built from it.
public enum ArgumentKind: Sendable {
    case bool
    /// A finite number within the range.
    case number(ClosedRange<Double>)
    /// Seconds within bounds (`Seconds`, the runtime's one checker).
    case seconds(Seconds.Bounds)
    /// A wall-clock instant: seconds since 1970 or ISO 8601.
    case instant
    /// An absolute path of at most 4 KiB, no NUL.
    case path
    /// 1 to `max` paths, each as `path`.
    case paths(max: Int)
    /// A non-empty string of at most 256 characters, without control characters.
    case contentID
    /// Event names or prefixes, at most `ControlProtocol.maxSubscriptions`.
    case eventNames
    /// A 0-based index into the queue.
    case index
    /// mpv's track id, `"auto"`, and (if `off`) `"off"`.
    case track(off: Bool)
    /// One of these words.
    case choice([String])
    /// A whole number in the range.
    case integer(ClosedRange<Int64>)

    /// What it takes, as a person reads it (errors, `usage`).
    public var summary: String {
        switch self {
        case .bool: "true or false"
        case .number(let range): "a number from \(Self.format(range.lowerBound)) to \(Self.format(range.upperBound))"
        case .seconds(let bounds): "seconds (\(bounds.what))"
        case .instant: "seconds since 1970 or an ISO 8601 time (2026-12-01T05:30:00Z)"
        case .path: "an absolute path"
        case .paths(let max): "1 to \(max) absolute paths"
        case .contentID: "a string of 1 to 256 characters, without control characters"
        case .eventNames: "an array of at most \(ControlProtocol.maxSubscriptions) event names"
        case .index: "a whole number from 0 (the queue's first entry)"
        case .track(let off): off ? "a track id, \"auto\" or \"off\"" : "a track id or \"auto\""
        case .choice(let words): "one of " + words.map { "\"\($0)\"" }.joined(separator: ", ")
        case .integer(let range): "a whole number from \(range.lowerBound) to \(range.upperBound)"
        }
    }

    static func format(_ value: Double) -> String { value == value.rounded() ? String(Int64(value)) : String(value) }
}

/// One argument of a command: its name (the key in `args`), its kind, whether it may be left out.
public struct Argument: Sendable {
    public let name: String
    public let kind: ArgumentKind
    public let optional: Bool

    public static func required(_ name: String, _ kind: ArgumentKind) -> Argument { Argument(name: name, kind: kind, optional: false) }
    public static func optional(_ name: String, _ kind: ArgumentKind) -> Argument { Argument(name: name, kind: kind, optional: true) }
}

/// A command's arguments: none, a list, or exactly one of several.
public enum Parameters: Sendable {
    case none
    case fields([Argument])
    case oneOf([Argument])

    public var all: [Argument] {
        switch self {
        case .none: []
        case .fields(let list), .oneOf(let list): list
        }
    }

    /// As docs/protocol.md writes them: `path, content_id?, start?`; `to | by`.
    public var signature: String {
        switch self {
        case .none: ""
        case .fields(let list): list.map { $0.name + ($0.optional ? "?" : "") }.joined(separator: ", ")
        case .oneOf(let list): list.map(\.name).joined(separator: " | ")
        }
    }
}

/// A checked argument's value.
public enum ArgumentValue: Sendable, Equatable {
    case bool(Bool)
    case number(Double)
    case text(String)
    case texts([String])
    case index(Int)
    case track(TrackChoice)
    case integer(Int64)
}

/// A request's arguments once every one has passed its kind's check. A command's `build`
/// reads them; a missing required one is a table defect, reported as `internal`, never a trap.
public struct ArgumentValues: Sendable {
    let command: String
    let values: [String: ArgumentValue]

    public func has(_ key: String) -> Bool { values[key] != nil }

    /// A required argument (present by the decoder's checks).
    private func value<T>(_ key: String, _ extract: (ArgumentValue) -> T?) throws(ControlError) -> T {
        guard let value = try optionalValue(key, extract) else { throw ControlError(.internalError, "\(command): \(key) was not decoded") }
        return value
    }

    /// An optional argument: nil when absent (or null).
    private func optionalValue<T>(_ key: String, _ extract: (ArgumentValue) -> T?) throws(ControlError) -> T? {
        guard let value = values[key] else { return nil }
        guard let typed = extract(value) else { throw ControlError(.internalError, "\(command): \(key) was decoded as another kind") }
        return typed
    }

    private static func bool(_ value: ArgumentValue) -> Bool? { if case .bool(let v) = value { v } else { nil } }
    private static func number(_ value: ArgumentValue) -> Double? { if case .number(let v) = value { v } else { nil } }
    private static func text(_ value: ArgumentValue) -> String? { if case .text(let v) = value { v } else { nil } }
    private static func texts(_ value: ArgumentValue) -> [String]? { if case .texts(let v) = value { v } else { nil } }

    public func bool(_ key: String) throws(ControlError) -> Bool { try value(key, Self.bool) }
    public func optionalBool(_ key: String) throws(ControlError) -> Bool? { try optionalValue(key, Self.bool) }
    public func number(_ key: String) throws(ControlError) -> Double { try value(key, Self.number) }
    public func optionalNumber(_ key: String) throws(ControlError) -> Double? { try optionalValue(key, Self.number) }
    public func text(_ key: String) throws(ControlError) -> String { try value(key, Self.text) }
    public func optionalText(_ key: String) throws(ControlError) -> String? { try optionalValue(key, Self.text) }
    public func texts(_ key: String) throws(ControlError) -> [String] { try value(key, Self.texts) }
    public func optionalTexts(_ key: String) throws(ControlError) -> [String]? { try optionalValue(key, Self.texts) }

    public func optionalInteger(_ key: String) throws(ControlError) -> Int64? {
        try optionalValue(key) { if case .integer(let v) = $0 { v } else { nil } }
    }

    public func index(_ key: String) throws(ControlError) -> Int {
        try value(key) { if case .index(let v) = $0 { v } else { nil } }
    }

    public func track(_ key: String) throws(ControlError) -> TrackChoice {
        try value(key) { if case .track(let v) = $0 { v } else { nil } }
    }
}

/// `adplayerctl`'s form of a command: its words, its help line, the options it takes, and how
/// the words become a `Request` (the daemon checks the request again: `Commands.decode`).
public struct CommandLineForm: Sendable {
    /// The word `adplayerctl` takes (the command's name, but `events` for `subscribe`).
    public let word: String
    /// `seek SECONDS | seek +S | -S`.
    public let synopsis: String
    public let help: String
    /// Options of this command (`--start`), beside `--socket`, `--json` and `--help`.
    public let options: [String: CommandLineArguments.Kind]
    /// Throws `UsageError` (or, for a table defect, the `ControlError` of `build`).
    let parse: @Sendable (CommandLineInput) throws -> Request
}

/// A command line for one command: the words after it and the options given.
public struct CommandLineInput: Sendable {
    public let words: [String]
    public let arguments: CommandLineArguments
    /// Relative paths are taken from here.
    public let directory: String

    public init(words: [String], arguments: CommandLineArguments, directory: String) {
        self.words = words
        self.arguments = arguments
        self.directory = directory
    }

    func absolute(_ path: String) -> String { path.hasPrefix("/") ? path : directory + "/" + path }

    func number(_ text: String, _ what: String) throws(UsageError) -> Double {
        guard let value = Double(text), value.isFinite else { throw UsageError("\(what): \"\(text)\" is not a number") }
        return value
    }

    /// Exactly `count` words, or the usage error `message`.
    func expect(_ count: Int, _ message: String) throws(UsageError) {
        guard words.count == count else { throw UsageError(message) }
    }

    func onOff(_ command: String) throws(UsageError) -> Bool {
        guard words.count == 1, ["on", "off"].contains(words[0]) else { throw UsageError("\(command) takes on or off") }
        return words[0] == "on"
    }
}

/// What a command may do while a linear ad (a pre-, mid- or post-roll) or its break has the
/// screen: a linear ad is billed at its own pace and in full, so what would cut it, skip it,
/// or play it faster or slower is refused `ad_playing` — for every client (socket, page,
/// bridge, MPRIS), by this column of the command's row, never by a check in a handler.
public enum LinearAdRule: Sendable, Equatable {
    case allowed
    /// Refused: the ad "cannot be `what`".
    case refused(_ what: String)
    /// Refused when it names the entry that plays (`remove` of another entry goes on).
    case refusedForPlayingEntry(_ what: String)
}

/// One row of the command table: everything there is to say of a command.
public struct Command: Sendable {
    public let name: String
    public let tier: Tier
    public let venue: Venue
    /// What a linear ad on screen refuses of it.
    public let duringLinearAd: LinearAdRule
    public let parameters: Parameters
    public let commandLine: CommandLineForm
    /// Its arguments from a checked, decoded form (what the daemon runs).
    let build: @Sendable (ArgumentValues) throws(ControlError) -> Request
    /// The inverse: a request of this command as it is sent (`args`), nil for another
    /// command's. A command without arguments needs none: its request is the one `build` makes.
    /// A request as its `args` (nil: not this command's request).
    public let encode: @Sendable (Request) -> [String: JSONValue]?

    /// `path, content_id?, start?` — what `usage` and the documentation show.
    public var arguments: String { parameters.signature }

    init(_ name: String, _ tier: Tier, _ venue: Venue, _ parameters: Parameters = .none, linear: LinearAdRule = .allowed,
         encode: (@Sendable (Request) -> [String: JSONValue]?)? = nil,
         cli: (synopsis: String, help: String), word: String? = nil, options: [String: CommandLineArguments.Kind] = [:],
         parse: (@Sendable (CommandLineInput) throws -> Request)? = nil,
         build: @escaping @Sendable (ArgumentValues) throws(ControlError) -> Request) {
        self.name = name
        self.tier = tier
        self.venue = venue
        self.duringLinearAd = linear
        self.parameters = parameters
        self.build = build
        let only = try? build(ArgumentValues(command: name, values: [:]))
        self.encode = encode ?? { request in request == only ? [:] : nil }
        let word = word ?? name
        // A command without arguments: its word alone.
        let parse: @Sendable (CommandLineInput) throws -> Request = parse ?? { input in
            guard input.words.isEmpty else { throw UsageError("\(word) takes no arguments") }
            return try build(ArgumentValues(command: name, values: [:]))
        }
        commandLine = CommandLineForm(word: word, synopsis: cli.synopsis, help: cli.help, options: options, parse: parse)
    }
}
