import AdRuntime
import AdTestSupport
import Foundation
import XCTest

/// Debian's `mosquitto` on a loopback port of its own, started and stopped by the test: plain,
/// with a password file, with TLS from certificates the test makes (openssl), with persistence.
final class Broker: @unchecked Sendable {
    let folder: URL
    let port: UInt16
    private var running: BackgroundProcess?
    private let configuration: String

    init(password: (user: String, password: String)? = nil, tls: (ca: String, cert: String, key: String)? = nil,
         requireCertificate: Bool = false, acl: String? = nil) throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("broker-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        port = try freePort()
        var lines = ["listener \(port) 127.0.0.1", "persistence true", "persistence_location \(folder.path)/",
                     "autosave_interval 1", "max_keepalive 3600", "user root", "log_dest stderr", "log_type error", "log_type warning"]
        if let password {
            let file = folder.appendingPathComponent("passwords").path
            let (status, output) = try runToEnd("/usr/bin/mosquitto_passwd", ["-c", "-b", file, password.user, password.password])
            guard status == 0 else { throw RawHTTPFailure(description: "mosquitto_passwd: \(output)") }
            lines += ["allow_anonymous false", "password_file \(file)"]
        } else {
            lines.append("allow_anonymous true")
        }
        if let acl {
            let file = folder.appendingPathComponent("acl").path
            try Data((acl + "\n").utf8).write(to: URL(fileURLWithPath: file))
            lines.append("acl_file \(file)")
        }
        if let tls {
            lines += ["cafile \(tls.ca)", "certfile \(tls.cert)", "keyfile \(tls.key)"]
            if requireCertificate { lines += ["require_certificate true", "use_identity_as_username true"] }
        }
        configuration = folder.appendingPathComponent("mosquitto.conf").path
        try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: configuration))
        try start()
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: folder)
    }

    func start() throws {
        let running = try BackgroundProcess("/usr/sbin/mosquitto", ["-c", configuration], collectOutput: true)
        self.running = running
        let port = self.port
        guard waitUntil(timeout: 20, { (try? RawHTTP(port: port, timeout: 1)).map { $0.close(); return true } ?? false || !running.isRunning }),
              running.isRunning else {
            throw RawHTTPFailure(description: "mosquitto did not start: \(running.log)")
        }
    }

    /// SIGTERM (mosquitto saves its persistence file) and the exit.
    func stop() {
        guard let running, running.isRunning else { return }
        kill(running.pid, SIGTERM)
        running.process.waitUntilExit()
        self.running = nil
    }

    var log: String { running?.log ?? "" }
    var pid: Int32? { running?.pid }
    var url: String { "mqtt://127.0.0.1:\(port)" }

    /// `mosquitto_sub`: up to `count` messages of `topic` (`-v`: "topic payload" lines), for at
    /// most `seconds`.
    func subscribe(_ topic: String, count: Int, seconds: Int = 20, extra: [String] = []) throws -> [String] {
        let (_, output) = try runToEnd("/usr/bin/mosquitto_sub", ["-p", String(port), "-h", "127.0.0.1", "-t", topic, "-v", "-C", String(count),
                                                                 "-W", String(seconds)] + extra)
        return output.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("Timed out") }
    }

    /// `mosquitto_pub -l`: each of `lines` a message, from one publisher, back to back.
    func publish(_ topic: String, lines: [String], extra: [String] = []) throws {
        let file = folder.appendingPathComponent("lines-\(UUID().uuidString.prefix(8)).txt").path
        try Data(lines.map { $0 + "\n" }.joined().utf8).write(to: URL(fileURLWithPath: file))
        let sender = Process()
        sender.executableURL = URL(fileURLWithPath: "/usr/bin/mosquitto_pub")
        sender.arguments = ["-p", String(port), "-h", "127.0.0.1", "-t", topic, "-l"] + extra
        sender.standardInput = FileHandle(forReadingAtPath: file)
        try sender.run()
        sender.waitUntilExit()
    }

    /// Returns once `subscriber` (a `mosquitto_sub` with `-t topic`) is subscribed: a marker is
    /// published on `topic` until its log shows it (no sleep that guesses how long that takes).
    func waitSubscribed(_ subscriber: BackgroundProcess, topic: String) throws {
        let marker = "subscribed-\(UUID().uuidString.prefix(8))"
        var published = 0
        let seen = waitUntil(timeout: 20) {
            if subscriber.log.contains(marker) { return true }
            published += 1
            try? self.publish(topic, marker)
            return subscriber.log.contains(marker)
        }
        XCTAssertTrue(seen, "the subscriber never saw \(marker) on \(topic) (\(published) published)")
    }

    func publish(_ topic: String, _ message: String, extra: [String] = []) throws {
        let (status, output) = try runToEnd("/usr/bin/mosquitto_pub", ["-p", String(port), "-h", "127.0.0.1", "-t", topic, "-m", message] + extra)
        XCTAssertEqual(status, 0, output)
    }

    /// The payload of each line `topic payload` as JSON, by topic.
    static func json(_ lines: [String]) -> [(topic: String, value: [String: Any])] {
        lines.compactMap { line in
            guard let space = line.firstIndex(of: " "),
                  let value = try? JSONSerialization.jsonObject(with: Data(line[line.index(after: space)...].utf8)) as? [String: Any] else { return nil }
            return (String(line[..<space]), value)
        }
    }
}

/// `adplayerd mqtt` for one daemon: its stderr collected.
final class BridgeProcess: @unchecked Sendable {
    let running: BackgroundProcess
    let stateDir: String
    var process: Process { running.process }
    var log: String { running.log }

    init(daemon: DaemonProcess, broker: String, box: String, groups: [String] = [], extra: [String] = []) throws {
        stateDir = daemon.folder.appendingPathComponent("bridge-\(box)").path
        running = try BackgroundProcess(Executables.adplayerd, ["mqtt", "--socket", daemon.socket, "--state-dir", stateDir, "--mqtt-broker", broker,
                                                                "--mqtt-box-id", box, "--mqtt-keepalive", "5"]
                                        + (groups.isEmpty ? [] : ["--mqtt-groups", groups.joined(separator: ",")]) + extra)
    }

    /// The cursor file's chain position (`LEDGER chain:POSITION`).
    var cursor: Int64 {
        (try? String(contentsOfFile: stateDir + "/mqtt-plays.cursor", encoding: .utf8))
            .flatMap { $0.split(whereSeparator: \.isWhitespace).last.flatMap { Int64($0.replacingOccurrences(of: "chain:", with: "")) } } ?? 0
    }
    var cursorLedger: String? {
        (try? String(contentsOfFile: stateDir + "/mqtt-plays.cursor", encoding: .utf8)).flatMap { text in
            let words = text.split(whereSeparator: \.isWhitespace)
            return words.count == 2 ? String(words[0]) : nil
        }
    }

    func waitConnected() throws {
        guard waitUntil(timeout: 30, { self.log.contains("mqtt: connected") || !self.process.isRunning }), process.isRunning else {
            throw RawHTTPFailure(description: "the bridge did not connect: \(log)")
        }
    }
}

/// A fleet of boxes on a real broker (docs/fleet.md): presence and the will, group commands,
/// proof of play delivered across an outage and a killed bridge, hostile publishers, TLS.
final class FleetTests: XCTestCase {
    private static let catalog = """
        {"version": 1, "overlays": [{"id": "ov-fleet", "image": "overlay.png",
          "slots": [\((0..<60).map { "{\"start\": \(Double($0) * 2 + 0.5), \"duration\": 1}" }.joined(separator: ", "))]}]}
        """

    /// The daemon's plays that ended: their ids, rows and chain positions.
    private func endedPlays(_ daemon: DaemonProcess) throws -> [(id: String, row: Int, chain: Int)] {
        let plays = try daemon.connect().call("plays")
        return ((plays["result"] as? [String: Any])?["plays"] as? [[String: Any]] ?? []).compactMap { play in
            play["ended"] is NSNull ? nil : (play["id"] as? String ?? "", play["row"] as? Int ?? 0, play["chain"] as? Int ?? 0)
        }
    }

    private func playing(_ daemon: DaemonProcess) throws -> Bool? {
        try daemon.connect().call("status")["result"].flatMap { ($0 as? [String: Any])?["playing"] as? Bool }
    }

    /// Ten daemons, each with its own socket, state and bridge, on one broker: every box online
    /// (retained); a command to group `lobby` pauses exactly that group; `all` reaches every box.
    func testAFleetOfTenOnOneBroker() throws {
        let broker = try Broker()
        var daemons: [DaemonProcess] = []
        var bridges: [BridgeProcess] = []
        for index in 0..<10 {
            let daemon = try DaemonProcess(extra: ["--ao", "null"])
            XCTAssertEqual(try daemon.ctl("open", Media.path("episode-long.mp4")).0, 0)
            daemons.append(daemon)
            bridges.append(try BridgeProcess(daemon: daemon, broker: broker.url, box: "box-\(index)", groups: index < 4 ? ["lobby"] : ["gate"]))
        }
        for bridge in bridges { try bridge.waitConnected() }
        let online = Broker.json(try broker.subscribe("adplayer/+/online", count: 10))
        XCTAssertEqual(Set(online.map(\.topic)), Set((0..<10).map { "adplayer/box-\($0)/online" }), "\(online)")
        XCTAssertTrue(online.allSatisfy { $0.value["online"] as? Bool == true && $0.value["version"] != nil }, "\(online)")

        try broker.publish("adplayer/group/lobby/cmd", #"{"id": 1, "cmd": "pause"}"#)
        for (index, daemon) in daemons.enumerated() {
            if index < 4 {
                XCTAssertTrue(waitUntil(timeout: 20) { (try? self.playing(daemon)) == false }, "box-\(index) of lobby paused")
            }
        }
        // The retained status topics say the same, once each bridge has published its change.
        XCTAssertTrue(waitUntil(timeout: 20) {
            let statuses = Broker.json((try? broker.subscribe("adplayer/+/status", count: 10, seconds: 5)) ?? [])
            let byBox = Dictionary(statuses.map { ($0.value["box"] as? String ?? "", $0.value["playing"] as? Bool) }) { $1 }
            return (0..<10).allSatisfy { byBox["box-\($0)"] == .some($0 >= 4) }
        }, "status topics: lobby paused, the others playing")
        for index in 4..<10 { XCTAssertEqual(try playing(daemons[index]), true, "box-\(index) is not in lobby") }

        try broker.publish("adplayer/all/cmd", #"{"id": 2, "cmd": "play"}"#)
        for (index, daemon) in daemons.enumerated() {
            XCTAssertTrue(waitUntil(timeout: 20) { (try? self.playing(daemon)) == true }, "box-\(index) plays again")
        }
    }

    /// The broker says a box is gone: `kill -9` of a bridge and a bridge frozen with SIGSTOP
    /// leave the will (`online: false`, retained) within 1.5 keepalives plus the broker's check;
    /// a clean stop says `stopped` itself.
    func testTheWillAndACleanStop() throws {
        let broker = try Broker()
        let daemon = try DaemonProcess()
        let killed = try BridgeProcess(daemon: daemon, broker: broker.url, box: "killed")
        let frozen = try BridgeProcess(daemon: daemon, broker: broker.url, box: "frozen")
        let stopped = try BridgeProcess(daemon: daemon, broker: broker.url, box: "stopped")
        for bridge in [killed, frozen, stopped] { try bridge.waitConnected() }

        kill(killed.process.processIdentifier, SIGKILL)
        kill(frozen.process.processIdentifier, SIGSTOP)
        kill(stopped.process.processIdentifier, SIGTERM)
        stopped.process.waitUntilExit()
        XCTAssertEqual(stopped.process.terminationStatus, 0, stopped.log)
        func offline(_ box: String) -> [String: Any]? {
            let lines = Broker.json((try? broker.subscribe("adplayer/\(box)/online", count: 1, seconds: 3)) ?? [])
            return lines.first.flatMap { $0.value["online"] as? Bool == false ? $0.value : nil }
        }
        var said: [String: Any]?
        XCTAssertTrue(waitUntil(timeout: 30) { said = offline("killed"); return said != nil }, "the will of the killed bridge")
        XCTAssertNil(said?["reason"])
        XCTAssertTrue(waitUntil(timeout: 30) { said = offline("frozen"); return said != nil }, "the will of the frozen bridge")
        said = offline("stopped")
        XCTAssertEqual(said?["reason"] as? String, "stopped", "\(String(describing: said)) \(stopped.log)")
        kill(frozen.process.processIdentifier, SIGCONT)
    }

    /// Proof of play across a broker outage and a bridge killed while it was down: every play
    /// the daemon recorded reaches `P/B/plays` (a persistent subscriber, QoS 1), none missing.
    func testEveryPlayReachesTheBrokerAcrossAnOutageAndAKilledBridge() throws {
        let broker = try Broker()
        // The fleet's side: a persistent session that queues QoS 1 messages while it is away.
        let session = ["-c", "-i", "fleet-plays", "-q", "1"]
        _ = try broker.subscribe("adplayer/box-p/plays", count: 1, seconds: 1, extra: session)
        let daemon = try DaemonProcess(catalog: makeCatalog(Self.catalog))
        var bridge = try BridgeProcess(daemon: daemon, broker: broker.url, box: "box-p")
        try bridge.waitConnected()
        XCTAssertEqual(try daemon.ctl("open", Media.path("episode-long.mp4")).0, 0)
        func rows() throws -> [Int] { try endedPlays(daemon).map(\.row) }
        XCTAssertTrue(waitUntil(timeout: 30) { (try? rows().count) ?? 0 >= 2 }, "plays before the outage")
        broker.stop()
        let before = try rows().count
        XCTAssertTrue(waitUntil(timeout: 30) { (try? rows().count) ?? 0 >= before + 3 }, "plays during the outage")
        // The bridge dies while the broker is down; a new one starts from its cursor.
        kill(bridge.process.processIdentifier, SIGKILL)
        bridge.process.waitUntilExit()
        bridge = try BridgeProcess(daemon: daemon, broker: broker.url, box: "box-p")
        try broker.start()
        try bridge.waitConnected()
        XCTAssertEqual(try daemon.ctl("stop").0, 0)
        let expected = try rows()
        let head = try endedPlays(daemon).map(\.chain).max() ?? 0
        XCTAssertTrue(waitUntil(timeout: 30) { bridge.cursor >= Int64(head) }, "the cursor reaches the chain's head: \(bridge.cursor) \(bridge.log)")
        let received = Broker.json(try broker.subscribe("adplayer/box-p/plays", count: 1000, seconds: 5, extra: session))
        let got = Set(received.compactMap { $0.value["row"] as? Int })
        XCTAssertEqual(Set(expected).subtracting(got), [], "every play reached the broker (received rows \(got.sorted()))")
        XCTAssertTrue(received.allSatisfy { $0.value["box"] as? String == "box-p" && $0.value["id"] != nil && $0.value["ad_id"] as? String == "ov-fleet" })
        // Each play closed, with its link (issue 45, 7): the back office holds the chain.
        XCTAssertTrue(received.allSatisfy { $0.value["ended"] is String && $0.value["hash"] is String && $0.value["prev_hash"] is String
                                            && $0.value["sequence"] is Int && $0.value["chain"] is Int }, "\(received.prefix(3))")
    }

    /// The state file re-created under a running bridge (found damaged or emptied, or removed):
    /// its plays start again from sequence 1 in a new ledger, all at or below the bridge's old
    /// cursor. The bridge sees the ledger's id change, says so once, and publishes every play of
    /// the new ledger — none skipped (issue 33). Then salvaged (its plays table destroyed): the
    /// ledger and its numbers go on, and every play after the salvage is published.
    func testANewLedgerUnderTheBridgeIsPublishedWholeFromItsFirstPlay() throws {
        let broker = try Broker()
        let session = ["-c", "-i", "fleet-ledger", "-q", "1"]
        _ = try broker.subscribe("adplayer/box-l/plays", count: 1, seconds: 1, extra: session)
        let daemon = try DaemonProcess(catalog: makeCatalog(Self.catalog))
        let bridge = try BridgeProcess(daemon: daemon, broker: broker.url, box: "box-l")
        try bridge.waitConnected()
        func ended() throws -> [(id: String, row: Int, chain: Int)] { try endedPlays(daemon) }
        XCTAssertEqual(try daemon.ctl("open", Media.path("episode-long.mp4")).0, 0)
        XCTAssertTrue(waitUntil(timeout: 60) { (try? ended().count) ?? 0 >= 4 && bridge.cursor >= 4 }, "plays acknowledged: \(bridge.log)")
        let firstLedger = bridge.cursorLedger
        XCTAssertNotNil(firstLedger)
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        let oldCursor = bridge.cursor
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: daemon.stateDir + "/adplayerd.sqlite" + suffix) }
        try daemon.launch()
        XCTAssertEqual(try daemon.ctl("open", Media.path("episode-long.mp4")).0, 0)
        XCTAssertTrue(waitUntil(timeout: 60) { (try? ended().count) ?? 0 >= 2 }, "plays of the new ledger")
        XCTAssertEqual(try daemon.ctl("stop").0, 0)
        let expected = try ended()
        XCTAssertTrue(expected.allSatisfy { $0.row <= oldCursor }, "numbered at or below the old cursor \(oldCursor): \(expected)")
        XCTAssertTrue(waitUntil(timeout: 30) { bridge.cursorLedger != firstLedger && bridge.cursor >= Int64(expected.map(\.chain).max() ?? 0) },
                      "the cursor follows the new ledger: \(bridge.log)")
        XCTAssertEqual(bridge.log.components(separatedBy: "publishing its plays again from the first").count - 1, 1, bridge.log)
        var received = Broker.json(try broker.subscribe("adplayer/box-l/plays", count: 1000, seconds: 5, extra: session))
        var got = Set(received.compactMap { $0.value["id"] as? String })
        XCTAssertEqual(Set(expected.map(\.id)).subtracting(got), [], "every play of the new ledger reached the broker")

        // Salvaged: the plays table destroyed, the rest read back — the ledger and its numbers
        // go on, and every play after the salvage is published.
        let ledger = bridge.cursorLedger
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        let damage = """
            import sqlite3, sys
            db = sqlite3.connect(sys.argv[1]); db.execute('PRAGMA wal_checkpoint(TRUNCATE)')
            root = db.execute("SELECT rootpage FROM sqlite_master WHERE type='table' AND name='plays'").fetchone()[0]; db.close()
            f = open(sys.argv[1], 'r+b'); f.seek((root - 1) * 4096); f.write(bytes([0x5A]) * 4096); f.close()
            """
        XCTAssertEqual(try runToEnd("/usr/bin/python3", ["-c", damage, daemon.stateDir + "/adplayerd.sqlite"]).status, 0)
        try daemon.launch()
        XCTAssertTrue(daemon.log.contains(".bad-"), "salvaged: \(daemon.log)")
        XCTAssertEqual(try daemon.ctl("open", Media.path("episode-long.mp4")).0, 0)
        XCTAssertTrue(waitUntil(timeout: 60) { (try? ended().count) ?? 0 >= 2 }, "plays after the salvage")
        XCTAssertEqual(try daemon.ctl("stop").0, 0)
        let salvaged = try ended()
        XCTAssertTrue(salvaged.allSatisfy { $0.row > Int(expected.map(\.row).max() ?? 0) }, "numbered on: \(salvaged)")
        XCTAssertTrue(waitUntil(timeout: 30) { bridge.cursor >= Int64(salvaged.map(\.chain).max() ?? 0) }, bridge.log)
        XCTAssertEqual(bridge.cursorLedger, ledger, "the same ledger")
        received = Broker.json(try broker.subscribe("adplayer/box-l/plays", count: 1000, seconds: 5, extra: session))
        got = Set(received.compactMap { $0.value["id"] as? String })
        XCTAssertEqual(Set(salvaged.map(\.id)).subtracting(got), [], "every play after the salvage reached the broker")
    }

    /// The bridge killed between its publish and the broker's acknowledgement (the broker frozen
    /// with SIGSTOP, so the rows are sent and never acknowledged): the next bridge sends them
    /// again from its cursor — a duplicate is allowed (the `id` says so), a gap is not.
    func testABridgeKilledBeforeTheAcknowledgementSendsTheRowsAgain() throws {
        let broker = try Broker()
        let session = ["-c", "-i", "fleet-acks", "-q", "1"]
        _ = try broker.subscribe("adplayer/box-a/plays", count: 1, seconds: 1, extra: session)
        let daemon = try DaemonProcess(catalog: makeCatalog(Self.catalog))
        var bridge = try BridgeProcess(daemon: daemon, broker: broker.url, box: "box-a", extra: ["--mqtt-keepalive", "60"])
        try bridge.waitConnected()
        XCTAssertEqual(try daemon.ctl("open", Media.path("episode-long.mp4")).0, 0)
        func rows() throws -> [Int] { try endedPlays(daemon).map(\.row) }
        XCTAssertTrue(waitUntil(timeout: 30) { (try? rows().count) ?? 0 >= 1 && bridge.cursor >= 1 }, "a first row acknowledged: \(bridge.log)")
        let acknowledged = bridge.cursor
        // Frozen: what the bridge publishes now is never acknowledged.
        let brokerPid = try XCTUnwrap(broker.pid)
        kill(brokerPid, SIGSTOP)
        XCTAssertTrue(waitUntil(timeout: 30) { (try? rows().max() ?? 0) ?? 0 >= Int(acknowledged) + 2 }, "more plays while the broker is frozen")
        // Give the bridge's pump (every 5 s, or after an ad ends) the time to publish them.
        XCTAssertTrue(waitUntil(timeout: 30) { (try? rows().max() ?? 0) ?? 0 >= Int(acknowledged) + 3 })
        XCTAssertEqual(bridge.cursor, acknowledged, "nothing acknowledged while frozen")
        kill(bridge.process.processIdentifier, SIGKILL)
        bridge.process.waitUntilExit()
        kill(brokerPid, SIGCONT)
        XCTAssertEqual(try daemon.ctl("stop").0, 0)
        let expected = try rows()
        let head = try endedPlays(daemon).map(\.chain).max() ?? 0
        bridge = try BridgeProcess(daemon: daemon, broker: broker.url, box: "box-a")
        try bridge.waitConnected()
        XCTAssertTrue(waitUntil(timeout: 30) { bridge.cursor >= Int64(head) }, "the cursor reaches the chain's head: \(bridge.log)")
        let received = Broker.json(try broker.subscribe("adplayer/box-a/plays", count: 1000, seconds: 5, extra: session))
        let got = received.compactMap { $0.value["row"] as? Int }
        XCTAssertEqual(Set(expected).subtracting(got), [], "no row skipped (received \(got))")
    }

    /// Hostile publishers: oversized, not JSON, unknown commands, commands above the tier, a
    /// thousand a second — each a clear error reply or a log line; the bridge goes on, the
    /// daemon plays on. A v5 response topic gets the reply too.
    func testHostilePublishersAndTiers() throws {
        let broker = try Broker()
        let daemon = try DaemonProcess()
        XCTAssertEqual(try daemon.ctl("open", Media.path("episode-long.mp4")).0, 0)
        let bridge = try BridgeProcess(daemon: daemon, broker: broker.url, box: "h", extra: ["--mqtt-commands", "read"])
        try bridge.waitConnected()
        let listener = try BackgroundProcess("/usr/bin/mosquitto_sub", ["-p", String(broker.port), "-h", "127.0.0.1", "-t", "adplayer/h/reply",
                                                                      "-t", "adplayer/reply/x"], collectOutput: true)
        try broker.waitSubscribed(listener, topic: "adplayer/reply/x")
        func reply(_ match: @escaping (String) -> Bool) -> String? {
            var found: String?
            _ = waitUntil(timeout: 20) {
                found = listener.log.split(separator: "\n").map(String.init).first(where: match)
                return found != nil
            }
            return found
        }
        try broker.publish("adplayer/h/cmd", "not json at all")
        XCTAssertNotNil(reply { $0.contains("\"malformed\"") })
        try broker.publish("adplayer/h/cmd", #"{"id": 3, "cmd": "rm -rf /"}"#)
        XCTAssertNotNil(reply { $0.contains("\"unknown_command\"") && $0.contains("\"id\":3") })
        try broker.publish("adplayer/h/cmd", #"{"id": 4, "cmd": "pause"}"#)
        let forbidden = try XCTUnwrap(reply { $0.contains("\"id\":4") })
        XCTAssertTrue(forbidden.contains("\"forbidden\"") && forbidden.contains("mqtt-commands"), forbidden)
        XCTAssertEqual(try playing(daemon), true, "a refused pause never reached the daemon")

        let big = daemon.folder.appendingPathComponent("big.json").path
        try Data(("{\"id\": 5, \"cmd\": \"status\", \"x\": \"" + String(repeating: "a", count: 70_000) + "\"}").utf8).write(to: URL(fileURLWithPath: big))
        let (_, _) = try runToEnd("/usr/bin/mosquitto_pub", ["-p", String(broker.port), "-h", "127.0.0.1", "-t", "adplayer/h/cmd", "-f", big])
        // A thousand commands at once: a few reach the daemon, the rest are told why.
        try broker.publish("adplayer/h/cmd", lines: (0..<1000).map { "{\"id\": \(1000 + $0), \"cmd\": \"status\"}" })
        XCTAssertNotNil(reply { $0.contains("too many commands") }, "the flood is told")
        XCTAssertNotNil(reply { $0.contains("\"id\":1000,") && $0.contains("\"ok\":true") }, "the first of the flood ran")
        // After all of it: a plain status is answered, on the v5 response topic too (asked
        // again while the flood's refusals still empty the bucket: at most 20 a second run).
        var answered: Int?
        for attempt in 0..<30 where answered == nil {
            let id = 600 + attempt
            try broker.publish("adplayer/h/cmd", "{\"id\": \(id), \"cmd\": \"status\"}", extra: ["-V", "5", "-D", "publish", "response-topic", "adplayer/reply/x",
                                                                                         "-D", "publish", "correlation-data", "c-\(id)"])
            guard let said = reply({ $0.contains("\"id\":\(id),") }) else { continue }
            if said.contains("\"ok\":true") { answered = id } else { usleep(200_000) }
        }
        let id = try XCTUnwrap(answered, "a status after the flood was answered")
        XCTAssertTrue(waitUntil(timeout: 20) { listener.log.split(separator: "\n").filter { $0.contains("\"id\":\(id),") && $0.contains("\"ok\":true") }.count >= 2 },
                      "the reply on P/B/reply and on the response topic")
        XCTAssertTrue(bridge.process.isRunning, bridge.log)
        XCTAssertEqual(try playing(daemon), true)
        XCTAssertTrue(bridge.log.contains("over 65536 bytes") || !listener.log.contains("\"id\":5,"),
                      "the oversized command was not run: \(bridge.log)")
    }

    /// The fleet channel cannot be turned against the boxes (issue 34, 1–4): a reply goes only
    /// to the box's `P/B/reply` and, for a v5 response topic, only inside `P/reply/…` — never to
    /// a box's command, state or proof topics (each refused response topic counted, said once);
    /// a retained command is never run (replayed at connect, after a broker restart, or
    /// published live with -r); the first commands after `online` are served (the bucket starts
    /// full); a command delivered twice (same id, correlation, response topic) runs once and
    /// both deliveries get the first reply.
    func testTheFleetChannelCannotBeTurnedAgainstTheBoxes() throws {
        let broker = try Broker()
        let daemon = try DaemonProcess()
        XCTAssertEqual(try daemon.ctl("open", Media.path("episode-long.mp4")).0, 0)
        // A retained pause waiting on the box's topic before its bridge ever connects.
        try broker.publish("adplayer/h2/cmd", #"{"id": 1, "cmd": "pause"}"#, extra: ["-r"])
        let everything = try BackgroundProcess("/usr/bin/mosquitto_sub", ["-p", String(broker.port), "-h", "127.0.0.1", "-t", "#", "-v"],
                                               collectOutput: true)
        try broker.waitSubscribed(everything, topic: "test/subscribed")
        let bridge = try BridgeProcess(daemon: daemon, broker: broker.url, box: "h2", extra: ["--mqtt-commands", "control"])
        try bridge.waitConnected()
        // At once: twelve commands right after online, all served.
        try broker.publish("adplayer/h2/cmd", lines: (0..<12).map { "{\"id\": \(100 + $0), \"cmd\": \"status\"}" })
        func lines(_ topic: String) -> [String] {
            everything.log.split(separator: "\n").filter { $0.hasPrefix(topic + " ") }.map(String.init)
        }
        XCTAssertTrue(waitUntil(timeout: 20) { lines("adplayer/h2/reply").filter { $0.contains("\"ok\":true") }.count >= 12 },
                      "every command of the burst answered ok: \(lines("adplayer/h2/reply"))")
        XCTAssertFalse(lines("adplayer/h2/reply").contains { $0.contains("too many commands") })
        XCTAssertEqual(try playing(daemon), true, "the retained pause was not run")

        // Response topics: the namespace only.
        let hostile = ["adplayer/h2/cmd", "adplayer/other/cmd", "adplayer/all/cmd", "adplayer/group/lobby/cmd", "adplayer/other/plays",
                       "adplayer/other/online", "adplayer/other/status", "adplayer/other/health", "adplayer/h2/plays", "elsewhere/x"]
        for (index, topic) in hostile.enumerated() {
            try broker.publish("adplayer/h2/cmd", "{\"id\": \(200 + index), \"cmd\": \"status\"}",
                               extra: ["-V", "5", "-D", "publish", "response-topic", topic, "-D", "publish", "correlation-data", "c\(index)"])
        }
        try broker.publish("adplayer/h2/cmd", #"{"id": 300, "cmd": "status"}"#,
                           extra: ["-V", "5", "-D", "publish", "response-topic", "adplayer/reply/ctl-1", "-D", "publish", "correlation-data", "ok"])
        XCTAssertTrue(waitUntil(timeout: 20) { lines("adplayer/reply/ctl-1").contains { $0.contains("\"id\":300,") } }, "\(everything.log)")
        XCTAssertTrue(waitUntil(timeout: 20) { (200..<210).allSatisfy { id in lines("adplayer/h2/reply").contains { $0.contains("\"id\":\(id),") } } })
        for topic in hostile {
            XCTAssertFalse(lines(topic).contains { line in (200..<210).contains { line.contains("\"id\":\($0),") } }, "nothing replied on \(topic)")
        }
        XCTAssertEqual(bridge.log.components(separatedBy: "outside the reply namespace").count - 1, 1, "said once: \(bridge.log)")

        // The same command delivered twice: one run, the first reply twice.
        let length = { () throws -> Int in
            ((try daemon.connect().call("status", ["queue": true])["result"] as? [String: Any])?["queue"] as? [Any])?.count ?? -1
        }
        let before = try length()
        let queue = "{\"id\": 400, \"cmd\": \"queue\", \"args\": {\"paths\": [\"\(try Media.path("episode-2.mp4"))\"]}}"
        // Both at once (one publisher, two lines): the second arrives while the first runs.
        try broker.publish("adplayer/h2/cmd", lines: [queue, queue], extra: ["-q", "1", "-V", "5", "-D", "publish", "response-topic",
                                                                             "adplayer/reply/ctl-1", "-D", "publish", "correlation-data", "dup"])
        XCTAssertTrue(waitUntil(timeout: 20) { lines("adplayer/reply/ctl-1").filter { $0.contains("\"id\":400,") }.count == 2 }, "\(everything.log)")
        let replies = Set(lines("adplayer/reply/ctl-1").filter { $0.contains("\"id\":400,") })
        XCTAssertEqual(replies.count, 1, "the same reply twice: \(replies)")
        XCTAssertEqual(try length(), before + 1, "run once")

        // An id used again for another command (issue 45, 4): a new command, run, answered with
        // its own reply — not the reply of the command that first had the id.
        try broker.publish("adplayer/h2/cmd", #"{"id": 450, "cmd": "pause"}"#)
        XCTAssertTrue(waitUntil(timeout: 20) { (try? self.playing(daemon)) == false }, "paused")
        try broker.publish("adplayer/h2/cmd", #"{"id": 450, "cmd": "play"}"#)
        XCTAssertTrue(waitUntil(timeout: 20) { (try? self.playing(daemon)) == true }, "the play with the reused id ran: \(bridge.log)")
        XCTAssertTrue(waitUntil(timeout: 20) { Set(lines("adplayer/h2/reply").filter { $0.contains("\"id\":450,") }).count == 2 },
                      "two replies, each its own: \(lines("adplayer/h2/reply").filter { $0.contains("\"id\":450,") })")

        // Retained, live: dropped and said; and nothing is replayed after a broker restart.
        try broker.publish("adplayer/h2/cmd", #"{"id": 500, "cmd": "pause"}"#, extra: ["-r"])
        XCTAssertTrue(waitUntil(timeout: 20) { bridge.log.contains("retained commands are never run") }, bridge.log)
        broker.stop()
        try broker.start()
        XCTAssertTrue(waitUntil(timeout: 30) { bridge.log.components(separatedBy: "mqtt: connected").count >= 3 }, bridge.log)
        // Commands run in the order they arrive: once a status sent now is answered, anything
        // the broker replayed at the reconnect has been run or refused.
        var synced = false
        for attempt in 0..<20 where !synced {
            let id = 510 + attempt
            try broker.publish("adplayer/h2/cmd", "{\"id\": \(id), \"cmd\": \"status\"}")
            synced = waitUntil(timeout: 5) { lines("adplayer/h2/reply").contains { $0.contains("\"id\":\(id),") } }
        }
        XCTAssertTrue(synced, "a status after the restart was answered: \(everything.log.suffix(2000))")
        XCTAssertEqual(try playing(daemon), true, "no retained pause ran, before or after the restart")
        XCTAssertFalse(lines("adplayer/h2/reply").contains { $0.contains("\"id\":500,") || $0.contains("\"id\":1,") })
    }

    /// A broker whose ACL refuses the box's proof-of-play topic (PUBACK 0x87): the bridge says
    /// so once, counts it, keeps the plays (the cursor does not move) and tries them again —
    /// while status and health go on (issue 34, 5).
    func testARefusedPubackIsSaidAndThePlaysWait() throws {
        let acl = ["adplayer/acl/online", "adplayer/acl/status", "adplayer/acl/health", "adplayer/acl/events", "adplayer/acl/reply",
                   "adplayer/acl/cmd", "adplayer/all/cmd"].map { "topic readwrite \($0)" }.joined(separator: "\n")
        let broker = try Broker(acl: acl)
        let daemon = try DaemonProcess(catalog: makeCatalog(Self.catalog))
        let bridge = try BridgeProcess(daemon: daemon, broker: broker.url, box: "acl")
        try bridge.waitConnected()
        XCTAssertEqual(try daemon.ctl("open", Media.path("episode-long.mp4")).0, 0)
        XCTAssertTrue(waitUntil(timeout: 60) { bridge.log.contains("refused a publish of proof of play") }, bridge.log)
        XCTAssertTrue(bridge.log.contains("Not authorized") || bridge.log.contains("0x87"), bridge.log)
        XCTAssertEqual(bridge.cursor, 0, "nothing acknowledged, nothing skipped")
        XCTAssertEqual(bridge.log.components(separatedBy: "refused a publish of proof of play").count - 1, 1, "said once")
        XCTAssertTrue(bridge.process.isRunning)
        // Not only in the log (issue 45, 7): the retained health says the box is degraded by it,
        // and the retained status names the refusal.
        var health: [String: Any] = [:]
        XCTAssertTrue(waitUntil(timeout: 60) {
            health = Broker.json((try? broker.subscribe("adplayer/acl/health", count: 1, seconds: 2)) ?? []).first?.value ?? [:]
            return (health["checks"] as? [[String: Any]])?.contains { $0["name"] as? String == "fleet-plays" } == true
        }, "\(health)")
        XCTAssertNotEqual(health["status"] as? String, "ok")
        var status: [String: Any] = [:]
        XCTAssertTrue(waitUntil(timeout: 30) {
            status = Broker.json((try? broker.subscribe("adplayer/acl/status", count: 1, seconds: 2)) ?? []).first?.value ?? [:]
            return (status["plays_feed"] as? [String: Any])?["state"] as? String == "refused"
        }, "\(status)")
    }

    /// A "broker" that accepts the connection and never answers: the attempt is given up (no
    /// CONNACK within 10 s, or the keepalive runs out first) and made again later, the bridge
    /// alive, the daemon untouched.
    func testABrokerThatNeverAnswersIsGivenUp() throws {
        let (listener, port) = try loopbackSocket()
        defer { close(listener) }
        XCTAssertEqual(listen(listener, 16), 0)   // the kernel accepts for it; nothing is ever read or written
        let daemon = try DaemonProcess()
        let bridge = try BridgeProcess(daemon: daemon, broker: "mqtt://127.0.0.1:\(port)", box: "silent")
        XCTAssertTrue(waitUntil(timeout: 40) { bridge.log.contains("trying again (attempt 1") }, bridge.log)
        XCTAssertTrue(bridge.log.contains("no CONNACK within 10 s") || bridge.log.contains("no answer within the keepalive"), bridge.log)
        XCTAssertTrue(bridge.process.isRunning)
        XCTAssertEqual(try daemon.ctl("status").0, 0)
    }

    /// `check-config` checks the bridge's keys: the broker's URL, the names that go into topics,
    /// the files; the bridge refuses to start without a broker.
    func testCheckConfigChecksTheBridgesKeys() throws {
        var (status, output) = try runToEnd(Executables.adplayerd, ["check-config", "--socket", "/tmp/never.sock", "--mqtt-broker", "ftp://broker"])
        XCTAssertEqual(status, 2, output)
        XCTAssertTrue(output.contains("mqtt-broker") && output.contains("mqtts://"), output)
        (status, output) = try runToEnd(Executables.adplayerd, ["check-config", "--socket", "/tmp/never.sock", "--mqtt-box-id", "lobby/#"])
        XCTAssertEqual(status, 2, output)
        XCTAssertTrue(output.contains("mqtt-box-id"), output)
        for word in ["all", "group", "reply"] {
            (status, output) = try runToEnd(Executables.adplayerd, ["check-config", "--socket", "/tmp/never.sock", "--mqtt-box-id", word])
            XCTAssertEqual(status, 2, output)
            XCTAssertTrue(output.contains("a word of the topic layout"), output)
        }
        (status, output) = try runToEnd(Executables.adplayerd, ["check-config", "--socket", "/tmp/never.sock", "--mqtt-broker", "mqtts://broker:8883",
                                                                 "--mqtt-ca-file", "/nonexistent/ca.pem", "--mqtt-cert-file", "/nonexistent/box.pem"])
        XCTAssertEqual(status, 2, output)
        XCTAssertTrue(output.contains("mqtt-ca-file: /nonexistent/ca.pem") && output.contains("go together"), output)
        (status, output) = try runToEnd(Executables.adplayerd, ["mqtt", "--socket", "/tmp/never.sock"])
        XCTAssertEqual(status, 2, output)
        XCTAssertTrue(output.contains("mqtt-broker"), output)
    }

    /// TLS with a certificate the test makes, a password file: the bridge connects by the name
    /// the certificate has; by another name it is refused and says so; a wrong password too.
    func testTLSAndPasswords() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tls-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        func openssl(_ arguments: [String]) throws {
            let (status, output) = try runToEnd("/usr/bin/openssl", arguments)
            XCTAssertEqual(status, 0, output)
        }
        let ca = folder.appendingPathComponent("ca.pem").path, caKey = folder.appendingPathComponent("ca.key").path
        let cert = folder.appendingPathComponent("server.pem").path, key = folder.appendingPathComponent("server.key").path
        let csr = folder.appendingPathComponent("server.csr").path, ext = folder.appendingPathComponent("ext.cnf").path
        try openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", caKey, "-out", ca, "-days", "2", "-subj", "/CN=adplayerd test CA"])
        try openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", csr, "-subj", "/CN=localhost"])
        try Data("subjectAltName=DNS:localhost\n".utf8).write(to: URL(fileURLWithPath: ext))
        try openssl(["x509", "-req", "-in", csr, "-CA", ca, "-CAkey", caKey, "-CAcreateserial", "-out", cert, "-days", "2", "-extfile", ext])
        let broker = try Broker(password: ("box", "s3cret-password"), tls: (ca, cert, key))
        let daemon = try DaemonProcess()
        let passwordFile = daemon.folder.appendingPathComponent("mqtt-password").path
        try Data("s3cret-password\n".utf8).write(to: URL(fileURLWithPath: passwordFile))
        chmod(passwordFile, 0o600)
        let good = try BridgeProcess(daemon: daemon, broker: "mqtts://localhost:\(broker.port)", box: "tls-good",
                                     extra: ["--mqtt-ca-file", ca, "--mqtt-username", "box", "--mqtt-password-file", passwordFile])
        try good.waitConnected()

        let wrongName = try BridgeProcess(daemon: daemon, broker: "mqtts://127.0.0.1:\(broker.port)", box: "tls-name",
                                          extra: ["--mqtt-ca-file", ca, "--mqtt-username", "box", "--mqtt-password-file", passwordFile])
        XCTAssertTrue(waitUntil(timeout: 20) { wrongName.log.contains("TLS") || wrongName.log.contains("certificate") }, wrongName.log)
        XCTAssertFalse(wrongName.log.contains("mqtt: connected"), wrongName.log)

        let badPassword = daemon.folder.appendingPathComponent("bad-password").path
        try Data("wrong\n".utf8).write(to: URL(fileURLWithPath: badPassword))
        chmod(badPassword, 0o600)
        let refused = try BridgeProcess(daemon: daemon, broker: "mqtts://localhost:\(broker.port)", box: "tls-refused",
                                        extra: ["--mqtt-ca-file", ca, "--mqtt-username", "box", "--mqtt-password-file", badPassword])
        XCTAssertTrue(waitUntil(timeout: 20) { refused.log.contains("refused the connection") }, refused.log)
        XCTAssertTrue(good.process.isRunning)

        chmod(passwordFile, 0o644)
        let (status, output) = try runToEnd(Executables.adplayerd, ["mqtt", "--socket", daemon.socket, "--mqtt-broker", "mqtts://localhost:1",
                                                                    "--mqtt-password-file", passwordFile, "--mqtt-box-id", "x"])
        XCTAssertEqual(status, 2, output)
        XCTAssertTrue(output.contains("chmod 600"), output)
    }
}
