import AdRuntime
import AdSources
import AdTestSupport
import Foundation
@_spi(Foreign) @testable import MpvPlayerAdapter
import XCTest

/// The mpv ad surface headless (`vo=null`): what mpv accepts, bad creatives, post-rolls in
/// the same mpv, HTML announcements. Pixels are `PixelTests`' (under Xvfb).
final class MpvAdSurfaceTests: MpvTestCase {
    private func rig(_ behaviours: [AdKind: TestAdSource.Behaviour], content: String = "content-grey", hideAtOnce: Bool = false,
                     onEvent: @escaping @Sendable (AdEvent) -> Void = { _ in },
                     onHTML: @escaping @Sendable (HTMLCreativeAnnouncement) -> Void = { _ in })
        throws -> (MpvPlayer, PlayerRecorder, VideoAds, MpvAdSurface, AdEventLog) {
        let (player, recorder) = try makePlayer()
        let surface = MpvAdSurface(player: player, hideAtOnce: hideAtOnce, onHTML: onHTML)
        let log = AdEventLog()
        let ads = VideoAds(content: ContentInfo(id: content), source: TestAdSource(behaviours), surface: surface, loop: player.loop,
                           onEvent: { log.record($0); onEvent($0) })
        addTeardownBlock { ads.destroy() }
        return (player, recorder, ads, surface, log)
    }

    private func creative(_ kind: AdKind, _ content: AdCreativeContent, id: String = "c", duration: Double? = 30) -> TestAdSource.Behaviour {
        .creative(AdCreative(id: id, kind: kind, content: content, duration: duration))
    }

    func testPlacementRules() {
        let output = (width: 1280, height: 720)
        XCTAssertEqual(AdPlacement.overlay(source: (200, 100), output: output), AdRect(x: 1280 - 21 - 320, y: 720 - 21 - 160, width: 320, height: 160))
        XCTAssertEqual(AdPlacement.overlay(source: (2000, 100), output: output).width, 320, "fits the quarter-width box")
        XCTAssertEqual(AdPlacement.overlay(source: (20, 10), output: output).width, 40, "at most twice its own size")
        let pause = AdPlacement.pauseAd(source: (300, 200), output: output)
        XCTAssertEqual(pause.height, 432)
        XCTAssertEqual(pause.x + pause.width / 2, 640, accuracy: 1)
        XCTAssertEqual(pause.y + pause.height / 2, 360, accuracy: 1)
    }

    /// The surface and the player's core are loop-only: called off mpv's loop, each entry
    /// point is caught (recorded here; a trap in a debug daemon).
    func testTheSurfaceAndThePlayersCoreCheckTheyRunOnTheLoop() throws {
        let offLoop = OffLoopCalls()
        let (player, _) = try makePlayer { $0.offLoopCalls = offLoop }
        let surface = MpvAdSurface(player: player)
        try surface.dismiss(1)
        surface.stopPostroll(1)
        player.stopAd(1)
        let calls = offLoop.take()
        XCTAssertTrue(calls.contains { $0.contains("MpvAdSurface.swift") && $0.hasSuffix("dismiss(_:)") }, "\(calls)")
        XCTAssertTrue(calls.contains { $0.contains("MpvAdSurface.swift") && $0.hasSuffix("stopPostroll(_:)") }, "\(calls)")
        XCTAssertTrue(calls.contains { $0.contains("MpvPlayer.swift") && $0.hasSuffix("stopAd(_:)") }, "\(calls)")
        try player.loop.sync { try surface.dismiss(1) }
        XCTAssertEqual(offLoop.take(), [], "on the loop, nothing is reported")
    }

    func testTextIsEscapedSoThatItCannotInjectASS() {
        XCTAssertEqual(assEscape(#"{\an5}Buy\Nnow"#), "\\{\\\u{2060}an5}Buy\\\u{2060}Nnow")
        XCTAssertEqual(assEscape("two\nlines"), "two\\Nlines")
        XCTAssertFalse(assEscape(#"{\pos(0,0)}"#).contains("{\\pos"))
        // Per Unicode scalar: a brace or backslash joined to a prepended mark (one grapheme
        // cluster with it) is still escaped; \r\n is one line break, a lone \r one too.
        XCTAssertEqual(assEscape("\u{0600}{\\fs100}"), "\u{0600}\\{\\\u{2060}fs100}")
        XCTAssertEqual(assEscape("a\r\nb\rc\u{2028}d"), "a\\Nb\\Nc\\Nd")
        XCTAssertEqual(assEscape("tab\there\u{07}"), "tab here ")
        for text in ["\u{0600}{", "e\u{301}\\", "{\u{20E3}"] {
            let escaped = Array(assEscape(text).unicodeScalars)
            for (index, scalar) in escaped.enumerated() where scalar == "{" {
                XCTAssertEqual(index > 0 ? escaped[index - 1] : " ", "\\", "an unescaped brace in \(escaped)")
            }
        }
    }

    func testImageAndTextOverlaysAndAPauseAdGoUpAndComeDown() throws {
        let (player, recorder, ads, surface, log) = try rig([
            .overlay: creative(.overlay, .image(location: try Media.path("overlay.png"))),
            .pauseAd: creative(.pauseAd, .image(location: try Media.path("pause.png"))),
        ])
        try player.load(Media.path("content-grey.mp4"))
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        ads.track(player)
        let overlay = try XCTUnwrap(requestAd(ads, .overlay)).get()
        try overlay.show(didEnd: log.didEnd(overlay.id))
        XCTAssertEqual(surface.visibleSlots.count, 1)
        try player.pause()
        XCTAssertTrue(waitUntil { log.endReasons(overlay.id) == [.paused] }, "\(log.endReasons(overlay.id))")
        XCTAssertEqual(surface.visibleSlots, [:])
        let pauseAd = try XCTUnwrap(requestAd(ads, .pauseAd)).get()
        try pauseAd.show(didEnd: log.didEnd(pauseAd.id))
        XCTAssertEqual(surface.visibleSlots.count, 1)
        try player.play()
        XCTAssertTrue(waitUntil { log.endReasons(pauseAd.id) == [.played] }, "\(log.endReasons(pauseAd.id))")
        XCTAssertEqual(surface.visibleSlots, [:])
        XCTAssertEqual(log.errors, [])
    }

    func testBadCreativesFailTheAdAndTheContentPlaysOn() throws {
        // mpv routes FFmpeg's log, and so our decoder's complaints about the corrupt PNG.
        logs.expectError(containing: "png: ")
        let (player, recorder, ads, surface, log) = try rig([:])
        try player.load(Media.path("content-grey.mp4"))
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        ads.track(player)
        for name in ["empty.png", "corrupt.png", "truncated.png", "not-an-image.png", "huge-header.png", "missing.png"] {
            let path = repositoryRoot.appendingPathComponent("media/\(name)").path
            let ads2 = VideoAds(content: ContentInfo(id: "content-grey"),
                                source: TestAdSource([.overlay: creative(.overlay, .image(location: path), id: name)]),
                                surface: surface, loop: player.loop, onEvent: { log.record($0) })
            ads2.track(player)
            let overlay = try XCTUnwrap(requestAd(ads2, .overlay)).get()
            try overlay.show(didEnd: log.didEnd(overlay.id))
            ads2.waitForCallbacks()
            XCTAssertEqual(log.endReasons(overlay.id), [.failed], name)
            ads2.destroy()
        }
        XCTAssertEqual(log.errors.filter { $0.code == "render_failed" }.count, 6)
        XCTAssertEqual(surface.visibleSlots, [:])
        let position = player.snapshot().position
        XCTAssertTrue(waitUntil { player.snapshot().position > position + 0.3 }, "the content plays on")
        _ = ads
    }

    /// R28 on real output: an episode mastered at -31 LUFS, a post-roll at -14 and another at
    /// -38 LUFS, each played by libmpv into its own PCM output (`ao=pcm`); the output is measured
    /// with FFmpeg's EBU R128 meter, segment by segment. Matched (the default), each ad's segment
    /// is within ±1 LU of the episode's and no sample of it is over -1 dBTP; `off` leaves the ads
    /// as mastered; `ad-volume` 50 % still lowers one. The episode's own segment is untouched.
    func testR28AdsPlayAtTheEpisodesLoudnessOnRealOutput() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("loud-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let episode = try LoudnessFixture.make(folder.appendingPathComponent("episode.mkv").path, lufs: -31, seconds: 4, frequency: 330)
        let loudAd = try LoudnessFixture.make(folder.appendingPathComponent("loud.mkv").path, lufs: -14, seconds: 3, frequency: 550)
        let quietAd = try LoudnessFixture.make(folder.appendingPathComponent("quiet.mkv").path, lufs: -38, seconds: 3, frequency: 770)
        let book = LoudnessBook(path: nil)
        _ = book.known(episode)   // measured in the background, as the daemon asks when an episode starts
        book.settle()
        XCTAssertEqual(try XCTUnwrap(book.known(episode)?.integrated), -31, accuracy: 0.3, "libebur128 agrees with FFmpeg's meter")

        func play(_ ad: String, policy: AdLoudnessPolicy, share: Double = 100) throws -> (episode: LoudnessFixture.Reading, ad: LoudnessFixture.Reading, decision: LoudnessDecision?) {
            let wav = folder.appendingPathComponent("out-\(UUID().uuidString.prefix(6)).wav").path
            let (player, recorder) = try makePlayer {
                $0.ao = "pcm"
                $0.untimed = true
                $0.extraOptions = [("ao-pcm-file", wav)]
            }
            player.setAdAudio(volumePercent: share)
            let surface = MpvAdSurface(player: player)
            let log = AdEventLog()
            var configuration = VideoAdsConfiguration()
            configuration.loudness = policy
            configuration.loudnessSource = book
            let ads = VideoAds(content: ContentInfo(id: "episode", mediaPath: episode),
                               source: TestAdSource([.postroll: creative(.postroll, .video(location: ad))]),
                               surface: surface, loop: player.loop, configuration: configuration, onEvent: { log.record($0) })
            defer { ads.destroy() }
            try player.load(episode)
            XCTAssertNotNil(recorder.next { $0.isPlaying })
            ads.track(player)
            let postroll = try XCTUnwrap(requestAd(ads, .postroll)).get()
            XCTAssertTrue(waitUntil { log.all.contains(.contentEnded(contentID: "episode")) })
            try postroll.show(didEnd: log.didEnd(postroll.id))
            XCTAssertTrue(waitUntil(timeout: 30) { log.endReasons(postroll.id) == [.completed] }, "\(log.endReasons(postroll.id))")
            player.shutdown()   // the PCM file is complete once mpv is gone
            let decision = log.all.compactMap { if case .started(let info) = $0 { info.loudness } else { nil } }.first
            // The episode's 4 s, then the ad's 3 s: each measured away from the joins.
            return (try LoudnessFixture.read(wav, from: 0.3, to: 3.7), try LoudnessFixture.read(wav, from: 4.4, to: 6.7), decision)
        }

        for (ad, mastered) in [(loudAd, -14.0), (quietAd, -38.0)] {
            let matched = try play(ad, policy: .match)
            XCTAssertEqual(matched.episode.integrated, -31, accuracy: 1, "the episode's own audio is untouched")
            XCTAssertEqual(matched.ad.integrated, matched.episode.integrated, accuracy: 1, "R28: the ad mastered at \(mastered) LUFS plays at the episode's loudness")
            XCTAssertLessThanOrEqual(matched.ad.truePeak, -1, "no sample over -1 dBTP")
            let decision = try XCTUnwrap(matched.decision)
            XCTAssertEqual(decision.content ?? 0, -31, accuracy: 0.3)
            XCTAssertEqual(decision.gain ?? 0, -31 - mastered, accuracy: 0.6, "one static gain, recorded with the play")
            let asMastered = try play(ad, policy: .off)
            XCTAssertEqual(asMastered.ad.integrated, mastered, accuracy: 1, "off: as mastered")
            XCTAssertNil(asMastered.decision?.gain)
        }
        let halved = try play(loudAd, policy: .off, share: 50)
        XCTAssertLessThan(halved.ad.integrated, -14 - 6, "ad-volume 50 % still caps it (mpv's volume is cubic: -18 dB)")
    }

    // R8: the post-roll plays in the same mpv, at 1x, and is never taken for an episode.
    func testAPostrollPlaysInTheSameMpvAtOneXWithoutBecomingAnItem() throws {
        let (player, recorder, ads, _, log) = try rig([.postroll: creative(.postroll, .video(location: try Media.path("postroll.mp4")))],
                                                      content: "clip-1s")
        try player.setSpeed(2)
        try player.load(Media.path("clip-1s.mp4"))
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        ads.track(player)
        let postroll = try XCTUnwrap(requestAd(ads, .postroll)).get()
        let mpv = try player.makeForeignClient(name: "observer")
        defer { mpv.close() }
        XCTAssertTrue(waitUntil { log.all.contains(.contentEnded(contentID: "clip-1s")) })
        let afterEnd = recorder.count
        try postroll.show(didEnd: log.didEnd(postroll.id))
        XCTAssertTrue(waitUntil { (try? mpv.get("speed", as: .double))?.double == 1 }, "the ad plays at 1x")
        // The viewer pauses the post-roll once its video plays, and goes on: reported for
        // tracking, not as content.
        XCTAssertTrue(waitUntil { (try? mpv.get("time-pos", as: .double))?.double ?? 0 > 0.2 }, "the post-roll's video never played")
        try player.pause()
        try player.play()
        XCTAssertTrue(waitUntil { log.all.contains { if case .postrollPaused(_, false) = $0 { true } else { false } } })
        XCTAssertEqual(log.all.compactMap { if case .postrollPaused(_, let p) = $0 { p } else { nil } }, [true, false])
        XCTAssertTrue(waitUntil(timeout: 30) { !log.endReasons(postroll.id).isEmpty })
        XCTAssertEqual(log.endReasons(postroll.id), [.completed])
        XCTAssertEqual(recorder.changes.dropFirst(afterEnd).filter { ($0.newItem ?? nil) != nil }, [], "the ad became an item")
        XCTAssertFalse(recorder.changes.dropFirst(afterEnd).contains { $0.isPlaying })
        let quartiles = log.all.compactMap { if case .quartile(_, let q) = $0 { q } else { nil } }
        XCTAssertEqual(quartiles, [1, 2, 3])
        // Its last frame stays on screen (keep-open) for the next episode to replace (or is
        // stopped after a grace): the next episode is an item as usual, at the content's speed again.
        let before = recorder.count
        try player.load(Media.path("episode-1.mp4"))
        XCTAssertNotNil(recorder.next(after: before) { ($0.newItem ?? nil) != nil })
        XCTAssertTrue(waitUntil { (try? mpv.get("speed", as: .double))?.double == 2 }, "the content's speed is restored")
        XCTAssertEqual(log.endReasons(postroll.id), [.completed], "its end told once, not again when the next file replaced it")
    }

    /// Issue 26: a mid-roll at 3 s of a 10 s episode on real mpv. The content stops there (held,
    /// no pause, no item change), the ad's video plays in the same output, and at the break's
    /// end the same item plays again from 3 s — its first position within one frame (40 ms at
    /// 25 fps) — with the overlay that was on screen before the break up again, still bound.
    /// The content plays at 0.02x so that reading its position after the fact is within a frame
    /// whatever the machine's load — a frame is 2 s of real time then (the ad plays at 1x:
    /// per-file options).
    func testAMidrollHoldsTheContentAtThreeSecondsAndTheSameItemResumesThereWithinAFrame() throws {
        let midroll = AdCreative(id: "mid", kind: .midroll, content: .video(location: try Media.path("postroll.mp4")), duration: 2)
        let overlay = AdCreative(id: "ov", kind: .overlay, content: .text("Bound"), duration: 600)
        let (player, recorder, ads, surface, log) = try rig([.midroll: .creative(midroll), .overlay: .creative(overlay)], content: "episode-10s")
        let mpv = try player.makeForeignClient(name: "observer")
        defer { mpv.close() }
        try player.setSpeed(0.02)
        try player.load(Media.path("episode-10s.mp4"), options: ["start": "2.96"])
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        ads.track(player)
        let item = try XCTUnwrap(player.snapshot().item)
        let shown = try XCTUnwrap(requestAd(ads, .overlay)).get()
        try shown.show(didEnd: log.didEnd(shown.id))
        let ad = try XCTUnwrap(requestAd(ads, .midroll)).get()
        try ad.show(atContentTime: 3, didEnd: log.didEnd(ad.id))
        XCTAssertNotNil(surface.visibleSlots[shown.id])

        XCTAssertTrue(waitUntil(timeout: 30) { log.all.contains { if case .breakStarted(.midroll, _, 3) = $0 { true } else { false } } })
        let atHold = recorder.count
        XCTAssertTrue(waitUntil { (try? mpv.get("speed", as: .double))?.double == 1 }, "the ad plays at 1x")
        XCTAssertNil(surface.visibleSlots[shown.id], "the overlay is off the screen during the ad")
        XCTAssertTrue(waitUntil(timeout: 30) { !log.endReasons(ad.id).isEmpty })
        XCTAssertEqual(log.endReasons(ad.id), [.completed])
        XCTAssertEqual(player.snapshot().item, item, "held: the same item, not playing")
        XCTAssertFalse(player.snapshot().playing)

        ads.endBreak()
        let resumed = try XCTUnwrap(recorder.next(after: atHold) { $0.isPlaying }, "the content never played again")
        let landing = try XCTUnwrap((try? mpv.get("time-pos", as: .double))?.double)
        XCTAssertEqual(landing, 3, accuracy: 0.04, "within one frame of the break's time")
        XCTAssertEqual(resumed.snapshot.item, item, "the same item (R10)")
        XCTAssertEqual(resumed.snapshot.position, 3, accuracy: 0.04)
        XCTAssertEqual(player.snapshot().item, item)
        let during = recorder.changes.dropFirst(atHold - 1)
        XCTAssertFalse(during.contains { ($0.newItem ?? nil) != nil || $0 == .item(nil) }, "no item change: \(Array(during))")
        XCTAssertFalse(during.contains(.paused), "a break is no pause: \(Array(during))")
        XCTAssertTrue(recorder.changes.contains(.held))
        XCTAssertTrue(waitUntil { surface.visibleSlots[shown.id] != nil }, "the overlay bound to the item is up again")
        XCTAssertEqual(log.endReasons(shown.id), [], "still bound, never ended")
        XCTAssertTrue(waitUntil { log.all.contains { if case .breakEnded(.midroll, _, 3) = $0 { true } else { false } } })
    }

    /// A file's chapters are its cue points (VMAP's `#n` breaks): their starts after 0, once
    /// the file is loaded; a file without chapters has none.
    func testAnEpisodesChaptersAreItsCuePoints() throws {
        let (player, recorder) = try makePlayer()
        XCTAssertNil(player.cuePoints(), "nothing is loaded")
        try player.load(Media.path("episode-chapters.mp4"))
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        XCTAssertEqual(player.cuePoints(), [2.5, 6])
        let before = recorder.count
        try player.load(Media.path("episode-10s.mp4"))
        XCTAssertNotNil(recorder.next(after: before) { $0.isPlaying })
        XCTAssertEqual(player.cuePoints(), [])
    }

    func testAPostrollThatDoesNotDecodeFails() throws {
        logs.expectError(containing: "Failed to recognize file format")
        let (player, recorder, ads, _, log) = try rig([.postroll: creative(.postroll, .video(location: try Media.path("bad-postroll.mp4")))],
                                                      content: "clip-1s")
        try player.load(Media.path("clip-1s.mp4"))
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        ads.track(player)
        let postroll = try XCTUnwrap(requestAd(ads, .postroll)).get()
        XCTAssertTrue(waitUntil { log.all.contains(.contentEnded(contentID: "clip-1s")) })
        try postroll.show(didEnd: log.didEnd(postroll.id))
        XCTAssertTrue(waitUntil { !log.endReasons(postroll.id).isEmpty })
        XCTAssertEqual(log.endReasons(postroll.id), [.failed])
        XCTAssertFalse(log.all.contains { if case .started(let info) = $0 { info.id == postroll.id } else { false } },
                       "no frame ever on the output: never started, never billed")
        XCTAssertTrue(log.errors.contains { $0.code == "render_failed" })
        XCTAssertFalse(recorder.changes.contains { $0.isFailed }, "an ad's failure is not the content's")
    }

    func testHTMLCreativesAreAnnouncedWithGeometryForAUIShell() throws {
        let announcements = Locked<[HTMLCreativeAnnouncement]>([])
        let (player, recorder, ads, _, log) = try rig(
            [.overlay: creative(.overlay, .html(url: "https://ads.example/overlay/slot-1"), duration: 8)],
            onHTML: { a in announcements.withLock { $0.append(a) } })
        try player.load(Media.path("content-grey.mp4"))
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        ads.track(player)
        let overlay = try XCTUnwrap(requestAd(ads, .overlay)).get()
        try overlay.show(didEnd: log.didEnd(overlay.id))
        // Announced on the loop in a turn of its own (so that the shell may call back in) —
        // again when the output's size changes: under load mpv may tell the video's size only
        // after the overlay went up (announced at 1280×720 first), so wait for the video's.
        func lastShow() -> HTMLCreativeAnnouncement? {
            announcements.withLock { $0.last { if case .show = $0 { true } else { false } } }
        }
        XCTAssertTrue(waitUntil {
            if case .show(_, _, _, let output, _, _, _)? = lastShow() { output.width == 320 } else { false }
        }, "\(announcements.withLock { $0 })")
        guard case .show(let id, let url, let rect, let output, let duration, _, let creativeID)? = lastShow() else {
            return XCTFail("not announced")
        }
        XCTAssertEqual(id, overlay.id)
        XCTAssertEqual(creativeID, "c")
        XCTAssertEqual(url, "https://ads.example/overlay/slot-1")
        XCTAssertEqual(output, AdRect(x: 0, y: 0, width: 320, height: 240), "the video's size headless")
        XCTAssertEqual(rect, AdPlacement.overlayBox(output: (320, 240)))
        XCTAssertEqual(duration, 8)
        try player.pause()
        // Delivered on this thread, or by mpv's event thread if it was delivering just then.
        XCTAssertTrue(waitUntil { announcements.withLock { $0.last } == .hide(id: overlay.id) },
                      "\(announcements.withLock { $0 })")
    }

    /// With `hideAtOnce` (the daemon's), an HTML creative's hide is announced in the turn
    /// that takes it down, before the ad's `ended` event; without it, in a turn of its own
    /// after it (a shell may call back into the runtime).
    func testAnHTMLHideCanBeAnnouncedInTheTurnThatTakesItDown() throws {
        for hideAtOnce in [true, false] {
            let announcements = Locked<[HTMLCreativeAnnouncement]>([])
            let hiddenAtEnd = Locked<Bool?>(nil)
            let (player, recorder, ads, _, log) = try rig(
                [.overlay: creative(.overlay, .html(url: "https://ads.example/overlay/slot-1"), duration: 8)], hideAtOnce: hideAtOnce,
                onEvent: { event in
                    if case .ended = event {
                        hiddenAtEnd.withLock { $0 = announcements.withLock { $0.contains { if case .hide = $0 { true } else { false } } } }
                    }
                },
                onHTML: { a in announcements.withLock { $0.append(a) } })
            try player.load(Media.path("content-grey.mp4"))
            XCTAssertNotNil(recorder.next { $0.isPlaying })
            ads.track(player)
            let overlay = try XCTUnwrap(requestAd(ads, .overlay)).get()
            try overlay.show(didEnd: log.didEnd(overlay.id))
            XCTAssertTrue(waitUntil { announcements.withLock { $0.contains { if case .show = $0 { true } else { false } } } })
            try player.pause()
            XCTAssertTrue(waitUntil { hiddenAtEnd.withLock { $0 } != nil })
            XCTAssertEqual(hiddenAtEnd.withLock { $0 }, hideAtOnce, "hideAtOnce \(hideAtOnce): \(announcements.withLock { $0 })")
            XCTAssertTrue(waitUntil { announcements.withLock { $0.last } == .hide(id: overlay.id) })
            ads.destroy()
        }
    }
}
