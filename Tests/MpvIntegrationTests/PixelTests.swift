import AdRuntime
import AdTestSupport
import Foundation
@_spi(Foreign) @testable import MpvPlayerAdapter
import XCTest

/// What a person would see: mpv draws into an X window (`vo=x11` under Xvfb), the screen is
/// grabbed and its pixels checked. With no X server available these fail, never skip.
final class PixelTests: MpvTestCase {
    private static let title = "adplayerd-pixel-test"
    private var display: XDisplay?

    /// The window: 640×360 at the screen's origin; the 4:3 content is pillarboxed in it.
    private let window = (width: 640, height: 360)

    override func tearDown() {
        super.tearDown()   // players first
        display?.stop()
        display = nil
    }

    private func rig(_ behaviours: [AdKind: TestAdSource.Behaviour], content: String = "content-grey")
        throws -> (MpvPlayer, PlayerRecorder, VideoAds, AdEventLog, XDisplay) {
        let (player, recorder, ads, log, display, _) = try rigWithSurface(behaviours, content: content)
        return (player, recorder, ads, log, display)
    }

    private func rigWithSurface(_ behaviours: [AdKind: TestAdSource.Behaviour], content: String = "content-grey")
        throws -> (MpvPlayer, PlayerRecorder, VideoAds, AdEventLog, XDisplay, MpvAdSurface) {
        let display = try XDisplay()
        self.display = display
        setenv("DISPLAY", display.name, 1)
        let (player, recorder) = try makePlayer {
            $0.vo = "x11"
            $0.inputBindings = true
            $0.extraOptions = [("geometry", "\(window.width)x\(window.height)+0+0"), ("title", Self.title),
                               ("osd-level", "0"), ("autofit", "\(window.width)x\(window.height)"), ("keepaspect-window", "no")]
        }
        let surface = MpvAdSurface(player: player)
        let log = AdEventLog()
        let ads = VideoAds(content: ContentInfo(id: content), source: TestAdSource(behaviours), surface: surface, loop: player.loop,
                           onEvent: { log.record($0) })
        addTeardownBlock { ads.destroy() }
        return (player, recorder, ads, log, display, surface)
    }

    private func grab(_ display: XDisplay, _ name: String) throws -> XDisplay.Capture {
        // A frame or two for mpv to draw what changed; the assertions that follow wait for
        // the pixels themselves (see `eventually`), this only saves a round.
        let capture = try display.capture(width: window.width, height: window.height)
        let path = NSTemporaryDirectory() + "adplayerd-\(name).png"
        capture.writePNG(path)
        return capture
    }

    /// Grabs until `predicate` holds for the screen (mpv draws asynchronously), or gives up.
    private func eventually(_ display: XDisplay, _ name: String, timeout: TimeInterval = 10,
                            _ predicate: (XDisplay.Capture) -> Bool) throws -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        repeat {
            if predicate(try grab(display, name)) { return true }
            Thread.sleep(forTimeInterval: 0.1)
        } while Date() < deadline
        return false
    }

    /// `creative` shown as the post-roll of the 1 s clip, once the clip played to its end.
    private func postrollAfterTheClip(_ creative: AdCreative) throws -> (AdEventLog, XDisplay, Ad) {
        let (player, recorder, ads, log, display) = try rig([.postroll: .creative(creative)], content: "clip-1s")
        try player.load(Media.path("clip-1s.mp4"))
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        ads.track(player)
        let postroll = try XCTUnwrap(requestAd(ads, .postroll)).get()
        XCTAssertTrue(waitUntil { log.all.contains(.contentEnded(contentID: "clip-1s")) })
        try postroll.show(didEnd: log.didEnd(postroll.id))
        return (log, display, postroll)
    }

    private static func isMagenta(_ p: (r: Int, g: Int, b: Int)) -> Bool { p.r > 200 && p.g < 60 && p.b > 200 }
    private static func isCyan(_ p: (r: Int, g: Int, b: Int)) -> Bool { p.r < 60 && p.g > 200 && p.b > 200 }
    private static func isYellow(_ p: (r: Int, g: Int, b: Int)) -> Bool { p.r > 200 && p.g > 200 && p.b < 60 }
    private static func isWhite(_ p: (r: Int, g: Int, b: Int)) -> Bool { p.r > 200 && p.g > 200 && p.b > 200 }

    func testTheOverlayIsOnScreenWhilePlayingAndGoneAfterAKeyPressPausesInMpvsWindow() throws {
        let (player, recorder, ads, log, display, surface) = try rigWithSurface([
            .overlay: .creative(AdCreative(id: "ov", kind: .overlay, content: .image(location: try Media.path("overlay.png")), duration: 60)),
        ])
        try player.load(Media.path("content-grey.mp4"))
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        ads.track(player)
        let overlay = try XCTUnwrap(requestAd(ads, .overlay)).get()
        try overlay.show(didEnd: log.didEnd(overlay.id))

        // The documented place: 200×100 fitted into a quarter of 640×360 → 160×80, 10 px
        // (3 % of the height) from the right and bottom edges: x 470…629, y 270…349.
        let expected = AdPlacement.overlay(source: (200, 100), output: window)
        XCTAssertEqual(expected, AdRect(x: 470, y: 270, width: 160, height: 80))
        XCTAssertTrue(try eventually(display, "overlay-playing") { screen in
            guard let box = screen.bounds(where: Self.isMagenta) else { return false }
            return abs(box.minX - expected.x) <= 2 && abs(box.minY - expected.y) <= 2
                && abs(box.maxX - (expected.x + expected.width - 1)) <= 2 && abs(box.maxY - (expected.y + expected.height - 1)) <= 2
        }, "the overlay's pixels are not at \(expected) (see \(NSTemporaryDirectory())adplayerd-overlay-playing.png)")

        // The output changes size: mpv's notification (osd-width/osd-height, mapped in
        // MpvPlayerMapping) reaches the surface as this call, and the overlay is placed
        // again by the same rule. (Xvfb has no window manager to resize the window for real.)
        try player.loop.sync { surface.outputResized(width: 320, height: 240) }   // on the loop, as mpv's notification is
        let smaller = AdPlacement.overlay(source: (200, 100), output: (320, 240))
        XCTAssertTrue(try eventually(display, "overlay-resized") { screen in
            guard let box = screen.bounds(where: Self.isMagenta) else { return false }
            return abs(box.minX - smaller.x) <= 2 && abs(box.minY - smaller.y) <= 2
                && abs(box.maxX - (smaller.x + smaller.width - 1)) <= 2 && abs(box.maxY - (smaller.y + smaller.height - 1)) <= 2
        }, "the overlay was not placed again at \(smaller) after the output shrank")
        try player.loop.sync { surface.outputResized(width: window.width, height: window.height) }

        // A key in mpv's own window: a pause that did not come from our code (R3).
        try display.press("space", inWindowTitled: Self.title)
        XCTAssertNotNil(recorder.next { $0.isPaused }, "the key did not pause mpv")
        XCTAssertTrue(waitUntil { log.endReasons(overlay.id) == [.paused] }, "\(log.endReasons(overlay.id))")
        XCTAssertTrue(try eventually(display, "overlay-paused") { $0.bounds(where: Self.isMagenta) == nil },
                      "overlay pixels remain after the pause")
    }

    func testThePauseAdIsThereWhilePausedPastTheDelayAndGoneAfterPlay() throws {
        let (player, recorder, ads, log, display) = try rig([
            .pauseAd: .creative(AdCreative(id: "pa", kind: .pauseAd, content: .image(location: try Media.path("pause.png")))),
        ])
        try player.load(Media.path("content-grey.mp4"))
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        ads.track(player)
        XCTAssertTrue(try eventually(display, "pause-before") { $0.pixel(100, 40).g > 25 }, "content not on screen")
        try player.pause()
        let pauseAd = try XCTUnwrap(requestAd(ads, .pauseAd)).get()
        try pauseAd.show(afterPausedFor: 1, didEnd: log.didEnd(pauseAd.id))
        let expected = AdPlacement.pauseAd(source: (300, 200), output: window)
        XCTAssertTrue(try eventually(display, "pause-ad") { screen in
            guard let box = screen.bounds(where: Self.isCyan) else { return false }
            return abs(box.minX - expected.x) <= 2 && abs(box.minY - expected.y) <= 2
                && abs((box.maxX + 1) - (expected.x + expected.width)) <= 2 && abs((box.maxY + 1) - (expected.y + expected.height)) <= 2
        }, "the pause ad is not centred at \(expected): \(log.all) \(logs.all)")
        // The frame around it is dimmed: grey 32 at 50 % black.
        let dimmed = try grab(display, "pause-dim").pixel(100, 40)
        XCTAssertLessThan(dimmed.g, 24, "the paused frame is not dimmed: \(dimmed)")
        try player.play()
        XCTAssertTrue(waitUntil { log.endReasons(pauseAd.id) == [.played] })
        XCTAssertTrue(try eventually(display, "pause-ad-gone") { $0.bounds(where: Self.isCyan) == nil && $0.pixel(100, 40).g > 25 },
                      "the pause ad or the dimming remains after play")
    }

    func testPostrollFramesAreOnScreenAndThenNothingOfTheAdRemains() throws {
        let (log, display, postroll) = try postrollAfterTheClip(
            AdCreative(id: "pr", kind: .postroll, content: .video(location: try Media.path("postroll.mp4"))))
        XCTAssertTrue(try eventually(display, "postroll") { Self.isYellow($0.pixel(320, 180)) }, "no post-roll frame on screen")
        XCTAssertTrue(waitUntil(timeout: 30) { log.endReasons(postroll.id) == [.completed] })
        XCTAssertTrue(try eventually(display, "postroll-after") { $0.bounds(where: Self.isYellow) == nil },
                      "the post-roll's frame stays on screen after it ended")
    }

    func testTextThatLooksLikeASSTagsIsShownLiterally() throws {
        let text = #"AD{\an5}X\NY"#
        let (player, recorder, ads, log, display) = try rig([
            .overlay: .creative(AdCreative(id: "tx", kind: .overlay, content: .text(text), duration: 60)),
        ])
        try player.load(Media.path("content-grey.mp4"))
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        ads.track(player)
        let overlay = try XCTUnwrap(requestAd(ads, .overlay)).get()
        try overlay.show(didEnd: log.didEnd(overlay.id))
        let fontSize = window.height * 45 / 1000   // 16 px
        let margin = AdPlacement.margin(window)
        var found: (minX: Int, minY: Int, maxX: Int, maxY: Int, count: Int)?
        XCTAssertTrue(try eventually(display, "text") { screen in
            found = screen.bounds(where: Self.isWhite)
            return found != nil
        }, "no text on screen")
        let box = try XCTUnwrap(found)
        // Injected, `{\an5}` would centre the line on its anchor (the bottom-right corner
        // minus the margin) and `\N` would break it in two. Literal: one line, right- and
        // bottom-aligned at the margin, as wide as all twelve characters.
        XCTAssertLessThan(box.maxY - box.minY + 1, fontSize * 3 / 2 + 4, "more than one line: \(box)")
        XCTAssertEqual(box.maxX, window.width - margin - 1, accuracy: 4, "not right-aligned: \(box)")
        XCTAssertEqual(box.maxY, window.height - margin - 1, accuracy: 6, "not bottom-aligned: \(box)")
        XCTAssertGreaterThan(box.maxX - box.minX, fontSize * 5, "too narrow for the literal text: \(box)")
    }

    /// Text that tries to get past the escaping — a `{` joined to U+0600 (one grapheme cluster
    /// with it), a `\r\n` pair, a second line long enough to run far to the left — stays in
    /// its box: no override tag applies (`\fs100` would draw glyphs taller than the box) and
    /// nothing is drawn outside the overlay's box (libass clips to it).
    func testTextCannotEscapeItsBox() throws {
        let text = "\u{0600}{\\fs100\\an7}BIG\r\nA SECOND LINE MUCH LONGER THAN THE BOX IS WIDE, WHICH MUST BE CUT AT ITS EDGE"
        let (player, recorder, ads, log, display) = try rig([
            .overlay: .creative(AdCreative(id: "tx", kind: .overlay, content: .text(text), duration: 60)),
        ])
        try player.load(Media.path("content-grey.mp4"))
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        ads.track(player)
        let overlay = try XCTUnwrap(requestAd(ads, .overlay)).get()
        try overlay.show(didEnd: log.didEnd(overlay.id))
        let box = AdPlacement.overlayBox(output: window)
        var found: (minX: Int, minY: Int, maxX: Int, maxY: Int, count: Int)?
        XCTAssertTrue(try eventually(display, "text-box") { screen in
            found = screen.bounds(where: Self.isWhite)
            return (found?.count ?? 0) > 50
        }, "no text on screen")
        let drawn = try XCTUnwrap(found)
        XCTAssertGreaterThanOrEqual(drawn.minX, box.x - 2, "text left its box: \(drawn), box \(box)")
        XCTAssertGreaterThanOrEqual(drawn.minY, box.y - 2, "text left its box: \(drawn), box \(box)")
        XCTAssertLessThanOrEqual(drawn.maxX, box.x + box.width + 2, "text left its box: \(drawn), box \(box)")
        XCTAssertLessThanOrEqual(drawn.maxY, box.y + box.height + 2, "text left its box: \(drawn), box \(box)")
        XCTAssertLessThan(drawn.maxY - drawn.minY, window.height * 45 / 1000 * 3 + 6, "glyphs taller than two lines of the font: \(drawn)")
    }

    /// An overlay never covers subtitles: a long subtitle line (yellow) that would run under the
    /// overlay's corner is raised above the overlay's box while it shows, and comes back down
    /// when the overlay is gone.
    func testAnOverlayAndASubtitleNeverOverlap() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("subs-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let episode = folder.appendingPathComponent("episode.mp4").path
        try FileManager.default.copyItem(atPath: try Media.path("content-grey.mp4"), toPath: episode)
        try Data("1\n00:00:00,000 --> 00:10:00,000\nThis subtitle line is long enough to run under the corner\n\n".utf8)
            .write(to: folder.appendingPathComponent("episode.srt"))
        let display = try XDisplay()
        self.display = display
        setenv("DISPLAY", display.name, 1)
        let (player, recorder) = try makePlayer {
            $0.vo = "x11"
            $0.extraOptions = [("geometry", "\(window.width)x\(window.height)+0+0"), ("title", Self.title), ("osd-level", "0"),
                               ("autofit", "\(window.width)x\(window.height)"), ("keepaspect-window", "no"), ("sub-auto", "exact"),
                               ("sub-color", "#FFFF00"), ("sub-border-size", "0"), ("sub-shadow-offset", "0"), ("sub-font-size", "40")]
        }
        let surface = MpvAdSurface(player: player)
        let log = AdEventLog()
        let ads = VideoAds(content: ContentInfo(id: "episode"), source: TestAdSource([
            .overlay: .creative(AdCreative(id: "ov", kind: .overlay, content: .image(location: try Media.path("overlay.png")), duration: 60)),
        ]), surface: surface, loop: player.loop, onEvent: { log.record($0) })
        addTeardownBlock { ads.destroy() }
        try player.load(episode)
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        var subtitle: (minX: Int, minY: Int, maxX: Int, maxY: Int, count: Int)?
        XCTAssertTrue(try eventually(display, "subtitle-alone") { screen in
            subtitle = screen.bounds(where: Self.isYellow)
            return (subtitle?.count ?? 0) > 100
        }, "no subtitle on screen")
        let low = try XCTUnwrap(subtitle)
        let box = AdPlacement.overlay(source: (200, 100), output: window)
        XCTAssertGreaterThan(low.maxY, box.y, "the test's subtitle must reach the overlay's rows to mean anything: \(low), \(box)")
        XCTAssertGreaterThan(low.maxX, box.x, "and its columns: \(low), \(box)")

        ads.track(player)
        let overlay = try XCTUnwrap(requestAd(ads, .overlay)).get()
        try overlay.show(didEnd: log.didEnd(overlay.id))
        var both: (sub: (minX: Int, minY: Int, maxX: Int, maxY: Int, count: Int), ad: (minX: Int, minY: Int, maxX: Int, maxY: Int, count: Int))?
        XCTAssertTrue(try eventually(display, "subtitle-and-overlay") { screen in
            guard let sub = screen.bounds(where: Self.isYellow), let ad = screen.bounds(where: Self.isMagenta), sub.count > 100 else { return false }
            both = (sub, ad)
            return sub.maxY < ad.minY
        }, "the subtitle was not raised above the overlay: \(String(describing: both)) (see \(NSTemporaryDirectory())adplayerd-subtitle-and-overlay.png)")
        overlay.close()
        XCTAssertTrue(try eventually(display, "subtitle-after") { screen in
            guard let sub = screen.bounds(where: Self.isYellow), screen.bounds(where: Self.isMagenta) == nil else { return false }
            return abs(sub.maxY - low.maxY) <= 2
        }, "the subtitle did not come back down")
    }

    /// Regression: with vo=x11, an overlay removed right after a pause stayed on the paused
    /// frame (8 rounds in 12 before MpvAdSurface asked mpv to draw again).
    func testAnOverlayRemovedRightAfterAPauseDoesNotStayOnThePausedFrame() throws {
        let (player, recorder, _, _, display, surface) = try rigWithSurface([:])
        try player.load(Media.path("content-grey.mp4"))
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        let creative = AdCreative(id: "ov", kind: .overlay, content: .image(location: try Media.path("overlay.png")))
        let prepared = try XCTUnwrap(prepare(surface, creative))
        let client = try player.makeForeignClient(name: "remote")
        defer { client.close() }
        for round in 0..<8 {
            let id = UInt64(round + 1)
            // The surface runs on the player's loop, as the runtime calls it.
            try player.loop.sync { try surface.present(AdPresentation(id: id, kind: .overlay, creative: creative, prepared: prepared)) }
            XCTAssertTrue(try eventually(display, "redraw-up") { $0.bounds(where: Self.isMagenta) != nil }, "round \(round): not up")
            try client.set("pause", true)
            try player.loop.sync { try surface.dismiss(id) }
            XCTAssertTrue(try eventually(display, "redraw-down", timeout: 5) { $0.bounds(where: Self.isMagenta) == nil },
                          "round \(round): the overlay stayed on the paused frame")
            try player.play()
            XCTAssertTrue(waitUntil { player.snapshot().playing })
        }
    }
}

/// What the surface prepares off the loop for `creative`, as the runtime asks it to.
func prepare(_ surface: MpvAdSurface, _ creative: AdCreative) -> PreparedCreative? {
    let answer = Handover<PreparedCreative>()
    Task { answer.fulfil(await surface.prepare(creative)) }
    return answer.wait(timeout: 20)
}

/// R26 in mpv's window: the content in its window and the creative around it, and the whole
/// picture back on a pause.
extension PixelTests {
    private static func isOrange(_ p: (r: Int, g: Int, b: Int)) -> Bool { p.r > 200 && (90...170).contains(p.g) && p.b < 60 }
    private static func isGreen(_ p: (r: Int, g: Int, b: Int)) -> Bool { p.r < 60 && p.g > 120 && p.b < 60 }

    private func squeezeback(_ id: String, layout: SqueezebackLayout, duration: Double = 60) throws -> AdCreative {
        var creative = AdCreative(id: id, kind: .squeezeback, content: .image(location: try Media.path("squeezeback.png")), duration: duration)
        creative.squeezeback = layout
        return creative
    }

    func testR26TheContentIsInItsWindowTheCreativeAroundItAndAPauseRestoresTheWholePicture() throws {
        let layout = SqueezebackLayout(shape: .lRight, scale: 0.66, transition: 0.5)
        let (player, recorder, ads, log, display, surface) = try rigWithSurface([.overlay: .creative(try squeezeback("sq", layout: layout))],
                                                                               content: "content-green")
        try player.load(Media.path("content-green.mp4"))
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        ads.track(player)
        XCTAssertTrue(try eventually(display, "squeeze-before") { Self.isGreen($0.pixel(600, 100)) && Self.isGreen($0.pixel(100, 330)) },
                      "the content does not fill the window before the squeezeback")
        for pass in 0..<2 {
            let ad = try XCTUnwrap(requestAd(ads, .overlay)).get()
            XCTAssertEqual(ad.kind, .squeezeback)
            try ad.show(didEnd: log.didEnd(ad.id))
            // At rest: the content's window is the top-left 66 % (422 × 238 of 640 × 360), the
            // creative's orange on its right and below it.
            let window = SqueezebackDrawing.window(layout, (640, 360))
            XCTAssertEqual(window, AdRect(x: 0, y: 0, width: 422, height: 238))
            XCTAssertTrue(try eventually(display, "squeeze-out-\(pass)") { screen in
                Self.isGreen(screen.pixel(100, 100)) && Self.isGreen(screen.pixel(410, 225))
                    && Self.isOrange(screen.pixel(600, 100)) && Self.isOrange(screen.pixel(100, 330)) && Self.isOrange(screen.pixel(430, 245))
            }, "pass \(pass): the content is not in its window with the creative around it (see \(NSTemporaryDirectory())adplayerd-squeeze-out-\(pass).png)")
            XCTAssertTrue(waitUntil { log.all.contains { if case .started(let info) = $0 { info.id == ad.id } else { false } } })
            XCTAssertNotNil(try player.loop.sync { surface.drawn(ad.id) }, "its drawing is there for the screen's evidence")

            // A key in mpv's own window pauses (R3): the whole picture is back at once.
            try display.press("space", inWindowTitled: Self.title)
            XCTAssertNotNil(recorder.next { $0.isPaused }, "the key did not pause mpv")
            XCTAssertTrue(waitUntil { log.endReasons(ad.id) == [.paused] }, "\(log.endReasons(ad.id))")
            XCTAssertTrue(try eventually(display, "squeeze-paused-\(pass)") { screen in
                Self.isGreen(screen.pixel(600, 100)) && Self.isGreen(screen.pixel(100, 330)) && screen.bounds(where: Self.isOrange) == nil
            }, "pass \(pass): the paused frame is not the whole picture (see \(NSTemporaryDirectory())adplayerd-squeeze-paused-\(pass).png)")
            try player.play()
            XCTAssertNotNil(recorder.next { $0.isPlaying })
        }
    }

    /// `creative` shown as the overlay chain's squeezeback over the green episode, playing.
    private func squeezebackOverTheGreenEpisode(_ creative: AdCreative) throws -> (AdEventLog, XDisplay, Ad) {
        let (player, recorder, ads, log, display) = try rig([.overlay: .creative(creative)], content: "content-green")
        try player.load(Media.path("content-green.mp4"))
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        ads.track(player)
        let ad = try XCTUnwrap(requestAd(ads, .overlay)).get()
        try ad.show(didEnd: log.didEnd(ad.id))
        return (log, display, ad)
    }

    /// A text squeezeback: its L in the layout's colour, the text drawn literally inside it.
    func testR26ATextSqueezebackFillsItsLInItsColour() throws {
        var creative = AdCreative(id: "sq", kind: .squeezeback, content: .text(#"SALE{\an5}"#), duration: 60)
        creative.squeezeback = SqueezebackLayout(shape: .frame, scale: 0.7, transition: 0.2, background: 0xFF00FF)
        let (_, display, _) = try squeezebackOverTheGreenEpisode(creative)
        // A frame at 0.7: the content in the middle 448 × 252, magenta on four sides.
        XCTAssertTrue(try eventually(display, "squeeze-text") { screen in
            Self.isGreen(screen.pixel(320, 180)) && Self.isMagenta(screen.pixel(20, 20)) && Self.isMagenta(screen.pixel(620, 340))
                && Self.isMagenta(screen.pixel(100, 20)) && Self.isMagenta(screen.pixel(20, 180)) && screen.bounds(where: Self.isWhite) != nil
        }, "the text squeezeback's frame is not there (see \(NSTemporaryDirectory())adplayerd-squeeze-text.png)")
    }

    func testR26ASqueezebackWhoseTimeIsServedGivesTheContentItsWholePictureBack() throws {
        let layout = SqueezebackLayout(shape: .sideBySide, scale: 0.5, transition: 0.3)
        let (log, display, ad) = try squeezebackOverTheGreenEpisode(try squeezeback("sq", layout: layout, duration: 2))
        // Side by side at 0.5: the content 320 × 180 on the left, centred vertically.
        XCTAssertTrue(try eventually(display, "squeeze-side") { screen in
            Self.isGreen(screen.pixel(160, 180)) && Self.isOrange(screen.pixel(480, 180)) && Self.isOrange(screen.pixel(160, 40))
                && Self.isOrange(screen.pixel(160, 320))
        }, "side by side is not where it should be (see \(NSTemporaryDirectory())adplayerd-squeeze-side.png)")
        XCTAssertTrue(waitUntil { log.endReasons(ad.id) == [.completed] }, "\(log.endReasons(ad.id))")
        XCTAssertTrue(try eventually(display, "squeeze-back") { screen in
            Self.isGreen(screen.pixel(480, 180)) && Self.isGreen(screen.pixel(160, 40)) && screen.bounds(where: Self.isOrange) == nil
        }, "the content did not get its whole picture back")
    }
}

/// R27 in mpv's window: a linear ad's icon at its place over its video, and gone with it.
extension PixelTests {
    func testR27ALinearAdsIconIsDrawnAtItsPlaceOverItsVideoAndGoesWithIt() throws {
        var creative = AdCreative(id: "pr", kind: .postroll, content: .video(location: try Media.path("postroll.mp4")))
        creative.icons = [AdIcon(program: "AdChoices", image: try Media.path("overlay.png"), width: 60, height: 30, x: .end, y: .start)]
        let (log, display, postroll) = try postrollAfterTheClip(creative)
        // 60 × 30 at the top right of the ad's picture (4:3, pillarboxed: x 80…559), the margin
        // (3 % of 360: 10 px) from its edges: x 490…549, y 10…39 — over the ad, not the bar.
        XCTAssertTrue(try eventually(display, "icon") { screen in
            guard Self.isYellow(screen.pixel(320, 180)), let box = screen.bounds(where: Self.isMagenta) else { return false }
            return abs(box.minX - 490) <= 2 && abs(box.maxX - 549) <= 2 && abs(box.minY - 10) <= 2 && abs(box.maxY - 39) <= 2
        }, "the icon is not at the top right over the ad's picture (see \(NSTemporaryDirectory())adplayerd-icon.png)")
        XCTAssertTrue(waitUntil { log.all.contains { if case .iconShown(let info, 0) = $0 { info.id == postroll.id } else { false } } })
        XCTAssertTrue(waitUntil(timeout: 30) { log.endReasons(postroll.id) == [.completed] })
        XCTAssertTrue(try eventually(display, "icon-after") { $0.bounds(where: Self.isMagenta) == nil && $0.bounds(where: Self.isYellow) == nil },
                      "the icon stays after its ad")
    }
}

/// R27 in mpv's window: a screensaver fills the screen (black around its picture), the next
/// stands somewhere else (burn-in care), and play brings the content back.
extension PixelTests {
    func testR27AScreensaverFillsTheScreenTheNextStandsElsewhereAndPlayEndsIt() throws {
        let screensaver = AdCreative(id: "ss", kind: .screensaver, content: .image(location: try Media.path("pause.png")))
        let (player, recorder, ads, log, display) = try rig([.screensaver: .creative(screensaver)])
        try player.load(Media.path("content-grey.mp4"))
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        ads.track(player)
        XCTAssertTrue(try eventually(display, "screensaver-before") { $0.pixel(300, 3).g > 25 }, "content not on screen")
        try player.pause()
        XCTAssertNotNil(recorder.next { $0.isPaused })
        var places: [(Int, Int)] = []
        for round in 0..<2 {
            let ad = try XCTUnwrap(requestAd(ads, .screensaver)).get()
            try ad.show(didEnd: log.didEnd(ad.id))
            var found: (minX: Int, minY: Int, maxX: Int, maxY: Int, count: Int)?
            XCTAssertTrue(try eventually(display, "screensaver-\(round)") { screen in
                found = screen.bounds(where: Self.isCyan)
                // Above its picture, where the paused content's grey was: black.
                let above = screen.pixel(300, 3)
                return found != nil && above.r < 8 && above.g < 8 && above.b < 8
            }, "round \(round): no full-screen screensaver (see \(NSTemporaryDirectory())adplayerd-screensaver-\(round).png)")
            let box = try XCTUnwrap(found)
            let expected = AdPlacement.screensaver(source: (300, 200), output: window, shift: round)
            XCTAssertEqual(box.minX, expected.x, accuracy: 2, "round \(round)")
            XCTAssertEqual(box.minY, expected.y, accuracy: 2, "round \(round)")
            places.append((box.minX, box.minY))
            if round == 0 { ad.close() }
        }
        XCTAssertNotEqual(places[0].0, places[1].0, "the next creative stands elsewhere")
        try player.play()
        XCTAssertTrue(try eventually(display, "screensaver-gone") { $0.bounds(where: Self.isCyan) == nil && $0.pixel(100, 40).g > 25 },
                      "the screensaver remains after play")
    }
}
