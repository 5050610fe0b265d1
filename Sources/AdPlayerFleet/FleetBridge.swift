import ClientSupport
import ControlProtocol
import ProcessSupport
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Bounds

/// `adplayerd mqtt` (docs/fleet.md): the daemon's control protocol on one side, an MQTT
/// broker on the other.
///
///     daemon ──events (subscribed)──▶ follower thread ─┐
///     daemon ◀──requests (one connection each)── calls queue ◀─┐   (status, health, plays, commands)
///                                                      ▼        │
///                                   bridge thread: owns the MQTT client, runs its loop,
///                                   publishes, takes commands, keeps the plays cursor
///
/// Topics (`P` the prefix, `B` the box): `P/B/online` (retained; the will says false),
/// `P/B/status` and `P/B/health` (retained), `P/B/events` (QoS 0), `P/B/plays` (QoS 1, every
/// play once it closes, in the ledger's chain order, with its link: the cursor — a chain
/// position — advances only past plays the broker acknowledged), commands from
/// `P/B/cmd`, `P/group/G/cmd`, `P/all/cmd`, replies on `P/B/reply` (and the v5 response topic).
///
/// Nothing of the broker reaches the daemon but the commands it is allowed (their tier), at
/// most `commandsPerSecond`; a broker that is down, slow or hostile costs the bridge only.
public final class FleetBridge: Sendable {
    public struct Settings: Sendable {
        public var mqtt: MqttSettings
        public var broker: MqttSettings.URLParts
        public var boxID: String
        public var password: String?
        /// The plays cursor's file (in the state folder).
        public var cursorFile: String
        public var version: String
        /// Statuses at most this often; the health verdict every `healthEvery` seconds.
        public var statusEvery = 1.0
        public var healthEvery = 30.0
        public var commandsPerSecond = 20.0

        public init(mqtt: MqttSettings, broker: MqttSettings.URLParts, boxID: String, password: String?, cursorFile: String, version: String) {
            self.mqtt = mqtt
            self.broker = broker
            self.boxID = boxID
            self.password = password
            self.cursorFile = cursorFile
            self.version = version
        }
    }

    /// What other threads hand the bridge's thread.
    enum Input: Sendable {
        case event(JSONValue)
        case daemon(connected: Bool)
        case status(JSONValue, generation: Int)
        case health(JSONValue, generation: Int)
        case plays([JSONValue], ledger: JSONValue?, full: Bool, generation: Int)
        case reply(JSONValue, responseTopic: String?, correlation: [UInt8]?, key: String, generation: Int)
        case callFailed(generation: Int)
    }

    public static let maxPayload = 64 * 1024
    static let maxInbox = 2000
    static let playsBatch = 50

    let settings: Settings
    let link: DaemonLink
    let log: @Sendable (String) -> Void
    private let inbox = Locked<(items: [Input], dropped: Int)>(([], 0))
    private let stopping = Locked(false)
    private let finished = Locked(false)
    /// The commands' calls to the daemon, in the order they came, off the MQTT callback thread.
    private let calls = Workers(name: "mqtt-calls")
    private let pendingCalls = Locked(0)
    let counters = Locked(Counters())

    /// What the bridge did and refused, for its log at stop and the tests.
    struct Counters {
        var published = 0, commands = 0, refused = 0, rateLimited = 0, cursorResets = 0
        /// Plays too large to publish whole: each published as a record of its link and why.
        var playsUnpublishable = 0
        /// Response topics outside the reply namespace; retained commands dropped; commands
        /// delivered again and answered with their first reply; PUBACKs with a failure reason.
        var responseTopicsRefused = 0, retainedDropped = 0, duplicates = 0, pubacksRefused = 0
    }

    /// Seconds on the monotonic clock: every interval the bridge measures (a wall clock that
    /// steps back must not stop reconnects or refuse every command).
    static func now() -> Double { Double(MonotonicTime.now()) / 1e9 }

    public init(settings: Settings, link: DaemonLink, log: @escaping @Sendable (String) -> Void) {
        self.settings = settings
        self.link = link
        self.log = log
    }

    var topic: String { "\(settings.mqtt.prefix)/\(settings.boxID)" }

    // MARK: Other threads → the bridge's

    func post(_ input: Input) {
        inbox.signal { inbox -> Bool in
            // Events are what may be dropped (QoS 0 anyway); answers never.
            if case .event = input, inbox.items.count >= Self.maxInbox {
                inbox.dropped += 1
                return false
            }
            inbox.items.append(input)
            return true
        }
    }

    /// Wakes the bridge's thread (waiting for work while it has no connection).
    private func signal() { inbox.signal { _ in } }

    /// A daemon call off the bridge's thread (it may take seconds); its answer comes back posted.
    /// At most `maxPendingCalls` wait: beyond, `refused` runs instead.
    func call(_ request: Request, timeout: Double = 5, _ answer: @escaping @Sendable (Result<JSONValue, ControlClient.Failure>) -> Input,
                      refused: () -> Void = {}) {
        let admitted = pendingCalls.withLock { count -> Bool in
            guard count < 64 else { return false }
            count += 1
            return true
        }
        guard admitted else { return refused() }
        let link = self.link
        calls.execute { [self] in
            let result = link.call(request, timeout: timeout)
            pendingCalls.withLock { $0 -= 1 }
            post(answer(result))
        }
    }

    // MARK: Running

    public func start() {
        link.follow(onEvent: { [self] event in post(.event(event)) }, onConnection: { [self] up in post(.daemon(connected: up)) })
        startThread(named: "adplayerd-mqtt") { [self] in
            let saved = PlaysCursor.read(settings.cursorFile)
            if saved.converted {
                log("mqtt: the plays cursor (\(settings.cursorFile)) counted sequence numbers; plays now go by chain position as they close: "
                    + "publishing the ledger's kept plays again from its first (receivers dedupe by play id)")
            }
            var state = State(cursor: saved.position, cursorLedger: saved.ledger)
            run(&state)
            finished.withLock { $0 = true }
        }
    }

    /// Says `{"online": false, "reason": "stopped"}` (retained, waited for up to 2 s), disconnects.
    public func stop() {
        stopping.withLock { $0 = true }
        signal()
        let deadline = Self.now() + 5
        while !finished.withLock({ $0 }), Self.now() < deadline { usleep(20_000) }
        link.stop()
    }

    struct State {
        var connection: MqttConnection?
        var connected = false
        var connectStarted = -Double.infinity
        var nextAttempt = -Double.infinity
        var backoff = 1.0
        var failures = 0
        var generation = 0
        /// The chain position of the last play the broker acknowledged.
        var cursor: Int64
        /// The ledger the cursor counts in (nil: not known yet, taken as the daemon's).
        var cursorLedger: String?
        /// The broker refused a plays batch (an ACL): why and since when, for health and the
        /// retained status (cleared when a play is acknowledged again).
        var playsRefused: (reason: String, since: String)?
        var fetchingPlays = false
        var inflightPlays: [Int32: Int64] = [:]
        var ackedRows: Set<Int64> = []
        var batchRows: [Int64] = []
        var morePlays = false
        var lastPlaysPump = -Double.infinity
        /// When the plays topic last moved (a batch published, a row acknowledged), and when a
        /// batch the broker refused is tried again.
        var lastPlaysProgress = -Double.infinity
        var playsRetryAt = -Double.infinity
        var statusDirty = true
        var fetchingStatus = false
        var lastStatus = -Double.infinity
        var fetchingHealth = false
        var lastHealth = -Double.infinity
        var lastHealthText = ""
        /// The command bucket: full at each connection (the first commands after `online` run).
        var tokens = 0.0
        var lastRefill = FleetBridge.now()
        var lastOverLimitReply = -Double.infinity
        /// Commands seen lately (a bounded window): a redelivery is answered with the first reply.
        var recent = RecentCommands()
        /// What was said once: a refused response topic, a retained command, refused PUBACKs by reason.
        var said: Set<String> = []
        var since = ISO8601.format(Date().timeIntervalSince1970)
    }

    private func run(_ state: inout State) {
        while !stopping.withLock({ $0 }) {
            if state.connection == nil, Self.now() >= state.nextAttempt { connect(&state) }
            drain(&state)
            if let connection = state.connection {
                let code = connection.loop(50)
                handle(connection.inbox, &state)
                if code != 0 || (!state.connected && Self.now() - state.connectStarted > 10) {
                    lost(&state, code != 0 ? "the connection to the broker was lost (\(MqttConnection.errorText(code)))" : "no CONNACK within 10 s")
                    continue
                }
                if state.connected { periodic(&state) }
            } else {
                let stopping = self.stopping
                _ = inbox.wait(timeout: max(0, min(state.nextAttempt - Self.now(), 0.25))) { inbox in
                    inbox.items.isEmpty && !stopping.withLock({ $0 }) ? nil : true
                }
            }
        }
        // A clean stop says so itself (the will is for the unclean ones).
        if let connection = state.connection, state.connected {
            let said = publish(connection, "\(topic)/online", ["online": false, "reason": "stopped", "box": .string(settings.boxID)], qos: 1, retain: true)
            let deadline = Self.now() + 2
            while let mid = said, Self.now() < deadline {
                guard connection.loop(50) == 0 else { break }
                if connection.inbox.items.contains(where: { if case .published(mid, _) = $0 { true } else { false } }) { break }
            }
            connection.disconnect()
            _ = connection.loop(50)
        }
        state.connection = nil
    }

    private func mqttSettings() -> MqttConnection.Settings {
        let online: JSONValue = ["online": false, "box": .string(settings.boxID)]
        return MqttConnection.Settings(host: settings.broker.host, port: settings.broker.port, tls: settings.broker.tls, caFile: settings.mqtt.caFile,
                                       certFile: settings.mqtt.certFile, keyFile: settings.mqtt.keyFile, username: settings.mqtt.username,
                                       password: settings.password, keepalive: settings.mqtt.keepalive, clientID: "adplayerd-\(settings.boxID)",
                                       will: ("\(topic)/online", online.line().dropLast().map { $0 }), maxPayload: Self.maxPayload)
    }

    private func connect(_ state: inout State) {
        state.generation += 1
        let mqtt = mqttSettings()
        do {
            let connection = try MqttConnection(mqtt)
            try connection.connect(mqtt)
            state.connection = connection
            state.connectStarted = Self.now()
        } catch {
            failed(&state, "\(error)")
        }
    }

    /// The next attempt after capped exponential backoff with jitter (a fleet must not
    /// stampede a broker that comes back): 1 s doubling to 60 s, each wait 50–100 % of it.
    private func failed(_ state: inout State, _ why: String) {
        state.failures += 1
        if state.failures == 1 || state.failures % 10 == 0 {
            log("mqtt: \(why); trying again (attempt \(state.failures), backing off up to 60 s)")
        }
        let wait = state.backoff * Double.random(in: 0.5...1.0)
        state.nextAttempt = Self.now() + wait
        state.backoff = min(state.backoff * 2, 60)
    }

    func lost(_ state: inout State, _ why: String) {
        state.connection = nil
        state.connected = false
        state.inflightPlays = [:]
        state.ackedRows = []
        state.batchRows = []
        state.fetchingPlays = false
        state.fetchingStatus = false
        state.fetchingHealth = false
        failed(&state, why)
    }

    private func handle(_ inbox: MqttInbox, _ state: inout State) {
        let items = inbox.items
        inbox.items.removeAll(keepingCapacity: true)
        if inbox.oversized > 0 {
            log("mqtt: \(inbox.oversized) messages over \(Self.maxPayload) bytes were dropped")
            inbox.oversized = 0
        }
        for item in items {
            switch item {
            case .connected(let reason):
                guard reason == 0 else {
                    lost(&state, "the broker refused the connection: \(MqttConnection.connackReason(reason))")
                    return
                }
                onConnected(&state)
            case .disconnected(let reason):
                lost(&state, "the connection to the broker was lost (\(MqttConnection.errorText(reason)))")
                return
            case .published(let mid, let reason) where reason >= 0x80:
                refusedAcknowledgement(mid, reason: reason, &state)
            case .published(let mid, _):
                if let row = state.inflightPlays.removeValue(forKey: mid) {
                    state.lastPlaysProgress = Self.now()
                    acknowledged(row, &state)
                }
            case .message(let topic, let payload, let retained, let responseTopic, let correlation):
                guard !retained else {
                    // A retained command is a standing one the broker replays at every
                    // (re)subscription: never run (the subscription asks for none; this drops any).
                    counters.withLock { $0.retainedDropped += 1 }
                    sayOnce("retained:\(topic)", &state, "mqtt: a retained message on \(topic) was dropped: retained commands are never run "
                            + "(clear it: mosquitto_pub -r -n -t \(topic))")
                    continue
                }
                command(topic, payload, responseTopic: responseTopic, correlation: correlation, &state)
            case .log(let level, let text):
                // Errors (and warnings) of libmosquitto: TLS refusals say why here.
                if level & 0x0C != 0 { log("mqtt: \(text)") }
            }
        }
    }

    private func onConnected(_ state: inout State) {
        state.connected = true
        state.failures = 0
        state.backoff = 1
        state.tokens = settings.commandsPerSecond   // full: automation configuring a box as it comes up is served
        state.lastRefill = Self.now()
        log("mqtt: connected to \(settings.broker.tls ? "mqtts" : "mqtt")://\(settings.broker.host):\(settings.broker.port) as \(topic)")
        guard let connection = state.connection else { return }
        _ = publish(connection, "\(topic)/online", ["online": true, "version": .string(settings.version), "since": .string(state.since),
                                                     "box": .string(settings.boxID)], qos: 1, retain: true)
        if settings.mqtt.commands != nil {
            var patterns = ["\(topic)/cmd", "\(settings.mqtt.prefix)/all/cmd"]
            patterns += settings.mqtt.groups.map { "\(settings.mqtt.prefix)/group/\($0)/cmd" }
            for pattern in patterns where !connection.subscribe(pattern, qos: 1) { log("mqtt: cannot subscribe to \(pattern)") }
        }
        state.statusDirty = true
        state.lastHealth = -.infinity
        state.lastPlaysPump = -.infinity
    }

    @discardableResult
    func publish(_ connection: MqttConnection, _ topic: String, _ value: JSONValue, qos: Int32, retain: Bool,
                         correlation: [UInt8]? = nil) -> Int32? {
        var bytes = value.line()
        bytes.removeLast()   // the newline
        let mid = connection.publish(topic, bytes, qos: qos, retain: retain, correlation: correlation)
        if mid != nil { counters.withLock { $0.published += 1 } }
        return mid
    }

    // MARK: What the other threads posted

    private func drain(_ state: inout State) {
        let (items, dropped) = inbox.withLock { inbox -> ([Input], Int) in
            defer { inbox.items.removeAll(keepingCapacity: true); inbox.dropped = 0 }
            return (inbox.items, inbox.dropped)
        }
        if dropped > 0 { log("mqtt: \(dropped) events were not relayed (the broker too slow)") }
        for item in items {
            switch item {
            case .event(let event):
                state.statusDirty = true
                if let name = event["event"]?.string, name == "ad.ended" { state.lastPlaysPump = -.infinity }
                guard state.connected, let connection = state.connection, matches(event["event"]?.string ?? "") else { continue }
                publish(connection, "\(topic)/events", event.adding(["box": .string(settings.boxID)]), qos: 0, retain: false)
            case .daemon(let up):
                state.statusDirty = true
                if !up, state.connected, let connection = state.connection {
                    publish(connection, "\(topic)/health", ["status": "failing", "box": .string(settings.boxID),
                                                            "checks": [["name": "daemon", "status": "failing", "reason": "the daemon does not answer"]]],
                            qos: 1, retain: true)
                    state.lastHealthText = ""
                }
            case .status(let status, let generation):
                state.fetchingStatus = false
                guard generation == state.generation, state.connected, let connection = state.connection else { continue }
                var fields = status.object ?? [:]
                fields["queue"] = nil
                fields["box"] = .string(settings.boxID)
                fields["plays_feed"] = playsFeed(state)
                publish(connection, "\(topic)/status", .object(fields), qos: 1, retain: true)
            case .health(let verdict, let generation):
                state.fetchingHealth = false
                guard generation == state.generation, state.connected, let connection = state.connection else { continue }
                let verdict = withPlaysFeed(verdict, state)
                let text = verdict.text
                guard text != state.lastHealthText else { continue }
                state.lastHealthText = text
                publish(connection, "\(topic)/health", verdict.adding(["box": .string(settings.boxID)]), qos: 1, retain: true)
            case .plays(let rows, let ledger, let full, let generation):
                state.fetchingPlays = false
                guard generation == state.generation, state.connected, let connection = state.connection else { continue }
                guard followLedger(ledger, &state) else { continue }
                sendPlays(rows, full: full, connection, &state)
            case .reply(let reply, let responseTopic, let correlation, let key, let generation):
                let owed = state.recent.answered(key, reply)
                guard generation == state.generation, state.connected, let connection = state.connection else { continue }
                // The first delivery's reply, and the same for each delivery that came while it ran.
                for _ in 0...owed { answer(reply, responseTopic: responseTopic, correlation: correlation, connection) }
            case .callFailed(let generation):
                if generation == state.generation {
                    state.fetchingStatus = false
                    state.fetchingHealth = false
                    state.fetchingPlays = false
                }
            }
        }
    }

    private func matches(_ name: String) -> Bool {
        settings.mqtt.events.contains { pattern in
            pattern == "*" || pattern == name || (pattern.hasSuffix("*") && name.hasPrefix(String(pattern.dropLast())))
        }
    }

    // MARK: Status, health, plays

    private func periodic(_ state: inout State) {
        let now = Self.now()
        let generation = state.generation
        if state.statusDirty, !state.fetchingStatus, now - state.lastStatus >= settings.statusEvery {
            state.statusDirty = false
            state.fetchingStatus = true
            state.lastStatus = now
            call(.status(queue: false)) { result in
                guard case .success(let reply) = result, reply["ok"]?.bool == true, let status = reply["result"] else { return .callFailed(generation: generation) }
                return .status(status, generation: generation)
            } refused: { state.fetchingStatus = false }
        }
        if !state.fetchingHealth, now - state.lastHealth >= settings.healthEvery {
            state.fetchingHealth = true
            state.lastHealth = now
            call(.health) { result in
                switch result {
                case .success(let reply) where reply["ok"]?.bool == true: return .health(reply["result"] ?? .null, generation: generation)
                case .success(let reply):
                    return .health(["status": "failing", "checks": [["name": "daemon", "status": "failing",
                                                                     "reason": .string(reply["error"]?["message"]?.string ?? "health refused")]]],
                                   generation: generation)
                case .failure(let failure):
                    return .health(["status": "failing", "checks": [["name": "daemon", "status": "failing", "reason": .string(failure.description)]]],
                                   generation: generation)
                }
            } refused: { state.fetchingHealth = false }
        }
        // Plays: one batch at a time, after an ad ends, after connecting, and every 5 s.
        if !state.fetchingPlays, state.inflightPlays.isEmpty, state.batchRows.isEmpty, now >= state.playsRetryAt,
           state.morePlays || now - state.lastPlaysPump >= 5 {
            state.morePlays = false
            state.fetchingPlays = true
            state.lastPlaysPump = now
            let cursor = state.cursor
            call(.plays(since: nil, limit: Self.playsBatch, afterChain: cursor)) { result in
                guard case .success(let reply) = result, reply["ok"]?.bool == true else { return .callFailed(generation: generation) }
                let rows = reply["result"]?["plays"]?.array ?? []
                return .plays(rows, ledger: reply["result"]?["ledger"], full: rows.count == Self.playsBatch, generation: generation)
            } refused: { state.fetchingPlays = false }
        }
        // A broker that takes proof of play and never acknowledges it: the connection is dropped
        // (and made again) rather than letting libmosquitto's queue grow. Judged by the plays
        // topic alone: status acknowledgements arriving meanwhile do not hide it.
        if !state.inflightPlays.isEmpty, now - state.lastPlaysProgress > 60 {
            lost(&state, "the broker acknowledged no proof of play for 60 s")
        }
    }

    /// The fields of a play the bridge publishes: what it was, and its link in the ledger's
    /// chain — `sequence`, `chain`, `hash`, `prev_hash`, `segment` — so the back office holds the
    /// chain's head outside the box (docs/reporting.md, "What the chain proves").
    static let playFields = ["id", "row", "sequence", "chain", "ad_id", "kind", "source", "content_id", "started", "ended", "seconds", "viewable",
                             "reason", "display", "display_evidence", "loudness", "hash", "prev_hash", "segment"]
    /// What a play too large to publish whole still says: its link.
    static let linkFields = ["id", "row", "sequence", "chain", "kind", "started", "ended", "hash", "prev_hash", "segment"]

    /// Publishes the plays in chain order: each one closed (the daemon lists a play once it
    /// closes: one on screen for hours goes when it ends, with its end). A play whose message
    /// would pass the largest the broker takes (an ad server's huge id, a long evidence) is
    /// published as its link and the reason, logged and counted — never a feed stuck at it.
    private func sendPlays(_ rows: [JSONValue], full: Bool, _ connection: MqttConnection, _ state: inout State) {
        var sent: [Int64] = []
        for row in rows {
            guard let position = row["chain"]?.integer else { continue }
            var fields: [String: JSONValue] = ["box": .string(settings.boxID)]
            for key in Self.playFields { fields[key] = row[key] ?? .null }
            var value = JSONValue.object(fields)
            if value.line().count > Self.maxPayload - 1024 {
                counters.withLock { $0.playsUnpublishable += 1 }
                log("mqtt: play \(row["sequence"]?.integer ?? 0) (chain \(position)) is \(value.line().count) bytes, over what the broker takes: "
                    + "published as its link only, marked unpublishable (counted; the daemon's plays and exports hold it whole)")
                var link: [String: JSONValue] = ["box": .string(settings.boxID),
                                                 "unpublishable": .string("its message is over \(Self.maxPayload) bytes (an id or evidence too long)")]
                for key in Self.linkFields { link[key] = row[key] ?? .null }
                value = .object(link)
            }
            guard let mid = publish(connection, "\(topic)/plays", value, qos: 1, retain: false) else { break }
            if state.inflightPlays.isEmpty { state.lastPlaysProgress = Self.now() }
            state.inflightPlays[mid] = position
            sent.append(position)
        }
        state.batchRows = sent
        state.morePlays = full && sent.count == rows.count
    }

    /// The daemon's ledger against the cursor's: another ledger (a new state file), or a cursor
    /// past the ledger's head, starts the cursor over from the ledger's first kept play, said
    /// once — at least once, never skipped (each play's `id` dedupes). False when it did.
    private func followLedger(_ ledger: JSONValue?, _ state: inout State) -> Bool {
        guard let id = ledger?["id"]?.string, let head = ledger?["head"]?.integer else { return true }
        // The daemon's file is locked: its plays are numbered in memory until it opens (and
        // then in the file's ledger): nothing is published meanwhile, nothing is skipped.
        if ledger?["waiting"]?.bool == true { return false }
        if state.cursorLedger == nil {
            state.cursorLedger = id
            saveCursor(state)
        }
        guard state.cursorLedger != id || state.cursor > head else { return true }
        log("mqtt: " + (state.cursorLedger != id ? "the daemon's ledger is \(id), the cursor was for \(state.cursorLedger ?? "?")"
                                                 : "the cursor (chain \(state.cursor)) is past the ledger's head (\(head))")
            + "; publishing its plays again from the first (receivers dedupe by play id)")
        counters.withLock { $0.cursorResets += 1 }
        state.cursor = 0
        state.cursorLedger = id
        state.batchRows = []
        state.ackedRows = []
        state.morePlays = true
        saveCursor(state)
        return false
    }

    private func saveCursor(_ state: State) {
        do {
            try PlaysCursor.write(state.cursor, ledger: state.cursorLedger, to: settings.cursorFile)
        } catch {
            log("mqtt: the plays cursor cannot be written (\(error)); after a restart the rows since the last write are sent again")
        }
    }

    /// A play the broker acknowledged: the cursor moves past every play of the batch once all
    /// are (in order: a play is never skipped), and is written to its file.
    private func acknowledged(_ position: Int64, _ state: inout State) {
        state.ackedRows.insert(position)
        if state.playsRefused != nil {
            state.playsRefused = nil
            state.statusDirty = true
            state.lastHealth = -.infinity
        }
        guard !state.batchRows.isEmpty, state.batchRows.allSatisfy(state.ackedRows.contains) else { return }
        let last = state.batchRows.max() ?? state.cursor
        state.batchRows = []
        state.ackedRows = []
        guard last > state.cursor else { return }
        state.cursor = last
        saveCursor(state)
    }

    /// The plays feed as the retained status says it: `ok`, or `refused` by the broker with why.
    func playsFeed(_ state: State) -> JSONValue {
        guard let refused = state.playsRefused else { return ["state": "ok", "cursor": .int(state.cursor)] }
        return ["state": "refused", "reason": .string(refused.reason), "since": .string(refused.since), "cursor": .int(state.cursor)]
    }

    /// The daemon's health verdict, with the bridge's own check when the broker refuses proof of
    /// play: the box is `degraded` — its plays wait in the daemon, nothing reaches the back office.
    func withPlaysFeed(_ verdict: JSONValue, _ state: State) -> JSONValue {
        guard let refused = state.playsRefused, case .object(var fields) = verdict else { return verdict }
        var checks = fields["checks"]?.array ?? []
        checks.append(["name": "fleet-plays", "status": "degraded",
                       "reason": .string("the broker refuses proof of play on \(topic)/plays since \(refused.since): \(refused.reason); "
                                         + "plays wait in the daemon and are published again every 30 s")])
        fields["checks"] = .array(checks)
        if fields["status"]?.string == "ok" { fields["status"] = "degraded" }
        return .object(fields)
    }

    /// For the log at stop and the benchmark.
    public var summary: String {
        let c = counters.withLock { $0 }
        return "published \(c.published), commands \(c.commands), refused \(c.refused), over the rate \(c.rateLimited), "
            + "duplicates \(c.duplicates), retained dropped \(c.retainedDropped), response topics refused \(c.responseTopicsRefused), "
            + "PUBACKs refused \(c.pubacksRefused), plays cursor started over \(c.cursorResets)"
    }
}

/// The last play the broker acknowledged — its ledger's id and its chain position — in a small
/// file of its own (`LEDGER chain:POSITION`, written atomically: a temporary file, fsync,
/// rename). Absent or unreadable: 0 (every play the daemon keeps). A cursor written before plays
/// went by chain position (`LEDGER SEQUENCE`, or a number alone) counted sequence numbers: it
/// starts over from 0 (`converted`), at least once, never skipped.
enum PlaysCursor {
    static func read(_ path: String) -> (ledger: String?, position: Int64, converted: Bool) {
        guard let data = FileManager.default.contents(atPath: path), data.count < 128 else { return (nil, 0, false) }
        let words = String(decoding: data, as: UTF8.self).split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init)
        switch words.count {
        case 1: return (nil, 0, Int64(words[0]) != nil)
        case 2:
            guard words[0].utf8.count <= 64 else { return (nil, 0, false) }
            if words[1].hasPrefix("chain:"), let position = Int64(words[1].dropFirst(6)), position >= 0 {
                return (words[0] == "-" ? nil : words[0], position, false)
            }
            return (words[0], 0, Int64(words[1]) != nil)
        default: return (nil, 0, false)
        }
    }

    static func write(_ position: Int64, ledger: String?, to path: String) throws {
        do {
            try AtomicFile.write(Data(((ledger.map { $0 + " " } ?? "- ") + "chain:\(position)\n").utf8), to: path, durable: true)
        } catch {
            throw ControlClient.Failure(description: error.description)
        }
    }
}
