@testable import AdRuntime
import AdTestSupport
import Foundation
import XCTest

/// Loop affinity is enforced, not commented (SPEC R18): each loop-owned type of the runtime
/// checks at its entry points that it runs on the player's loop. On a `VirtualLoop` made with
/// a recorder the checks record instead of trapping, so that these tests can show them fire.
final class LoopAffinityTests: XCTestCase {
    /// A `VideoAds`' state (`AdSession`): every entry point, called off the loop, is caught.
    func testTheSessionChecksItRunsOnTheLoop() {
        let offLoop = OffLoopCalls()
        let loop = VirtualLoop(recordingOffLoopCallsIn: offLoop)
        let player = VirtualPlayer(loop: loop)
        let session = AdSession(content: ContentInfo(id: "ep"), source: TestAdSource(), surface: RecordingAdSurface(), loop: loop,
                                configuration: VideoAdsConfiguration(), onEvent: { _ in })
        session.track(player)
        session.setBackground(true)
        session.close(1)
        session.destroy()
        let calls = offLoop.take()
        for name in ["track(_:)", "setBackground(_:)", "close(_:)", "destroy(endingShownAs:)"] {
            XCTAssertTrue(calls.contains { $0.contains("Session.swift") && $0.hasSuffix(name) }, "\(name) not caught: \(calls)")
        }
        // Through `VideoAds` every call is handed to the loop: nothing to report.
        let ads = VideoAds(content: ContentInfo(id: "ep"), source: TestAdSource(), surface: RecordingAdSurface(), loop: loop)
        ads.track(player)
        ads.setBackground(true)
        ads.destroy()
        XCTAssertEqual(offLoop.take(), [])
    }

    /// A player's change feed, and a loop timer, are loop-only too.
    func testTheChangeFeedAndTimersCheckTheyRunOnTheLoop() {
        let offLoop = OffLoopCalls()
        let loop = VirtualLoop(recordingOffLoopCallsIn: offLoop)
        let feed = PlayerChangeFeed(loop: loop)
        final class Observer: PlayerObserver {
            func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) {}
        }
        let observer = Observer()
        let observation = feed.add(observer)
        _ = feed.observerCount
        let timer = try? loop.sync { loop.schedule(after: 1) {} }
        timer?.cancel()
        _ = loop.schedule(after: 1) {}
        let calls = offLoop.take()
        XCTAssertTrue(calls.contains { $0.contains("PlayerChangeFeed.swift") && $0.hasSuffix("add(_:phase:)") }, "\(calls)")
        XCTAssertTrue(calls.contains { $0.contains("PlayerChangeFeed.swift") && $0.hasSuffix("observerCount") }, "\(calls)")
        XCTAssertTrue(calls.contains { $0.contains("PlayerLoop.swift") && $0.hasSuffix("cancel()") }, "\(calls)")
        XCTAssertTrue(calls.contains { $0.contains("VirtualLoop.swift") && $0.contains("schedule") }, "\(calls)")
        withExtendedLifetime(observation) {}
    }
}
