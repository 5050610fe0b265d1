import CMqtt
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// What the broker said, collected by libmosquitto's callbacks during `loop` (they run inside
/// it, on the bridge's thread) and handled right after.
enum MqttIncoming: Sendable {
    case connected(reason: Int32)
    case disconnected(reason: Int32)
    /// A PUBACK: `reason` 0x80 or more is a refusal (a broker's ACL), not a delivery.
    case published(mid: Int32, reason: Int32)
    /// `retained`: the broker kept it and replays it (never a command to run).
    case message(topic: String, payload: [UInt8], retained: Bool, responseTopic: String?, correlation: [UInt8]?)
    case log(level: Int32, text: String)
}

/// Where the callbacks put what they get: the connection's own, touched only by the thread
/// that runs `loop` (the callbacks run inside it).
final class MqttInbox: @unchecked Sendable {
    var items: [MqttIncoming] = []
    /// Messages over the bound are counted, not kept (a broker that ignores our packet limit).
    var oversized = 0
    let maxPayload: Int

    init(maxPayload: Int) { self.maxPayload = maxPayload }
}

// The callbacks, as C function pointers formed in nonisolated code (notes/libmpv.md §6.2:
// a closure formed in main-actor code gets an isolation check that crashes on a foreign thread).
private func inbox(_ context: UnsafeMutableRawPointer?) -> MqttInbox? {
    context.map { Unmanaged<MqttInbox>.fromOpaque($0).takeUnretainedValue() }
}

private let callbacks = cmqtt_callbacks(
    connected: { context, reason in inbox(context)?.items.append(.connected(reason: reason)) },
    disconnected: { context, reason in inbox(context)?.items.append(.disconnected(reason: reason)) },
    published: { context, mid, reason in inbox(context)?.items.append(.published(mid: mid, reason: reason)) },
    message: { context, topic, payload, length, retained, responseTopic, correlation, correlationLength in
        guard let box = inbox(context), let topic else { return }
        guard Int(length) <= box.maxPayload else {
            box.oversized += 1
            return
        }
        let bytes = payload.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(length))) } ?? []
        let correlationBytes = correlation.map { Array(UnsafeRawBufferPointer(start: $0, count: Int(correlationLength))) }
        box.items.append(.message(topic: String(cString: topic), payload: bytes, retained: retained,
                                  responseTopic: responseTopic.map { String(cString: $0) }, correlation: correlationBytes))
    },
    logged: { context, level, text in
        guard let text else { return }
        inbox(context)?.items.append(.log(level: level, text: String(cString: text)))
    })

/// One libmosquitto client, MQTT 5, used by one thread (the bridge's): connect, the loop,
/// publish, subscribe. A new one for every connection attempt, so that nothing of a lost
/// connection (libmosquitto's own queue of unacknowledged messages) is sent twice behind the
/// bridge's back: what was not acknowledged is sent again by the bridge, from its cursor.
final class MqttConnection {
    struct Settings: Sendable {
        var host: String
        var port: Int
        var tls: Bool
        var caFile: String?
        var certFile: String?
        var keyFile: String?
        var username: String?
        var password: String?
        var keepalive: Int
        var clientID: String
        var will: (topic: String, payload: [UInt8])?
        var maxPayload: Int
    }

    enum Failure: Error, CustomStringConvertible {
        case setup(String)
        case connect(String)

        var description: String {
            switch self {
            case .setup(let why), .connect(let why): why
            }
        }
    }

    private let client: OpaquePointer
    let inbox: MqttInbox
    private let retained: Unmanaged<MqttInbox>

    static let initialised: Void = { cmqtt_init() }()

    init(_ settings: Settings) throws(Failure) {
        _ = Self.initialised
        inbox = MqttInbox(maxPayload: settings.maxPayload)
        retained = Unmanaged.passRetained(inbox)
        var table = callbacks
        guard let client = cmqtt_new(settings.clientID, retained.toOpaque(), &table) else {
            retained.release()
            throw .setup("cannot make an MQTT client (out of memory?)")
        }
        self.client = client
        if let username = settings.username {
            try check(cmqtt_credentials(client, username, settings.password), "credentials")
        }
        if settings.tls {
            // No CA file: the system's store (Debian's ca-certificates).
            try check(cmqtt_tls(client, settings.caFile, settings.caFile == nil ? "/etc/ssl/certs" : nil, settings.certFile, settings.keyFile),
                      "TLS (mqtt-ca-file, mqtt-cert-file, mqtt-key-file)")
        }
        if let will = settings.will {
            try check(will.payload.withUnsafeBytes { cmqtt_will(client, will.topic, $0.baseAddress, Int32($0.count), 1, true) }, "the last will")
        }
    }

    deinit {
        cmqtt_destroy(client)
        retained.release()
    }

    private func check(_ code: Int32, _ what: String) throws(Failure) {
        guard code == 0 else { throw .setup("\(what): \(String(cString: cmqtt_error(code)))") }
    }

    /// The TCP (and TLS) connection and CONNECT; the CONNACK comes later, through `loop`.
    func connect(_ settings: Settings) throws(Failure) {
        let code = cmqtt_connect(client, settings.host, Int32(settings.port), Int32(settings.keepalive), UInt32(settings.maxPayload + 1024))
        guard code == 0 else {
            let reason = String(cString: cmqtt_error(code))
            let said = code == 8 /* MOSQ_ERR_TLS */ ? "TLS refused (the broker's certificate does not match its name, or is not signed by mqtt-ca-file): \(reason)" : reason
            throw .connect("\(settings.host):\(settings.port): \(said)")
        }
    }

    /// Runs the network for at most `milliseconds`; 0, or libmosquitto's error code.
    func loop(_ milliseconds: Int32) -> Int32 { cmqtt_loop(client, milliseconds) }

    /// Publishes; the message id (QoS 1: acknowledged through `.published`), or nil.
    func publish(_ topic: String, _ payload: [UInt8], qos: Int32, retain: Bool, correlation: [UInt8]? = nil) -> Int32? {
        var mid: Int32 = 0
        let code = payload.withUnsafeBytes { bytes in
            (correlation ?? []).withUnsafeBytes { correlationBytes in
                cmqtt_publish(client, &mid, topic, bytes.baseAddress, Int32(bytes.count), qos, retain,
                              correlation == nil ? nil : correlationBytes.baseAddress, Int32(correlationBytes.count))
            }
        }
        return code == 0 ? mid : nil
    }

    func subscribe(_ pattern: String, qos: Int32) -> Bool { cmqtt_subscribe(client, pattern, qos) == 0 }

    func disconnect() { _ = cmqtt_disconnect(client) }

    static func publishable(_ topic: String) -> Bool { topic.utf8.count <= 512 && cmqtt_publishable(topic) }

    static func connackReason(_ code: Int32) -> String { String(cString: cmqtt_connack(code)) }
    static func reasonText(_ code: Int32) -> String { String(cString: cmqtt_reason(code)) }

    /// libmosquitto's words for one of its error codes (a keepalive that ran out, a reset).
    static func errorText(_ code: Int32) -> String {
        code == 19 ? "no answer within the keepalive" : "\(String(cString: cmqtt_error(code))) (\(code))"   // 19: MOSQ_ERR_KEEPALIVE
    }
}
