import AdTestSupport
import AdTracking
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import AdRuntime
import XCTest

/// R17 against a real HTTP endpoint on loopback (Tests/Fixtures/beacon_server.py).
final class BeaconOutboxTests: XCTestCase {
    private var server: FixtureServer!
    private var directory: URL!

    override func setUpWithError() throws {
        server = try FixtureServer(script: "beacon_server.py")
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("outbox-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        server.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    private var database: String { directory.appendingPathComponent("adplayerd.sqlite").path }

    private func outbox(baseDelay: Double = 0.01, maxDelay: Double = 0.2, concurrency: Int = 8,
                        now: @escaping @Sendable () -> Date = { Date() },
                        onEvent: @escaping @Sendable (OutboxEvent) -> Void = { _ in }) throws -> BeaconOutbox {
        var configuration = BeaconOutbox.Configuration()
        configuration.baseDelay = baseDelay
        configuration.maxDelay = maxDelay
        configuration.concurrency = concurrency
        configuration.requestTimeout = 5
        return try BeaconOutbox(path: database, configuration: configuration, now: now, onEvent: onEvent)
    }

    private func url(_ name: String) -> String { "http://127.0.0.1:\(server.port)/b/\(name)" }

    func testAnEndpointThatFailsThreeTimesGetsTheBeaconExactlyOnce() async throws {
        let events = Locked<[OutboxEvent]>([])
        let outbox = try outbox(onEvent: { e in events.withLock { $0.append(e) } })
        try server.get("/_fail/3")
        try outbox.enqueue([url("impression-1")])
        XCTAssertEqual(try outbox.pendingCount(), 1, "written before the first attempt")
        try await outbox.deliverAll(until: Date().addingTimeInterval(30))
        let counts = try server.counts()
        XCTAssertEqual(counts["/b/impression-1"], 1)
        XCTAssertEqual(counts["_attempts"], 4)
        XCTAssertEqual(try outbox.pendingCount(), 0)
        let retries = events.withLock { $0.filter { if case .retrying = $0 { true } else { false } } }
        XCTAssertEqual(retries.count, 3)
        XCTAssertEqual(events.withLock { $0.last }, .sent(url: url("impression-1"), attempts: 4))
    }

    func testBackoffGrowsExponentiallyWithJitterAndACap() throws {
        let outbox = try outbox(baseDelay: 2, maxDelay: 600)
        let delays = (1...12).map { attempt in (0..<50).map { _ in outbox.backoff(after: attempt) } }
        for (index, samples) in delays.enumerated() {
            let expected = min(600, 2 * pow(2, Double(index)))
            XCTAssertGreaterThanOrEqual(samples.min()!, expected * 0.5 - 1e-9)
            XCTAssertLessThanOrEqual(samples.max()!, expected * 1.5 + 1e-9)
        }
        XCTAssertGreaterThan(Set(delays[3]).count, 10, "jitter")
    }

    func testBeaconsSurviveAReopenAndAreSentOnce() async throws {
        try server.get("/_down")
        do {
            let first = try outbox()
            try first.enqueue([url("a"), url("b")])
            let report = try await first.deliverDue()
            XCTAssertEqual(report.failed, 2)
        }
        try server.get("/_up")
        let second = try outbox()
        XCTAssertEqual(try second.pendingCount(), 2)
        try await second.deliverAll(until: Date().addingTimeInterval(30))
        let counts = try server.counts()
        XCTAssertEqual(counts["/b/a"], 1)
        XCTAssertEqual(counts["/b/b"], 1)
    }

    func testABeaconOlderThanTheMaximumAgeIsDroppedAndCounted() async throws {
        let start = Date()
        try outbox(now: { start }).enqueue([url("old")])
        let events = Locked<[OutboxEvent]>([])
        let later = try outbox(now: { start.addingTimeInterval(8 * 24 * 3600) }, onEvent: { e in events.withLock { $0.append(e) } })
        let report = try await later.deliverDue()
        XCTAssertEqual(report.dropped, 1)
        XCTAssertEqual(try later.droppedCount(), 1)
        XCTAssertEqual(try later.pendingCount(), 0)
        guard case .dropped(let dropped, let age)? = events.withLock({ $0.first }) else { return XCTFail("not reported") }
        XCTAssertEqual(dropped, url("old"))
        XCTAssertEqual(age, 8 * 24 * 3600, accuracy: 1)
        XCTAssertEqual(try server.counts()["_attempts"], 0, "an expired beacon is not sent")
    }

    func testOnlyHTTPURLsAreAccepted() throws {
        let outbox = try outbox()
        for bad in ["file:///etc/passwd", "ftp://x/y", "not a url", "http://"] {
            XCTAssertThrowsError(try outbox.enqueue([bad]), bad)
        }
        XCTAssertEqual(try outbox.pendingCount(), 0)
    }

    func testTenThousandBeaconsQueuedWhileTheEndpointIsDownAreAllDeliveredWhenItComesBack() async throws {
        try server.get("/_down")
        let outbox = try outbox(baseDelay: 0.05, maxDelay: 0.5, concurrency: 16)
        try outbox.enqueue((0..<10_000).map { url("n\($0)") })
        _ = try await outbox.deliverDue()
        XCTAssertEqual(try outbox.pendingCount(), 10_000)
        try server.get("/_up")
        try await outbox.deliverAll(until: Date().addingTimeInterval(300))
        XCTAssertEqual(try outbox.pendingCount(), 0)
        let counts = try server.counts()
        let delivered = (0..<10_000).filter { counts["/b/n\($0)"] == 1 }.count
        XCTAssertEqual(delivered, 10_000, "each exactly once")
    }

    /// The daemon's process is killed with SIGKILL mid-delivery and started again: every
    /// beacon arrives, none more than twice.
    func testKillNineMidDeliveryLosesNothing() throws {
        let binary = Executables.adplayerd
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: binary), "build adplayerd first (swift build --build-tests)")
        let names = (0..<300).map { "k\($0)" }
        try run(binary, ["beacons", "add", "--state-dir", directory.path] + names.map(url))
        try server.get("/_delay/20")
        let flush = Process()
        flush.executableURL = URL(fileURLWithPath: binary)
        flush.arguments = ["beacons", "flush", "--state-dir", directory.path, "--concurrency", "4", "--base-delay", "0.01"]
        flush.standardOutput = FileHandle.nullDevice
        try flush.run()
        let deadline = Date().addingTimeInterval(60)
        while (try server.counts().filter { $0.key.hasPrefix("/b/") }.count) < 60 && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
        kill(flush.processIdentifier, SIGKILL)
        flush.waitUntilExit()
        XCTAssertEqual(flush.terminationReason, .uncaughtSignal)
        let before = try server.counts().filter { $0.key.hasPrefix("/b/") }.count
        XCTAssertLessThan(before, 300, "killed before it finished")
        try server.get("/_delay/0")
        try run(binary, ["beacons", "flush", "--state-dir", directory.path, "--base-delay", "0.01"])
        let counts = try server.counts()
        for name in names {
            let count = counts["/b/\(name)"] ?? 0
            XCTAssertTrue((1...2).contains(count), "\(name) arrived \(count) times")
        }
        XCTAssertEqual(try outbox().pendingCount(), 0)
    }

    private func run(_ binary: String, _ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        XCTAssertEqual(process.terminationStatus, 0, "adplayerd \(arguments.prefix(2).joined(separator: " "))")
    }

    /// A damaged outbox (here: its index's page overwritten, so the integrity check fails) is
    /// moved aside with a warning naming both files, and every beacon its table still holds is
    /// read back into the new one: none is lost.
    func testADamagedOutboxIsMovedAsideAndItsBeaconsReadBack() throws {
        let urls = (0..<2000).map { url("kept-\($0)") }
        var root: Int64 = 0
        do {
            let outbox = try outbox()
            try outbox.enqueue(urls)
            let db = try SQLiteDatabase(path: database)
            root = try db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'beacons_due'").first?.first?.integer ?? 0
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        XCTAssertGreaterThan(root, 1)
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: database))
        try handle.seek(toOffset: UInt64(root - 1) * 4096)
        try handle.write(contentsOf: Data(repeating: 0xA5, count: 4096))
        try handle.close()
        let warnings = Locked<[String]>([])
        let reopened = try BeaconOutbox(path: database, onWarning: { w in warnings.withLock { $0.append(w) } })
        let said = warnings.withLock { $0 }
        XCTAssertTrue(said.contains { $0.contains(database) && $0.contains(".bad-") }, "\(said)")
        XCTAssertTrue(said.contains { $0.contains("2000 beacons were read back") }, "\(said)")
        XCTAssertEqual(try reopened.pendingCount(), 2000, "no beacon lost")
    }
}
