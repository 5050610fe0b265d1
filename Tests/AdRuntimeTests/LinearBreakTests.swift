import AdRuntime
import AdTestSupport
import XCTest

/// Pre-rolls and mid-rolls on the virtual player and virtual time: the break holds the
/// content (not a pause), the same item resumes at the break's time, pods, pause, skip, and
/// what fails or is left open lets the content play (R16).
final class LinearBreakTests: XCTestCase {
    static let preroll = AdCreative(id: "pre", kind: .preroll, content: .video(location: "pre.mp4"), duration: 10)
    static func midroll(_ id: String = "mid", skipOffset: Double? = nil, podRemaining: Int = 0) -> AdCreative {
        var creative = AdCreative(id: id, kind: .midroll, content: .video(location: "\(id).mp4"), duration: 10)
        creative.skipOffset = skipOffset
        creative.podRemaining = podRemaining
        return creative
    }

    private func harness(_ behaviours: [AdKind: TestAdSource.Behaviour] = [:]) -> Harness {
        var all = TestAdSource.standard
        all.merge(behaviours) { $1 }
        return Harness(source: TestAdSource(all))
    }

    private func breaks(_ log: AdEventLog) -> [String] {
        log.all.compactMap { event in
            switch event {
            case .breakStarted(let kind, _, let at): "started \(kind.protocolName) \(at)"
            case .breakEnded(let kind, _, let at): "ended \(kind.protocolName) \(at)"
            default: nil
            }
        }
    }

    // MARK: Pre-rolls

    /// Before the episode is tracked: the break opens with the video, quartiles as a post-roll's,
    /// ends when the app ends it; once the content is tracked a pre-roll is refused.
    func testAPrerollPlaysBeforeTheContentAndIsRefusedOnceItIsIn() throws {
        let h = harness([.preroll: .creative(Self.preroll)])
        let preroll = try h.ad(.preroll)
        try h.show(preroll)
        XCTAssertEqual(h.surface.calls, [.playPostroll(preroll.id, "pre")])
        XCTAssertNil(h.player.snapshot().item, "no content in the player while it plays")
        let reporter = try XCTUnwrap(h.surface.reporter(preroll.id))
        for second in stride(from: 0.0, through: 10, by: 1) { reporter.progress(second, of: 10) }
        reporter.finished()
        XCTAssertEqual(h.ends(preroll), [.completed])
        XCTAssertEqual(breaks(h.settled), ["started preroll 0.0"], "the break is the app's to end")
        h.ads.endBreak()
        XCTAssertEqual(breaks(h.settled), ["started preroll 0.0", "ended preroll 0.0"])
        let quartiles = h.settled.all.compactMap { if case .quartile(_, let q) = $0 { q } else { nil } }
        XCTAssertEqual(quartiles, [1, 2, 3])
        // The break's start comes before the ad's start.
        let order = h.settled.all.compactMap { event -> String? in
            switch event {
            case .breakStarted: "break"
            case .started: "ad"
            default: nil
            }
        }
        XCTAssertEqual(order, ["break", "ad"])

        h.start(duration: 10)
        let late = try h.ad(.preroll)
        XCTAssertThrowsAdError(.contentStarted) { try h.show(late) }
    }

    /// A pre-roll whose video does not start within its timeout fails (VAST 402) and the
    /// break closes by itself a request's time later if the app does nothing.
    func testAPrerollThatNeverStartsFailsAndItsBreakClosesByItself() throws {
        let h = harness([.preroll: .creative(Self.preroll)])
        let preroll = try h.ad(.preroll)
        try h.show(preroll)
        h.loop.advance(by: 7.9)
        XCTAssertEqual(h.ends(preroll), [])
        h.loop.advance(by: 0.2)
        XCTAssertEqual(h.ends(preroll), [.failed])
        XCTAssertEqual(h.surface.calls.last, .stopPostroll(preroll.id))
        XCTAssertTrue(h.settled.errors.contains { $0.vastCode == 402 }, "\(h.settled.errors)")
        XCTAssertEqual(breaks(h.settled), ["started preroll 0.0"])
        h.loop.advance(by: 11)
        XCTAssertEqual(breaks(h.settled), ["started preroll 0.0", "ended preroll 0.0"], "closed by itself (R16)")
    }

    /// A linear ad starts — and is billed — at its first frame on the output, not when its file
    /// is asked for (issue 34, 16): a video that never shows a frame and fails is never
    /// `started` (no impression, no proof of play): it ends `failed` with its error alone; one
    /// whose frame comes is started then, once.
    func testALinearAdStartsAtItsFirstFrameNotAtItsLoad() throws {
        let h = harness([.preroll: .creative(Self.preroll)])
        h.surface.silenceVideos()
        let broken = try h.ad(.preroll)
        try h.show(broken)
        h.loop.advance(by: 1)
        XCTAssertFalse(h.settled.all.contains { if case .started = $0 { true } else { false } }, "asked for, not on screen: not started")
        try XCTUnwrap(h.surface.reporter(broken.id)).failed("Failed to recognize file format")
        h.loop.advance(by: 0.1)
        XCTAssertEqual(h.ends(broken), [.failed])
        XCTAssertFalse(h.settled.all.contains { if case .started = $0 { true } else { false } }, "never started, never billed")
        XCTAssertTrue(h.settled.errors.contains { $0.code == "render_failed" }, "\(h.settled.errors)")

        let h2 = harness([.preroll: .creative(Self.preroll)])
        h2.surface.silenceVideos()
        let late = try h2.ad(.preroll)
        try h2.show(late)
        h2.loop.advance(by: 2)
        XCTAssertFalse(h2.settled.all.contains { if case .started = $0 { true } else { false } })
        let reporter = try XCTUnwrap(h2.surface.reporter(late.id))
        reporter.began()
        reporter.began()
        h2.loop.advance(by: 0.1)
        XCTAssertEqual(h2.settled.all.filter { if case .started = $0 { true } else { false } }.count, 1, "started at its first frame, once")
    }

    // MARK: Mid-rolls

    /// Playback crossing T holds the content at T (`.held`, not a pause): the overlay on screen
    /// is taken down without ending; the ad plays; at the break's end the same item plays again
    /// from exactly T and the overlay comes back for the time it had left.
    func testAMidrollHoldsTheContentAtItsTimeAndTheSameItemResumesThere() throws {
        let h = harness([.midroll: .creative(Self.midroll())])
        let observer = PlayerEventRecorder()
        let observation = h.player.addObserver(observer, phase: .report)
        defer { observation.cancel() }
        let item = h.start(duration: 10)
        h.loop.advance(by: 1)
        let overlay = try h.ad(.overlay)   // 5 s on screen
        try h.show(overlay)
        let midroll = try h.ad(.midroll)
        try midroll.show(atContentTime: 3, didEnd: h.log.didEnd(midroll.id))
        h.loop.advance(by: 1.5)
        XCTAssertEqual(h.surface.calls.filter { if case .playPostroll = $0 { true } else { false } }, [], "not before T")
        h.loop.advance(by: 0.5)

        XCTAssertTrue(h.player.isHeld)
        let held = h.player.snapshot()
        XCTAssertEqual(held.item, item, "the same item stays in")
        XCTAssertEqual(held.position, 3, accuracy: 1e-9)
        XCTAssertFalse(held.playing)
        XCTAssertTrue(h.surface.calls.contains(.playPostroll(midroll.id, "mid")))
        XCTAssertEqual(h.ends(overlay), [], "an overlay is not ended by a break")
        XCTAssertFalse(h.surface.isVisible(overlay.id), "it is off the screen while the ad plays")
        XCTAssertFalse(observer.changes.contains(.paused), "a break is no pause: \(observer.changes)")
        XCTAssertTrue(observer.changes.contains(.held))

        let reporter = try XCTUnwrap(h.surface.reporter(midroll.id))
        for second in stride(from: 0.0, through: 10, by: 0.5) { reporter.progress(second, of: 10) }
        h.loop.advance(by: 10)
        reporter.finished()
        XCTAssertEqual(h.ends(midroll), [.completed])
        XCTAssertTrue(h.player.isHeld, "held until the break ends (a pod may follow)")
        h.ads.endBreak()

        let resumed = h.player.snapshot()
        XCTAssertFalse(h.player.isHeld)
        XCTAssertEqual(resumed.item, item, "the same item, not a new one (R10)")
        XCTAssertEqual(resumed.position, 3, accuracy: 1e-9, "from exactly the break's time")
        XCTAssertTrue(resumed.playing)
        XCTAssertTrue(h.surface.isVisible(overlay.id), "the overlay is back")
        XCTAssertEqual(h.surface.presentCounts[overlay.id], 2)
        XCTAssertEqual(breaks(h.settled), ["started midroll 3.0", "ended midroll 3.0"])
        XCTAssertEqual(h.settled.all.filter { if case .started(let info) = $0 { info.id == overlay.id } else { false } }.count, 1,
                       "its start is told once")
        // 2 s of its 5 were played before the break: 3 s remain.
        h.loop.advance(by: 2.9)
        XCTAssertEqual(h.ends(overlay), [])
        h.loop.advance(by: 0.2)
        XCTAssertEqual(h.ends(overlay), [.completed])
        let onScreen = try XCTUnwrap(h.settled.ended.first { $0.0.id == overlay.id }?.0.onScreenSeconds)
        XCTAssertEqual(onScreen, 5, accuracy: 0.01, "its time on screen does not count the break")
    }

    /// The viewer's pause during the ad pauses the ad (its budget stops); skip is refused before
    /// the skip offset and ends it `skipped` after.
    func testPauseAndSkipDuringAMidroll() throws {
        let h = harness([.midroll: .creative(Self.midroll(skipOffset: 5))])
        h.start(duration: 10)
        let midroll = try h.ad(.midroll)
        try h.show(midroll)   // now: a snapback holds the content where it is
        XCTAssertTrue(h.player.isHeld)
        let reporter = try XCTUnwrap(h.surface.reporter(midroll.id))
        reporter.progress(1, of: 10)
        reporter.paused(true)
        h.loop.advance(by: 600)
        XCTAssertEqual(h.ends(midroll), [], "paused time does not count")
        XCTAssertTrue(h.settled.all.contains { if case .postrollPaused(_, true) = $0 { true } else { false } })
        reporter.paused(false)
        XCTAssertThrowsAdError(.notSkippable(after: 5)) { try midroll.skip() }
        reporter.progress(5.2, of: 10)
        try midroll.skip()
        XCTAssertEqual(h.ends(midroll), [.skipped])
        XCTAssertEqual(h.surface.calls.last, .stopPostroll(midroll.id))

        let unskippable = Harness(source: TestAdSource([.midroll: .creative(Self.midroll())]))
        unskippable.start(duration: 10)
        let plain = try unskippable.ad(.midroll)
        try unskippable.show(plain)
        unskippable.surface.reporter(plain.id)?.progress(9, of: 10)
        XCTAssertThrowsAdError(.notSkippable(after: nil)) { try plain.skip() }
    }

    /// A pod: the second ad plays with the content still held (one break), then the content
    /// resumes once.
    func testAPodPlaysInSequenceWithinOneBreak() throws {
        let h = harness([.midroll: .creative(Self.midroll(podRemaining: 1))])
        let item = h.start(duration: 10)
        let first = try h.ad(.midroll)
        try first.show(atContentTime: 2, didEnd: h.log.didEnd(first.id))
        h.loop.advance(by: 2)
        h.surface.reporter(first.id)?.progress(0.5, of: 10)
        h.surface.reporter(first.id)?.finished()
        XCTAssertEqual(h.ends(first), [.completed])
        h.source.set(.midroll, .creative(Self.midroll("mid-2")))
        let second = try h.ad(.midroll)
        try h.show(second)
        XCTAssertTrue(h.player.isHeld)
        h.surface.reporter(second.id)?.progress(0.5, of: 10)
        h.surface.reporter(second.id)?.finished()
        XCTAssertEqual(h.ends(second), [.completed])
        h.ads.endBreak()
        XCTAssertEqual(breaks(h.settled), ["started midroll 2.0", "ended midroll 2.0"], "one break for the pod")
        XCTAssertEqual(h.player.snapshot().item, item)
        XCTAssertEqual(h.player.snapshot().position, 2, accuracy: 1e-9)
    }

    /// A seek that lands past a waiting mid-roll's time does not start it (R12: only playing
    /// across does); withdrawn, it ends `seeked`, never having played.
    func testASeekPastAWaitingMidrollDoesNotStartIt() throws {
        let h = harness([.midroll: .creative(Self.midroll())])
        h.start(duration: 10)
        let midroll = try h.ad(.midroll)
        try midroll.show(atContentTime: 3, didEnd: h.log.didEnd(midroll.id))
        h.player.seek(to: 5)
        h.loop.advance(by: 2)
        XCTAssertFalse(h.player.isHeld)
        XCTAssertEqual(h.surface.calls.filter { if case .playPostroll = $0 { true } else { false } }, [])
        midroll.withdraw()
        XCTAssertEqual(h.ends(midroll), [.seeked])
        XCTAssertEqual(breaks(h.settled), [])
    }

    /// Another item while the break holds the content: the ad ends `contentChanged`, the break
    /// ends, nothing is resumed.
    func testAnotherItemDuringTheBreakEndsIt() throws {
        let h = harness([.midroll: .creative(Self.midroll())])
        h.start(duration: 10)
        let midroll = try h.ad(.midroll)
        try h.show(midroll)
        let next = h.player.load("episode-2.mp4", duration: 10)
        XCTAssertEqual(h.ends(midroll), [.contentChanged])
        XCTAssertEqual(breaks(h.settled).count, 2)
        XCTAssertEqual(h.player.snapshot().item, next)
        XCTAssertFalse(h.player.isHeld)
    }

    /// A break whose app never ends it (a pod's next request lost) ends by itself a request's
    /// timeout after its last ad, and the content plays (R16).
    func testABreakLeftOpenResumesTheContentByItself() throws {
        let h = harness([.midroll: .creative(Self.midroll())])
        let item = h.start(duration: 10)
        let midroll = try h.ad(.midroll)
        try midroll.show(atContentTime: 1, didEnd: h.log.didEnd(midroll.id))
        h.loop.advance(by: 1)
        h.surface.reporter(midroll.id)?.progress(1, of: 10)
        h.surface.reporter(midroll.id)?.failed("decoder error")
        XCTAssertEqual(h.ends(midroll), [.failed])
        h.loop.advance(by: 10.9)
        XCTAssertTrue(h.player.isHeld)
        h.loop.advance(by: 0.2)
        XCTAssertFalse(h.player.isHeld)
        XCTAssertEqual(h.player.snapshot().item, item)
        XCTAssertTrue(h.player.snapshot().playing)
    }

    /// A mid-roll asked of a player that cannot hold its content fails, and the content plays.
    func testAPlayerThatCannotHoldFailsTheMidroll() throws {
        let loop = VirtualLoop()
        let player = PlainPlayer(VirtualPlayer(loop: loop))
        let log = AdEventLog()
        let surface = RecordingAdSurface()
        let ads = VideoAds(content: ContentInfo(id: "e"), source: TestAdSource([.midroll: .creative(Self.midroll())]),
                           surface: surface, loop: loop, onEvent: { log.record($0) })
        player.base.load("episode.mp4", duration: 10)
        ads.track(player)
        let midroll = try XCTUnwrap(requestAd(ads, .midroll)).get()
        try midroll.show(didEnd: log.didEnd(midroll.id))
        ads.waitForCallbacks()
        XCTAssertEqual(log.endReasons(midroll.id), [.failed])
        XCTAssertTrue(log.errors.contains(.cannotHold))
        XCTAssertTrue(player.base.snapshot().playing)
    }
}

/// Records the player's changes.
final class PlayerEventRecorder: PlayerObserver, @unchecked Sendable {
    // @unchecked: appended on the loop, read after it settled.
    private let lock = Locked<[PlayerChange]>([])
    var changes: [PlayerChange] { lock.withLock { $0 } }
    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) { lock.withLock { $0.append(event.change) } }
}

/// A player with no breaks: the scripted one seen only as a `TrackablePlayer`.
private final class PlainPlayer: TrackablePlayer, @unchecked Sendable {
    let base: VirtualPlayer
    init(_ base: VirtualPlayer) { self.base = base }
    var loop: any PlayerLoop { base.loop }
    func snapshot() -> PlayerSnapshot { base.snapshot() }
    func addObserver(_ observer: any PlayerObserver, phase: ObserverPhase) -> PlayerObservation { base.addObserver(observer, phase: phase) }
}
