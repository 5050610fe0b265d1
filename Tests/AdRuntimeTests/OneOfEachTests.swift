import Foundation
import XCTest
@testable import AdRuntime

/// The project's one helper of each kind (issue 35 §6): the atomic write every file that must
/// be whole goes through, the loopback predicate, the Unix socket address.
final class OneOfEachTests: XCTestCase {
    private var folder = ""

    override func setUpWithError() throws {
        folder = NSTemporaryDirectory() + "one-of-each-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    }

    override func tearDown() {
        try? FileManager.default.removeItem(atPath: folder)
    }

    private func names() -> [String] { ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).sorted() }

    func testAnAtomicWriteReplacesTheFileWholeWithItsModeAndLeavesNoTemporary() throws {
        let path = folder + "/cursor"
        try AtomicFile.write(Data("old\n".utf8), to: path, durable: true)
        try AtomicFile.write(Data("new contents\n".utf8), to: path, mode: 0o644, durable: true)
        XCTAssertEqual(try String(contentsOfFile: path, encoding: .utf8), "new contents\n")
        XCTAssertEqual(names(), ["cursor"])
        var info = stat()
        XCTAssertEqual(stat(path, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o644)
        try AtomicFile.write(Data(), to: path, durable: false)
        // Its size by stat: Foundation's Data(contentsOf:) leaks its 4 KiB buffer on an empty
        // file (LeakSanitizer found it in `make asan`).
        XCTAssertEqual(stat(path, &info), 0)
        XCTAssertEqual(info.st_size, 0)
    }

    func testAFailedReplaceKeepsEveryPreviousFileAndRemovesItsTemporaries() throws {
        let first = folder + "/a.csv", second = folder + "/a.csv.sig"
        try AtomicFile.replace([(first, Data("one".utf8)), (second, Data("sig".utf8))], durable: true)
        // The second file's folder does not exist: nothing is renamed, the first's temporary goes.
        XCTAssertThrowsError(try AtomicFile.replace([(first, Data("two".utf8)), (folder + "/missing/x", Data("y".utf8))], durable: true)) { error in
            let failure = error as? AtomicFile.Failure
            XCTAssertEqual(failure?.path, self.folder + "/missing/x")
            XCTAssertEqual(failure?.code, ENOENT)
        }
        XCTAssertEqual(try String(contentsOfFile: first, encoding: .utf8), "one")
        XCTAssertEqual(names(), ["a.csv", "a.csv.sig"])
    }

    func testWritesOfOneFileFromManyThreadsAtOnceEachLandWhole() throws {
        // Temporaries are made with O_EXCL and a name of their own: no two writes share one.
        let path = folder + "/metrics.prom"
        DispatchQueue.concurrentPerform(iterations: 32) { index in
            try? AtomicFile.write(Data(String(repeating: "\(index % 10)", count: 4096).utf8), to: path, durable: false)
        }
        let text = try String(contentsOfFile: path, encoding: .utf8)
        XCTAssertEqual(text.count, 4096)
        XCTAssertEqual(Set(text).count, 1, "a write landed whole")
        XCTAssertEqual(names(), ["metrics.prom"])
    }

    func testLoopbackIsDecidedOnceForEveryFormAPeerTakes() {
        for address in ["127.0.0.1", "127.255.0.9", "::1", "0:0:0:0:0:0:0:1", "::ffff:127.0.0.1", "::FFFF:127.1.2.3"] {
            XCTAssertTrue(SocketAddress.isLoopback(address), address)
        }
        for address in ["10.0.0.1", "128.0.0.1", "::2", "::ffff:10.0.0.1", "::ffff:128.0.0.1", "fe80::1", "localhost", "127.0.0.1.evil", "", "::127.0.0.1"] {
            XCTAssertFalse(SocketAddress.isLoopback(address), address)
        }
    }

    func testAUnixSocketPathTooLongIsRefusedNeverCut() throws {
        let longest = "/" + String(repeating: "s", count: SocketAddress.maxUnixPathBytes - 1)
        let length = try SocketAddress.unix(longest) { _, length in length }
        XCTAssertEqual(Int(length), MemoryLayout<sockaddr_un>.size)
        XCTAssertThrowsError(try SocketAddress.unix(longest + "x") { _, _ in 0 }) { error in
            XCTAssertTrue("\(error)".contains("at most 107 bytes"), "\(error)")
        }
        XCTAssertThrowsError(try SocketAddress.unix("/tmp/a\0b") { _, _ in 0 })
    }
}
