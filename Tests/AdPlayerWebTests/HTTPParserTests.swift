@testable import AdPlayerWeb
import ClientSupport
import ControlProtocol
import Foundation
import XCTest

/// The request parser alone: what it takes, and a clear status for every hostile head.
final class HTTPParserTests: XCTestCase {
    private func parse(_ text: String) throws(HTTPError) -> HTTPRequest {
        let bytes = Array(text.utf8)
        return try HTTPParser.parse(head: bytes[...])
    }

    private func status(_ text: String) -> Int? {
        do {
            let request = try parse(text)
            _ = try HTTPParser.bodyLength(request)
            return nil
        } catch {
            return error.status
        }
    }

    func testAWellFormedRequestIsRead() throws {
        let request = try parse("GET /api/plays?since=12&limit=5&x=a%20b+c HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nAccept: */*\r\nX-A: 1\r\nx-a: 2\r\n\r\n")
        XCTAssertEqual(request.method, "GET")
        XCTAssertEqual(request.path, "/api/plays")
        XCTAssertEqual(request.query, ["since": "12", "limit": "5", "x": "a b c"])
        XCTAssertEqual(request.header("HOST"), "127.0.0.1:8080")
        XCTAssertEqual(request.header("x-a"), "1, 2")
        XCTAssertTrue(request.keepAlive)
        XCTAssertFalse(try parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n").keepAlive)
        XCTAssertFalse(try parse("GET / HTTP/1.0\r\n\r\n").keepAlive)
        XCTAssertEqual(try HTTPParser.bodyLength(try parse("POST /api/command HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n")), 12)
        XCTAssertEqual(HTTPParser.headEnd(Array("GET / HTTP/1.1\r\nHost: a\r\n\r\nBODY".utf8)), 27)
        XCTAssertNil(HTTPParser.headEnd(Array("GET / HTTP/1.1\r\nHost: a\r\n".utf8)))
    }

    func testMethodsAndVersionsOutsideWhatIsServedAreRefused() {
        XCTAssertEqual(status("PUT / HTTP/1.1\r\nHost: a\r\n\r\n"), 405)
        XCTAssertEqual(status("DELETE / HTTP/1.1\r\nHost: a\r\n\r\n"), 405)
        XCTAssertEqual(status("TRACE / HTTP/1.1\r\nHost: a\r\n\r\n"), 405)
        XCTAssertEqual(status("BREW / HTTP/1.1\r\nHost: a\r\n\r\n"), 501)
        XCTAssertEqual(status("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), 505)
        XCTAssertEqual(status("GET / SPDY\r\nHost: a\r\n\r\n"), 400)
        XCTAssertEqual(status("GET /\r\n\r\n"), 400)
        XCTAssertEqual(status("GET / HTTP/1.1\r\n\r\n"), 400, "HTTP/1.1 needs Host")
        XCTAssertEqual(status("GET http://evil/ HTTP/1.1\r\nHost: a\r\n\r\n"), 400, "absolute form")
    }

    func testPathsThatClimbOrHideBytesAreRefused() {
        for path in ["/../etc/passwd", "/a/../../b", "/%2e%2e/etc/passwd", "/a/%2E%2E/b", "/./a", "/a%00b", "/a%0d%0aSet-Cookie:x", "/a%5cb",
                     "/%ff%fe", "/%zz"] {
            XCTAssertEqual(status("GET \(path) HTTP/1.1\r\nHost: a\r\n\r\n"), 400, path)
        }
        XCTAssertEqual(status("GET /?a=%00 HTTP/1.1\r\nHost: a\r\n\r\n"), 400)
        XCTAssertEqual(status("GET /" + String(repeating: "a", count: 3000) + " HTTP/1.1\r\nHost: a\r\n\r\n"), 414)
    }

    func testSmugglingAndBodiesItDoesNotTakeAreRefused() {
        let post = "POST /api/command HTTP/1.1\r\nHost: a\r\n"
        XCTAssertEqual(status(post + "Content-Length: 5\r\nContent-Length: 6\r\n\r\n"), 400, "two lengths")
        XCTAssertEqual(status(post + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"), 400, "a length and chunked")
        XCTAssertEqual(status(post + "Transfer-Encoding: chunked\r\n\r\n"), 411)
        XCTAssertEqual(status(post + "Content-Length: -1\r\n\r\n"), 400)
        XCTAssertEqual(status(post + "Content-Length: 1e3\r\n\r\n"), 400)
        XCTAssertEqual(status(post + "Content-Length: 99999999999999999999\r\n\r\n"), 400)
        XCTAssertEqual(status(post + "Content-Length: \(HTTPParser.maxBodyBytes + 1)\r\n\r\n"), 413)
        XCTAssertEqual(status(post + " Content-Length: 5\r\n\r\n"), 400, "a folded line")
        XCTAssertEqual(status(post + "Content-Length : 5\r\n\r\n"), 400, "a space before the colon")
        XCTAssertEqual(status(post + "Host: b\r\n\r\n"), 400, "two hosts")
        XCTAssertEqual(status(post + "X: a\u{01}b\r\n\r\n"), 400, "a control character")
        XCTAssertEqual(status(post + "NoColon\r\n\r\n"), 400)
    }

    func testHeadsOverTheirBoundsAre431() {
        let many = (0..<10_000).map { "X-\($0): 1\r\n" }.joined()
        XCTAssertEqual(status("GET / HTTP/1.1\r\nHost: a\r\n" + many + "\r\n"), 431)
        let few = (0..<(HTTPParser.maxHeaders + 1)).map { "X-\($0): 1\r\n" }.joined()
        XCTAssertEqual(status("GET / HTTP/1.1\r\n" + few + "\r\n"), 431)
        XCTAssertEqual(status("GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "a", count: 9000) + "\r\n\r\n"), 431)
    }

    func testRefusalsAreJSONWithoutAnythingAPageCouldRun() throws {
        let response = HTTPResponse.error(400, "bad <script>alert(1)</script> \"x\"\n")
        let body = String(decoding: response.body, as: UTF8.self)
        XCTAssertFalse(body.contains("<"))
        let parsed = try JSONValue.parse(body.trimmingCharacters(in: .newlines))
        XCTAssertEqual(parsed["error"]?["message"]?.string, "bad <script>alert(1)</script> \"x\"\n")
        let head = String(decoding: response.head(keepAlive: true, method: "GET"), as: UTF8.self)
        XCTAssertTrue(head.hasPrefix("HTTP/1.1 400 Bad Request\r\n"))
        XCTAssertTrue(head.contains("Content-Security-Policy: default-src 'self'"))
        XCTAssertTrue(head.contains("Content-Length: \(response.body.count)\r\n"))
    }

    func testCSVCellsAreQuotedAndFormulasDisarmed() {
        XCTAssertEqual(WebApp.csvCell(.string("plain")), "plain")
        XCTAssertEqual(WebApp.csvCell(.string("a,b")), "\"a,b\"")
        XCTAssertEqual(WebApp.csvCell(.string("say \"hi\"")), "\"say \"\"hi\"\"\"")
        XCTAssertEqual(WebApp.csvCell(.string("=HYPERLINK(\"x\")")), "\"'=HYPERLINK(\"\"x\"\")\"")
        XCTAssertEqual(WebApp.csvCell(.string("@SUM(1)")), "'@SUM(1)")
        XCTAssertEqual(WebApp.csvCell(.number(-2.5)), "-2.5")
        XCTAssertEqual(WebApp.csvCell(.null), "")
    }

    func testHostsThatAreNotAddressesAreKnown() {
        for host in ["127.0.0.1", "127.0.0.1:8080", "localhost:8080", "[::1]:8080", "192.0.2.2"] { XCTAssertTrue(WebApp.isAddressHost(host), host) }
        for host in ["evil.example", "evil.example:8080", "127.0.0.1.evil.example", "[nope]"] { XCTAssertFalse(WebApp.isAddressHost(host), host) }
    }
}

/// Tokens and roles: the file's checks, and what each presented credential gets.
final class WebAuthTests: XCTestCase {
    let viewer = "viewer-token-0123456789"
    let op = "operator-token-0123456789"
    let admin = "admin-token-0123456789ab"

    func testTheTokenFileIsCheckedLineByLineAndByItsMode() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("webauth-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let path = folder + "/tokens"
        try "# roles\nviewer \(viewer)\noperator \(op)\n\nadmin \(admin)\n".write(toFile: path, atomically: true, encoding: .utf8)
        chmod(path, 0o644)
        XCTAssertThrowsError(try WebAuth.load(path)) { XCTAssertTrue("\($0)".contains("chmod 600"), "\($0)") }
        chmod(path, 0o600)
        let auth = try WebAuth.load(path)
        XCTAssertEqual(auth.tokens.count, 3)
        XCTAssertTrue(auth.required)
        for bad in ["root \(admin)", "viewer short", "viewer \(viewer) extra", "viewer \(viewer)\nadmin \(viewer)", "# nothing\n"] {
            XCTAssertThrowsError(try WebAuth.parse(bad, source: "t"), bad)
        }
        XCTAssertThrowsError(try WebAuth.load(folder + "/missing"))
        XCTAssertThrowsError(try WebAuth.load(folder)) { XCTAssertTrue("\($0)".contains("not a regular file"), "\($0)") }
    }

    func testEachCredentialGetsItsRoleAndNothingElseGetsIn() throws {
        let auth = try WebAuth.parse("viewer \(viewer)\noperator \(op)\nadmin \(admin)\n", source: "t")
        XCTAssertEqual(auth.role(authorization: "Bearer \(viewer)"), .role(.viewer))
        XCTAssertEqual(auth.role(authorization: "bearer \(op)"), .role(.operator))
        let basic = Data("anyone:\(admin)".utf8).base64EncodedString()
        XCTAssertEqual(auth.role(authorization: "Basic \(basic)"), .role(.admin))
        for bad in [nil, "Bearer", "Bearer wrong-token-0123456789", "Bearer \(viewer)x", "Token \(admin)", "Basic !!!",
                    "Basic " + Data(admin.utf8).base64EncodedString()] {
            if case .role = auth.role(authorization: bad) { XCTFail("\(bad ?? "nil") got in") }
        }
        XCTAssertEqual(WebAuth.open.role(authorization: nil), .role(.operator), "no token file: operator, an admin's command needs a token")
        XCTAssertEqual(WebRole.viewer.tier, .read)
        XCTAssertEqual(WebRole.operator.tier, .control)
        XCTAssertEqual(WebRole.admin.tier, .admin)
        XCTAssertTrue(WebAuth.equal(Array("abc".utf8), Array("abc".utf8)))
        XCTAssertFalse(WebAuth.equal(Array("abc".utf8), Array("abcd".utf8)))
    }

    func testListenAddressesAreCheckedInOnePlace() throws {
        XCTAssertEqual(try ListenAddress(parsing: "127.0.0.1:8080").port, 8080)
        XCTAssertTrue(try ListenAddress(parsing: "localhost:0").isLoopback)
        XCTAssertTrue(try ListenAddress(parsing: "[::1]:80").isLoopback)
        XCTAssertFalse(try ListenAddress(parsing: "0.0.0.0:8080").isLoopback)
        for bad in ["8080", "example.com:80", "127.0.0.1:65536", "127.0.0.1:-1", "[::1:80", "1.2.3:80", ":80"] {
            XCTAssertThrowsError(try ListenAddress(parsing: bad), bad)
        }
    }
}

/// The event streams' bounds: a client that stops reading is dropped, not buffered for ever.
final class EventStreamTests: XCTestCase {
    func testAStreamThatIsNotReadOverflowsAndCloses() {
        let stream = EventStream()
        let message = EventStream.frame(event: "status", data: String(repeating: "x", count: 1000))
        var sent = 0
        while stream.send(message) { sent += 1 }
        XCTAssertLessThanOrEqual(sent * message.count, EventStream.maxQueuedBytes)
        XCTAssertTrue(stream.overflowed)
        XCTAssertEqual(stream.next(timeout: 0.01), .closed)
        XCTAssertFalse(stream.send(message))
    }

    func testMessagesComeOutInOrderAndIdleSaysSo() {
        let stream = EventStream()
        stream.send(EventStream.frame(event: "a", data: "1\n2"))
        stream.send(EventStream.frame(event: "b", data: "{}"))
        XCTAssertEqual(stream.next(timeout: 1), .messages([Array("event: a\ndata: 1\ndata: 2\n\n".utf8), Array("event: b\ndata: {}\n\n".utf8)]))
        XCTAssertEqual(stream.next(timeout: 0.01), .idle)
        stream.close()
        XCTAssertEqual(stream.next(timeout: 1), .closed)
    }

    func testTheHubHoldsAtMostItsStreamsAndDropsTheOnesThatOverflow() {
        let hub = EventHub()
        var streams: [EventStream] = []
        while let stream = hub.open() { streams.append(stream) }
        XCTAssertEqual(streams.count, EventHub.maxStreams)
        // One reader keeps up, the others never read: they are dropped, it is not.
        let big = String(repeating: "y", count: 64 * 1024)
        for _ in 0..<40 {
            hub.broadcast(event: "x", data: big)
            _ = streams[0].next(timeout: 0.01)
        }
        XCTAssertEqual(hub.count, 1)
        XCTAssertFalse(streams[0].overflowed)
        XCTAssertTrue(streams[1].overflowed)
        XCTAssertNotNil(hub.open(), "room again")
    }
}
