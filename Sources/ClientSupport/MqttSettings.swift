import ControlProtocol
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// `adplayerd mqtt`'s settings (docs/fleet.md), each checked here as it is read: the broker's
/// URL, names that go into topics (no wildcard, no `/` where one is not meant, no NUL), the
/// tier the broker's commands get.
public struct MqttSettings: Sendable, Equatable {
    public var broker: URLParts?
    /// nil: `/etc/machine-id` (the bridge reads it).
    public var boxID: String?
    /// The levels under the prefix that are the fleet's, not a box's (`P/all/cmd`,
    /// `P/group/G/cmd`, `P/reply/…`): no box may be named so.
    public static let layoutWords: Set<String> = ["all", "group", "reply"]
    public var prefix = "adplayer"
    public var groups: [String] = []
    public var username: String?
    public var passwordFile: String?
    public var caFile: String?
    public var certFile: String?
    public var keyFile: String?
    public var keepalive = 30
    /// The highest tier a command from the broker gets; nil: none (no command topic subscribed).
    public var commands: Tier? = .control
    /// Which protocol events go to `P/B/events`: names or prefixes.
    public var events = ["ad.*", "player.item", "player.failed"]

    public init() {}

    public struct URLParts: Sendable, Equatable {
        public var tls: Bool
        public var host: String
        public var port: Int
    }

    /// A name that goes into a topic level: 1–64 of `A–Z a–z 0–9 . _ -`.
    public static func isTopicName(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64 && text.unicodeScalars.allSatisfy { $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "._-".unicodeScalars.contains($0)) }
    }

    public mutating func set(_ key: String, _ value: String) throws(UsageError) {
        switch key {
        case "mqtt-broker":
            if value.isEmpty { broker = nil; return }
            let fail = UsageError("mqtt-broker: \"\(value.prefix(80))\" is not mqtt://HOST:PORT or mqtts://HOST:PORT")
            let tls: Bool
            var rest: Substring
            if value.hasPrefix("mqtt://") { tls = false; rest = value.dropFirst(7) } else if value.hasPrefix("mqtts://") { tls = true; rest = value.dropFirst(8) } else { throw fail }
            if rest.hasSuffix("/") { rest = rest.dropLast() }
            var host = rest
            var port = tls ? 8883 : 1883
            if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
                guard let p = Int(rest[rest.index(after: colon)...]), (1...65535).contains(p) else { throw fail }
                port = p
                host = rest[..<colon]
            }
            if host.hasPrefix("[") && host.hasSuffix("]") { host = host.dropFirst().dropLast() }
            guard !host.isEmpty, host.utf8.count <= 253,
                  host.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || ".-:".unicodeScalars.contains($0)) }) else {
                throw fail
            }
            broker = URLParts(tls: tls, host: String(host), port: port)
        case "mqtt-box-id":
            guard value.isEmpty || Self.isTopicName(value) else { throw UsageError("mqtt-box-id: 1 to 64 of A-Z a-z 0-9 . _ - (it is a topic level)") }
            guard !Self.layoutWords.contains(value) else {
                throw UsageError("mqtt-box-id: \(value) is a word of the topic layout (\(Self.layoutWords.sorted().joined(separator: ", "))): "
                                 + "a box named so would take the fleet's topics as its own")
            }
            boxID = value.isEmpty ? nil : value
        case "mqtt-prefix":
            let levels = value.split(separator: "/", omittingEmptySubsequences: false)
            guard value.utf8.count <= 128, !levels.isEmpty, levels.allSatisfy({ Self.isTopicName(String($0)) }) else {
                throw UsageError("mqtt-prefix: levels of A-Z a-z 0-9 . _ - separated by /, at most 128 bytes")
            }
            prefix = value
        case "mqtt-groups":
            let list = value.split(separator: ",").map { $0.trimmedSpaces() }.filter { !$0.isEmpty }
            guard list.count <= 32, list.allSatisfy(Self.isTopicName) else {
                throw UsageError("mqtt-groups: at most 32 names of A-Z a-z 0-9 . _ -, comma-separated")
            }
            groups = list
        case "mqtt-username":
            guard value.utf8.count <= 256, !value.unicodeScalars.contains(where: { $0.value < 0x20 }) else { throw UsageError("mqtt-username: at most 256 printable characters") }
            username = value.isEmpty ? nil : value
        case "mqtt-password-file", "mqtt-ca-file", "mqtt-cert-file", "mqtt-key-file":
            guard value.isEmpty || value.hasPrefix("/") else { throw UsageError("\(key): \"\(value.prefix(80))\" must be an absolute path") }
            let file: String? = value.isEmpty ? nil : value
            switch key {
            case "mqtt-password-file": passwordFile = file
            case "mqtt-ca-file": caFile = file
            case "mqtt-cert-file": certFile = file
            default: keyFile = file
            }
        case "mqtt-keepalive":
            guard let seconds = Int(value), (5...3600).contains(seconds) else { throw UsageError("mqtt-keepalive: a whole number of seconds from 5 to 3600 (libmosquitto takes no less)") }
            keepalive = seconds
        case "mqtt-commands":
            if value == "none" { commands = nil; return }
            guard let tier = Tier(name: value) else { throw UsageError("mqtt-commands: none, read, control or admin") }
            commands = tier
        case "mqtt-events":
            let list = value.split(separator: ",").map { $0.trimmedSpaces() }.filter { !$0.isEmpty }
            guard list.count <= ControlProtocol.maxSubscriptions, list.allSatisfy({ $0.utf8.count <= 64 && !$0.contains(" ") }) else {
                throw UsageError("mqtt-events: at most \(ControlProtocol.maxSubscriptions) event names or prefixes (ad.*), comma-separated")
            }
            events = list
        default:
            throw UsageError("unknown key \(key)")
        }
    }
}
