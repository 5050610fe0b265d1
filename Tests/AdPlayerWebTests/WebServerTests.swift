@testable import AdPlayerWeb
import ClientSupport
import ControlProtocol
import Foundation
import Bounds
import AdTestSupport
import XCTest

/// A stand-in for the daemon's control socket: it answers every request line `ok` (the
/// command's name in the result; a health verdict for `health`), keeps subscribed
/// connections open to push events, and records what reached it.
final class FakeDaemon: @unchecked Sendable {
    let path: String
    private let listener: Int32
    let received = Locked<[String]>([])
    private let subscribers = Locked<[Int32]>([])

    init() throws {
        path = FileManager.default.temporaryDirectory.appendingPathComponent("fake-\(UInt32.random(in: 0...UInt32.max)).sock").path
        listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8))
            raw[path.utf8.count] = 0
        }
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) } }
        guard bound == 0, listen(listener, 64) == 0 else { throw ControlClient.Failure(description: "fake daemon: cannot listen") }
        let thread = Thread { [self] in
            while true {
                let fd = accept(listener, nil, nil)
                guard fd >= 0 else { return }
                let connection = Thread { [self] in serve(fd) }
                connection.start()
            }
        }
        thread.start()
    }

    deinit {
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
        unlink(path)
    }

    private func serve(_ fd: Int32) {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &chunk, chunk.count)
            guard n > 0 else { close(fd); return }
            buffer += chunk[..<n]
            while let newline = buffer.firstIndex(of: 10) {
                let line = Array(buffer[..<newline])
                buffer.removeFirst(newline + 1)
                guard let request = try? JSONValue.parse(line), let cmd = request["cmd"]?.string else { continue }
                received.withLock { $0.append(cmd) }
                let result: JSONValue = cmd == "health" ? ["status": "degraded", "checks": [["name": "ads", "status": "degraded", "reason": "test"]]]
                    : cmd == "metrics" ? ["text": .string(String(repeating: "m", count: 900_000))]   // a large response
                    : ["cmd": .string(cmd)]
                let reply: JSONValue = ["id": request["id"] ?? .null, "ok": true, "result": result]
                _ = reply.line().withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                if cmd == "subscribe" { subscribers.withLock { $0.append(fd) } }
            }
        }
    }

    /// Sends `event` to every subscribed connection.
    func emit(_ event: JSONValue) {
        let line = event.line()
        for fd in subscribers.withLock({ $0 }) { _ = line.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } }
    }

    var subscriberCount: Int { subscribers.withLock { $0.count } }
}

/// The web server alone against a stand-in daemon: roles and tiers, the browser's guards,
/// hostile bytes, and the connection bounds — the server keeps serving after each.
final class WebServerTests: XCTestCase {
    var daemon: FakeDaemon!
    var server: HTTPServer!
    var app: WebApp!
    var port: UInt16 = 0
    let viewer = "viewer-token-0123456789", op = "operator-token-0123456789", admin = "admin-token-0123456789ab"

    func start(auth: WebAuth, limits: HTTPServer.Limits = HTTPServer.Limits()) throws {
        daemon = try FakeDaemon()
        let (fd, port) = try HTTPServer.listen(try ListenAddress(parsing: "127.0.0.1:0"))
        self.port = port
        app = WebApp(link: DaemonLink(socket: daemon.path), auth: auth, identity: WebApp.Identity(version: "test", boxID: "box-1"))
        let app = self.app!
        server = HTTPServer(listeners: [fd], limits: limits) { request, peer in app.handle(request, peer) }
        app.start()
        server.start()
    }

    override func tearDown() {
        server?.stop()
        app?.stop()
        server = nil
        app = nil
        daemon = nil
    }

    private func exchange(_ text: String) throws -> RawHTTP.Response? {
        let client = try RawHTTP(port: port)
        defer { client.close() }
        client.send(text)
        return client.read()
    }

    private func post(_ body: String, token: String?, extra: String = "") throws -> RawHTTP.Response? {
        let auth = token.map { "Authorization: Bearer \($0)\r\n" } ?? ""
        return try exchange("POST /api/command HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\(auth)Content-Type: application/json\r\n\(extra)"
                            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
    }

    private func get(_ path: String, token: String? = nil) throws -> RawHTTP.Response? {
        let auth = token.map { "Authorization: Bearer \($0)\r\n" } ?? ""
        return try exchange("GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\(auth)Connection: close\r\n\r\n")
    }

    /// none → 401, viewer → 403 on pause (and nothing reaches the daemon), operator → 200,
    /// admin alone reloads.
    func testEachRoleRunsItsTierAndNoMore() throws {
        try start(auth: try WebAuth.parse("viewer \(viewer)\noperator \(op)\nadmin \(admin)\n", source: "t"))
        let pause = #"{"cmd": "pause"}"#
        let none = try XCTUnwrap(post(pause, token: nil))
        XCTAssertEqual(none.status, 401)
        XCTAssertNotNil(none.headers["www-authenticate"])
        XCTAssertEqual(try XCTUnwrap(post(pause, token: "not-a-token-0123456789")).status, 401)
        let refused = try XCTUnwrap(post(pause, token: viewer))
        XCTAssertEqual(refused.status, 403)
        XCTAssertTrue(refused.text.contains("viewer"), refused.text)
        XCTAssertFalse(daemon.received.withLock { $0 }.contains("pause"), "a refused command never reaches the daemon")
        let done = try XCTUnwrap(post(pause, token: op))
        XCTAssertEqual(done.status, 200, done.text)
        XCTAssertEqual(done.json?["result"]?["cmd"]?.string, "pause")
        XCTAssertEqual(try XCTUnwrap(post(#"{"cmd": "reload"}"#, token: op)).status, 403)
        XCTAssertEqual(try XCTUnwrap(post(#"{"cmd": "reload"}"#, token: admin)).status, 200)
        // Reading is every role's; a screenshot is control.
        XCTAssertEqual(try XCTUnwrap(get("/api/status", token: viewer)).status, 200)
        XCTAssertEqual(try XCTUnwrap(get("/api/screenshot.png", token: viewer)).status, 403)
        XCTAssertEqual(try XCTUnwrap(get("/api/status")).status, 401)
        let basic = Data("x:\(viewer)".utf8).base64EncodedString()
        XCTAssertEqual(try XCTUnwrap(exchange("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Basic \(basic)\r\nConnection: close\r\n\r\n")).status, 200)
        // A request the table refuses is the protocol's error, with its status.
        let bad = try XCTUnwrap(post(#"{"cmd": "seek", "args": {"to": -1}}"#, token: op))
        XCTAssertEqual(bad.status, 400)
        XCTAssertTrue(bad.text.contains("bad_args"), bad.text)
        XCTAssertEqual(try XCTUnwrap(post(#"{"cmd": "rm -rf /"}"#, token: op)).status, 400)
        XCTAssertEqual(try XCTUnwrap(post(#"{"cmd": "subscribe"}"#, token: op)).status, 400)
        XCTAssertEqual(try XCTUnwrap(post("[1,2", token: op)).status, 400)
        // The health verdict's status is the HTTP status's: degraded is 200.
        let health = try XCTUnwrap(get("/api/health", token: viewer))
        XCTAssertEqual(health.status, 200)
        XCTAssertEqual(health.json?["status"]?.string, "degraded")
    }

    /// A browser's cross-site request cannot drive the box: another origin, a form's content
    /// type, and (without tokens) a host name that is not an address (DNS rebinding).
    func testCrossSiteRequestsAreRefused() throws {
        try start(auth: .open)
        XCTAssertEqual(try XCTUnwrap(post(#"{"cmd": "pause"}"#, token: nil, extra: "Origin: http://evil.example\r\n")).status, 403)
        let form = try XCTUnwrap(exchange("POST /api/command HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: text/plain\r\nContent-Length: 15\r\nConnection: close\r\n\r\n{\"cmd\":\"pause\"}"))
        XCTAssertEqual(form.status, 415)
        XCTAssertEqual(try XCTUnwrap(exchange("GET /api/status HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n")).status, 421)
        XCTAssertFalse(daemon.received.withLock { $0 }.contains("pause"))
        XCTAssertEqual(try XCTUnwrap(post(#"{"cmd": "pause"}"#, token: nil, extra: "Origin: http://127.0.0.1:\(port)\r\n")).status, 200)
    }

    /// Per client (issue 34, 11): past its burst of requests a client gets 429 with Retry-After
    /// and is served again as its bucket refills; wrong tokens are limited tighter (10, then
    /// 2 a second), a right one after them waits too; other clients are not touched.
    func testEachClientIsBoundedInRequestsAndFailedTokens() {
        var settings = ClientLimits.Settings()
        settings.requestsPerSecond = 10
        settings.burst = 20
        let limits = ClientLimits(settings)
        var admitted = 0
        for _ in 0..<50 where limits.admit("10.0.0.1", now: 100) { admitted += 1 }
        XCTAssertEqual(admitted, 20, "the burst")
        XCTAssertFalse(limits.admit("10.0.0.1", now: 100.05))
        XCTAssertTrue(limits.admit("10.0.0.1", now: 100.2), "refilled: 10 a second")
        XCTAssertTrue(limits.admit("10.0.0.2", now: 100), "another client is not touched")
        for _ in 0..<10 {
            XCTAssertTrue(limits.mayAuthenticate("10.0.0.3", now: 200))
            limits.failed("10.0.0.3", now: 200)
        }
        XCTAssertFalse(limits.mayAuthenticate("10.0.0.3", now: 200.1), "ten wrong tokens: wait")
        XCTAssertTrue(limits.mayAuthenticate("10.0.0.3", now: 200.6), "2 a second again")
        XCTAssertTrue(limits.mayAuthenticate("10.0.0.4", now: 200))
    }

    /// Fifty readers of /api/status at once share the daemon's answers: the daemon is asked a
    /// handful of times (one call a quarter second, concurrent readers waiting for it), not 50.
    func testConcurrentStatusReadersShareOneDaemonCall() throws {
        try start(auth: .open)
        let before = daemon.received.withLock { $0.filter { $0 == "status" }.count }
        let codes = Locked<[Int]>([])
        let started = Date()
        let port = self.port
        DispatchQueue.concurrentPerform(iterations: 50) { _ in
            let client = try? RawHTTP(port: port)
            client?.send("GET /api/status HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n")
            if let status = client?.read()?.status { codes.withLock { $0.append(status) } }
            client?.close()
        }
        let elapsed = Date().timeIntervalSince(started)
        XCTAssertEqual(codes.withLock { $0 }, Array(repeating: 200, count: 50))
        let calls = daemon.received.withLock { $0.filter { $0 == "status" }.count } - before
        XCTAssertLessThanOrEqual(calls, Int(elapsed / 0.25) + 2, "shared: \(calls) daemon calls for 50 readers in \(elapsed) s")
    }

    /// A reader that takes the response a trickle at a time (issue 34, 13) holds its slot no
    /// longer than the response's deadline: cut off before the end, and the server serves on.
    func testASlowReaderIsCutOffAtTheResponsesDeadline() throws {
        var limits = HTTPServer.Limits()
        limits.writeTimeout = 1
        limits.responseDeadline = 1
        try start(auth: .open, limits: limits)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var small: Int32 = 2048
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        XCTAssertEqual(connected, 0)
        let request = Array("GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n".utf8)
        XCTAssertEqual(request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }, request.count)
        // 512 bytes every 20 ms: 25 KB a second, 36 s for the whole — unless it is cut off.
        var received = 0, chunk = [UInt8](repeating: 0, count: 512)
        let giveUp = Date().addingTimeInterval(60)
        while Date() < giveUp {
            let n = recv(fd, &chunk, chunk.count, 0)
            guard n > 0 else { break }
            received += n
            usleep(20_000)
        }
        XCTAssertLessThan(received, 900_000, "cut off before the end of the response")
        XCTAssertEqual(try XCTUnwrap(get("/favicon.ico")).status, 204, "and the server serves on")
    }

    /// Smaller holes of issue 34 (13): `HEAD /events` answers the head of a stream and opens
    /// none; a viewer reads the log without URLs' queries (beacons' ids, tokens), an operator
    /// with them; a token file another user owns is refused.
    func testHeadOfEventsViewerLogsAndTheTokenFilesOwner() throws {
        try start(auth: .open)
        let head = try XCTUnwrap(try exchange("HEAD /events HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nConnection: close\r\n\r\n"))
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.headers["content-type"], "text/event-stream")
        XCTAssertEqual(head.body, [], "no body")
        XCTAssertEqual(app.hub.count, 0, "no stream opened")

        XCTAssertEqual(WebApp.redactingQueries("beacon https://ads.example/imp?ad=7&token=s3cr3t: attempt 1 failed (timeout)"),
                       "beacon https://ads.example/imp?…: attempt 1 failed (timeout)")
        XCTAssertEqual(WebApp.redactingQueries("no URL here"), "no URL here")
        XCTAssertEqual(WebApp.redactingQueries("two: http://a/x?q=1 and \"http://b/y?r=2\""), "two: http://a/x?… and \"http://b/y?…\"")

        let file = FileManager.default.temporaryDirectory.appendingPathComponent("tokens-\(UUID().uuidString.prefix(6))").path
        defer { unlink(file) }
        try "viewer viewer-0123456789abcdef\n".write(toFile: file, atomically: true, encoding: .utf8)
        chmod(file, 0o600)
        XCTAssertNoThrow(try WebAuth.load(file))
        guard geteuid() == 0 else { return }   // only root can give a file away
        XCTAssertEqual(chown(file, 65534, 65534), 0)
        XCTAssertThrowsError(try WebAuth.load(file)) { XCTAssertTrue("\($0)".contains("owned by another user"), "\($0)") }
    }

    /// Every hostile request gets its 4xx/5xx, and the server answers the next one.
    func testHostileRequestsGetAClearAnswerAndTheServerKeepsServing() throws {
        try start(auth: .open)
        let hostile: [(String, Int)] = [
            ("GET /../../etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400),
            ("GET /%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400),
            ("BREW / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 501),
            ("PUT / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 405),
            ("GET /\u{0}x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 400),
            ("POST /api/command HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n", 400),
            ("POST /api/command HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 4\r\nContent-Length: 40\r\n\r\n", 400),
            ("POST /api/command HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 411),
            ("POST /api/command HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 70000\r\n\r\n", 413),
            ("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n" + (0..<10_000).map { "X-\($0): y\r\n" }.joined() + "\r\n", 431),
            ("GET / HTTP/3\r\nHost: 127.0.0.1\r\n\r\n", 505),
            ("GET /nowhere HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 404),
            ("POST /api/status HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 0\r\n\r\n", 405),
        ]
        for (request, expected) in hostile {
            let response = try XCTUnwrap(exchange(request), String(request.prefix(60)))
            XCTAssertEqual(response.status, expected, String(request.prefix(60)))
            XCTAssertEqual(response.headers["content-type"], "application/json", "a JSON error, never a trace")
        }
        // 1 MiB of header: 431, the server unharmed.
        let client = try RawHTTP(port: port)
        client.send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
        _ = client.send([UInt8](repeating: UInt8(ascii: "a"), count: 1 << 20))
        XCTAssertEqual(client.read()?.status, 431)
        client.close()
        let page = try XCTUnwrap(get("/"))
        XCTAssertEqual(page.status, 200)
        XCTAssertTrue(page.text.contains("data-field=\"state\""))
        XCTAssertEqual(page.headers["content-security-policy"]?.hasPrefix("default-src 'self'"), true)
        XCTAssertTrue(page.text.contains("No token file"), "the open banner")
    }

    /// A slowloris (a head that trickles in) is cut at the head's deadline, with 408.
    func testASlowHeadIsCut() throws {
        var limits = HTTPServer.Limits()
        limits.headerTimeout = 1
        try start(auth: .open, limits: limits)
        let slow = try RawHTTP(port: port)
        defer { slow.close() }
        slow.send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        var trickled = 0
        // A byte at a time, each well within any idle timeout: only the head's deadline cuts it.
        while slow.send("X") {
            trickled += 1
            usleep(100_000)
            if trickled > 200 { break }
        }
        XCTAssertLessThan(trickled, 200, "the slow head was cut")
        XCTAssertEqual(try XCTUnwrap(get("/api/status")).status, 200)
    }

    /// At the connection limit an idle keep-alive connection makes room; only when every one
    /// is busy is a new one answered 503.
    func testIdleConnectionsMakeRoomAndBusyOnesAre503() throws {
        var limits = HTTPServer.Limits()
        limits.maxConnections = 4
        try start(auth: .open, limits: limits)
        var idle: [RawHTTP] = []
        for _ in 0..<4 {
            let client = try RawHTTP(port: port)
            client.send("GET /favicon.ico HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            XCTAssertEqual(client.read()?.status, 204)
            idle.append(client)
        }
        // Four idle keep-alive connections hold every slot; new requests still get answers.
        for _ in 0..<3 { XCTAssertEqual(try XCTUnwrap(get("/api/status")).status, 200) }
        XCTAssertTrue(idle[0].closedByServer(), "the longest idle made room")
        idle.forEach { $0.close() }
        // Every connection so far gone (their threads end as the clients close) before the streams.
        XCTAssertTrue(waitUntil(timeout: 20) { self.server.openConnections == 0 }, "\(server.openConnections) still open")
        // Four event streams: every slot busy; the fifth connection is told so.
        var streams: [RawHTTP] = []
        for _ in 0..<4 {
            let client = try RawHTTP(port: port)
            client.send("GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            XCTAssertEqual(client.read()?.status, 200)
            streams.append(client)
        }
        let refused = try XCTUnwrap(get("/api/status"))
        XCTAssertEqual(refused.status, 503)
        XCTAssertEqual(server.refusedCount, 1)
        streams.forEach { $0.close() }
    }

    /// The event stream carries the daemon's events as they come.
    func testTheEventStreamCarriesTheDaemonsEvents() throws {
        try start(auth: .open)
        let client = try RawHTTP(port: port)
        defer { client.close() }
        client.send("GET /events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        let head = try XCTUnwrap(client.read())
        XCTAssertEqual(head.headers["content-type"], "text/event-stream")
        // The follower subscribes; then an event goes through.
        XCTAssertTrue(waitUntil(timeout: 20) { daemon.subscriberCount > 0 }, "the follower subscribed")
        daemon.emit(["event": "player.paused", "position": 3])
        var seen = ""
        var chunk = [UInt8](repeating: 0, count: 4096)
        while !seen.contains("player.paused") {
            let n = recv(client.fd, &chunk, chunk.count, 0)
            guard n > 0 else { return XCTFail("the stream ended: \(seen)") }
            seen += String(decoding: chunk[..<n], as: UTF8.self)
        }
        XCTAssertTrue(seen.contains("event: protocol\ndata: {\"event\":\"player.paused\",\"position\":3}"), seen)
    }
}

extension RawHTTP.Response {
    var json: JSONValue? { try? JSONValue.parse(body) }
}
