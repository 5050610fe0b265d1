import AdRuntime
import AdTestSupport
import XCTest

/// R7 and R8 on the virtual player and virtual time.
final class PauseAdTests: XCTestCase {
    func testAPauseAdShowsWhilePausedAndEndsWithPlayedWhenContentPlays() throws {
        let h = Harness()
        h.start()
        h.loop.advance(by: 2)
        h.player.pause()
        let pauseAd = try h.ad(.pauseAd)
        try h.show(pauseAd)
        XCTAssertTrue(h.surface.isVisible(pauseAd.id))
        h.loop.advance(by: 30)
        XCTAssertTrue(h.surface.isVisible(pauseAd.id))
        h.player.play()
        XCTAssertFalse(h.surface.isVisible(pauseAd.id), "taken down in the step that delivered the play")
        XCTAssertEqual(h.ends(pauseAd), [.played])
        XCTAssertNotNil(h.settled.ended.first?.2)
    }

    func testAPauseAdIsRefusedWhileContentPlays() throws {
        let h = Harness()
        h.start()
        let pauseAd = try h.ad(.pauseAd)
        XCTAssertThrowsAdError(.notPaused) { try h.show(pauseAd) }
        XCTAssertEqual(h.surface.calls, [])
    }

    // R7: shown only after the content stayed paused for the delay; a seek restarts it.
    func testTheActivationDelayAndASeekRestartingIt() throws {
        let h = Harness()
        h.start()
        h.loop.advance(by: 5)
        h.player.pause()
        let pauseAd = try h.ad(.pauseAd)
        try pauseAd.show(afterPausedFor: 1, didEnd: h.log.didEnd(pauseAd.id))
        h.loop.advance(by: 0.7)
        h.player.seek(to: 2)   // scrubbing while paused
        h.loop.advance(by: 0.9)
        XCTAssertFalse(h.surface.isVisible(pauseAd.id), "the seek restarted the second")
        h.loop.advance(by: 0.1)
        XCTAssertTrue(h.surface.isVisible(pauseAd.id))
        // Once up, a seek takes it down.
        h.player.seek(to: 3)
        XCTAssertEqual(h.ends(pauseAd), [.seeked])
        XCTAssertFalse(h.surface.isVisible(pauseAd.id))
    }

    func testPlayingBeforeTheDelayEndsItUnseen() throws {
        let h = Harness()
        h.start()
        h.player.pause()
        let pauseAd = try h.ad(.pauseAd)
        try pauseAd.show(afterPausedFor: 1, didEnd: h.log.didEnd(pauseAd.id))
        h.loop.advance(by: 0.5)
        h.player.play()
        h.loop.advance(by: 5)
        XCTAssertEqual(h.ends(pauseAd), [.played])
        XCTAssertEqual(h.surface.calls, [], "never put up")
    }

    func testTheBackgroundSuspendsTheDelayAndTheReturnRestartsIt() throws {
        let h = Harness()
        h.start()
        h.player.pause()
        let pauseAd = try h.ad(.pauseAd)
        try pauseAd.show(afterPausedFor: 1, didEnd: h.log.didEnd(pauseAd.id))
        h.loop.advance(by: 0.5)
        h.ads.setBackground(true)
        h.loop.advance(by: 10)
        XCTAssertFalse(h.surface.isVisible(pauseAd.id))
        h.ads.setBackground(false)
        h.loop.advance(by: 0.9)
        XCTAssertFalse(h.surface.isVisible(pauseAd.id))
        h.loop.advance(by: 0.1)
        XCTAssertTrue(h.surface.isVisible(pauseAd.id))
    }

    func testAnotherItemEndsItWithContentChanged() throws {
        let h = Harness()
        h.start()
        h.player.pause()
        let pauseAd = try h.ad(.pauseAd)
        try h.show(pauseAd)
        h.player.load("episode-2.mp4", duration: 10)
        XCTAssertEqual(h.ends(pauseAd), [.contentChanged])
        XCTAssertEqual(h.surface.visible, [])
    }
}

final class PostrollTests: XCTestCase {
    // R8: after the episode played to its end; progress and its end come from the surface.
    func testAPostrollPlaysAfterTheEndAndReportsQuartilesAndCompletion() throws {
        let h = Harness()
        let item = h.start(duration: 10)
        let postroll = try h.ad(.postroll)
        XCTAssertThrowsAdError(.notEnded) { try h.show(postroll) }
        h.loop.advance(by: 10)
        XCTAssertEqual(h.player.snapshot().item, nil, "\(item) ended")
        try h.show(postroll)
        XCTAssertEqual(h.surface.calls, [.playPostroll(postroll.id, "pr-test")])
        let reporter = try XCTUnwrap(h.surface.reporter(postroll.id))
        for second in stride(from: 0.0, through: 15, by: 1) { reporter.progress(second, of: 15) }
        reporter.finished()
        XCTAssertEqual(h.ends(postroll), [.completed])
        let quartiles = h.settled.all.compactMap { if case .quartile(_, let q) = $0 { q } else { nil } }
        XCTAssertEqual(quartiles, [1, 2, 3])
        reporter.finished()
        reporter.failed("late")
        XCTAssertEqual(h.ends(postroll), [.completed], "reports after the end are dropped")
    }

    func testAnotherEpisodeComingInStopsIt() throws {
        let h = Harness()
        h.start(duration: 2)
        let postroll = try h.ad(.postroll)
        h.loop.advance(by: 2)
        try h.show(postroll)
        h.player.load("episode-2.mp4", duration: 10)
        XCTAssertEqual(h.ends(postroll), [.contentChanged])
        XCTAssertEqual(h.surface.calls.last, .stopPostroll(postroll.id))
    }

    /// A post-roll that plays past its declared duration and a margin (an endless stream served
    /// as a 5 s ad) is stopped and ends `failed` with VAST 202; the viewer's paused time does not
    /// count against it. One that declares nothing has a bound of its own.
    func testAPostrollPlayingPastItsBudgetIsStopped() throws {
        let declared = AdCreative(id: "pr-5s", kind: .postroll, content: .video(location: "endless.mp4"), duration: 5)
        let h = Harness(source: TestAdSource([.postroll: .creative(declared)]))
        h.start(duration: 2)
        let postroll = try h.ad(.postroll)
        h.loop.advance(by: 2)
        try h.show(postroll)
        let reporter = try XCTUnwrap(h.surface.reporter(postroll.id))
        h.loop.advance(by: 3)
        reporter.paused(true)
        h.loop.advance(by: 600)   // paused for ten minutes: not played
        XCTAssertEqual(h.ends(postroll), [])
        reporter.paused(false)
        h.loop.advance(by: 8)
        XCTAssertEqual(h.ends(postroll), [], "3 + 8 s played: within 11.25 s")
        h.loop.advance(by: 0.5)
        XCTAssertEqual(h.ends(postroll), [.failed])
        XCTAssertEqual(h.surface.calls.last, .stopPostroll(postroll.id))
        XCTAssertTrue(h.settled.errors.contains { $0.vastCode == 202 }, "\(h.settled.errors)")

        // None declared (the standard test post-roll): 300 s and the margin.
        let undeclared = Harness()
        undeclared.start(duration: 2)
        let stream = try undeclared.ad(.postroll)
        undeclared.loop.advance(by: 2)
        try undeclared.show(stream)
        undeclared.loop.advance(by: 304)
        XCTAssertEqual(undeclared.ends(stream), [])
        undeclared.loop.advance(by: 2)
        XCTAssertEqual(undeclared.ends(stream), [.failed])
    }

    func testAVideoThatFailsEndsItAsFailed() throws {
        let h = Harness()
        h.start(duration: 2)
        let postroll = try h.ad(.postroll)
        h.loop.advance(by: 2)
        try h.show(postroll)
        h.surface.reporter(postroll.id)?.failed("decoder error")
        XCTAssertEqual(h.ends(postroll), [.failed])
        XCTAssertTrue(h.settled.errors.contains(.renderFailed("decoder error")))
    }

    func testSkippingIsClosed() throws {
        let h = Harness()
        h.start(duration: 2)
        let postroll = try h.ad(.postroll)
        h.loop.advance(by: 2)
        try h.show(postroll)
        postroll.close()
        XCTAssertEqual(h.ends(postroll), [.closed])
        XCTAssertEqual(h.surface.visible, [])
    }

    func testAPostrollOfTheEpisodeIsRefusedOnceAnotherIsIn() throws {
        let h = Harness()
        h.start(duration: 2)
        let postroll = try h.ad(.postroll)
        h.loop.advance(by: 2)
        h.player.load("episode-2.mp4", duration: 10)
        XCTAssertThrowsAdError(.invalidated(.contentChanged)) { try h.show(postroll) }
    }
}
