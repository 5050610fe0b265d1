import AdRuntime
import AdTestSupport
import XCTest

/// R9, R10, R11, R14, R16 on the virtual player and virtual time.
final class TrackingTests: XCTestCase {
    // R9: held weakly.
    func testThePlayerIsHeldWeakly() throws {
        let h = Harness()
        var player: VirtualPlayer? = VirtualPlayer(loop: h.loop)
        player!.load("ep.mp4", duration: 10)
        h.ads.track(player!)
        weak let weakPlayer = player
        player = nil
        XCTAssertNil(weakPlayer, "the runtime kept the player alive")
        XCTAssertFalse(h.ads.isTracking)
        let overlay = try h.ad(.overlay)
        XCTAssertThrowsAdError(.notTracking) { try h.show(overlay) }
    }

    // R9: lets go at destroy() and at the next track().
    func testItLetsGoAtDestroyAndAtTheNextTrack() throws {
        let h = Harness()
        h.start()
        XCTAssertEqual(h.player.observerCount, 1)
        let other = VirtualPlayer(loop: h.loop)
        other.load("other.mp4", duration: 10)
        h.ads.track(other)
        XCTAssertEqual(h.player.observerCount, 0, "the first player is let go")
        XCTAssertEqual(other.observerCount, 1)
        // Changes of the first player no longer reach the runtime.
        let overlay = try h.ad(.overlay)
        try h.show(overlay)
        h.player.pause()
        XCTAssertEqual(h.ends(overlay), [])
        h.ads.destroy()
        XCTAssertEqual(other.observerCount, 0)
        XCTAssertEqual(h.ends(overlay), [.destroyed])
        h.ads.destroy()
        XCTAssertEqual(h.ends(overlay), [.destroyed], "idempotent")
    }

    // R10: tracked before the item changed, the new episode's ads are refused; again, shown.
    func testTrackedBeforeTheItemChangedThenTrackedAgain() throws {
        let h = Harness(content: "episode-2")
        h.player.load("episode-1.mp4", duration: 60)
        h.ads.track(h.player)                         // too early: episode 1 is still in
        h.player.load("episode-2.mp4", duration: 60)
        let overlay = try h.ad(.overlay)
        XCTAssertThrowsAdError(.invalidated(.contentChanged)) { try h.show(overlay) }
        h.player.pause()
        let pauseAd = try h.ad(.pauseAd)
        XCTAssertThrowsAdError(.invalidated(.contentChanged)) { try h.show(pauseAd) }
        XCTAssertEqual(h.surface.calls, [])

        h.ads.track(h.player)                         // once the new item is in
        try h.show(pauseAd)
        XCTAssertTrue(h.surface.isVisible(pauseAd.id))
        h.player.play()
        let next = try h.ad(.overlay)
        try h.show(next)
        XCTAssertTrue(h.surface.isVisible(next.id))
        XCTAssertEqual(h.ends(pauseAd), [.played])
    }

    func testAnAdOnScreenEndsWhenTheItemChanges() throws {
        let h = Harness()
        h.start()
        let overlay = try h.ad(.overlay)
        try h.show(overlay)
        h.player.load("episode-2.mp4", duration: 60)
        XCTAssertEqual(h.ends(overlay), [.contentChanged])
        XCTAssertEqual(h.surface.visible, [])
    }

    // R11: position 0 before track and after the bound item is gone.
    func testThePositionSentIsZeroBeforeTrackAndAfterTheItemIsGone() throws {
        let h = Harness()
        h.player.load("episode-1.mp4", duration: 60)
        h.loop.advance(by: 7)
        _ = try h.ad(.overlay)                        // prefetch
        h.ads.track(h.player)
        h.loop.advance(by: 3)
        _ = try h.ad(.overlay)
        h.player.load("episode-2.mp4", duration: 60)
        h.loop.advance(by: 4)
        _ = try h.ad(.overlay)
        XCTAssertEqual(h.source.requests.map(\.position), [0, 10, 0])
        XCTAssertEqual(h.source.requests.map(\.content.id), ["episode-1", "episode-1", "episode-1"])
        XCTAssertEqual(h.settled.all.compactMap { if case .requested(_, _, let p) = $0 { p } else { nil } }, [0, 10, 0])
    }

    func testAPrefetchedAdShowsOnceTracked() throws {
        let h = Harness()
        let overlay = try h.ad(.overlay)              // before anything is in the player
        h.start()
        try h.show(overlay)
        XCTAssertTrue(h.surface.isVisible(overlay.id))
    }

    // R14: each loop is another item; the VideoAds follows its own episode's loops.
    func testLoops() throws {
        let h = Harness()
        h.player.setLoop(true)
        let first = h.start(duration: 10)
        let early = try h.ad(.overlay)                // requested in loop 0
        let shown = try h.ad(.overlay)
        try h.show(shown)
        let nextAd = Locked<Ad?>(nil)
        h.loop.advance(by: 5)                        // shown's 5 s complete in loop 0
        XCTAssertEqual(h.ends(shown), [.completed])
        let onScreen = try h.ad(.overlay)
        let ads = h.ads
        try onScreen.show { reason in
            XCTAssertEqual(reason, .contentChanged)
            // Requested from didEnd: it belongs to the loop that plays. (A callback must not
            // block waiting for another: they are handed out one at a time.)
            ads.request(.overlay) { result in nextAd.withLock { $0 = try? result.get() } }
        }
        h.loop.advance(by: 5)                        // wrap into loop 1
        XCTAssertEqual(h.player.snapshot().item, first.nextLoop())
        XCTAssertEqual(h.ends(onScreen), [])          // its didEnd recorded nothing in the log
        XCTAssertFalse(h.surface.isVisible(onScreen.id), "no ad of loop 0 is visible in loop 1")
        XCTAssertThrowsAdError(.invalidated(.contentChanged)) { try h.show(early) }
        XCTAssertTrue(waitUntil { nextAd.withLock { $0 } != nil })
        let fromDidEnd = try XCTUnwrap(nextAd.withLock { $0 })
        try h.show(fromDidEnd)                        // no new track needed
        XCTAssertTrue(h.surface.isVisible(fromDidEnd.id))
    }

    // R16: no fill, a source that throws, one that never answers: the content plays on.
    func testNoFillAFailingSourceAndATimeoutAreReportedAndContentPlaysOn() throws {
        let source = TestAdSource([.overlay: .noFill, .pauseAd: .fail("HTTP 500"), .postroll: .never])
        let h = Harness(source: source)
        h.start()
        XCTAssertEqual(failure(requestAd(h.ads, .overlay)), .noFill)
        guard case .failure(.loadFailed(let why, _))? = requestAd(h.ads, .pauseAd) else { return XCTFail() }
        XCTAssertTrue(why.contains("HTTP 500"), why)

        let result = Locked<Result<Ad, AdError>?>(nil)
        h.ads.request(.postroll) { r in result.withLock { $0 = r } }
        h.loop.advance(by: 9.9)
        h.ads.waitForCallbacks()
        XCTAssertNil(result.withLock { $0 }, "not before the timeout")
        h.loop.advance(by: 0.1)
        h.ads.waitForCallbacks()
        XCTAssertEqual(failure(result.withLock { $0 }), .timeout(seconds: 10))
        XCTAssertTrue(waitUntil { source.cancelledCount == 1 }, "the request in flight was cancelled")
        // No fill is a normal outcome with an event of its own, not an error.
        XCTAssertEqual(h.settled.errors.map(\.code), ["load_failed", "timeout"])
        XCTAssertEqual(h.settled.all.filter { if case .noFill(.overlay, "episode-1", _) = $0 { true } else { false } }.count, 1)
        XCTAssertTrue(h.player.snapshot().playing)
    }

    func testACreativeOfTheWrongKindIsALoadFailure() throws {
        let source = TestAdSource([.overlay: .creative(AdCreative(id: "v", kind: .overlay, content: .video(location: "x.mp4")))])
        let h = Harness(source: source)
        h.start()
        guard case .failure(.loadFailed)? = requestAd(h.ads, .overlay) else { return XCTFail() }
    }

    func testDestroyCancelsRequestsInFlight() throws {
        let source = TestAdSource([.overlay: .never])
        let h = Harness(source: source)
        h.start()
        let result = Locked<Result<Ad, AdError>?>(nil)
        h.ads.request(.overlay) { r in result.withLock { $0 = r } }
        h.ads.destroy()
        h.ads.waitForCallbacks()
        guard case .failure(.destroyed)? = result.withLock({ $0 }) else { return XCTFail("\(String(describing: result.withLock { $0 }))") }
        XCTAssertTrue(waitUntil { source.cancelledCount == 1 })
        XCTAssertEqual(failure(requestAd(h.ads, .overlay)), .destroyed)
    }
}


func failure(_ result: Result<Ad, AdError>?) -> AdError? {
    if case .failure(let error)? = result { error } else { nil }
}
