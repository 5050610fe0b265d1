import AdRuntime
import AdTestSupport
import XCTest

/// R6, R12, R13 on the virtual player and virtual time.
final class OverlayTests: XCTestCase {
    // R6: over playing content only; ends the moment the content stops playing.
    func testAnOverlayShowsOverPlayingContentAndEndsWithPausedOnPause() throws {
        let h = Harness()
        h.start()
        let overlay = try h.ad(.overlay)
        try h.show(overlay)
        XCTAssertTrue(h.surface.isVisible(overlay.id))
        h.loop.advance(by: 1)
        h.player.pause()
        XCTAssertFalse(h.surface.isVisible(overlay.id), "taken down in the step that delivered the pause")
        XCTAssertEqual(h.ends(overlay), [.paused])
        let ended = try XCTUnwrap(h.settled.ended.first)
        XCTAssertEqual(ended.1, .paused)
        XCTAssertNotNil(ended.2, "an end caused by the player carries its latency")
    }

    /// An output that refuses the removal: the overlay still ends (paused), but no latency is
    /// claimed for a removal that did not happen, and the failure is said (an `.error`).
    func testARefusedRemovalIsSaidAndClaimsNoLatency() throws {
        let h = Harness()
        h.start()
        let overlay = try h.ad(.overlay)
        try h.show(overlay)
        h.surface.refuseRemoval()
        h.loop.advance(by: 1)
        h.player.pause()
        XCTAssertEqual(h.ends(overlay), [.paused])
        let ended = try XCTUnwrap(h.settled.ended.first)
        XCTAssertNil(ended.2, "no latency for a removal the output refused")
        guard case .renderFailed(let message)? = h.settled.errors.first else {
            return XCTFail("the refused removal is reported: \(h.settled.errors)")
        }
        XCTAssertTrue(message.contains("could not be taken down"), message)
    }

    func testAnOverlayIsRefusedOverPausedContent() throws {
        let h = Harness()
        h.start()
        h.player.pause()
        let overlay = try h.ad(.overlay)
        XCTAssertThrowsAdError(.notPlaying) { try h.show(overlay) }
        XCTAssertEqual(h.surface.calls, [])
        XCTAssertEqual(h.settled.errors, [.notPlaying])
    }

    // R6: the duration is wall-clock time while the content plays — not content time.
    func testTheDurationIsPlayingTimeNotContentTime() throws {
        let h = Harness()
        h.start()
        h.player.setRate(2)
        let overlay = try h.ad(.overlay)   // 5 s
        try h.show(overlay)
        h.loop.advance(by: 4.9)
        XCTAssertTrue(h.surface.isVisible(overlay.id), "5 s at 2x is still 5 s on screen")
        h.loop.advance(by: 0.1)
        XCTAssertEqual(h.ends(overlay), [.completed])
        XCTAssertFalse(h.surface.isVisible(overlay.id))
        XCTAssertNil(h.settled.ended.first?.2, "no player change caused a completion")
    }

    // R12: a seek while it is on screen ends it.
    func testASeekWhileShowingEndsItWithSeeked() throws {
        let h = Harness()
        h.start()
        let overlay = try h.ad(.overlay)
        try h.show(overlay)
        h.player.seek(to: 30)
        XCTAssertEqual(h.ends(overlay), [.seeked])
        XCTAssertFalse(h.surface.isVisible(overlay.id))
    }

    // R12: 2x playback across the start starts it; the rate is no seek.
    func testPlayingAcrossTheStartAtTwiceTheSpeedStartsIt() throws {
        let h = Harness()
        h.start()
        h.player.setRate(2)
        let overlay = try h.ad(.overlay)
        try overlay.show(atContentTime: 10, didEnd: h.log.didEnd(overlay.id))
        XCTAssertFalse(h.surface.isVisible(overlay.id))
        h.loop.advance(by: 4.9)   // content at 9.8
        XCTAssertFalse(h.surface.isVisible(overlay.id))
        h.loop.advance(by: 0.1)   // content at 10.0
        XCTAssertTrue(h.surface.isVisible(overlay.id))
        h.loop.advance(by: 5)
        XCTAssertEqual(h.ends(overlay), [.completed])
    }

    // R12: a seek that lands past the start does not start it; playing across it later does.
    func testASeekPastTheStartDoesNotStartIt() throws {
        let h = Harness()
        h.start()
        let overlay = try h.ad(.overlay)
        try overlay.show(atContentTime: 10, didEnd: h.log.didEnd(overlay.id))
        h.loop.advance(by: 2)
        h.player.seek(to: 12)
        h.loop.advance(by: 20)
        XCTAssertEqual(h.surface.calls, [], "landing past the start is not playing across it")
        h.player.seek(to: 8)
        h.loop.advance(by: 1.9)
        XCTAssertFalse(h.surface.isVisible(overlay.id))
        h.loop.advance(by: 0.1)
        XCTAssertTrue(h.surface.isVisible(overlay.id), "played across 10 after seeking back before it")
    }

    /// `withdraw()`: a waiting overlay the application no longer wants ends `seeked`, never
    /// having been on screen; on screen, or ended, it changes nothing.
    func testWithdrawEndsAWaitingOverlayOnlyAsSeekedAndUnseen() throws {
        let h = Harness()
        h.start()
        let waiting = try h.ad(.overlay)
        try waiting.show(atContentTime: 10, didEnd: h.log.didEnd(waiting.id))
        h.player.seek(to: 12)
        waiting.withdraw()
        h.loop.advance(by: 0)
        XCTAssertEqual(h.ends(waiting), [.seeked])
        XCTAssertEqual(h.surface.calls, [], "never on screen")

        let showing = try h.ad(.overlay)
        try showing.show(atContentTime: 13, didEnd: h.log.didEnd(showing.id))
        h.loop.advance(by: 1.5)
        XCTAssertTrue(h.surface.isVisible(showing.id))
        showing.withdraw()
        waiting.withdraw()
        h.loop.advance(by: 0)
        XCTAssertTrue(h.surface.isVisible(showing.id), "on screen: withdraw changes nothing")
        XCTAssertEqual(h.ends(showing), [])
        XCTAssertEqual(h.ends(waiting), [.seeked], "ended once")
    }

    func testAScheduledOverlayWaitsThroughAPauseAndChangesOfRate() throws {
        let h = Harness()
        h.start()
        let overlay = try h.ad(.overlay)
        try overlay.show(atContentTime: 6, didEnd: h.log.didEnd(overlay.id))
        h.loop.advance(by: 2)
        h.player.pause()
        h.loop.advance(by: 30)
        XCTAssertEqual(h.surface.calls, [])
        h.player.play()
        h.loop.advance(by: 1)       // 3
        h.player.setRate(3)
        h.loop.advance(by: 0.99)    // 5.97
        XCTAssertFalse(h.surface.isVisible(overlay.id))
        h.loop.advance(by: 0.01)    // 6.0
        XCTAssertTrue(h.surface.isVisible(overlay.id))
        XCTAssertEqual(h.ends(overlay), [])
    }

    // R13: in the background the overlay freezes through the content's pause...
    func testBackgroundFreezesItAndPlayingWithinASecondOfTheReturnGoesOn() throws {
        let h = Harness()
        h.start()
        let overlay = try h.ad(.overlay)   // 5 s
        try h.show(overlay)
        h.loop.advance(by: 2)
        h.ads.setBackground(true)
        h.player.pause()                   // the box pauses content when it hides the output
        h.loop.advance(by: 60)
        XCTAssertTrue(h.surface.isVisible(overlay.id), "frozen, not ended")
        XCTAssertEqual(h.ends(overlay), [])
        h.ads.setBackground(false)
        h.loop.advance(by: 0.9)
        h.player.play()
        // ...and goes on with its remaining 3 s: frozen time did not count.
        h.loop.advance(by: 2.9)
        XCTAssertTrue(h.surface.isVisible(overlay.id))
        h.loop.advance(by: 0.1)
        XCTAssertEqual(h.ends(overlay), [.completed])
    }

    func testBackgroundThenNoPlayWithinASecondOfTheReturnIsInterrupted() throws {
        let h = Harness()
        h.start()
        let overlay = try h.ad(.overlay)
        try h.show(overlay)
        h.ads.setBackground(true)
        h.player.pause()
        h.loop.advance(by: 10)
        h.ads.setBackground(false)
        h.loop.advance(by: 0.99)
        XCTAssertEqual(h.ends(overlay), [])
        h.loop.advance(by: 0.01)
        XCTAssertEqual(h.ends(overlay), [.interrupted])
        XCTAssertFalse(h.surface.isVisible(overlay.id))
        h.player.play()
        XCTAssertEqual(h.ends(overlay), [.interrupted], "ended once")
    }

    func testContentStillPlayingAtTheReturnGoesOnAtOnce() throws {
        let h = Harness()
        h.start()
        let overlay = try h.ad(.overlay)   // 5 s
        try h.show(overlay)
        h.loop.advance(by: 1)
        h.ads.setBackground(true)
        h.loop.advance(by: 3)             // content plays on; the overlay is frozen
        h.ads.setBackground(false)
        h.loop.advance(by: 3.9)
        XCTAssertTrue(h.surface.isVisible(overlay.id))
        h.loop.advance(by: 0.1)
        XCTAssertEqual(h.ends(overlay), [.completed])
    }

    /// Without the background, the same pause ends it at once (R6 wins outside R13).
    func testAPauseInTheForegroundAfterAReturnEndsIt() throws {
        let h = Harness()
        h.start()
        let overlay = try h.ad(.overlay)
        try h.show(overlay)
        h.ads.setBackground(true)
        h.ads.setBackground(false)
        h.player.pause()
        XCTAssertEqual(h.ends(overlay), [.paused])
    }

    func testCloseEndsItWithClosedOnce() throws {
        let h = Harness()
        h.start()
        let overlay = try h.ad(.overlay)
        try h.show(overlay)
        overlay.close()
        overlay.close()
        h.player.pause()
        XCTAssertEqual(h.ends(overlay), [.closed])
        XCTAssertThrowsAdError(.alreadyShown) { try h.show(overlay) }
    }

    func testAnEndedEpisodeEndsItWithContentChanged() throws {
        let h = Harness()
        h.start(duration: 3)
        let overlay = try h.ad(.overlay)
        try h.show(overlay)
        h.loop.advance(by: 3)
        XCTAssertEqual(h.ends(overlay), [.contentChanged])
        XCTAssertFalse(h.surface.isVisible(overlay.id))
    }

    func testACreativeTheSurfaceRefusesFailsTheAdAndTheContentPlaysOn() throws {
        let h = Harness()
        h.start()
        h.surface.refuse(creativeID: "ov-test")
        let overlay = try h.ad(.overlay)
        try h.show(overlay)
        XCTAssertEqual(h.ends(overlay), [.failed])
        XCTAssertTrue(h.settled.errors.contains { $0.code == "render_failed" })
        XCTAssertTrue(h.player.snapshot().playing)
        XCTAssertEqual(h.surface.visible, [])
    }
}
