import AdPlayerDaemon
import AdRuntime
import AdTestSupport
import ControlProtocol
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
        h.onLoop { try? h.controller.admit(.next) }
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
