import AdRuntime
import AdSources
import AdTestSupport
@testable import AdTracking
import Foundation
import XCTest

/// A clock the tests move: the wall clock can jump without the monotonic one.
final class TestTrackingClock: TrackingClock, @unchecked Sendable {
    // @unchecked: everything is behind `state`'s lock.
    private struct State {
        var wall: Double = 1_800_000_000
        var monotonic: Double = 1000
        var synchronized = true
    }

    private let state = Locked(State())
    let bootID: String
    /// Nil: the kernel's word alone decides (the tests of holding); a `ClockEvidence`: as the system clock does.
    let evidence: ClockEvidence?

    init(boot: String = "boot-1", evidence: ClockEvidence? = nil) {
        bootID = boot
        self.evidence = evidence
    }

    func wallNow() -> Date { Date(timeIntervalSince1970: state.withLock { $0.wall }) }
    func monotonicNow() -> Double { state.withLock { $0.monotonic } }
    func wallClockSynchronized() -> Bool { state.withLock { $0.synchronized } }

    /// Time passes: both clocks move.
    func advance(_ seconds: Double) { state.withLock { $0.wall += seconds; $0.monotonic += seconds } }
    /// The wall clock alone jumps (NTP sets it, a stale RTC), and says whether it is synchronised.
    func jumpWall(by seconds: Double, synchronized: Bool) { state.withLock { $0.wall += seconds; $0.synchronized = synchronized } }
}

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

    private func outbox(at path: String? = nil, baseDelay: Double = 0.01, maxDelay: Double = 0.2, concurrency: Int = 8,
                        clock: any TrackingClock = SystemTrackingClock(), configure: (inout BeaconOutbox.Configuration) -> Void = { _ in },
                        onEvent: @escaping @Sendable (OutboxEvent) -> Void = { _ in }) throws -> BeaconOutbox {
        var configuration = BeaconOutbox.Configuration()
        configuration.baseDelay = baseDelay
        configuration.maxDelay = maxDelay
        configuration.concurrency = concurrency
        configuration.requestTimeout = 5
        configure(&configuration)
        return try BeaconOutbox(path: path ?? database, configuration: configuration, clock: clock, onEvent: onEvent)
    }

    private func url(_ name: String) -> String { "http://127.0.0.1:\(server.port)/b/\(name)" }

    /// Overwrites page `root` of the database (4 KiB pages) with `byte`: an index destroyed.
    private func destroyPage(_ root: Int64, with byte: UInt8) throws {
        XCTAssertGreaterThan(root, 1)
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: database))
        try handle.seek(toOffset: UInt64(root - 1) * 4096)
        try handle.write(contentsOf: Data(repeating: byte, count: 4096))
        try handle.close()
    }

    func testAnEndpointThatFailsThreeTimesGetsTheBeaconExactlyOnce() async throws {
        let events = Locked<[OutboxEvent]>([])
        let outbox = try outbox(onEvent: { e in events.withLock { $0.append(e) } })
        try server.get("/_fail/3")
        XCTAssertEqual(outbox.enqueue(urls: [url("impression-1")]), 1)
        XCTAssertEqual(outbox.pendingCount(), 1, "written before the first attempt")
        await outbox.deliverAll(until: Date().addingTimeInterval(30))
        let counts = try server.counts()
        XCTAssertEqual(counts["/b/impression-1"], 1)
        XCTAssertEqual(counts["_attempts"], 4)
        XCTAssertEqual(outbox.pendingCount(), 0)
        let retries = events.withLock { $0.filter { if case .retrying = $0 { true } else { false } } }
        XCTAssertEqual(retries.count, 3)
        XCTAssertEqual(events.withLock { $0.last }, .sent(url: url("impression-1"), attempts: 4))
        XCTAssertEqual(outbox.status().sent, 1)
        XCTAssertEqual(outbox.status().failedAttempts, 3)
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
            first.enqueue(urls: [url("a"), url("b")])
            let report = await first.deliverDue()
            XCTAssertEqual(report.failed, 2)
        }
        try server.get("/_up")
        let second = try outbox()
        XCTAssertEqual(second.pendingCount(), 2)
        await second.deliverAll(until: Date().addingTimeInterval(30))
        let counts = try server.counts()
        XCTAssertEqual(counts["/b/a"], 1)
        XCTAssertEqual(counts["/b/b"], 1)
    }

    /// Aged by the time the box has run, not by the wall clock: a wall clock that jumps a month
    /// (a box without a battery-backed clock, then NTP) drops nothing; a week of running does.
    func testBeaconsAreAgedByRunTimeNotByTheWallClock() async throws {
        try server.get("/_down")
        let clock = TestTrackingClock()
        let events = Locked<[OutboxEvent]>([])
        let outbox = try outbox(clock: clock, onEvent: { e in events.withLock { $0.append(e) } })
        outbox.enqueue(urls: [url("kept")])
        clock.jumpWall(by: 30 * 86_400, synchronized: true)
        _ = await outbox.deliverDue()
        XCTAssertEqual(outbox.pendingCount(), 1, "a wall-clock jump ages nothing")
        XCTAssertEqual(outbox.status().dropped["expired"], nil)
        // Reopened (a restart), the run clock goes on from where it was saved: a week more of running.
        let reopened = try self.outbox(clock: clock, onEvent: { e in events.withLock { $0.append(e) } })
        clock.advance(7 * 86_400 + 1)
        let report = await reopened.deliverDue()
        XCTAssertEqual(report.dropped, 1)
        XCTAssertEqual(reopened.status().dropped["expired"], 1, "counted")
        XCTAssertTrue(events.withLock { $0 }.contains(.dropped(url: url("kept"), reason: "expired")), "and told")
        XCTAssertEqual(try server.counts()["/b/kept"], nil, "an expired beacon is not sent")
    }

    /// Each URL is judged alone: a bad one is refused and counted, its neighbours go.
    func testEachURLIsJudgedAlone() async throws {
        let outbox = try outbox()
        let beacons = ["a", "b", "c"].map { url($0) } + ["ftp://ads.example/imp", "http://", "http://x/ y", "http://x/" + String(repeating: "z", count: 17_000)]
        XCTAssertEqual(outbox.enqueue(urls: beacons), 3)
        await outbox.deliverAll(until: Date().addingTimeInterval(30))
        let counts = try server.counts()
        XCTAssertEqual(["a", "b", "c"].map { counts["/b/\($0)"] }, [1, 1, 1], "every good URL delivered")
        XCTAssertEqual(outbox.status().dropped, ["not_http": 1, "no_host": 1, "malformed": 1, "too_long": 1])
    }

    /// The outbox is bounded: a flood against a failing server stays within it, the oldest
    /// non-billable beacons go first, impressions last, and every drop is counted.
    func testTheOutboxIsBoundedAndEveryDropIsCounted() async throws {
        try server.get("/_down")
        let recorded = RecordedTime.now(SystemTrackingClock())
        let outbox = try outbox(configure: { $0.maxRows = 200; $0.maxBytes = 1 << 20 })
        let impressions = (0..<150).map { Beacon(url: url("imp-\($0)"), event: "impression", billable: true, recorded: recorded) }
        outbox.enqueue(impressions)
        for chunk in stride(from: 0, to: 12_000, by: 1000) {
            outbox.enqueue((chunk..<(chunk + 1000)).map { Beacon(url: url("q-\($0)"), event: "firstQuartile", recorded: recorded) })
        }
        let status = outbox.status()
        XCTAssertEqual(status.pending, 200, "at its bound")
        XCTAssertEqual(status.dropped["outbox_full"], 12_150 - 200, "every drop counted")
        try server.get("/_up")
        await outbox.deliverAll(until: Date().addingTimeInterval(60))
        let counts = try server.counts()
        XCTAssertEqual((0..<150).filter { counts["/b/imp-\($0)"] == 1 }.count, 150, "the impressions kept")
        XCTAssertEqual((11_950..<12_000).filter { counts["/b/q-\($0)"] == 1 }.count, 50, "the newest others kept")
        XCTAssertNil(counts["/b/q-0"], "the oldest others dropped")
    }

    /// A disk that refuses writes (injected: SQLite's "database or disk is full"): beacons wait
    /// in memory and are sent from there; what cannot be sent then is written once the disk
    /// takes writes again — nothing lost, nothing silent.
    func testInjectedWriteFailuresLoseNothing() async throws {
        let events = Locked<[OutboxEvent]>([])
        let outbox = try outbox(onEvent: { e in events.withLock { $0.append(e) } })
        outbox.injectWriteFailures(true)
        try server.get("/_down")
        XCTAssertEqual(outbox.enqueue(urls: (0..<5).map { url("held-\($0)") }), 5)
        XCTAssertEqual(outbox.status().pendingInMemory, 5)
        XCTAssertTrue(outbox.status().diskFailing)
        XCTAssertTrue(events.withLock { $0 }.contains { if case .diskFailing = $0 { true } else { false } })
        _ = await outbox.deliverDue()
        try server.get("/_up")
        outbox.enqueue(urls: [url("sent-from-memory")])
        await outbox.deliverAll(until: Date().addingTimeInterval(30))
        XCTAssertEqual(try server.counts()["/b/sent-from-memory"], 1, "sent from memory while the disk refuses writes")
        XCTAssertEqual((0..<5).filter { (try? server.counts()["/b/held-\($0)"]) == 1 }.count, 5)
        // Down again, then the disk recovers: what waits in memory is written.
        try server.get("/_down")
        outbox.enqueue(urls: [url("written-later")])
        outbox.injectWriteFailures(false)
        _ = await outbox.deliverDue()
        XCTAssertEqual(outbox.status().pendingInMemory, 0)
        XCTAssertEqual(outbox.pendingCount(), 1)
        XCTAssertTrue(events.withLock { $0 }.contains { if case .diskRecovered = $0 { true } else { false } })
        let reopened = try self.outbox()
        XCTAssertEqual(reopened.pendingCount(), 1, "on disk now")
        XCTAssertEqual(reopened.status().sent, 6, "the counters too")
    }

    /// Backoff holds whatever the disk does: a beacon on disk whose server is down, while every
    /// write fails, is tried at most twice in 2 s (base delay 2 s), not every few milliseconds;
    /// once the disk takes writes, the schedule kept in memory is written to it.
    func testBackoffHoldsWhileTheDiskRefusesWrites() async throws {
        let attempts = Locked(0)
        let outbox = try outbox(baseDelay: 2, maxDelay: 600, onEvent: { event in
            if case .retrying = event { attempts.withLock { $0 += 1 } }
        })
        try server.get("/_down")
        XCTAssertEqual(outbox.enqueue(urls: [url("stormy")]), 1)
        outbox.injectWriteFailures(true)
        await outbox.deliverAll(until: Date().addingTimeInterval(2))
        let tried = attempts.withLock { $0 }
        XCTAssertGreaterThanOrEqual(tried, 1)
        XCTAssertLessThanOrEqual(tried, 2, "a retry storm while the disk refuses writes")
        XCTAssertTrue(outbox.status().diskFailing)
        XCTAssertEqual(outbox.pendingCount(), 1, "nothing lost")

        outbox.injectWriteFailures(false)
        _ = await outbox.deliverDue()
        XCTAssertFalse(outbox.status().diskFailing)
        let db = try SQLiteDatabase(path: database, readOnly: true)
        let row = try XCTUnwrap(try db.execute("SELECT attempts, next_run FROM beacons").first)
        // (This pass may have made one more attempt, if the backoff had passed: it counts too.)
        XCTAssertEqual(row[0].integer.map(Int.init), attempts.withLock { $0 }, "the attempts made while the disk failed are on disk now")
        XCTAssertGreaterThan(try XCTUnwrap(outbox.nextDue()), 0, "and the next attempt waits its backoff")
    }

    /// A play on disk whose end and viewability the disk refuses: kept, the disk marked
    /// failing, and written once it takes writes again — proof of play loses neither.
    func testAPlaysEndAndViewabilityWaitForTheDisk() async throws {
        let outbox = try outbox()
        outbox.recordPlayStart(Play(id: "p1", adID: "ad", kind: "overlay", source: "catalog", contentID: "ep", startedWall: 1_800_000_000))
        outbox.injectWriteFailures(true)
        outbox.recordViewability(id: "p1", "viewable")
        outbox.recordPlayEnd(id: "p1", endedWall: 1_800_000_004, seconds: 4, reason: "completed", viewable: nil)
        XCTAssertTrue(outbox.status().diskFailing, "a refused write marks the disk failing")
        outbox.injectWriteFailures(false)
        _ = await outbox.deliverDue()
        XCTAssertFalse(outbox.status().diskFailing)
        let reopened = try self.outbox()
        let play = try XCTUnwrap(reopened.plays().first)
        XCTAssertEqual(play.viewable, "viewable")
        XCTAssertEqual(play.reason, "completed")
        XCTAssertEqual(play.seconds, 4)
    }

    /// On a real full filesystem (an 8 MiB tmpfs filled to the last byte): the same.
    func testAFullFilesystemLosesNothing() async throws {
        guard getuid() == 0 else { throw XCTSkip("mounting a tmpfs needs root (CI runs as root)") }
        let mount = directory.appendingPathComponent("small")
        try FileManager.default.createDirectory(at: mount, withIntermediateDirectories: true)
        let (status, output) = try runToEnd("/bin/mount", ["-t", "tmpfs", "-o", "size=8m", "tmpfs", mount.path])
        XCTAssertEqual(status, 0, "mount a tmpfs (the tests run as root): \(output)")
        guard status == 0 else { return }
        defer { _ = try? runToEnd("/bin/umount", [mount.path]) }
        let path = mount.appendingPathComponent("adplayerd.sqlite").path
        let outbox = try outbox(at: path)
        try server.get("/_down")
        outbox.enqueue(urls: [url("before")])
        // Fill the filesystem.
        let filler = mount.appendingPathComponent("filler").path
        _ = try runToEnd("/bin/dd", ["if=/dev/zero", "of=\(filler)", "bs=4096"])
        let long = String(repeating: "p", count: 4000)
        XCTAssertEqual(outbox.enqueue(urls: (0..<50).map { url("full-\($0)-\(long)") }), 50, "kept, not refused")
        XCTAssertTrue(outbox.status().diskFailing, "the disk is full: \(outbox.status())")
        XCTAssertGreaterThan(outbox.status().pendingInMemory, 0)
        // Space comes back: what waited in memory is written (at the courier's next pass).
        try FileManager.default.removeItem(atPath: filler)
        _ = await outbox.deliverDue()
        outbox.enqueue(urls: [url("after")])
        XCTAssertFalse(outbox.status().diskFailing)
        XCTAssertEqual(outbox.status().pendingInMemory, 0)
        XCTAssertEqual(outbox.pendingCount(), 52)
        try server.get("/_up")
        await outbox.deliverAll(until: Date().addingTimeInterval(60))
        let counts = try server.counts()
        XCTAssertEqual(counts["/b/before"], 1)
        XCTAssertEqual(counts["/b/after"], 1)
        XCTAssertEqual((0..<50).filter { counts["/b/full-\($0)-\(long)"] == 1 }.count, 50, "every beacon delivered once")
        XCTAssertEqual(outbox.status().dropped, [:], "none dropped")
    }

    /// `[TIMESTAMP]` is the event's time; recorded while the wall clock was not synchronised,
    /// the beacon waits for it and is sent with the corrected time (its monotonic time on the
    /// synchronised clock's offset), decoded once to exactly that.
    func testATimestampRecordedOnAWrongClockIsCorrectedOnceItSyncs() async throws {
        let clock = TestTrackingClock()
        clock.jumpWall(by: -400 * 86_400, synchronized: false)   // booted with a clock a year behind
        let outbox = try outbox(clock: clock)
        let recorded = RecordedTime.now(clock)
        outbox.enqueue([Beacon(url: url("t") + "?ts=[TIMESTAMP]", event: "impression", billable: true, recorded: recorded)])
        _ = await outbox.deliverDue()
        XCTAssertEqual(try server.counts().keys.filter { $0.hasPrefix("/b/t") }, [], "it waits for the clock")
        clock.advance(10)
        clock.jumpWall(by: 400 * 86_400, synchronized: true)      // NTP sets it
        await outbox.deliverAll(until: Date().addingTimeInterval(30))
        let sent = try XCTUnwrap(try server.counts().keys.first { $0.hasPrefix("/b/t") })
        let value = try XCTUnwrap(URLComponents(string: "http://x" + sent)?.queryItems?.first { $0.name == "ts" }?.value)
        XCTAssertEqual(value, Macros.timestamp(Date(timeIntervalSince1970: 1_800_000_000)), "the event's time on the right clock: \(sent)")
    }

    /// A kernel that says "unsynchronised" is no evidence of a wrong clock (a box with no NTP
    /// client): a `[TIMESTAMP]` beacon goes at once with its time — unless the clock is before
    /// this release, or behind what the box already recorded, or jumped since the event (then it
    /// waits, and is corrected once the clock is synchronised).
    func testAnUnsynchronisedClockHoldsBeaconsOnlyOnEvidence() async throws {
        let evidence = ClockEvidence()
        let clock = TestTrackingClock(evidence: evidence)
        clock.jumpWall(by: 0, synchronized: false)   // 2027-01-15, no NTP
        let outbox = try outbox(clock: clock)
        outbox.enqueue([Beacon(url: url("now") + "?ts=[TIMESTAMP]", event: "impression", billable: true, recorded: RecordedTime.now(clock))])
        _ = await outbox.deliverDue()
        let sent = try XCTUnwrap(try server.counts().keys.first { $0.hasPrefix("/b/now") }, "sent at once, not held")
        XCTAssertTrue(sent.contains(Macros.timestamp(Date(timeIntervalSince1970: 1_800_000_000)).replacingOccurrences(of: ":", with: "%3A"))
                      || sent.contains(Macros.timestamp(Date(timeIntervalSince1970: 1_800_000_000))), sent)

        // Behind what this box already recorded: evidence of a wrong clock, held.
        clock.jumpWall(by: -3600, synchronized: false)
        outbox.enqueue([Beacon(url: url("behind") + "?ts=[TIMESTAMP]", event: "impression", recorded: RecordedTime.now(clock))])
        // Recorded while plausible, then the clock jumped (unsynchronised): held too.
        clock.jumpWall(by: 3600 + 60, synchronized: false)
        let beforeJump = RecordedTime.now(clock)
        XCTAssertEqual(beforeJump.trust, .plausible)
        outbox.enqueue([Beacon(url: url("jumped") + "?ts=[TIMESTAMP]", event: "impression", recorded: beforeJump)])
        clock.jumpWall(by: 600, synchronized: false)
        _ = await outbox.deliverDue()
        XCTAssertEqual(try server.counts().keys.filter { $0.hasPrefix("/b/behind") || $0.hasPrefix("/b/jumped") }, [], "both wait")
        // NTP sets the clock: both go, on the synchronised clock's offset (once looked at again).
        clock.advance(10)
        clock.jumpWall(by: 0, synchronized: true)
        await outbox.deliverAll(until: Date().addingTimeInterval(30))
        XCTAssertEqual(try server.counts().keys.filter { $0.hasPrefix("/b/behind") || $0.hasPrefix("/b/jumped") }.count, 2)
        XCTAssertLessThan(ClockEvidence.notBefore, Date().timeIntervalSince1970, "this release's date is in the past")
        XCTAssertFalse(ClockEvidence().plausible(ClockEvidence.notBefore - 86_400), "before this release: wrong")
    }

    /// Beacons held for an unsynchronised clock are looked at again in one transaction a pass,
    /// a few seconds apart: a box whose clock never syncs does not commit (and sync) a row per
    /// beacon a second (found by bench-outbox: 1,000 held beacons made ~800 commits a second).
    func testBeaconsHeldForTheClockCostOneCommitAPass() async throws {
        let clock = TestTrackingClock()
        clock.jumpWall(by: -400 * 86_400, synchronized: false)
        let outbox = try outbox(clock: clock)
        outbox.enqueue((0..<500).map { Beacon(url: url("held-\($0)") + "?ts=[TIMESTAMP]", event: "impression", recorded: RecordedTime.now(clock)) })
        let before = SQLiteDatabase.transactionCount()
        var passes = 0
        while let next = outbox.nextDue(), next == 0, passes < 100 {
            _ = await outbox.deliverDue()
            passes += 1
        }
        let commits = SQLiteDatabase.transactionCount() - before
        XCTAssertEqual(passes, 4, "500 held beacons, 128 looked at a pass (16 for each of 8 sending slots)")
        XCTAssertEqual(commits, passes, "one commit a pass")
        XCTAssertGreaterThanOrEqual(try XCTUnwrap(outbox.nextDue()), 4, "looked at again in seconds, not at once")
        XCTAssertEqual(try server.counts().keys.filter { $0.hasPrefix("/b/held") }, [], "they wait for the clock")
    }

    /// Where the kernel's answer is refused (systemd's ProtectClock=), timesyncd's flag file
    /// says whether the clock is synchronised: its folder without the flag, not yet; with it,
    /// yes; no timesyncd at all, nothing is known to be wrong.
    func testTimesyncdsFlagAnswersWhenTheKernelIsNotAsked() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("timesync-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        XCTAssertTrue(SystemTrackingClock.timesyncdSaysSynchronized(folder: folder), "no timesyncd")
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        XCTAssertFalse(SystemTrackingClock.timesyncdSaysSynchronized(folder: folder), "timesyncd, no sync yet")
        XCTAssertTrue(FileManager.default.createFile(atPath: folder + "/synchronized", contents: Data()))
        XCTAssertTrue(SystemTrackingClock.timesyncdSaysSynchronized(folder: folder), "synchronised")
    }

    func testTenThousandBeaconsQueuedWhileTheEndpointIsDownAreAllDeliveredWhenItComesBack() async throws {
        try server.get("/_down")
        let outbox = try outbox(baseDelay: 0.05, maxDelay: 0.5, concurrency: 16)
        outbox.enqueue(urls: (0..<10_000).map { url("n\($0)") })
        _ = await outbox.deliverDue()
        XCTAssertEqual(outbox.pendingCount(), 10_000)
        try server.get("/_up")
        await outbox.deliverAll(until: Date().addingTimeInterval(300))
        XCTAssertEqual(outbox.pendingCount(), 0)
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
        XCTAssertEqual(try runToEnd(binary, ["beacons", "add", "--state-dir", directory.path] + names.map(url)).status, 0)
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
        XCTAssertEqual(try runToEnd(binary, ["beacons", "flush", "--state-dir", directory.path, "--base-delay", "0.01"]).status, 0)
        let counts = try server.counts()
        for name in names {
            let count = counts["/b/\(name)"] ?? 0
            XCTAssertTrue((1...2).contains(count), "\(name) arrived \(count) times")
        }
        XCTAssertEqual(try outbox().pendingCount(), 0)
    }

    /// A damaged outbox (here: its index's page overwritten, so the integrity check fails) is
    /// moved aside with a warning naming both files, and every beacon its table still holds is
    /// read back into the new one: none is lost.
    func testADamagedOutboxIsMovedAsideAndItsBeaconsReadBack() throws {
        let urls = (0..<2000).map { url("kept-\($0)") }
        var root: Int64 = 0
        do {
            let outbox = try outbox()
            outbox.enqueue(urls: urls)
            let db = try SQLiteDatabase(path: database)
            root = try db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'beacons_next'").first?.first?.integer ?? 0
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        try destroyPage(root, with: 0xA5)
        let warnings = Locked<[String]>([])
        let reopened = try BeaconOutbox(path: database, onWarning: { w in warnings.withLock { $0.append(w) } })
        let said = warnings.withLock { $0 }
        XCTAssertTrue(said.contains { $0.contains(database) && $0.contains(".bad-") }, "\(said)")
        XCTAssertTrue(said.contains { $0.contains("read back beacons: 2000 rows") }, "\(said)")
        XCTAssertEqual(reopened.pendingCount(), 2000, "no beacon lost")
    }

    /// Whoever opens a damaged file first salvages it for everyone (issue 23): with an index
    /// page of proof of play destroyed, the state store (here: any other owner, through the same
    /// `openRepairing`) opens it first and moves it aside — the outbox that opens it next still
    /// has every queued beacon and every play, and the warning says what was read back.
    func testADamagedFileOpenedFirstByAnotherOwnerLosesNoBeaconOrPlay() throws {
        var root: Int64 = 0
        do {
            let outbox = try outbox()
            outbox.enqueue(urls: (0..<40).map { url("queued-\($0)") })
            for n in 0..<300 {
                outbox.recordPlayStart(Play(id: "p\(n)", adID: "ad", kind: "overlay", source: "catalog", contentID: "ep", startedWall: 1_800_000_000 + Double(n)))
            }
            let db = try SQLiteDatabase(path: database)
            root = try db.execute("SELECT rootpage FROM sqlite_master WHERE type = 'index' AND tbl_name = 'plays'").first?.first?.integer ?? 0
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        try destroyPage(root, with: 0x5A)
        let warnings = Locked<[String]>([])
        // Another owner of the file (the daemon's state store) opens it first.
        _ = try SQLiteDatabase.openRepairing(path: database, onWarning: { w in warnings.withLock { $0.append(w) } })
        let said = warnings.withLock { $0 }
        XCTAssertTrue(said.contains { $0.contains(".bad-") && $0.contains("beacons: 40 rows") && $0.contains("plays: 300 rows") }, "\(said)")
        let outbox = try outbox()
        XCTAssertEqual(outbox.pendingCount(), 40, "every queued beacon")
        XCTAssertEqual(outbox.plays().count, 300, "every play")
    }

    /// A database another process holds locked is not damage: it is left as it is (nothing moved
    /// aside, nothing lost), and the open says so in a second, not after 5 s of waiting.
    func testALockedDatabaseIsNotTakenForADamagedOne() throws {
        do {
            let outbox = try outbox()
            outbox.enqueue(urls: (0..<5).map { url("locked-\($0)") })
        }
        let holder = try SQLiteDatabase(path: database)
        try holder.execute("PRAGMA journal_mode=DELETE")
        try holder.execute("BEGIN EXCLUSIVE")
        XCTAssertThrowsError(try SQLiteDatabase.openRepairing(path: database, onWarning: { _ in })) { error in
            XCTAssertTrue((error as? SQLiteError)?.isBusy == true, "\(error)")
            XCTAssertTrue("\(error)".contains("locked by another process"), "\(error)")
        }
        try holder.execute("COMMIT")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        XCTAssertFalse(names.contains { $0.contains(".bad-") }, "nothing moved aside: \(names)")
        XCTAssertEqual(try outbox().pendingCount(), 5, "nothing lost")
    }

    /// An outbox of the previous version (URL and wall-clock time) is carried over.
    func testAnOutboxOfThePreviousVersionIsCarriedOver() async throws {
        do {
            let db = try SQLiteDatabase(path: database)
            try db.execute("""
                CREATE TABLE beacons (id INTEGER PRIMARY KEY AUTOINCREMENT, url TEXT NOT NULL, created_at REAL NOT NULL,
                                      attempts INTEGER NOT NULL DEFAULT 0, next_attempt_at REAL NOT NULL, last_error TEXT)
                """)
            try db.execute("INSERT INTO beacons (url, created_at, next_attempt_at) VALUES (?, 1, 1)", [.text(url("old-format"))])
        }
        let outbox = try outbox()
        XCTAssertEqual(outbox.pendingCount(), 1)
        await outbox.deliverAll(until: Date().addingTimeInterval(30))
        XCTAssertEqual(try server.counts()["/b/old-format"], 1)
    }
}
