import AdRuntime
import AdTestSupport
import Foundation
@_spi(Foreign) import MpvPlayerAdapter
import XCTest

/// The SDK's rules through the real mpv adapter playing generated media (R3, R6–R16).
/// Waits have generous deadlines; the only time comparisons are lower bounds, which a
/// slow machine cannot break (a timer never fires early).
final class AdRuntimeOnMpvTests: MpvTestCase {
    private struct Rig {
        let player: MpvPlayer
        let recorder: PlayerRecorder
        let ads: VideoAds
        let surface: RecordingAdSurface
        let source: TestAdSource
        let log: AdEventLog
        /// Observes the player after the runtime (registered after `track`): when it has
        /// seen a change, so has the runtime.
        let late = PlayerRecorder()

        func ad(_ kind: AdKind) throws -> Ad { try XCTUnwrap(requestAd(ads, kind)).get() }

        func show(_ ad: Ad) throws { try ad.show(didEnd: log.didEnd(ad.id)) }

        func ends(_ ad: Ad) -> [AdEndReason] {
            ads.waitForCallbacks()
            return log.endReasons(ad.id)
        }

        func waitForEnd(_ ad: Ad, timeout: TimeInterval = 20) -> AdEndReason? {
            _ = waitUntil(timeout: timeout) { !log.endReasons(ad.id).isEmpty }
            return ends(ad).first
        }
    }

    private func rig(content: String = "episode-long", source: TestAdSource = TestAdSource(),
                     configure: (inout MpvPlayerConfiguration) -> Void = { _ in }) throws -> Rig {
        let (player, recorder) = try makePlayer(configure)
        let log = AdEventLog()
        let surface = RecordingAdSurface()
        let ads = VideoAds(content: ContentInfo(id: content), source: source, surface: surface, loop: player.loop,
                           onEvent: { log.record($0) })
        addTeardownBlock { ads.destroy() }
        return Rig(player: player, recorder: recorder, ads: ads, surface: surface, source: source, log: log)
    }

    private var lateObservations: [PlayerObservation] = []

    private func play(_ rig: Rig, _ file: String = "episode-long.mp4") throws {
        try rig.player.load(Media.path(file))
        XCTAssertNotNil(rig.recorder.next { $0.isPlaying }, "\(file) did not play")
        rig.ads.track(rig.player)
        lateObservations.append(rig.player.addObserver(rig.late))
    }

    // R3 + R6: a pause from another client of the core ends the overlay with `paused`.
    func testAnOverlayEndsWithPausedWhenAnotherClientPauses() throws {
        let r = try rig()
        try play(r)
        let overlay = try r.ad(.overlay)
        try r.show(overlay)
        XCTAssertTrue(r.surface.isVisible(overlay.id))
        let client = try r.player.makeForeignClient(name: "remote")
        defer { client.close() }
        try client.set("pause", true)
        XCTAssertEqual(r.waitForEnd(overlay), .paused)
        XCTAssertFalse(r.surface.isVisible(overlay.id))
        let ended = try XCTUnwrap(r.log.ended.first { $0.0.id == overlay.id })
        XCTAssertNotNil(ended.2, "the end carries the latency from mpv's change to the dismissal")
    }

    // R6 + R13: the duration is playing time; frozen time in the background does not count.
    func testTheDurationIsPlayingTimeAndFrozenTimeDoesNotCount() throws {
        let source = TestAdSource([.overlay: .creative(AdCreative(id: "ov-2s", kind: .overlay, content: .text("Sponsored"), duration: 2))])
        let r = try rig(source: source)
        try play(r)
        let overlay = try r.ad(.overlay)
        let shownAt = Date()
        try r.show(overlay)
        r.ads.setBackground(true)
        try r.player.pause()
        Thread.sleep(forTimeInterval: 1.5)
        XCTAssertTrue(r.surface.isVisible(overlay.id), "frozen, not ended")
        r.ads.setBackground(false)
        try r.player.play()
        XCTAssertEqual(r.waitForEnd(overlay), .completed)
        // Lower bound only: 2 s of playing time plus the 1.5 s frozen.
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(shownAt), 3.5)
    }

    func testBackgroundWithoutPlayAfterTheReturnIsInterrupted() throws {
        let r = try rig()
        try play(r)
        let overlay = try r.ad(.overlay)
        try r.show(overlay)
        r.ads.setBackground(true)
        let client = try r.player.makeForeignClient(name: "remote")
        defer { client.close() }
        try client.set("pause", true)
        XCTAssertNotNil(r.late.next { $0.isPaused })
        XCTAssertEqual(r.ends(overlay), [])
        r.ads.setBackground(false)
        XCTAssertEqual(r.waitForEnd(overlay), .interrupted, "\(r.log.all) \(r.recorder.changes)")
    }

    // R7: a pause ad ends with `played` when the content resumes, from anywhere.
    func testAPauseAdEndsWithPlayedWhenContentResumes() throws {
        let r = try rig()
        try play(r)
        let client = try r.player.makeForeignClient(name: "remote")
        defer { client.close() }
        try client.set("pause", true)
        XCTAssertNotNil(r.late.next { $0.isPaused })
        let pauseAd = try r.ad(.pauseAd)
        try pauseAd.show(afterPausedFor: 0.3, didEnd: r.log.didEnd(pauseAd.id))
        XCTAssertTrue(waitUntil { r.surface.isVisible(pauseAd.id) })
        try client.set("pause", false)
        XCTAssertEqual(r.waitForEnd(pauseAd), .played)
        XCTAssertFalse(r.surface.isVisible(pauseAd.id))
    }

    // R8: a post-roll after the item played to its end.
    func testAPostrollStartsAfterTheEpisodePlayedToItsEnd() throws {
        let r = try rig(content: "clip-1s")
        try play(r, "clip-1s.mp4")
        let postroll = try r.ad(.postroll)
        XCTAssertThrowsError(try r.show(postroll)) { XCTAssertEqual($0 as? AdError, .notEnded) }
        // The runtime's own signal: a player observer of ours may see the end before it does.
        XCTAssertTrue(waitUntil { r.log.all.contains(.contentEnded(contentID: "clip-1s")) })
        try r.show(postroll)
        XCTAssertEqual(r.surface.calls, [.playPostroll(postroll.id, "pr-test")])
        r.surface.reporter(postroll.id)?.finished()
        XCTAssertEqual(r.waitForEnd(postroll), .completed)
    }

    // R9: the runtime never keeps the mpv player alive.
    func testTheMpvPlayerIsHeldWeakly() throws {
        let log = AdEventLog()
        weak var weakPlayer: MpvPlayer?
        let ads = try { () throws -> VideoAds in
            let logs = self.logs
            let player = try MpvPlayer(configuration: MpvPlayerConfiguration()) { logs.record($0) }
            weakPlayer = player
            let ads = VideoAds(content: ContentInfo(id: "episode-1"), source: TestAdSource(), surface: RecordingAdSurface(),
                               loop: player.loop, onEvent: { log.record($0) })
            try player.load(Media.path("episode-1.mp4"))
            ads.track(player)
            XCTAssertTrue(ads.isTracking)
            return ads
        }()
        // mpv's event thread holds the player for the length of one event's handling, so the
        // last reference may go there a moment later; the runtime must not hold it at all.
        XCTAssertTrue(waitUntil { weakPlayer == nil }, "VideoAds kept the player alive")
        XCTAssertFalse(ads.isTracking, "the player is gone, and with it its loop")
        ads.destroy()
    }

    // R10: tracked before the item changed → refused; tracked again → shown.
    func testTrackedBeforeTheItemChangedIsRefusedUntilTrackedAgain() throws {
        let r = try rig(content: "episode-2")
        try play(r, "episode-1.mp4")                     // tracks episode 1's item
        let before = r.late.count
        try r.player.load(Media.path("episode-long.mp4"))
        XCTAssertNotNil(r.late.next(after: before) { $0.isPlaying })
        let overlay = try r.ad(.overlay)
        XCTAssertThrowsError(try r.show(overlay)) { XCTAssertEqual($0 as? AdError, .invalidated(.contentChanged)) }
        r.ads.track(r.player)
        try r.show(overlay)
        XCTAssertTrue(r.surface.isVisible(overlay.id))
    }

    // R11: 0 before track; the content's position once tracked.
    func testThePositionIsZeroBeforeTrack() throws {
        let r = try rig()
        try r.player.load(Media.path("episode-long.mp4"))
        XCTAssertNotNil(r.recorder.next { $0.isPlaying })
        XCTAssertTrue(waitUntil { r.player.snapshot().position > 0.5 })
        _ = try r.ad(.overlay)
        r.ads.track(r.player)
        _ = try r.ad(.overlay)
        let positions = r.source.requests.map(\.position)
        XCTAssertEqual(positions.first, 0)
        XCTAssertGreaterThan(positions.last ?? 0, 0.5)
    }

    // R12: 2x across the start starts it; a seek past it does not; a seek while up ends it.
    func testPlayingAcrossTheStartAtTwiceTheSpeedStartsIt() throws {
        let r = try rig()
        try play(r)
        try r.player.setSpeed(2)
        let start = r.player.snapshot().position + 2
        let overlay = try r.ad(.overlay)
        try overlay.show(atContentTime: start, didEnd: r.log.didEnd(overlay.id))
        XCTAssertTrue(waitUntil { r.surface.isVisible(overlay.id) }, "never started")
        XCTAssertGreaterThanOrEqual(r.player.snapshot().position, start - 0.1)
        XCTAssertEqual(r.recorder.changes.filter(\.isSeek), [])
        try r.player.seek(20)
        XCTAssertEqual(r.waitForEnd(overlay), .seeked)
        XCTAssertFalse(r.surface.isVisible(overlay.id))
    }

    func testASeekPastTheStartDoesNotStartIt() throws {
        let r = try rig()
        try play(r)
        let overlay = try r.ad(.overlay)
        try overlay.show(atContentTime: 10, didEnd: r.log.didEnd(overlay.id))
        let before = r.recorder.count
        try r.player.seek(12)
        XCTAssertNotNil(r.recorder.next(after: before) { $0.isSeek })
        XCTAssertTrue(waitUntil { r.player.snapshot().position > 13 })
        XCTAssertEqual(r.surface.calls, [], "a seek past the start is not playing across it")
    }

    // R14: with loop-file, an ad of one loop is refused in the next; one from didEnd shows.
    func testLoopsOfTheEpisode() throws {
        let r = try rig(content: "episode-1")
        try r.player.setLoop(true)
        try play(r, "episode-1.mp4")
        let early = try r.ad(.overlay)
        let onScreen = try r.ad(.overlay)
        let fromDidEnd = Locked<Ad?>(nil)
        let ads = r.ads
        try onScreen.show { reason in
            XCTAssertEqual(reason, .contentChanged)
            ads.request(.overlay) { result in fromDidEnd.withLock { $0 = try? result.get() } }
        }
        XCTAssertNotNil(r.late.next(timeout: 30) { $0.newItem??.loop == 1 }, "no loop wrap")
        XCTAssertFalse(r.surface.isVisible(onScreen.id))
        XCTAssertThrowsError(try r.show(early)) { XCTAssertEqual($0 as? AdError, .invalidated(.contentChanged)) }
        XCTAssertTrue(waitUntil { fromDidEnd.withLock { $0 } != nil })
        let next = try XCTUnwrap(fromDidEnd.withLock { $0 })
        if r.player.snapshot().item?.loop == 1 {
            try r.show(next)
            XCTAssertTrue(r.surface.isVisible(next.id))
        }
    }

    // R15 on real mpv: destroy racing a pause from another client, 50 rounds.
    func testDestroyRacingAForeignPauseEndsEachAdOnce() throws {
        let (player, recorder) = try makePlayer()
        try player.load(Media.path("episode-long.mp4"))
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        let client = try player.makeForeignClient(name: "remote")
        defer { client.close() }
        for round in 0..<50 {
            try player.play()
            XCTAssertTrue(waitUntil { player.snapshot().playing }, "round \(round)")
            // Stay well inside the 30 s episode. (Seeking while paused and resuming at once
            // makes mpv's ao=null log "start() while paused"; playing first avoids it.)
            let before = recorder.count
            try player.seek(1)
            XCTAssertNotNil(recorder.next(after: before) { $0.isSeek }, "round \(round)")
            let log = AdEventLog()
            let surface = RecordingAdSurface()
            let ads = VideoAds(content: ContentInfo(id: "episode-long"), source: TestAdSource(), surface: surface, loop: player.loop,
                               onEvent: { log.record($0) })
            ads.track(player)
            let overlay = try XCTUnwrap(requestAd(ads, .overlay)).get()
            try overlay.show(didEnd: log.didEnd(overlay.id))
            let group = DispatchGroup()
            DispatchQueue.global().async(group: group) { ads.destroy() }
            DispatchQueue.global().async(group: group) { try? client.set("pause", true) }
            group.wait()
            _ = waitUntil { !player.snapshot().playing }
            ads.waitForCallbacks()
            XCTAssertEqual(log.endReasons(overlay.id).count, 1, "round \(round)")
            XCTAssertTrue([.destroyed, .paused].contains(log.endReasons(overlay.id).first), "round \(round): \(log.endReasons(overlay.id))")
            XCTAssertEqual(surface.visible, [], "round \(round)")
        }
    }

    // R16: no fill and a failing source: the content plays on.
    func testNoFillAndAFailingSourceLeaveTheContentPlaying() throws {
        let r = try rig(source: TestAdSource([.overlay: .noFill, .pauseAd: .fail("connection refused")]))
        try play(r)
        XCTAssertEqual(failureOf(requestAd(r.ads, .overlay)), .noFill)
        XCTAssertEqual(failureOf(requestAd(r.ads, .pauseAd))?.code, "load_failed")
        let position = r.player.snapshot().position
        XCTAssertTrue(waitUntil { r.player.snapshot().position > position + 0.5 }, "the content stopped")
        XCTAssertTrue(r.player.snapshot().playing)
        XCTAssertFalse(r.recorder.changes.contains(.paused))
    }
}

func failureOf(_ result: Result<Ad, AdError>?) -> AdError? {
    if case .failure(let error)? = result { error } else { nil }
}
