import BoundsCore

/// Every event of the control protocol (docs/protocol.md): its name, once.
public enum EventName: String, CaseIterable, Sendable {
    case playerItem = "player.item"
    case playerPlaying = "player.playing"
    case playerPaused = "player.paused"
    case playerSeeked = "player.seeked"
    case playerRate = "player.rate"
    case playerEnded = "player.ended"
    case playerFailed = "player.failed"
    case playerBackground = "player.background"
    case playerDisplay = "player.display"
    case playerVolume = "player.volume"
    case playerMode = "player.mode"
    case playerQueue = "player.queue"
    case playerTrack = "player.track"
    case adRequested = "ad.requested"
    case adNoFill = "ad.nofill"
    case adLoaded = "ad.loaded"
    case adStarted = "ad.started"
    case adQuartile = "ad.quartile"
    case adViewability = "ad.viewability"
    case adPaused = "ad.paused"
    case adResumed = "ad.resumed"
    case adEnded = "ad.ended"
    case adBreakStarted = "ad.break_started"
    case adBreakEnded = "ad.break_ended"
    case adError = "ad.error"
    case adHTML = "ad.html"
    case beaconSent = "beacon.sent"
}

/// One event: its name and its fields, encoded here and nowhere else.
public struct ControlEvent: Sendable, Equatable {
    public let name: EventName
    public let fields: [String: JSONValue]

    public init(_ name: EventName, _ fields: [String: JSONValue]) {
        self.name = name
        self.fields = fields
    }

    /// The event as sent: its fields and `"event": name`.
    public var json: JSONValue {
        var object = fields
        object["event"] = .string(name.rawValue)
        return .object(object)
    }

    /// Whether a subscription (`subscribe`'s names: exact, a prefix `ad.*`, or `*`) takes it.
    public func matches(_ filter: Set<String>) -> Bool {
        Self.matches(name.rawValue, filter)
    }

    public static func matches(_ name: String, _ filter: Set<String>) -> Bool {
        if filter.contains("*") || filter.contains(name) { return true }
        return filter.contains { $0.hasSuffix(".*") && name.hasPrefix($0.dropLast()) }
    }
}

extension ControlEvent {
    public static func playerItem(path: String, entry: Int64, pass: Int, contentID: String?) -> ControlEvent {
        ControlEvent(.playerItem, ["path": .string(path), "entry": .int(entry), "pass": .int(pass),
                                   "content_id": contentID.map { .string($0) } ?? .null])
    }

    /// Nothing is in the player.
    public static let playerEmpty = ControlEvent(.playerItem, ["path": .null])

    public static func playerPlaying(rate: Double, position: Double) -> ControlEvent {
        ControlEvent(.playerPlaying, ["rate": .number(rate), "position": .number(position)])
    }

    public static func playerPaused(position: Double) -> ControlEvent { ControlEvent(.playerPaused, ["position": .number(position)]) }

    public static func playerSeeked(from: Double, to: Double) -> ControlEvent {
        ControlEvent(.playerSeeked, ["from": .number(from), "to": .number(to)])
    }

    public static func playerRate(_ rate: Double) -> ControlEvent { ControlEvent(.playerRate, ["rate": .number(rate)]) }

    public static func playerEnded(path: String, position: Double) -> ControlEvent {
        ControlEvent(.playerEnded, ["path": .string(path), "position": .number(position)])
    }

    public static func playerFailed(path: String, code: String, message: String) -> ControlEvent {
        ControlEvent(.playerFailed, ["path": .string(path), "code": .string(code), "message": .string(message)])
    }

    public static func playerVolume(volume: Double, mute: Bool) -> ControlEvent {
        ControlEvent(.playerVolume, ["volume": .number(volume), "mute": .bool(mute)])
    }

    public static func playerMode(repeatMode: String, shuffle: Bool) -> ControlEvent {
        ControlEvent(.playerMode, ["repeat": .string(repeatMode), "shuffle": .bool(shuffle)])
    }

    /// The queue was edited: its length and the entry that plays (`status` has the paths).
    public static func playerQueue(length: Int, current: Int?) -> ControlEvent {
        ControlEvent(.playerQueue, ["length": .int(Int64(length)), "current": current.map { .int(Int64($0)) } ?? .null])
    }

    /// An audio or subtitle track was selected (`id` null: none; `"auto"`: mpv's choice).
    public static func playerTrack(type: String, id: JSONValue) -> ControlEvent {
        ControlEvent(.playerTrack, ["type": .string(type), "id": id])
    }

    /// The display's power changed: `power` on or off, `reason` null (in the hours), `schedule`
    /// (outside them) or `override` (`display on|off`).
    public static func playerDisplay(on: Bool, reason: String?) -> ControlEvent {
        ControlEvent(.playerDisplay, ["power": .string(on ? "on" : "off"), "reason": reason.map { .string($0) } ?? .null])
    }

    public static func playerBackground(_ background: Bool, reasons: [String]) -> ControlEvent {
        ControlEvent(.playerBackground, ["background": .bool(background), "reasons": .array(reasons.sorted().map { .string($0) })])
    }

    /// An HTML creative for a UI shell to draw: `rect` and `output` as `{x, y, width, height}`.
    public static func adHTMLShow(instance id: UInt64, adID: String, url: String, rect: [String: JSONValue],
                                  output: [String: JSONValue], duration: Double?) -> ControlEvent {
        ControlEvent(.adHTML, ["action": "show", "kind": "overlay", "ad_id": .string(adID), "instance": instance(id),
                               "url": .string(url), "rect": .object(rect), "output": .object(output),
                               "duration": duration.map { .number($0) } ?? .null])
    }

    public static func adHTMLHide(instance id: UInt64) -> ControlEvent {
        ControlEvent(.adHTML, ["action": "hide", "kind": "overlay", "ad_id": .null, "instance": instance(id)])
    }

    public static func beaconSent(url: String, attempts: Int) -> ControlEvent {
        ControlEvent(.beaconSent, ["url": .string(url), "attempts": .int(attempts)])
    }

    /// A showing of an ad: its presentation id in hexadecimal.
    public static func instance(_ id: UInt64) -> JSONValue { .string(String(id, radix: 16)) }
}
