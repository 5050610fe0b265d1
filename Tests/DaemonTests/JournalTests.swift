import AdRuntime
import AdTestSupport
import Foundation
import XCTest

/// journald's native socket, played by the test: `sd_journal_send` writes datagrams to
/// `/run/systemd/journal/socket` (a fixed path), which this binds when no journal runs here.
/// Each datagram is one entry: `KEY=value` lines, or `KEY`, a 64-bit little-endian length and
/// the bytes for a value holding a newline (systemd's "Native Journal Protocol").
final class FakeJournal: @unchecked Sendable {
    // @unchecked: `fd` is fixed; entries and the stop flag are behind their locks.
    static let path = "/run/systemd/journal/socket"
    private let fd: Int32
    private let made: [String]
    private let received = Locked<[[String: String]]>([])
    private let stopped = Locked(false)
    private let done = Handover<Bool>()

    init() throws {
        guard !FileManager.default.fileExists(atPath: Self.path) else { throw XCTSkip("a journal runs on this machine") }
        made = ["/run/systemd", "/run/systemd/journal"].filter { !FileManager.default.fileExists(atPath: $0) }
        try FileManager.default.createDirectory(atPath: "/run/systemd/journal", withIntermediateDirectories: true)
        fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(Self.path.utf8))
            raw[Self.path.utf8.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard bound == 0 else { throw ControlConnection.Failure(description: "bind \(Self.path): \(String(cString: strerror(errno)))") }
        var big: Int32 = 8 << 20
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, socklen_t(MemoryLayout<Int32>.size))
        _ = startThread(named: "fake-journal") { [self] in
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            while !stopped.withLock({ $0 }) {
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&pfd, 1, 100) > 0 else { continue }
                let n = recv(fd, &buffer, buffer.count, 0)
                if n > 0 { received.withLock { $0.append(Self.parse(buffer[0..<n])) } }
            }
            done.fulfil(true)
        }
    }

    var entries: [[String: String]] { received.withLock { $0 } }

    func stop() {
        stopped.withLock { $0 = true }
        _ = done.wait()
        close(fd)
        unlink(Self.path)
        for folder in made.reversed() { try? FileManager.default.removeItem(atPath: folder) }
    }

    static func parse(_ bytes: ArraySlice<UInt8>) -> [String: String] {
        var fields: [String: String] = [:]
        var i = bytes.startIndex
        while i < bytes.endIndex, let newline = bytes[i...].firstIndex(of: 10) {
            let line = bytes[i..<newline]
            if let equals = line.firstIndex(of: UInt8(ascii: "=")) {
                fields[String(decoding: line[..<equals], as: UTF8.self)] = String(decoding: line[(equals + 1)...], as: UTF8.self)
                i = newline + 1
            } else {
                guard newline + 9 <= bytes.endIndex else { break }
                let length = (0..<8).reduce(0) { $0 | Int(bytes[newline + 1 + $1]) << (8 * $1) }
                let start = newline + 9
                guard length >= 0, start + length <= bytes.endIndex else { break }
                fields[String(decoding: line, as: UTF8.self)] = String(decoding: bytes[start..<(start + length)], as: UTF8.self)
                i = start + length + 1
            }
        }
        return fields
    }
}

/// Under systemd (stderr a journal stream), the daemon logs through `sd_journal_send`: a
/// priority for every message, and for an ad shown, an ad error and a beacon dropped a
/// `MESSAGE_ID` and fields an operator selects on (`journalctl MESSAGE_ID=… AD_KIND=pause`).
final class JournalTests: XCTestCase {
    func testAdsShownErrorsAndDroppedBeaconsReachTheJournalWithTheirFields() throws {
        let journal = try FakeJournal()
        defer { journal.stop() }
        // A tracking URL that passes the catalog's check but is over 16 KiB once [CLIENTUA]
        // is filled: refused when it is queued, and logged.
        let long = "http://127.0.0.1:9/imp?pad=" + String(repeating: "x", count: 16 * 1024 - 60) + "&ua=[CLIENTUA]"
        let catalog = try makeCatalog("""
            {"version": 1,
             "overlays": [{"id": "ov-1", "image": "overlay.png", "slots": [{"start": 0.2, "duration": 0.5}], "impression": ["\(long)"]}],
             "pause_ads": [{"id": "liar", "image": "liar.png"}]}
            """)
        try FileManager.default.copyItem(atPath: repositoryRoot.appendingPathComponent("Tests/Fixtures/images/lying-crc.png").path,
                                         toPath: catalog.appendingPathComponent("liar.png").path)
        let daemon = try DaemonProcess(catalog: catalog, extra: ["--pause-ad-delay", "0"], stderrIsJournal: true)
        let control = try daemon.connect()
        _ = try control.call("subscribe", ["events": ["ad.*"]])
        _ = try control.call("open", ["path": try Media.path("episode-long.mp4")])
        _ = try control.event(named("ad.ended", "kind", "overlay"))
        _ = try control.call("pause")
        _ = try control.event(named("ad.error", "ad_id", "liar"))
        XCTAssertEqual(daemon.stop(), 0, daemon.log)

        let entries = journal.entries
        func entry(_ id: String) -> [String: String]? { entries.first { $0["MESSAGE_ID"] == id } }
        let shown = try XCTUnwrap(entry("4f3a1c2b8d9e4e6fa1b2c3d4e5f60718"), "ad shown: \(entries)")
        XCTAssertEqual(shown["AD_ID"], "ov-1")
        XCTAssertEqual(shown["AD_KIND"], "overlay")
        XCTAssertEqual(shown["CONTENT_ID"], "episode-long")
        XCTAssertEqual(shown["PRIORITY"], "6")
        XCTAssertEqual(shown["SYSLOG_IDENTIFIER"], "adplayerd")
        let error = try XCTUnwrap(entry("7b6c5d4e3f2a41b0c9d8e7f6a5b4c3d2"), "ad error: \(entries)")
        XCTAssertEqual(error["AD_ID"], "liar")
        XCTAssertEqual(error["AD_KIND"], "pause")
        XCTAssertEqual(error["VAST_ERROR"], "405")
        let dropped = try XCTUnwrap(entry("a1e2d3c4b5a64f78e9d0c1b2a3f4e5d6"), "beacon dropped: \(entries)")
        XCTAssertEqual(dropped["DROP_REASON"], "too_long")
        XCTAssertTrue(dropped["BEACON_URL"]?.hasPrefix("http://127.0.0.1:9/imp?pad=") == true)
        XCTAssertEqual(dropped["PRIORITY"], "4")
        XCTAssertTrue(entries.contains { $0["MESSAGE"]?.hasPrefix("adplayerd starting") == true && $0["PRIORITY"] == "5" }, "\(entries)")
        XCTAssertFalse(daemon.log.contains("ad shown"), "the journal has it, not stderr: \(daemon.log)")
    }
}
