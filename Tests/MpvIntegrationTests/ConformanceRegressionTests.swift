import AdRuntime
import AdTestSupport
import Foundation
@_spi(Foreign) @testable import MpvPlayerAdapter
import XCTest

/// The four failures an independent conformance run on real mpv found (issue: one loop owns
/// the player), each on real libmpv with the real ad surface.
final class ConformanceRegressionTests: MpvTestCase {
    private struct Rig {
        let player: MpvPlayer
        let recorder: PlayerRecorder
        let ads: VideoAds
        let log: AdEventLog
        let mpv: MpvClient
    }

    private func rig(content: String, keepOpen: Bool = true, keepOpenPause: Bool = false,
                     source: TestAdSource) throws -> Rig {
        let (player, recorder) = try makePlayer { $0.keepOpen = keepOpen; $0.keepOpenPause = keepOpenPause }
        let surface = MpvAdSurface(player: player)
        let log = AdEventLog()
        let ads = VideoAds(content: ContentInfo(id: content), source: source, surface: surface, loop: player.loop,
                           onEvent: { log.record($0) })
        let mpv = try player.makeForeignClient(name: "observer")
        addTeardownBlock {
            ads.destroy()
            mpv.close()
        }
        return Rig(player: player, recorder: recorder, ads: ads, log: log, mpv: mpv)
    }

    private func postrollSource() throws -> TestAdSource {
        TestAdSource([.postroll: .creative(AdCreative(id: "pr", kind: .postroll, content: .video(location: try Media.path("postroll.mp4"))))])
    }

    /// clip-1s played to its end in `r`, tracked, with its post-roll requested before the end.
    private func postrollAtTheEnd(_ r: Rig) throws -> Ad {
        try r.player.load(Media.path("clip-1s.mp4"))
        XCTAssertNotNil(r.recorder.next { $0.isPlaying })
        r.ads.track(r.player)
        let postroll = try XCTUnwrap(requestAd(r.ads, .postroll)).get()
        XCTAssertTrue(waitUntil { r.log.all.contains(.contentEnded(contentID: "clip-1s")) })
        return postroll
    }

    /// 1. A post-roll cut short by the app loading the next episode did end `completed` (and
    /// its VAST `complete` beacon went out): mpv's END_FILE reason `stop` was taken for the
    /// ad's end. It ends `contentChanged`, and nothing says it completed.
    func testAPostrollCutShortByTheNextEpisodeIsNotCompleted() throws {
        let r = try rig(content: "clip-1s", source: postrollSource())
        let postroll = try postrollAtTheEnd(r)
        try postroll.show(didEnd: r.log.didEnd(postroll.id))
        XCTAssertTrue(waitUntil { ((try? r.mpv.get("time-pos", as: .double))?.double ?? 0) > 0.3 }, "the post-roll never played")
        try r.player.load(Media.path("episode-1.mp4"))   // the app moves on before the ad's end
        XCTAssertTrue(waitUntil { !r.log.endReasons(postroll.id).isEmpty })
        XCTAssertEqual(r.log.endReasons(postroll.id), [.contentChanged])
        XCTAssertFalse(r.log.ended.contains { $0.1 == .completed }, "\(r.log.ended)")
    }

    /// 2. With keep-open and keep-open-pause, mpv's own pause at the end of the content leaked
    /// into the post-roll as a viewer's "resume" (a `resume` beacon nobody caused).
    func testTheContentsEndPauseIsNoPauseOrResumeOfThePostroll() throws {
        let r = try rig(content: "clip-1s", keepOpenPause: true, source: postrollSource())
        let postroll = try postrollAtTheEnd(r)
        // mpv pauses by itself at the end: let it, so that its notification is on its way.
        XCTAssertTrue(waitUntil { (try? r.mpv.get("pause", as: .flag))?.flag == true }, "mpv did not pause at the end")
        try postroll.show(didEnd: r.log.didEnd(postroll.id))
        XCTAssertTrue(waitUntil(timeout: 30) { !r.log.endReasons(postroll.id).isEmpty })
        XCTAssertEqual(r.log.endReasons(postroll.id), [.completed])
        let pauses = r.log.all.filter { if case .postrollPaused = $0 { true } else { false } }
        XCTAssertEqual(pauses, [], "nobody paused or resumed the post-roll")
    }

    /// Found later by CI (MprisTests, under load): the viewer paused while mpv was still
    /// opening the post-roll's video. mpv stayed paused, the mapping took the video's
    /// per-file `pause=no` for the truth: no `pause` told, the ad believed playing, and a
    /// `play` afterwards no resume. Here the pause is made in the loop's turn of the video's
    /// START_FILE, so it always comes before the first frame.
    func testAPauseWhileThePostrollsVideoOpensIsTheViewersAndHolds() throws {
        let r = try rig(content: "clip-1s", source: postrollSource())
        let postroll = try postrollAtTheEnd(r)
        let paused = Locked(false)
        let player = r.player
        player.tapEvents { [weak player] event in
            guard case .startFile = event, !paused.withLock({ $0 }) else { return }
            paused.withLock { $0 = true }
            try? player?.pause()
        }
        try postroll.show(didEnd: r.log.didEnd(postroll.id))
        let pauses = { r.log.all.compactMap { if case .postrollPaused(_, let p) = $0 { p } else { nil } } }
        XCTAssertTrue(waitUntil { pauses() == [true] }, "the viewer's pause was not told: \(r.log.all)")
        XCTAssertTrue(paused.withLock { $0 })
        XCTAssertEqual((try r.mpv.get("pause", as: .flag)).flag, true, "mpv plays the post-roll the viewer paused")
        XCTAssertEqual(r.log.endReasons(postroll.id), [])
        try r.player.play()
        XCTAssertTrue(waitUntil(timeout: 30) { !r.log.endReasons(postroll.id).isEmpty })
        XCTAssertEqual(pauses(), [true, false])
        XCTAssertEqual(r.log.endReasons(postroll.id), [.completed])
    }

    /// 3. A `loop-playlist` replay of the entry that just ended was reported as the same item,
    /// so an overlay requested in the first pass showed in the second (R10, R14).
    func testAnOverlayOfTheFirstPassIsRefusedInALoopPlaylistReplay() throws {
        let r = try rig(content: "clip-1s", keepOpen: false, source: TestAdSource())
        try r.mpv.command(["set", "loop-playlist", "inf"])
        try r.player.load(Media.path("clip-1s.mp4"))
        XCTAssertNotNil(r.recorder.next { $0.isPlaying })
        r.ads.track(r.player)
        let early = try XCTUnwrap(requestAd(r.ads, .overlay)).get()   // requested in pass 0
        let pass1 = try XCTUnwrap(r.recorder.next(timeout: 30) { $0.newItem??.loop == 1 })
        XCTAssertNotNil(r.recorder.next(after: r.recorder.all.firstIndex(of: pass1) ?? 0) { $0.isPlaying })
        XCTAssertThrowsError(try early.show(didEnd: r.log.didEnd(early.id))) {
            XCTAssertEqual($0 as? AdError, .invalidated(.contentChanged))
        }
        // One requested in this pass belongs to it (the VideoAds follows its own episode).
        if r.player.snapshot().item?.loop == 1 {
            let now = try XCTUnwrap(requestAd(r.ads, .overlay)).get()
            XCTAssertNoThrow(try now.show(didEnd: r.log.didEnd(now.id)))
        }
    }

    /// 4. The surface held the mpv handle strongly: when the app dropped its `MpvPlayer`,
    /// mpv played on with nobody observing it, also after `destroy()` (R9's intent).
    func testDroppingThePlayerStopsMpvWhileTheSurfaceAndTheAdsLiveOn() throws {
        weak var weakPlayer: MpvPlayer?
        let logs = self.logs
        let (ads, surface) = try { () throws -> (VideoAds, MpvAdSurface) in
            let player = try MpvPlayer(configuration: MpvPlayerConfiguration()) { logs.record($0) }
            weakPlayer = player
            let surface = MpvAdSurface(player: player)
            let ads = VideoAds(content: ContentInfo(id: "episode-long"), source: TestAdSource(), surface: surface,
                               loop: player.loop)
            try player.load(Media.path("episode-long.mp4"))
            ads.track(player)
            XCTAssertTrue(waitUntil { player.snapshot().playing })
            XCTAssertGreaterThan(Self.mpvThreads(), 0)
            return (ads, surface)
        }()
        XCTAssertTrue(waitUntil { weakPlayer == nil }, "something kept the player alive")
        XCTAssertTrue(waitUntil { Self.mpvThreads() == 0 }, "mpv plays on: \(Self.mpvThreads()) of its threads remain")
        ads.destroy()
        XCTAssertEqual(surface.visibleSlots, [:])
        XCTAssertEqual(Self.mpvThreads(), 0)
    }

    /// mpv's threads (`mpv/…`) and our loop (`mpv-events`) in this process.
    private static func mpvThreads() -> Int {
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        return tasks.filter { tid in
            let name = (try? String(contentsOfFile: "/proc/self/task/\(tid)/comm", encoding: .utf8)) ?? ""
            return name.hasPrefix("mpv")
        }.count
    }
}
