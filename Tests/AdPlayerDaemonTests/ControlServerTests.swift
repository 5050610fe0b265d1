import AdPlayerDaemon
import AdRuntime
import AdTestSupport
import ControlProtocol
import Foundation
import XCTest

/// The control socket in process: half-closing clients, linear input, fairness between
/// clients. Its handler answers `version` from another thread, as the loop would.
final class ControlServerTests: XCTestCase {
    private var path: String!
    private var server: ControlServer!
    private let answerer = Workers(name: "test-answers")

    override func setUpWithError() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ctl-\(UUID().uuidString.prefix(8))")
        path = folder.appendingPathComponent("ctl.sock").path
        let answerer = self.answerer
        server = try ControlServer(path: path, group: nil, log: Logger(level: .error)) { _, request, reply in
            answerer.execute { reply(.success(["cmd": .string(request.name)])) }
        }
        try server.start()
    }

    override func tearDown() {
        server.stop()
        try? FileManager.default.removeItem(atPath: (path as NSString).deletingLastPathComponent)
    }

    private func connect() throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        let connected = ControlServerTests.withAddress(path) { Glibc.connect(fd, $0, $1) }
        guard connected == 0 else { throw NSError(domain: "connect", code: Int(errno)) }
        return fd
    }

    private static func withAddress<R>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            let bytes = Array(path.utf8)
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    private static func sendAll(_ fd: Int32, _ bytes: [UInt8]) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { return }
            offset += n
        }
    }

    /// Reads lines until the peer closes (or `limit` lines); a failing test is bounded by `timeout`.
    private static func readLines(_ fd: Int32, limit: Int = .max, timeout: Double = 60) -> [JSONValue] {
        var buffer: [UInt8] = []
        var lines: [JSONValue] = []
        let deadline = Date().addingTimeInterval(timeout)
        var chunk = [UInt8](repeating: 0, count: 65536)
        while lines.count < limit, Date() < deadline {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 200) > 0 else { continue }
            let n = read(fd, &chunk, chunk.count)
            guard n > 0 else { break }
            buffer += chunk[0..<n]
            while let newline = buffer.firstIndex(of: 10) {
                if let value = try? JSONValue.parse(buffer[..<newline]) { lines.append(value) }
                buffer.removeFirst(newline + 1)
            }
        }
        return lines
    }

    /// `echo '{"cmd":"pause"}' | socat - UNIX-CONNECT:…` and `nc -N`: the client sends, then
    /// closes its side. Every request is answered — a last one without its newline too — and
    /// then the daemon closes the connection.
    func testAClientThatHalfClosesGetsEveryAnswer() throws {
        for trailing in ["\n", ""] {
            let fd = try connect()
            defer { close(fd) }
            Self.sendAll(fd, Array(#"{"id": 1, "cmd": "pause"}"#.utf8) + [10] + Array(#"{"id": 2, "cmd": "status"}"#.utf8) + Array(trailing.utf8))
            shutdown(fd, Int32(SHUT_WR))
            let lines = Self.readLines(fd)
            XCTAssertEqual(lines.map { $0["id"] }, [1, 2], "\(trailing.isEmpty ? "no" : "a") final newline: \(lines)")
            XCTAssertEqual(lines.map { $0["result"]?["cmd"] }, ["pause", "status"])
        }
    }

    /// 2 MiB of blank lines, then a request: input is read from an offset and compacted once
    /// per read (linear), so the request is answered — a copy of the rest of the buffer per
    /// line (quadratic) would take hours.
    func testInputIsHandledInLinearTime() throws {
        let fd = try connect()
        defer { close(fd) }
        let sender = Workers(name: "test-sender")
        sender.execute {
            Self.sendAll(fd, [UInt8](repeating: 10, count: 2 << 20) + Array(#"{"id": 7, "cmd": "version"}"#.utf8) + [10])
        }
        let lines = Self.readLines(fd, limit: 1, timeout: 120)
        XCTAssertEqual(lines.first?["id"], 7)
    }

    /// One client floods the socket with requests; another's request is answered in between,
    /// not after the flood (at most 32 lines of one client per turn).
    func testOneClientCannotStarveTheOthers() throws {
        let flooder = try connect(), other = try connect()
        defer { close(flooder); close(other) }
        let total = 20_000
        let flood: [UInt8] = (0..<total).flatMap { Array(#"{"id": \#($0), "cmd": "status"}"#.utf8) + [10] }
        let answered = Locked(0)
        let done = Handover<Bool>()
        let reader = Workers(name: "test-flood")
        reader.execute {
            let counted = Self.readLines(flooder, limit: total, timeout: 120).count
            answered.withLock { $0 = counted }
            done.fulfil(true)
        }
        let sender = Workers(name: "test-sender")
        let sent = Handover<Bool>()
        sender.execute {
            Self.sendAll(flooder, Array(flood.prefix(flood.count / 2)))
            sent.fulfil(true)
            Self.sendAll(flooder, Array(flood.dropFirst(flood.count / 2)))
        }
        _ = sent.wait(timeout: 60)
        Self.sendAll(other, Array(#"{"id": 1, "cmd": "version"}"#.utf8) + [10])
        let reply = Self.readLines(other, limit: 1)
        XCTAssertEqual(reply.first?["id"], 1)
        // The flood's answers are still coming: the other client was not made to wait for them.
        XCTAssertFalse(done.current == true, "the other client was answered only after the whole flood")
        _ = done.wait(timeout: 120)
        XCTAssertEqual(answered.withLock { $0 }, total, "every request of the flood is answered too")
    }

    /// Events reach each subscriber in the order they were broadcast, however busy the socket
    /// is: while another client's pipelined requests keep replies waiting in the inbox (so
    /// broadcasts go through the socket thread), no event may overtake an earlier one by a
    /// direct write (issue 23: an ad's ad.ended reached clients before its ad.started).
    func testEventsReachEverySubscriberInOrderWhileRepliesAreBusy() throws {
        let subscribers = try (0..<3).map { _ in try connect() }
        for fd in subscribers {
            Self.sendAll(fd, Array(#"{"id": 1, "cmd": "subscribe", "args": {"events": ["ad.*"]}}"#.utf8) + [10])
            XCTAssertEqual(Self.readLines(fd, limit: 1).count, 1)
        }
        let busy = try connect()
        let flood = Workers(name: "test-flood")
        flood.execute {
            var lines: [UInt8] = []
            for n in 0..<3000 { lines += Array(#"{"id": \#(n), "cmd": "status"}"#.utf8) + [10] }
            Self.sendAll(busy, lines)
        }
        let drain = Workers(name: "test-drain")
        drain.execute { _ = Self.readLines(busy, limit: 3000, timeout: 60) }
        let count = 3000
        for n in 0..<count {
            server.broadcast(ControlEvent(.adStarted, ["n": .int(Int64(n))]))
        }
        for fd in subscribers {
            let numbers = Self.readLines(fd, limit: count, timeout: 60).compactMap { $0["n"]?.integer }
            XCTAssertEqual(numbers.count, count)
            XCTAssertEqual(numbers, numbers.sorted(), "an event overtook an earlier one")
        }
        for fd in subscribers + [busy] { close(fd) }
    }
}
