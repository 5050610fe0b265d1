import AdRuntime
import AdTestSupport
import XCTest

/// Time on a visible output and viewability (the MRC's times: 1 s on screen for an overlay or
/// a pause ad, 2 s of a playing video for a post-roll, continuously), and overlays that load
/// before the content plays — on a virtual player and virtual time.
final class ExposureTests: XCTestCase {
    private func viewability(_ h: Harness, _ ad: Ad) -> [AdViewability] {
        h.settled.all.compactMap { if case .viewability(let info, let v) = $0, info.id == ad.id { v } else { nil } }
    }

    private func onScreen(_ h: Harness, _ ad: Ad) -> Double? {
        h.settled.ended.first { $0.0.id == ad.id }?.0.onScreenSeconds
    }

    /// On screen for the MRC's second: viewable, said once, at that second.
    func testAnOverlayOnScreenForASecondIsViewableAtThatSecond() throws {
        let h = Harness()
        h.start()
        let overlay = try h.ad(.overlay)   // 5 s
        try h.show(overlay)
        h.loop.advance(by: 0.999)
        XCTAssertEqual(viewability(h, overlay), [], "not before its second")
        h.loop.advance(by: 0.001)
        XCTAssertEqual(viewability(h, overlay), [.viewable])
        h.loop.advance(by: 4)
        XCTAssertEqual(h.ends(overlay), [.completed])
        XCTAssertEqual(viewability(h, overlay), [.viewable], "once")
        XCTAssertEqual(onScreen(h, overlay) ?? 0, 5, accuracy: 0.001)
    }

    /// Ended by a pause before its second: not viewable, and on screen only as long as it was.
    func testAnOverlayEndedBeforeItsSecondIsNotViewable() throws {
        let h = Harness()
        h.start()
        let overlay = try h.ad(.overlay)
        try h.show(overlay)
        h.loop.advance(by: 0.6)
        h.player.pause()
        XCTAssertEqual(h.ends(overlay), [.paused])
        XCTAssertEqual(viewability(h, overlay), [.notViewable])
        XCTAssertEqual(onScreen(h, overlay) ?? 0, 0.6, accuracy: 0.001)
        let events = h.settled.all
        let viewabilityIndex = events.firstIndex { if case .viewability = $0 { true } else { false } }
        let endIndex = events.firstIndex { if case .ended = $0 { true } else { false } }
        XCTAssertLessThan(viewabilityIndex ?? .max, endIndex ?? .min, "said before the end")
    }

    /// The output hidden (R13): the overlay freezes, and the frozen time neither counts on
    /// screen nor toward the continuous second.
    func testHiddenTimeCountsNeitherOnScreenNorTowardTheSecond() throws {
        let h = Harness()
        h.start()
        let overlay = try h.ad(.overlay)
        try h.show(overlay)
        h.loop.advance(by: 0.7)
        h.ads.setBackground(true)
        h.player.pause()
        h.loop.advance(by: 10)
        h.ads.setBackground(false)
        h.player.play()
        h.loop.advance(by: 0.7)
        XCTAssertEqual(viewability(h, overlay), [], "0.7 s and 0.7 s are not one continuous second")
        h.loop.advance(by: 0.3)
        XCTAssertEqual(viewability(h, overlay), [.viewable])
        overlay.close()
        XCTAssertEqual(h.ends(overlay), [.closed])
        XCTAssertEqual(onScreen(h, overlay) ?? 0, 1.7, accuracy: 0.001)
    }

    /// A post-roll is a video: 2 s of it playing; a pause breaks the run.
    func testAPostrollNeedsTwoSecondsOfPlayingVideo() throws {
        let h = Harness()
        h.start(duration: 1)
        h.loop.advance(by: 1)
        let postroll = try h.ad(.postroll)
        try h.show(postroll)
        let reporter = try XCTUnwrap(h.surface.reporter(postroll.id))
        h.loop.advance(by: 1.5)
        reporter.paused(true)
        h.loop.advance(by: 5)
        reporter.paused(false)
        h.loop.advance(by: 1.9)
        XCTAssertEqual(viewability(h, postroll), [])
        h.loop.advance(by: 0.1)
        XCTAssertEqual(viewability(h, postroll), [.viewable])
        reporter.finished()
        XCTAssertEqual(h.ends(postroll), [.completed])
        XCTAssertEqual(onScreen(h, postroll) ?? 0, 3.5, accuracy: 0.001)
    }

    /// An output that reports nothing (`vo=null`), or an HTML creative a UI shell draws: the
    /// viewability is undetermined, said when it starts.
    func testWhatCannotBeSeenIsUndetermined() throws {
        let h = Harness { $0.viewabilityMeasurable = false }
        h.start()
        let overlay = try h.ad(.overlay)
        try h.show(overlay)
        XCTAssertEqual(viewability(h, overlay), [.undetermined])
        h.loop.advance(by: 5)
        XCTAssertEqual(viewability(h, overlay), [.undetermined], "once")
        let html = Harness(source: TestAdSource([.overlay: .creative(AdCreative(id: "h", kind: .overlay, content: .html(url: "https://x/"),
                                                                                  duration: 5))]))
        html.start()
        let shell = try html.ad(.overlay)
        try html.show(shell)
        html.loop.advance(by: 2)
        XCTAssertEqual(viewability(html, shell), [.undetermined])
    }

    /// An overlay that loads between an episode coming in and its first frame waits for it
    /// (`showWhenPlaying`), instead of failing `notPlaying`.
    func testAnOverlayLoadedBeforeTheContentPlaysWaitsForIt() throws {
        let h = Harness()
        h.player.pause()
        h.start()
        let overlay = try h.ad(.overlay)
        try overlay.showWhenPlaying(didEnd: h.log.didEnd(overlay.id))
        h.loop.advance(by: 3)
        XCTAssertFalse(h.surface.isVisible(overlay.id), "not before the content plays")
        h.player.play()
        XCTAssertTrue(h.surface.isVisible(overlay.id))
        h.loop.advance(by: 5)
        XCTAssertEqual(h.ends(overlay), [.completed])
        // And one that waits when another item comes in ends with it.
        let second = try h.ad(.overlay)
        h.player.pause()
        try second.showWhenPlaying(didEnd: h.log.didEnd(second.id))
        h.player.load("other.mp4", duration: 60)
        XCTAssertEqual(h.ends(second), [.contentChanged])
    }

    /// A slot at the very start of an episode shows when the episode plays from its start.
    func testASlotAtTheStartShowsWhenTheEpisodeStartsPlaying() throws {
        let h = Harness()
        h.player.pause()
        h.start()
        let overlay = try h.ad(.overlay)
        try overlay.show(atContentTime: 0, didEnd: h.log.didEnd(overlay.id))
        XCTAssertFalse(h.surface.isVisible(overlay.id))
        h.player.play()
        XCTAssertTrue(h.surface.isVisible(overlay.id), "playing from 0:00 is playing across a slot at 0:00")
    }
}
