import AdRuntime
import AdTestSupport
import XCTest

/// R27 on virtual time: a screensaver takes the pause ad's place over paused content, rotates,
/// and ends the moment anything plays or the output is hidden.
final class ScreensaverTests: XCTestCase {
    private func harness() -> Harness {
        Harness(source: TestAdSource([
            .pauseAd: .creative(AdCreative(id: "pa", kind: .pauseAd, content: .image(location: "pause.png"))),
            .screensaver: .creative(AdCreative(id: "ss", kind: .screensaver, content: .image(location: "ss.png"))),
        ])) { $0.screensaverRotation = 30 }
    }

    func testR27AScreensaverTakesThePauseAdsPlaceAndEndsWhenTheContentPlays() throws {
        let h = harness()
        h.start()
        h.player.pause()
        let pauseAd = try h.ad(.pauseAd)
        try h.show(pauseAd)
        XCTAssertTrue(h.surface.isVisible(pauseAd.id))
        h.loop.advance(by: 300)
        let screensaver = try h.ad(.screensaver)
        try h.show(screensaver)
        XCTAssertEqual(h.ends(pauseAd), [.replaced], "the pause ad gives its place")
        XCTAssertEqual(Array(h.surface.calls.suffix(2)), [.dismiss(pauseAd.id), .present(screensaver.id, "ss")], "down before it goes up")
        h.loop.advance(by: 10)
        h.player.play()
        XCTAssertEqual(h.ends(screensaver), [.played])
        XCTAssertFalse(h.surface.isVisible(screensaver.id), "gone in the step that delivered the play")
        XCTAssertNotNil(h.settled.ended.last?.2, "a latency from the play's arrival")
    }

    /// A pause ad still waiting for its delay when the screen idles never goes up over the screensaver.
    func testR27APauseAdStillWaitingForItsDelayIsReplacedToo() throws {
        let h = harness()
        h.start()
        h.player.pause()
        let pauseAd = try h.ad(.pauseAd)
        try pauseAd.show(afterPausedFor: 600, didEnd: h.log.didEnd(pauseAd.id))
        h.loop.advance(by: 300)
        let screensaver = try h.ad(.screensaver)
        try h.show(screensaver)
        XCTAssertEqual(h.ends(pauseAd), [.replaced])
        h.loop.advance(by: 400)
        XCTAssertEqual(h.surface.presentCounts[pauseAd.id], nil, "never up")
        XCTAssertEqual(h.ends(screensaver), [.limitReached], "its rotation time passed; no pause ad came up meanwhile")
    }

    func testR27EachCreativeHasItsTimeThenTheNextTakesItsPlace() throws {
        let h = harness()
        h.start()
        h.player.pause()
        let first = try h.ad(.screensaver)
        try h.show(first)
        h.loop.advance(by: 29.9)
        XCTAssertEqual(h.ends(first), [])
        h.loop.advance(by: 0.1)
        XCTAssertEqual(h.ends(first), [.limitReached], "its rotation time")
        let started = h.settled.all.filter { if case .started(let info) = $0 { info.id == first.id } else { false } }
        XCTAssertEqual(started.count, 1, "its own play: one start, one impression")
    }

    func testR27AHiddenOutputEndsItInterruptedAndItNeedsPausedContent() throws {
        let h = harness()
        h.start()
        let refused = try h.ad(.screensaver)
        XCTAssertThrowsAdError(.notPaused) { try h.show(refused) }
        h.player.pause()
        let screensaver = try h.ad(.screensaver)
        try h.show(screensaver)
        h.ads.setBackground(true)
        XCTAssertEqual(h.ends(screensaver), [.interrupted])
        XCTAssertFalse(h.surface.isVisible(screensaver.id))
    }

    func testR27ASeekOrAnotherItemEndsIt() throws {
        for (name, act, reason) in [("seek", { (h: Harness) in h.player.seek(to: 30) }, AdEndReason.seeked),
                                    ("item", { (h: Harness) in _ = h.player.load("next.mp4", duration: 60) }, .contentChanged)] {
            let h = harness()
            h.start()
            h.player.pause()
            let screensaver = try h.ad(.screensaver)
            try h.show(screensaver)
            act(h)
            XCTAssertEqual(h.ends(screensaver), [reason], name)
        }
    }
}
