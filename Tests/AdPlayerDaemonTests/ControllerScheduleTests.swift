import AdPlayerDaemon
import AdRuntime
import AdTestSupport
import Bounds
import ControlProtocol
import AdPlayerSimulation
import AdSchedule
import Foundation
import XCTest

/// The schedule in the controller on virtual time (issue 37): a boundary never cuts a linear
/// ad — it waits for its end; a takeover is immediate and what is on screen ends
/// `interrupted`; a person's command overrides until the next boundary.
final class ControllerScheduleTests: XCTestCase {
    private func configure(_ h: ControllerHarness, slotFrom seconds: Double) throws -> Date {
        let base = Date(timeIntervalSince1970: 1_800_000_000)   // a Friday, 08:00 UTC
        let start = h.loop.now()
        let loop = h.loop
        let now: @Sendable () -> Date = { base.addingTimeInterval(Double(loop.now() &- start) / 1e9) }
        let json = """
            {"version": 1, "playlists": {"filler": {"items": ["a"]}, "promo": {"items": ["p"]}}, "default": "filler",
             "slots": [{"id": "promo", "playlist": "promo", "from": "2027-01-01", "priority": 5}]}
            """
        let schedule = try Schedule.parse(Array(json.utf8), timeZone: TimeZone(identifier: "UTC")!)
        // The slot's validity starts `seconds` from now: set by hand (dates are whole days).
        var shifted = schedule
        shifted.slots[0].from = base.addingTimeInterval(seconds)
        let resolved = ResolvedSchedule(schedule: shifted, files: ["filler": [.init(path: "/lib/a.mp4", seconds: nil)],
                                                                  "promo": [.init(path: "/lib/promo.mp4", seconds: nil)]])
        h.onLoop {
            h.controller.configureSchedule(resolved, timeline: ScheduleTimeline.compute(shifted, from: base), now: now,
                                           compute: { schedule, from, done in done(ScheduleTimeline.compute(schedule, from: from)) })
        }
        return base
    }

    /// The slot begins while the filler's post-roll plays: the post-roll plays to its end
    /// (`completed`), then the slot's item; a boundary waits for a linear ad.
    func testABoundaryWaitsForALinearAdsEnd() throws {
        let h = try ControllerHarness(source: LinearSource(), pauseAdDelay: 0)
        h.player.setMedia("/lib/a.mp4", duration: 2)
        h.player.setMedia("/lib/promo.mp4", duration: 30)
        h.start()
        _ = try configure(h, slotFrom: 3)
        h.wait(for: .playerItem) { $0.fields["path"]?.string == "/lib/a.mp4" }
        h.advance(2.1)
        let started = h.wait(for: .adStarted) { $0.fields["kind"] == "postroll" }
        let id = try XCTUnwrap(started?.fields["instance"]?.string.flatMap { UInt64($0, radix: 16) })
        h.advance(3)   // past the boundary (t = 3 s), the post-roll still playing
        XCTAssertFalse(h.events.contains { $0.name == .adEnded }, "the post-roll is not cut: \(h.eventNames)")
        XCTAssertFalse(h.events.contains { $0.name == .playerItem && $0.fields["path"]?.string == "/lib/promo.mp4" })
        h.onLoop { h.surface.reporter(id)?.finished() }
        let ended = h.wait(for: .adEnded) { $0.fields["kind"] == "postroll" }
        XCTAssertEqual(ended?.fields["reason"]?.string, "completed")
        h.wait(for: .playerItem) { $0.fields["path"]?.string == "/lib/promo.mp4" }
        let schedule = try h.onLoop { try h.controller.perform(.schedule) }
        XCTAssertEqual(schedule["rule"]?["kind"]?.string, "slot")
        XCTAssertEqual(schedule["rule"]?["id"]?.string, "promo")
        XCTAssertEqual(h.offLoop.take(), [])
    }

    /// A takeover while a pause ad is up: it ends `interrupted`, the takeover's file plays, and
    /// the audit says who; `takeover end` gives the screen back to the schedule. A person's
    /// `next` overrides the schedule until its next boundary.
    func testATakeoverInterruptsTheAdOnScreenAndAPersonOverridesUntilTheBoundary() throws {
        let h = try ControllerHarness(source: LinearSource(), pauseAdDelay: 0)
        h.player.setMedia("/lib/a.mp4", duration: 600)
        h.player.setMedia("/lib/takeover.mp4", duration: 600)
        h.start()
        _ = try configure(h, slotFrom: 60)
        h.wait(for: .playerItem) { $0.fields["path"]?.string == "/lib/a.mp4" }
        h.wait(for: .playerPlaying)
        _ = try h.onLoop { try h.controller.pause() }
        h.wait(for: .adStarted) { $0.fields["kind"] == "pause" }
        _ = try h.onLoop {
            try h.controller.takeover(target: "/lib/takeover.mp4", files: [.init(path: "/lib/takeover.mp4", seconds: nil)], seconds: 30,
                                      priority: nil, by: "a test")
        }
        let ended = h.wait(for: .adEnded) { $0.fields["kind"] == "pause" }
        XCTAssertEqual(ended?.fields["reason"]?.string, "interrupted")
        h.wait(for: .playerItem) { $0.fields["path"]?.string == "/lib/takeover.mp4" }
        var schedule = try h.onLoop { try h.controller.perform(.schedule) }
        XCTAssertEqual(schedule["rule"]?["kind"]?.string, "takeover")
        XCTAssertEqual(schedule["audit"]?.array?.last?["by"]?.string, "a test")
        XCTAssertEqual(schedule["audit"]?.array?.last?["event"]?.string, "started")
        _ = try h.onLoop { try h.controller.perform(.takeoverEnd(by: "the test")) }
        schedule = try h.onLoop { try h.controller.perform(.schedule) }
        XCTAssertEqual(schedule["rule"]?["kind"]?.string, "default")
        XCTAssertEqual(schedule["audit"]?.array?.last?["event"]?.string, "ended by the test")
        // A person's command: manual until the slot begins (t = 60 s), then the slot plays.
        _ = try h.onLoop { try h.controller.perform(.jump(index: 0)) }
        schedule = try h.onLoop { try h.controller.perform(.schedule) }
        XCTAssertEqual(schedule["rule"]?["kind"]?.string, "manual")
        XCTAssertNotNil(schedule["override_until"]?.string)
        h.player.setMedia("/lib/promo.mp4", duration: 600)
        h.advance(61)
        h.wait(for: .playerItem) { $0.fields["path"]?.string == "/lib/promo.mp4" }
        schedule = try h.onLoop { try h.controller.perform(.schedule) }
        XCTAssertEqual(schedule["rule"]?["id"]?.string, "promo")
    }
}

/// A person's buttons on a schedule (issue 45, 3; R24): nothing a person does leaves the screen
/// dark. Tested through the command path (`perform`), as the socket runs it.
final class SchedulePeopleTests: XCTestCase {
    private let base = Date(timeIntervalSince1970: 1_800_000_000)

    /// A schedule of playlists by name (files as given), the default `filler`, no slot.
    private func configure(_ h: ControllerHarness, _ playlists: [String: [String]], contentPlays: Locked<[ContentPlay]>? = nil) throws {
        let start = h.loop.now()
        let loop = h.loop, base = self.base
        let now: @Sendable () -> Date = { base.addingTimeInterval(Double(loop.now() &- start) / 1e9) }
        let names = playlists.keys.sorted().map { "\"\($0)\": {\"items\": [\"x\"]}" }.joined(separator: ", ")
        let schedule = try Schedule.parse(Array("{\"version\": 1, \"playlists\": {\(names)}, \"default\": \"filler\"}".utf8),
                                          timeZone: TimeZone(identifier: "UTC")!)
        let files: [String: [ResolvedSchedule.File]] = playlists.mapValues { paths in paths.map { ResolvedSchedule.File(path: $0, seconds: nil) } }
        let resolved = ResolvedSchedule(schedule: schedule, files: files)
        var record: (@Sendable (ContentPlay) -> Void)?
        if let contentPlays {
            record = { (play: ContentPlay) in contentPlays.withLock { $0.append(play) } }
        }
        let onContent = record
        h.onLoop {
            h.controller.configureSchedule(resolved, timeline: ScheduleTimeline.compute(schedule, from: base), now: now,
                                           compute: { schedule, from, done in done(ScheduleTimeline.compute(schedule, from: from)) },
                                           onContent: onContent)
        }
    }

    private func rule(_ h: ControllerHarness) throws -> String? {
        try h.onLoop { try h.controller.perform(.schedule) }["rule"]?["kind"]?.string
    }

    /// One default playlist of one file: Next plays the schedule's next item (the same file
    /// again) — not `stopped`, not `manual` until two days later (it was); Previous the item
    /// before; a refused Previous changes nothing.
    func testNextAndPreviousMoveWithinTheSchedule() throws {
        let h = try ControllerHarness(source: nil)
        h.player.setMedia("/lib/a.mp4", duration: 600)
        h.start()
        try configure(h, ["filler": ["/lib/a.mp4"]])
        h.wait(for: .playerItem) { $0.fields["path"]?.string == "/lib/a.mp4" }
        let refused = try? h.onLoop { try h.controller.perform(.previous) }
        XCTAssertNil(refused, "nothing played before")
        XCTAssertEqual(try rule(h), "default", "a refused command overrides nothing")
        h.advance(30)
        let status = try h.onLoop { try h.controller.perform(.next) }
        XCTAssertEqual(status["playing"]?.bool, true, "\(status)")
        XCTAssertEqual(status["item"]?["path"]?.string, "/lib/a.mp4")
        XCTAssertEqual(status["position"]?.number ?? -1, 0, accuracy: 0.01, "the next item, from its start")
        XCTAssertEqual(try rule(h), "default")
        XCTAssertNil(try h.onLoop { try h.controller.perform(.schedule) }["override_until"])
        h.advance(5)
        _ = try h.onLoop { try h.controller.perform(.previous) }
        XCTAssertEqual(try h.onLoop { h.controller.status() }["playing"]?.bool, true)
        XCTAssertEqual(try rule(h), "default")
        XCTAssertEqual(h.offLoop.take(), [])
    }

    /// A person's `stop` (or `jump`) rules for a bounded time when no boundary comes: at most
    /// ten minutes (it was the 48-hour horizon), then the schedule plays again. A person's own
    /// queue that runs out gives the screen back at once.
    func testAnOverrideIsBoundedAndAPersonsQueueRunningOutGivesTheScreenBack() throws {
        let h = try ControllerHarness(source: nil)
        h.player.setMedia("/lib/a.mp4", duration: 6000)
        h.player.setMedia("/lib/mine.mp4", duration: 20)
        h.start()
        try configure(h, ["filler": ["/lib/a.mp4"]])
        h.wait(for: .playerItem) { $0.fields["path"]?.string == "/lib/a.mp4" }
        _ = try h.onLoop { try h.controller.perform(.stop) }
        let schedule = try h.onLoop { try h.controller.perform(.schedule) }
        XCTAssertEqual(schedule["rule"]?["kind"]?.string, "manual")
        let until = try XCTUnwrap(schedule["override_until"]?.string.flatMap(ISO8601.parse))
        XCTAssertLessThanOrEqual(until - base.timeIntervalSince1970, 600.001, "minutes, not days")
        XCTAssertEqual(try h.onLoop { h.controller.status() }["playing"]?.bool, false)
        h.advance(601)
        XCTAssertEqual(try rule(h), "default", "the schedule plays again")
        XCTAssertEqual(try h.onLoop { h.controller.status() }["playing"]?.bool, true)

        // A person's file: it plays, and when it ends the schedule plays at once.
        _ = try h.onLoop { () throws -> JSONValue in
            let result = try h.controller.open(QueueEntry(path: "/lib/mine.mp4"), start: 0)
            h.controller.commanded(.open(path: "/lib/mine.mp4", contentID: nil, start: 0))
            return result
        }
        XCTAssertEqual(try rule(h), "manual")
        h.advance(20.5)
        XCTAssertEqual(try rule(h), "default", "a person's queue ran out: the schedule at once, not after the override")
        XCTAssertEqual(try h.onLoop { h.controller.status() }["item"]?["path"]?.string, "/lib/a.mp4")
    }

    /// Files of a playlist gone (a USB stick pulled, a library replaced by rsync): each is a
    /// failed content play with its reason, what still loads plays, and with nothing loading
    /// the schedule backs off instead of spinning; health says "schedule items failing" (issue
    /// 45, 6). Before: every load failed at once and was recorded `completed`, without end.
    func testItemsThatCannotBeLoadedAreFailuresWithABackOff() throws {
        let plays = Locked<[ContentPlay]>([])
        let h = try ControllerHarness(source: nil)
        h.player.setMedia("/lib/gone-1.mp4", duration: nil)
        h.player.setMedia("/lib/gone-2.mp4", duration: nil)
        h.player.setMedia("/lib/here.mp4", duration: 10)
        h.start()
        try configure(h, ["filler": ["/lib/gone-1.mp4", "/lib/gone-2.mp4", "/lib/here.mp4"]], contentPlays: plays)
        h.wait(for: .playerItem) { $0.fields["path"]?.string == "/lib/here.mp4" }
        let failed = plays.withLock { $0 }.filter { $0.reason?.hasPrefix("failed") == true }
        XCTAssertEqual(Set(failed.map(\.path)), ["/lib/gone-1.mp4", "/lib/gone-2.mp4"], "\(plays.withLock { $0 })")
        XCTAssertFalse(plays.withLock { $0 }.contains { $0.reason == "completed" && $0.path.contains("gone") })

        // Now every file gone: a few tries, then a back-off — not thousands of loads.
        h.player.setMedia("/lib/here.mp4", duration: nil)
        h.advance(10.5)
        var loads = 0
        for _ in 0..<120 {
            h.advance(1)
            loads = h.events.filter { $0.name == .playerFailed }.count
        }
        XCTAssertGreaterThan(loads, 5)
        XCTAssertLessThan(loads, 60, "two minutes of a library gone: backed off, not spinning")
        let health = h.onLoop { h.controller.healthSnapshot() }
        XCTAssertTrue(health.scheduleProblem?.contains("schedule items failing") == true, "\(String(describing: health.scheduleProblem))")
        // The file comes back: it plays, and the failures are over.
        h.player.setMedia("/lib/here.mp4", duration: 10)
        h.advance(61)
        h.wait(for: .playerItem) { _ in h.events.filter { $0.name == .playerItem && $0.fields["path"]?.string == "/lib/here.mp4" }.count >= 2 }
        XCTAssertNil(h.onLoop { h.controller.healthSnapshot() }.scheduleProblem)
    }
}

/// A pause ad and a post-roll for every episode.
private struct LinearSource: AdSource {
    func ad(for request: AdRequest) async throws -> AdCreative? {
        switch request.kind {
        case .pauseAd: AdCreative(id: "pa", kind: .pauseAd, content: .text("Paused"))
        case .postroll: AdCreative(id: "pr", kind: .postroll, content: .video(location: "/ads/pr.mp4"))
        default: nil
        }
    }

    func mayFill(_ kind: AdKind, content: ContentInfo, at position: Double) -> Bool { kind == .pauseAd || kind == .postroll }
}
