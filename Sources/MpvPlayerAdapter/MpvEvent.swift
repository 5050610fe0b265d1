import CMpv

/// An mpv error code with mpv's own message.
public struct MpvError: Error, Sendable, Equatable, CustomStringConvertible {
    /// mpv's code (negative, `MPV_ERROR_*`).
    public let code: Int32
    /// What was being done: `loadfile`, `set pause`, …
    public let operation: String

    public init(code: Int32, operation: String) {
        self.code = code
        self.operation = operation
    }

    /// mpv's sentence for the code.
    public var message: String { String(cString: mpv_error_string(code)) }

    /// A stable name a program can match, e.g. `loading-failed`, `unknown-format`.
    public var name: String {
        switch code {
        case -1: "event-queue-full"
        case -2: "nomem"
        case -3: "uninitialized"
        case -4: "invalid-parameter"
        case -5: "option-not-found"
        case -6: "option-format"
        case -7: "option-error"
        case -8: "property-not-found"
        case -9: "property-format"
        case -10: "property-unavailable"
        case -11: "property-error"
        case -12: "command"
        case -13: "loading-failed"
        case -14: "ao-init-failed"
        case -15: "vo-init-failed"
        case -16: "nothing-to-play"
        case -17: "unknown-format"
        case -18: "unsupported"
        case -19: "not-implemented"
        case -20: "generic"
        default: "mpv-error-\(code)"
        }
    }

    public var description: String { "\(operation): \(message) (\(name))" }

    /// The handle is shutting down or gone; no call reaches mpv any more.
    public static func shutDown(_ operation: String) -> MpvError { MpvError(code: -3, operation: operation) }
}

/// A value read from mpv, copied out of mpv's memory. `.unavailable` is mpv's
/// `MPV_FORMAT_NONE` or `PROPERTY_UNAVAILABLE`: the value is unknown — never false or zero (R1).
public enum MpvValue: Sendable, Equatable {
    case unavailable
    case flag(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    indirect case array([MpvValue])
    indirect case map([String: MpvValue])

    public var flag: Bool? { if case .flag(let v) = self { v } else { nil } }
    public var string: String? { if case .string(let v) = self { v } else { nil } }
    public var double: Double? {
        switch self {
        case .double(let v): v
        case .int(let v): Double(v)
        default: nil
        }
    }
    public var int: Int64? {
        switch self {
        case .int(let v): v
        case .double(let v) where v == v.rounded(): Int64(v)
        default: nil
        }
    }
    public subscript(key: String) -> MpvValue? { if case .map(let m) = self { m[key] } else { nil } }

    /// Copies a node; the caller still owns and frees `node`.
    init(node: mpv_node) {
        switch node.format {
        case MPV_FORMAT_FLAG: self = .flag(node.u.flag != 0)
        case MPV_FORMAT_INT64: self = .int(node.u.int64)
        case MPV_FORMAT_DOUBLE: self = .double(node.u.double_)
        case MPV_FORMAT_STRING: self = node.u.string.map { .string(String(cString: $0)) } ?? .unavailable
        case MPV_FORMAT_NODE_ARRAY:
            guard let list = node.u.list?.pointee else { self = .array([]); return }
            self = .array((0..<Int(list.num)).map { MpvValue(node: list.values[$0]) })
        case MPV_FORMAT_NODE_MAP:
            guard let list = node.u.list?.pointee else { self = .map([:]); return }
            var map: [String: MpvValue] = [:]
            for i in 0..<Int(list.num) {
                if let key = list.keys?[i] { map[String(cString: key)] = MpvValue(node: list.values[i]) }
            }
            self = .map(map)
        default: self = .unavailable
        }
    }

    /// Copies the data of a property event or reply in `format`.
    init(format: mpv_format, data: UnsafeMutableRawPointer?) {
        guard let data else { self = .unavailable; return }
        switch format {
        case MPV_FORMAT_FLAG: self = .flag(data.load(as: Int32.self) != 0)
        case MPV_FORMAT_INT64: self = .int(data.load(as: Int64.self))
        case MPV_FORMAT_DOUBLE: self = .double(data.load(as: Double.self))
        case MPV_FORMAT_STRING, MPV_FORMAT_OSD_STRING:
            self = data.load(as: UnsafePointer<CChar>?.self).map { .string(String(cString: $0)) } ?? .unavailable
        case MPV_FORMAT_NODE: self = MpvValue(node: data.load(as: mpv_node.self))
        default: self = .unavailable
        }
    }
}

/// The format in which a property is observed or read.
public enum MpvFormat: Sendable {
    case flag, int, double, string, node

    var raw: mpv_format {
        switch self {
        case .flag: MPV_FORMAT_FLAG
        case .int: MPV_FORMAT_INT64
        case .double: MPV_FORMAT_DOUBLE
        case .string: MPV_FORMAT_STRING
        case .node: MPV_FORMAT_NODE
        }
    }
}

/// Why mpv ended a file (`MPV_EVENT_END_FILE`).
public enum MpvEndReason: Sendable, Equatable {
    case eof, stop, quit, redirect
    case error(MpvError)
    case unknown(Int32)
}

/// A log line mpv sent (at the level requested from the handle).
public struct MpvLogMessage: Sendable, Equatable, CustomStringConvertible {
    public let prefix: String
    public let level: String
    public let text: String
    /// mpv's numeric level: 10 fatal, 20 error, 30 warn, 40 info, …
    public let logLevel: Int32

    public var isError: Bool { logLevel <= 20 }
    /// An error mpv logs that says nothing is wrong: the null audio output (`ao=null`, every
    /// headless box) checks its own state machine and complains when playback resumes right
    /// after a seek made while paused — the audio plays on regardless. A daemon logs it as
    /// information, not as an error.
    public var isKnownHarmless: Bool { prefix == "ao/null" && text.hasPrefix("illegal state: start() while paused") }
    public var description: String { "[\(prefix)] \(level): \(text)" }
}

/// One mpv event, copied into Swift values on the loop (nothing here points into mpv's
/// memory, which is only valid until the next `mpv_wait_event`).
public enum MpvEvent: Sendable, Equatable {
    public struct Reply: Sendable, Equatable {
        public let userdata: UInt64
        /// mpv's error code; ≥ 0 is success.
        public let error: Int32
        /// A command's result node (`loadfile` → `{playlist_entry_id}`).
        public let result: MpvValue
    }

    case shutdown
    case log(MpvLogMessage)
    case startFile(entry: Int64)
    case endFile(entry: Int64, reason: MpvEndReason)
    case fileLoaded
    case seek
    case playbackRestart
    /// An observed property; `id` is the id it was observed with.
    case property(id: UInt64, name: String, value: MpvValue)
    /// The answer to an asynchronous command or property write of ours.
    case reply(Reply)
    case videoReconfig
    case audioReconfig
    case queueOverflow
    case hook(name: String, id: UInt64)
    case clientMessage([String])
    case other(Int32)

    /// Copies `event` (owned by mpv) into a value. Returns nil for `MPV_EVENT_NONE`.
    init?(copying event: mpv_event) {
        switch event.event_id {
        case MPV_EVENT_NONE: return nil
        case MPV_EVENT_SHUTDOWN: self = .shutdown
        case MPV_EVENT_LOG_MESSAGE:
            guard let m = event.data?.assumingMemoryBound(to: mpv_event_log_message.self).pointee else { return nil }
            self = .log(MpvLogMessage(prefix: m.prefix.map { String(cString: $0) } ?? "",
                                      level: m.level.map { String(cString: $0) } ?? "",
                                      text: m.text.map { String(cString: $0) } ?? "",
                                      logLevel: Int32(m.log_level.rawValue)))
        case MPV_EVENT_START_FILE:
            let s = event.data?.assumingMemoryBound(to: mpv_event_start_file.self).pointee
            self = .startFile(entry: s?.playlist_entry_id ?? -1)
        case MPV_EVENT_END_FILE:
            guard let e = event.data?.assumingMemoryBound(to: mpv_event_end_file.self).pointee else { return nil }
            let reason: MpvEndReason = switch e.reason {
            case MPV_END_FILE_REASON_EOF: .eof
            case MPV_END_FILE_REASON_STOP: .stop
            case MPV_END_FILE_REASON_QUIT: .quit
            case MPV_END_FILE_REASON_REDIRECT: .redirect
            case MPV_END_FILE_REASON_ERROR: .error(MpvError(code: e.error, operation: "play"))
            default: .unknown(Int32(bitPattern: e.reason.rawValue))
            }
            self = .endFile(entry: e.playlist_entry_id, reason: reason)
        case MPV_EVENT_FILE_LOADED: self = .fileLoaded
        case MPV_EVENT_SEEK: self = .seek
        case MPV_EVENT_PLAYBACK_RESTART: self = .playbackRestart
        case MPV_EVENT_PROPERTY_CHANGE:
            guard let p = event.data?.assumingMemoryBound(to: mpv_event_property.self).pointee else { return nil }
            self = .property(id: event.reply_userdata, name: p.name.map { String(cString: $0) } ?? "",
                             value: MpvValue(format: p.format, data: p.data))
        case MPV_EVENT_COMMAND_REPLY:
            let result = event.data?.assumingMemoryBound(to: mpv_event_command.self).pointee.result
            self = .reply(Reply(userdata: event.reply_userdata, error: event.error,
                                result: result.map { MpvValue(node: $0) } ?? .unavailable))
        case MPV_EVENT_SET_PROPERTY_REPLY:
            self = .reply(Reply(userdata: event.reply_userdata, error: event.error, result: .unavailable))
        case MPV_EVENT_VIDEO_RECONFIG: self = .videoReconfig
        case MPV_EVENT_AUDIO_RECONFIG: self = .audioReconfig
        case MPV_EVENT_QUEUE_OVERFLOW: self = .queueOverflow
        case MPV_EVENT_HOOK:
            let h = event.data?.assumingMemoryBound(to: mpv_event_hook.self).pointee
            self = .hook(name: h?.name.map { String(cString: $0) } ?? "", id: h?.id ?? 0)
        case MPV_EVENT_CLIENT_MESSAGE:
            guard let m = event.data?.assumingMemoryBound(to: mpv_event_client_message.self).pointee else { return nil }
            self = .clientMessage((0..<Int(m.num_args)).compactMap { m.args?[$0].map { String(cString: $0) } })
        default: self = .other(Int32(bitPattern: event.event_id.rawValue))
        }
    }
}
