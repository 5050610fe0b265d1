import ClientSupport
import ControlProtocol
import ProcessSupport
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Bounds

/// Commands from the broker (docs/fleet.md, "Commands"), on the bridge's thread:
///
/// - **every message costs a token** of a bucket of `commandsPerSecond` (full at each
///   connection), a malformed or refused one too; past it a command is refused, and the refusal
///   is answered at most once a second;
/// - **retained messages are never run** (the subscription asks the broker for none; any that
///   comes with the retain flag is dropped, counted and said once: `handle`);
/// - **a command delivered again** (a QoS 1 redelivery: the same bytes on the same topic, with
///   the same response topic and correlation data, within `RecentCommands.window`) is answered
///   with its first reply, not run twice — another command that reuses an id is a new command;
/// - **replies go to the box's `P/B/reply`**, and to a v5 response topic only inside the fleet's
///   reply namespace `P/reply/…` — never into a command, state or proof-of-play topic, of this
///   box or another (a refused one is counted and said once).
extension FleetBridge {
    /// The fleet's reply namespace: response topics must be under it.
    var replyNamespace: String { "\(settings.mqtt.prefix)/reply/" }

    func command(_ topic: String, _ payload: [UInt8], responseTopic: String?, correlation: [UInt8]?, _ state: inout State) {
        guard state.connected, let connection = state.connection else { return }
        let generation = state.generation
        var response = responseTopic
        if let candidate = response, !(candidate.hasPrefix(replyNamespace) && candidate.count > replyNamespace.count
                                       && MqttConnection.publishable(candidate)) {
            counters.withLock { $0.responseTopicsRefused += 1 }
            sayOnce("response-topic", &state, "mqtt: a command's response topic (\(candidate.prefix(120))) is outside the reply namespace "
                    + "\(replyNamespace)#: its reply goes to \(self.topic)/reply only (said once; counted)")
            response = nil
        }
        func refuse(_ id: JSONValue, _ error: ControlError) {
            counters.withLock { $0.refused += 1 }
            answer(Reply.error(id, error), responseTopic: response, correlation: correlation, connection)
        }
        // Every message takes a token, whatever it holds: at most commandsPerSecond a second
        // reach the daemon or get an answer; past them, one refusal a second.
        let now = Self.now()
        state.tokens = min(settings.commandsPerSecond, state.tokens + max(0, now - state.lastRefill) * settings.commandsPerSecond)
        state.lastRefill = now
        guard state.tokens >= 1 else {
            counters.withLock { $0.rateLimited += 1 }
            guard now - state.lastOverLimitReply >= 1 else { return }
            state.lastOverLimitReply = now
            let id = (try? JSONValue.parse(payload))?["id"] ?? .null
            return refuse(id, ControlError(.unavailable, "too many commands: at most \(Int(settings.commandsPerSecond)) a second reach the daemon"))
        }
        state.tokens -= 1
        guard let value = try? JSONValue.parse(payload), value.object != nil else {
            return refuse(.null, .malformed("a command is one JSON object {\"id\", \"cmd\", \"args\"} of at most \(Self.maxPayload) bytes"))
        }
        switch Commands.decode(value) {
        case .failure(let failure):
            refuse(failure.id, failure.error)
        case .success(let envelope):
            if case .subscribe = envelope.request {
                return refuse(envelope.id, ControlError(.badArgs, "events are published on \(self.topic)/events: subscribe to that topic"))
            }
            let tier = settings.mqtt.commands ?? .read
            if Commands.refusal(envelope.request, tier: tier) != nil {
                return refuse(envelope.id, ControlError(.forbidden, "\(envelope.request.name) needs the \(Commands.row(of: envelope.request)?.tier.name ?? "?") tier; "
                                                        + "commands from the broker have \(tier.name) (mqtt-commands)"))
            }
            // The same command delivered again: its first reply (or nothing yet: it comes).
            let key = RecentCommands.key(id: envelope.id, topic: topic, responseTopic: responseTopic, correlation: correlation, payload: payload)
            switch state.recent.seen(key, now: now) {
            case .answered(let reply):
                counters.withLock { $0.duplicates += 1 }
                return answer(reply, responseTopic: response, correlation: correlation, connection)
            case .running:
                counters.withLock { $0.duplicates += 1 }
                return   // answered with the first reply when it comes (`RecentCommands.answered`)
            case .new:
                break
            }
            counters.withLock { $0.commands += 1 }
            let id = envelope.id
            let response = response
            call(envelope.request.audited(by: "mqtt (\(topic))"), timeout: 10) { result in
                switch result {
                case .success(let reply):
                    return .reply(reply.adding(["id": id]), responseTopic: response, correlation: correlation, key: key, generation: generation)
                case .failure(let failure):
                    return .reply(Reply.error(id, ControlError(.unavailable, "the daemon: \(failure.description)")), responseTopic: response,
                                  correlation: correlation, key: key, generation: generation)
                }
            } refused: {
                state.recent.forget(key)
                refuse(id, ControlError(.unavailable, "too many commands waiting for the daemon"))
            }
        }
    }

    func answer(_ reply: JSONValue, responseTopic: String?, correlation: [UInt8]?, _ connection: MqttConnection) {
        let value = reply.adding(["box": .string(settings.boxID)])
        publish(connection, "\(topic)/reply", value, qos: 1, retain: false)
        if let responseTopic { publish(connection, responseTopic, value, qos: 1, retain: false, correlation: correlation) }
    }

    /// A PUBACK with a failure reason (a broker's ACL refusing a topic): said and counted. A
    /// proof-of-play batch it refused is not acknowledged: the cursor stays, and the batch is
    /// published again 30 s later (on the same connection, judged by the plays topic alone).
    func refusedAcknowledgement(_ mid: Int32, reason: Int32, _ state: inout State) {
        counters.withLock { $0.pubacksRefused += 1 }
        let plays = state.inflightPlays[mid] != nil
        sayOnce("puback:\(reason):\(plays)", &state, "mqtt: the broker refused a publish" + (plays ? " of proof of play (\(topic)/plays)" : "")
                + ": \(MqttConnection.reasonText(reason)) (0x\(String(reason, radix: 16))); check its ACL"
                + (plays ? " — plays wait in the daemon and are published again every 30 s" : "") + " (said once; counted)")
        guard plays else { return }
        if state.playsRefused == nil {
            state.playsRefused = ("\(MqttConnection.reasonText(reason)) (0x\(String(reason, radix: 16)))", ISO8601.format(Date().timeIntervalSince1970))
            state.statusDirty = true
            state.lastHealth = -.infinity   // health says it now, not at the next 30 s
        }
        state.inflightPlays = [:]
        state.batchRows = []
        state.ackedRows = []
        state.playsRetryAt = Self.now() + 30
    }

    /// Logs `text` the first time `key` is said in this bridge's life.
    func sayOnce(_ key: String, _ state: inout State, _ text: String) {
        guard state.said.count < 256, state.said.insert(key).inserted else { return }
        log(text)
    }
}

/// Commands seen lately, for answering a redelivery with the first reply: at most `capacity`,
/// none older than `window` seconds (monotonic).
struct RecentCommands {
    enum Seen { case new, running, answered(JSONValue) }
    private var waiting: [String: Int] = [:]

    static let capacity = 512
    static let window = 300.0
    private var entries: [String: (at: Double, reply: JSONValue?)] = [:]
    private var order: [String] = []

    /// A delivery's identity: where it came, its id, and a digest of its bytes (two 64-bit
    /// FNV-1a of different bases, and the length): only a byte-identical message is the same
    /// command — `{"id":1,"cmd":"pause"}` and then `{"id":1,"cmd":"play"}` are two.
    static func key(id: JSONValue, topic: String, responseTopic: String?, correlation: [UInt8]?, payload: [UInt8]) -> String {
        "\(topic)\u{1}\(responseTopic ?? "")\u{1}\(correlation.map { Digits.hex($0) } ?? "")\u{1}\(id.text)"
            + "\u{1}\(payload.count):\(String(digest(payload, basis: 0xcbf29ce484222325), radix: 16)):\(String(digest(payload, basis: 0x84222325cbf29ce4), radix: 16))"
    }

    private static func digest(_ bytes: [UInt8], basis: UInt64) -> UInt64 {
        var hash = basis
        for byte in bytes {
            hash ^= UInt64(byte)
            hash = hash &* 0x100000001b3
        }
        return hash
    }

    /// Whether `key` was seen within the window; a new one is remembered as running.
    mutating func seen(_ key: String, now: Double) -> Seen {
        while let oldest = order.first, order.count >= Self.capacity || (entries[oldest].map { now - $0.at > Self.window } ?? true) {
            order.removeFirst()
            entries[oldest] = nil
            waiting[oldest] = nil
        }
        if let entry = entries[key] {
            guard let reply = entry.reply else {
                waiting[key, default: 0] += 1
                return .running
            }
            return .answered(reply)
        }
        entries[key] = (now, nil)
        order.append(key)
        return .new
    }

    /// The first reply came: kept for later deliveries; returns how many deliveries that came
    /// while it ran are owed it too.
    mutating func answered(_ key: String, _ reply: JSONValue) -> Int {
        if entries[key] != nil { entries[key]?.reply = reply }
        return waiting.removeValue(forKey: key) ?? 0
    }

    mutating func forget(_ key: String) {
        entries[key] = nil
        waiting[key] = nil
        order.removeAll { $0 == key }
    }
}
