import AdRuntime
import AdTestSupport
import XCTest

/// R26 on the virtual player and virtual time: a squeezeback is an overlay's rules with the
/// content's way into its window and back.
final class SqueezebackTests: XCTestCase {
    /// A harness whose overlay chain is answered with a 10 s squeezeback (transition 1 s).
    private func harness(transition: Double = 1) -> Harness {
        var creative = AdCreative(id: "sq", kind: .squeezeback, content: .text("Winter sale"), duration: 10)
        creative.squeezeback = SqueezebackLayout(shape: .lRight, scale: 0.66, transition: transition)
        return Harness(source: TestAdSource([.overlay: .creative(creative)]))
    }

    private func started(_ h: Harness, _ ad: Ad) -> Int {
        h.settled.all.filter { if case .started(let info) = $0 { info.id == ad.id } else { false } }.count
    }

    private func quartiles(_ h: Harness, _ ad: Ad) -> [Int] {
        h.settled.all.compactMap { if case .quartile(let info, let q) = $0, info.id == ad.id { q } else { nil } }
    }

    func testR26TheContentGoesInThenTheCreativeIsOutAndOnlyThenItsStartIsTold() throws {
        let h = harness()
        h.start()
        let ad = try h.ad(.overlay)
        XCTAssertEqual(ad.kind, .squeezeback, "the overlay chain's slot answered with a squeezeback")
        try h.show(ad)
        XCTAssertEqual(h.surface.calls, [.present(ad.id, "sq")], "the content starts into its window")
        h.loop.advance(by: 0.9)
        XCTAssertEqual(started(h, ad), 0, "no impression while the content is still moving")
        h.loop.advance(by: 0.1)
        XCTAssertEqual(h.surface.calls.last, .squeeze(ad.id, .out))
        XCTAssertEqual(started(h, ad), 1, "started (the impression) when the L is fully out")
        h.loop.advance(by: 2.5)
        XCTAssertEqual(quartiles(h, ad), [1])
        h.loop.advance(by: 5)
        XCTAssertEqual(quartiles(h, ad), [1, 2, 3])
        h.loop.advance(by: 2.5)
        XCTAssertEqual(h.surface.calls.last, .squeeze(ad.id, .back), "its time served: the content goes back")
        XCTAssertEqual(h.ends(ad), [], "not over before the content is back")
        h.loop.advance(by: 1)
        XCTAssertEqual(h.ends(ad), [.completed])
        XCTAssertEqual(h.surface.calls.last, .dismiss(ad.id))
        XCTAssertEqual(started(h, ad), 1)
        let ended = try XCTUnwrap(h.settled.ended.first)
        XCTAssertEqual(ended.0.onScreenSeconds ?? 0, 10, accuracy: 0.001, "on screen: the time the L was out, not the moves")
    }

    func testR26APauseWhileTheContentGoesInEndsItPausedRestoredAtOnceWithNoImpression() throws {
        let h = harness()
        h.start()
        let ad = try h.ad(.overlay)
        try h.show(ad)
        h.loop.advance(by: 0.5)
        h.player.pause()
        XCTAssertEqual(h.surface.calls, [.present(ad.id, "sq"), .dismiss(ad.id)], "restored in the step that delivered the pause")
        XCTAssertEqual(h.ends(ad), [.paused])
        XCTAssertEqual(started(h, ad), 0, "never fully out: no impression")
        XCTAssertNotNil(h.settled.ended.first?.2, "a latency from the pause's arrival")
        h.loop.advance(by: 5)
        XCTAssertEqual(h.surface.calls.count, 2, "nothing after: no animation while paused")
    }

    func testR26APauseWhileOutEndsItPausedAtOnceWithNoWayBack() throws {
        let h = harness()
        h.start()
        let ad = try h.ad(.overlay)
        try h.show(ad)
        h.loop.advance(by: 4)
        h.player.pause()
        XCTAssertEqual(h.surface.calls.last, .dismiss(ad.id))
        XCTAssertFalse(h.surface.calls.contains(.squeeze(ad.id, .back)), "a pause never animates the content back")
        XCTAssertEqual(h.ends(ad), [.paused])
        XCTAssertEqual(quartiles(h, ad), [1], "a quarter of 10 s was on screen, not half")
    }

    func testR26ASeekAnotherItemOrDestroyEndItAsAnOverlay() throws {
        for (name, act, reason) in [("seek", { (h: Harness) in h.player.seek(to: 30) }, AdEndReason.seeked),
                                    ("item", { (h: Harness) in _ = h.player.load("next.mp4", duration: 60) }, .contentChanged),
                                    ("destroy", { (h: Harness) in h.ads.destroy() }, .destroyed)] {
            for at in [0.5, 3.0] {
                let h = harness()
                h.start()
                let ad = try h.ad(.overlay)
                try h.show(ad)
                h.loop.advance(by: at)
                act(h)
                XCTAssertEqual(h.ends(ad), [reason], "\(name) at \(at) s")
                XCTAssertEqual(h.surface.calls.last, .dismiss(ad.id), "\(name) at \(at) s: restored at once")
            }
        }
    }

    func testR26WhileTheContentGoesBackItsTimeIsServedAndAPauseEndsItCompletedAtOnce() throws {
        let h = harness()
        h.start()
        let ad = try h.ad(.overlay)
        try h.show(ad)
        h.loop.advance(by: 11.5)
        XCTAssertEqual(h.surface.calls.last, .squeeze(ad.id, .back))
        h.player.pause()
        XCTAssertEqual(h.surface.calls.last, .dismiss(ad.id), "the rest of the way at once")
        XCTAssertEqual(h.ends(ad), [.completed])
    }

    func testR26AHiddenOutputFreezesItAndItsClock() throws {
        let h = harness()
        h.start(duration: 600)
        let ad = try h.ad(.overlay)
        try h.show(ad)
        h.loop.advance(by: 3)   // out for 2 s
        h.ads.setBackground(true)
        h.loop.advance(by: 60)
        XCTAssertTrue(h.surface.isVisible(ad.id), "frozen, still up (R13)")
        XCTAssertEqual(h.ends(ad), [])
        h.ads.setBackground(false)
        h.loop.advance(by: 7.9)
        XCTAssertEqual(h.ends(ad), [], "8 s left when it was hidden")
        h.loop.advance(by: 0.1 + 1)
        XCTAssertEqual(h.ends(ad), [.completed])
        XCTAssertEqual(started(h, ad), 1)
    }

    func testR26ALinearBreakTakesItDownAndTheContentComesInAgainAfter() throws {
        let h = harness()
        h.start()
        let ad = try h.ad(.overlay)
        try h.show(ad)
        h.loop.advance(by: 3)
        h.player.holdForBreak(at: 4)
        XCTAssertEqual(h.surface.calls.last, .dismiss(ad.id), "down, restored, for the break")
        XCTAssertEqual(h.ends(ad), [], "a break suspends it (as an overlay)")
        h.player.resumeAfterBreak(at: 4)
        XCTAssertEqual(h.surface.calls.last, .present(ad.id, "sq"), "the content goes into its window again")
        h.loop.advance(by: 1)
        XCTAssertEqual(h.surface.calls.last, .squeeze(ad.id, .out))
        XCTAssertEqual(started(h, ad), 1, "one start: it was seen")
        h.loop.advance(by: 8 + 1)
        XCTAssertEqual(h.ends(ad), [.completed])
    }

    func testR26WithNoTransitionItIsOutAtOnce() throws {
        let h = harness(transition: 0)
        h.start()
        let ad = try h.ad(.overlay)
        try h.show(ad)
        XCTAssertEqual(started(h, ad), 1)
        h.loop.advance(by: 10)
        XCTAssertEqual(h.ends(ad), [.completed])
        XCTAssertFalse(h.surface.calls.contains(.squeeze(ad.id, .back)))
    }

    func testR26AnOverlayRequestIsNotAnsweredWithAPauseAdButASqueezebackIsNotAnsweredForAPause() throws {
        let creative = AdCreative(id: "sq", kind: .squeezeback, content: .text("x"), duration: 10)
        let h = Harness(source: TestAdSource([.pauseAd: .creative(creative)]))
        h.start()
        h.player.pause()
        let result = try XCTUnwrap(requestAd(h.ads, .pauseAd))
        guard case .failure(.loadFailed(let message, _)) = result else { return XCTFail("\(result)") }
        XCTAssertTrue(message.contains("squeezeback"), message)
    }

    func testR26TheLayoutIsJudgedInOnePlace() throws {
        XCTAssertEqual(try SqueezebackLayout.checked(attributes: [:]), .standard)
        let frame = try SqueezebackLayout.checked(attributes: ["layout": "frame", "scale": "0.8", "transition": "0.5", "background": "#FF0080"])
        XCTAssertEqual(frame, SqueezebackLayout(shape: .frame, scale: 0.8, transition: 0.5, background: 0xFF0080))
        for side in [frame.margins.left, frame.margins.right, frame.margins.top, frame.margins.bottom] {
            XCTAssertEqual(side, 0.1, accuracy: 1e-9)
        }
        for (attributes, field) in [(["layout": "{\\an5}"], "layout"), (["scale": "0.95"], "scale"), (["scale": "nan"], "scale"),
                                    (["transition": "-1"], "transition"), (["background": "#12345"], "background"),
                                    (["background": "+12345"], "background"), (["scale": "1e400"], "scale")] {
            XCTAssertThrowsError(try SqueezebackLayout.checked(attributes: attributes), "\(attributes)") { error in
                XCTAssertEqual((error as? SqueezebackLayout.Refusal)?.field, field)
            }
        }
        let l = SqueezebackLayout.standard.margins(at: 0.5)
        XCTAssertEqual(l.right, 0.17, accuracy: 1e-9)
        XCTAssertEqual(l.bottom, 0.17, accuracy: 1e-9)
        XCTAssertEqual(l.left, 0)
        let side = SqueezebackLayout(shape: .sideBySide, scale: 0.5).margins.window(width: 1280, height: 720)
        XCTAssertEqual(side.x, 0)
        XCTAssertEqual(side.width, 640)
        XCTAssertEqual(side.y, 180)
        XCTAssertEqual(side.height, 360)
    }
}
