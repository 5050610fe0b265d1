import AdRuntime
@testable import MpvPlayerAdapter
import XCTest

/// The mapping's rules on exact event sequences (no mpv): the cases real playback makes rare
/// or racy. mpv's answers to the mapping's read-backs are scripted here, and every read-back
/// is counted: the fast path (a pause from anywhere) must decide on the observed value alone.
final class MappingRuleTests: XCTestCase {
    private var mapping = MpvPlayerMapping()
    /// What mpv answers when the mapping reads it back (nil: the property is unavailable).
    private var mpv = (eof: Bool?.some(false), pause: Bool?.some(false), timePos: Double?.some(0))
    private var reads: [String] = []
    private var now: UInt64 = 1_000_000_000

    override func setUp() {
        super.setUp()
        // These sequences jump time-pos at will; the backstop has a test of its own.
        mapping.backstopEnabled = false
    }

    private var query: MpvPlayerMapping.Query {
        .init(pause: { [self] in reads.append("pause"); return mpv.pause },
              eofReached: { [self] in reads.append("eof-reached"); return mpv.eof },
              timePos: { [self] in reads.append("time-pos"); return mpv.timePos },
              path: { [self] in reads.append("path"); return "/media/ep.mp4" })
    }

    private func events(_ events: MpvEvent...) -> [PlayerEvent] {
        events.flatMap { event -> [PlayerEvent] in
            now += 40_000_000
            return mapping.apply(event, now: now, query: query)
        }
    }

    private func feed(_ list: MpvEvent...) -> [PlayerChange] {
        list.flatMap { event -> [PlayerChange] in
            now += 40_000_000
            return mapping.apply(event, now: now, query: query).map(\.change)
        }
    }

    private func own(pause: Bool) -> [PlayerChange] {
        mapping.applyOwnPause(pause, now: now).map(\.change)
    }

    private func prop(_ p: MpvPlayerMapping.Observed, _ v: MpvValue) -> MpvEvent {
        .property(id: p.rawValue, name: p.name, value: v)
    }

    private func startPlaying(entry: Int64 = 1) -> PlayerItem {
        mapping.noteLoad(entry: entry, path: "/media/ep.mp4")
        let item = PlayerItem(entry: entry, path: "/media/ep.mp4")
        XCTAssertEqual(feed(.startFile(entry: entry), .fileLoaded, prop(.duration, .double(10)), .playbackRestart),
                       [.item(item), .playing(rate: 1)])
        reads = []
        return item
    }

    /// R1: a property that arrives with no value is unknown — never false or zero. Each case
    /// starts from a known value that "false" or "zero" would change.
    func testUnavailableValuesAreUnknownNotFalseOrZero() {
        let item = startPlaying()
        XCTAssertEqual(feed(prop(.timePos, .double(4)), prop(.speed, .double(2))), [.rate(2)])
        XCTAssertEqual(feed(prop(.pause, .flag(true))), [.paused])
        XCTAssertEqual(feed(prop(.pause, .unavailable)), [], "unknown is not `no`: still paused")
        XCTAssertFalse(mapping.snapshot().playing)
        XCTAssertEqual(feed(prop(.timePos, .unavailable), prop(.speed, .unavailable)), [])
        XCTAssertEqual(mapping.snapshot().position, 4, "unknown time-pos is not 0: the last known stays")
        XCTAssertEqual(feed(prop(.pause, .flag(false))), [.playing(rate: 2)], "unknown speed is not 0 or 1")
        XCTAssertEqual(feed(prop(.eofReached, .unavailable)), [], "unknown eof-reached is not the end")
        XCTAssertEqual(feed(prop(.eofReached, .flag(true))), [.ended(item), .item(nil)])
        XCTAssertEqual(feed(prop(.eofReached, .unavailable)), [], "unknown eof-reached is not `no`: no replay")
        XCTAssertEqual(reads, [], "nothing was read back")
    }

    /// R3 on the fast path: a pause from another client is taken as observed, with no read-back.
    func testAPauseFromElsewhereIsSeenWithoutReadingMpv() {
        _ = startPlaying()
        XCTAssertEqual(feed(prop(.pause, .flag(true))), [.paused])
        XCTAssertEqual(feed(prop(.pause, .flag(false))), [.playing(rate: 1)])
        XCTAssertEqual(reads, [])
    }

    /// R2: with keep-open-pause, mpv's own pause at the end can arrive before `eof-reached`:
    /// still the end, and no pause.
    func testKeepOpensPauseBeforeEofReachedIsTheEnd() {
        mapping.keepOpenPause = true
        let item = startPlaying()
        mpv.eof = true
        XCTAssertEqual(feed(prop(.pause, .flag(true))), [.ended(item), .item(nil)])
        XCTAssertEqual(feed(prop(.eofReached, .flag(true))), [])
        XCTAssertEqual(reads, ["eof-reached"])
    }

    /// R2's other side: with keep-open-pause, a viewer's pause before the end is a pause.
    func testWithKeepOpenPauseAPauseBeforeTheEndIsAPause() {
        mapping.keepOpenPause = true
        _ = startPlaying()
        mpv.eof = false
        XCTAssertEqual(feed(prop(.pause, .flag(true))), [.paused])
    }

    /// `.ended` carries the facts at the end: the ended item, at its duration, not playing;
    /// `.item(nil)` carries none (facts right after each change, not after the batch).
    func testTheEndCarriesTheItemAndWhereItEnded() {
        let item = startPlaying()
        _ = feed(prop(.timePos, .double(9.6)))
        let list = events(.endFile(entry: 1, reason: .eof))
        XCTAssertEqual(list.map(\.change), [.ended(item), .item(nil)])
        XCTAssertEqual(list.first?.snapshot, PlayerSnapshot(item: item, position: 10, playing: false, rate: 0))
        XCTAssertEqual(list.last?.snapshot, .empty)
    }

    /// A container that claims more than it holds (10 h for a 3 s file): the end is where it
    /// really ended, not the claimed duration.
    func testAnEndFarShortOfTheClaimedDurationIsWhereItEnded() {
        let item = startPlaying()
        _ = feed(prop(.duration, .double(36_000)), prop(.timePos, .double(3.0)))
        let list = events(.endFile(entry: 1, reason: .eof))
        XCTAssertEqual(list.map(\.change), [.ended(item), .item(nil)])
        XCTAssertEqual(list.first?.snapshot.position, 3.0)
    }

    func testARestartWithoutSeekIsNotASeekAndSeekThenRestartIs() {
        _ = startPlaying()
        XCTAssertEqual(feed(prop(.timePos, .double(3)), .playbackRestart), [])
        mpv.timePos = 7
        XCTAssertEqual(feed(.seek, .playbackRestart), [.seeked(from: 3, to: 7)])
        XCTAssertEqual(reads, ["time-pos"], "the landing position of a seek is read once")
    }

    func testAStartPositionIsPartOfLoadingNotASeek() {
        mapping.noteLoad(entry: 1, path: "/media/ep.mp4")
        mpv.timePos = 5
        XCTAssertEqual(feed(.startFile(entry: 1), .fileLoaded, .seek, .playbackRestart),
                       [.item(PlayerItem(entry: 1, path: "")), .playing(rate: 1)])
    }

    func testAForeignSeekFromNearTheEndToTheStartWhileLoopingIsAWrap() {
        let item = startPlaying()
        XCTAssertEqual(feed(prop(.loopFile, .string("inf")), prop(.timePos, .double(9.96))), [])
        mpv.timePos = 0
        XCTAssertEqual(feed(.seek, .playbackRestart), [.item(item.nextLoop()), .playing(rate: 1)])
        // Our own seek to 0 from near the end is a seek, even while looping.
        XCTAssertEqual(feed(prop(.timePos, .double(9.9))), [])
        mapping.ownSeekAccepted()
        XCTAssertEqual(feed(.seek, .playbackRestart), [.seeked(from: 9.9, to: 0)])
    }

    /// Found by CI (MprisTests, a loop wrap reported as `Seeked`): when the loop is behind,
    /// libmpv hands over the wrap's `SEEK` before the `time-pos` updates of the pass's last
    /// frames (it makes property notifications only when its queue is empty), so the last
    /// position known is from early in the pass. Carried forward at the rate, it is the end.
    /// And a wrap between our seek command and mpv's answer to it is not our seek.
    func testAWrapSeenLateIsAWrapAndOneBeforeOurSeekIsAnsweredIsNotOurs() {
        let item = startPlaying()
        XCTAssertEqual(feed(prop(.loopFile, .string("inf")), prop(.timePos, .double(0.5))), [])
        // The loop stalls: 9.6 s go by before it takes the next event, the wrap's SEEK.
        now += 9_600_000_000
        mpv.timePos = 0.05
        XCTAssertEqual(feed(.seek, .playbackRestart), [.item(item.nextLoop()), .playing(rate: 1)])

        // Our seek is sent (no answer yet) when mpv wraps: the wrap is a wrap...
        XCTAssertEqual(feed(prop(.timePos, .double(9.98))), [])
        mpv.timePos = 0
        XCTAssertEqual(feed(.seek, .playbackRestart), [.item(item.nextLoop().nextLoop()), .playing(rate: 1)])
        // ...then mpv answers and makes our seek.
        mapping.ownSeekAccepted()
        mpv.timePos = 4
        XCTAssertEqual(feed(.seek, .playbackRestart).map { if case .seeked(_, let to) = $0 { to } else { -1 } }, [4])
    }

    func testTheBackstopCatchesAJumpWithoutSeekEventsButNotFastPlayback() {
        mapping.backstopEnabled = true
        _ = startPlaying()
        XCTAssertEqual(feed(prop(.speed, .double(2))), [.rate(2)])
        // 40 ms per event at 2x: 80 ms of content per event is explained.
        var position = 0.0
        for _ in 0..<50 {
            position += 0.08
            XCTAssertEqual(feed(prop(.timePos, .double(position))), [])
        }
        XCTAssertEqual(feed(prop(.timePos, .double(position + 5))), [.seeked(from: position, to: position + 5)])
        XCTAssertEqual(feed(prop(.timePos, .double(1))), [.seeked(from: position + 5, to: 1)])
    }

    func testAReplayAfterTheEndWithKeepOpenIsTheNextPass() {
        let item = startPlaying()
        XCTAssertEqual(feed(prop(.eofReached, .flag(true))), [.ended(item), .item(nil)])
        mpv.timePos = 2
        XCTAssertEqual(feed(.seek, .playbackRestart), [], "where the seek went is told by eof-reached")
        XCTAssertEqual(feed(prop(.eofReached, .flag(false))), [.item(item.nextLoop()), .playing(rate: 1)])
    }

    /// Conformance failure 3: `loop-playlist` plays the entry that just ended again, with the
    /// same playlist entry id. That is the entry's next pass, not the item that ended (R10, R14).
    func testAnEntryPlayedAgainAfterItsEndIsItsNextPass() {
        let item = startPlaying(entry: 4)
        XCTAssertEqual(feed(.endFile(entry: 4, reason: .eof)), [.ended(item), .item(nil)])
        XCTAssertEqual(feed(.startFile(entry: 4), .fileLoaded, .playbackRestart),
                       [.item(item.nextLoop()), .playing(rate: 1)])
        XCTAssertEqual(feed(.endFile(entry: 4, reason: .eof), .startFile(entry: 4)).last,
                       .item(item.nextLoop().nextLoop()))
    }

    func testOwnPauseTakesEffectAtOnceAndItsEchoIsNotRepeated() {
        _ = startPlaying()
        XCTAssertEqual(own(pause: true), [.paused])
        XCTAssertEqual(feed(prop(.pause, .flag(true))), [])
        XCTAssertEqual(own(pause: false), [.playing(rate: 1)])
        XCTAssertEqual(feed(prop(.pause, .flag(false))), [])
        XCTAssertEqual(reads, [], "an echo of our own write needs no read-back")
    }

    /// A notification made before our own play() arrives after it: mpv's flag now decides.
    func testAStalePauseNotificationAfterOurOwnPlayIsNoPause() {
        _ = startPlaying()
        XCTAssertEqual(own(pause: true), [.paused])
        XCTAssertEqual(own(pause: false), [.playing(rate: 1)])
        mpv.pause = false
        XCTAssertEqual(feed(prop(.pause, .flag(true))), [], "the flag is `no` now: no pause")
        XCTAssertEqual(reads, ["pause"])
        XCTAssertEqual(feed(prop(.pause, .flag(false))), [])
    }

    /// ...and a pause by another client just after our play is a pause.
    func testAPauseByAnotherClientAfterOurOwnPlayIsAPause() {
        _ = startPlaying()
        XCTAssertEqual(own(pause: true), [.paused])
        XCTAssertEqual(own(pause: false), [.playing(rate: 1)])
        mpv.pause = true
        XCTAssertEqual(feed(prop(.pause, .flag(true))), [.paused])
        reads = []
        XCTAssertEqual(feed(prop(.pause, .flag(false))), [.playing(rate: 1)])
        XCTAssertEqual(reads, [], "once resolved, the fast path again")
    }

    func testALoadErrorIsAFailureWithMpvsReason() {
        mapping.noteLoad(entry: 3, path: "/media/bad.mp4")
        XCTAssertEqual(feed(.startFile(entry: 3), .endFile(entry: 3, reason: .error(MpvError(code: -17, operation: "play")))), [
            .item(PlayerItem(entry: 3, path: "")), .item(nil),
            .failed(PlayerFailure(entry: 3, path: "/media/bad.mp4", code: "unknown-format",
                                  message: MpvError(code: -17, operation: "").message)),
        ])
    }

    /// R8 and conformance failures 1 and 2: an ad's video is never an item; its end says how.
    func testAnAdsVideoIsNeverAnItemAndItsEndSaysHow() {
        let item = startPlaying()
        XCTAssertEqual(feed(.endFile(entry: 1, reason: .eof)), [.ended(item), .item(nil)])
        mapping.noteAdLoad(entry: 2)
        XCTAssertEqual(feed(.startFile(entry: 2), .fileLoaded, .playbackRestart, prop(.timePos, .double(1))), [])
        XCTAssertEqual(mapping.takeAdEvents(), [.started(entry: 2), .progress(entry: 2, position: 1, duration: 0)])
        // Another file loaded over it (the app's next episode): stopped, not finished.
        XCTAssertEqual(feed(.endFile(entry: 2, reason: .stop)), [])
        XCTAssertEqual(mapping.takeAdEvents(), [.ended(entry: 2, .stopped)])
        mapping.noteAdLoad(entry: 3)
        _ = feed(.startFile(entry: 3), .endFile(entry: 3, reason: .eof))
        XCTAssertEqual(mapping.takeAdEvents(), [.ended(entry: 3, .finished)],
                       "no frame ever on the output (no playback restart): never started (issue 34, 16)")
    }

    /// Conformance failure 2: with keep-open-pause, mpv's own pause at the end of the content
    /// reaches us after the post-roll started; the post-roll's per-file `pause=no` is no viewer's
    /// "resume" either. Only changes once its video plays are the viewer's.
    func testTheContentsEndPauseDoesNotLeakIntoThePostroll() {
        mapping.keepOpenPause = true
        let item = startPlaying()
        mpv.eof = true
        XCTAssertEqual(feed(prop(.eofReached, .flag(true))), [.ended(item), .item(nil)])
        mapping.noteAdLoad(entry: 2)
        _ = feed(.startFile(entry: 2), prop(.pause, .flag(true)), .fileLoaded, prop(.pause, .flag(false)), .playbackRestart)
        XCTAssertEqual(mapping.takeAdEvents(), [.started(entry: 2)], "no pause or resume reported before it plays")
        _ = feed(prop(.pause, .flag(true)))
        XCTAssertEqual(mapping.takeAdEvents(), [.paused(entry: 2, true)], "a pause while it plays is the viewer's")
    }

    /// Found by CI (MprisTests, under load): the viewer paused while mpv was still opening the
    /// post-roll's video; at its first frame the mapping took the video's per-file `pause=no`
    /// for the truth, so mpv stayed paused while the ad was believed playing — no `paused`,
    /// and no end for ever. The viewer's pause holds, mpv is told it again, and it is the ad's.
    func testAPauseWhileTheAdsVideoOpensHoldsAndIsToldWhenItPlays() {
        let item = startPlaying()
        XCTAssertEqual(feed(.endFile(entry: 1, reason: .eof)), [.ended(item), .item(nil)])
        mapping.noteAdLoad(entry: 2)
        _ = feed(.startFile(entry: 2))
        XCTAssertEqual(mapping.takeAdEvents(), [], "its file opens: not started until its first frame")
        _ = own(pause: true)
        _ = feed(prop(.pause, .flag(true)), .fileLoaded)
        XCTAssertEqual(mapping.takeAdEvents(), [], "nothing to pause before it plays")
        XCTAssertNil(mapping.takeAdPauseToApply())
        _ = feed(.playbackRestart)
        XCTAssertEqual(mapping.takeAdEvents(), [.started(entry: 2), .paused(entry: 2, true)], "started at its first frame, then the viewer's pause")
        XCTAssertEqual(mapping.takeAdPauseToApply(), true, "mpv is told again: the per-file pause=no must not win")
        XCTAssertNil(mapping.takeAdPauseToApply(), "once")
        _ = feed(prop(.pause, .flag(true)))
        XCTAssertEqual(mapping.takeAdEvents(), [], "the echo is no change")
        _ = own(pause: false)
        XCTAssertEqual(mapping.takeAdEvents(), [.paused(entry: 2, false)], "and the viewer's play resumes it")

        // Paused and played again while the next ad's video opened: it simply plays.
        _ = feed(.endFile(entry: 2, reason: .eof))
        mapping.noteAdLoad(entry: 3)
        _ = feed(.startFile(entry: 3))
        _ = own(pause: true)
        _ = own(pause: false)
        _ = feed(.fileLoaded, .playbackRestart)
        XCTAssertEqual(mapping.takeAdEvents(), [.ended(entry: 2, .finished), .started(entry: 3)])
        XCTAssertEqual(mapping.takeAdPauseToApply(), false)
    }

    func testTheOutputSizeIsTheOSDsElseTheVideosAndChangesAreNoticedOnce() {
        XCTAssertTrue(mapping.outputSize == (1280, 720), "nothing known yet")
        _ = feed(prop(.videoWidth, .int(320)), prop(.videoHeight, .int(240)))
        XCTAssertTrue(mapping.outputSize == (320, 240))
        XCTAssertTrue(mapping.takeOutputSizeChange())
        XCTAssertFalse(mapping.takeOutputSizeChange(), "once")
        _ = feed(prop(.osdWidth, .int(640)), prop(.osdHeight, .int(360)))
        XCTAssertTrue(mapping.outputSize == (640, 360), "the OSD wins")
        XCTAssertTrue(mapping.takeOutputSizeChange())
        _ = feed(prop(.videoWidth, .int(1920)))
        XCTAssertFalse(mapping.takeOutputSizeChange(), "the video's size no longer matters")
    }

    /// R13's "the output is hidden": mpv's `window-minimized` is told once per change, not a
    /// player change; an unavailable value (no window) is "not minimized". The item's
    /// duration is told when it becomes known and when the item goes.
    func testWindowMinimizedAndDurationAreDetailsNotPlayerChanges() {
        let item = startPlaying()
        XCTAssertEqual(mapping.takeDetailChanges(), [.duration(10)])
        XCTAssertEqual(feed(prop(.windowMinimized, .flag(true))), [])
        XCTAssertEqual(mapping.takeDetailChanges(), [.windowMinimized(true)])
        XCTAssertEqual(feed(prop(.windowMinimized, .flag(true))), [])
        XCTAssertEqual(mapping.takeDetailChanges(), [], "no change, nothing told")
        XCTAssertEqual(feed(prop(.windowMinimized, .unavailable)), [])
        XCTAssertEqual(mapping.takeDetailChanges(), [.windowMinimized(false)])
        XCTAssertEqual(feed(prop(.duration, .double(12))), [])
        XCTAssertEqual(mapping.takeDetailChanges(), [.duration(12)])
        _ = item
    }

    /// A mid-roll break (issue 26): held, the content's file replaced by the ad's, the ad played,
    /// the content's file loaded again at the break's time — one item throughout: `.held`, then
    /// `.playing` at that time, never `.paused`, `.item(nil)` or a new item. A failure of the
    /// reload is the item's, under its own entry.
    func testABreakHoldsTheItemAcrossTheAdsFileAndItsReload() throws {
        let item = startPlaying()
        _ = feed(prop(.timePos, .double(3.02)))
        let held = try XCTUnwrap(mapping.hold(at: 3, now: now))
        XCTAssertEqual(held.path, "/media/ep.mp4")
        XCTAssertEqual(held.events.map(\.change), [.held])
        XCTAssertEqual(held.events.first?.snapshot.position, 3)
        mapping.noteAdLoad(entry: 2)
        XCTAssertEqual(feed(.endFile(entry: 1, reason: .stop), .startFile(entry: 2), .fileLoaded, .playbackRestart,
                            prop(.timePos, .double(1)), prop(.eofReached, .flag(true)), prop(.pause, .flag(false))), [])
        XCTAssertEqual(mapping.takeAdEvents().last, .ended(entry: 2, .finished))
        XCTAssertEqual(mapping.snapshot().item, item, "held in, across the ad's file")
        XCTAssertFalse(mapping.snapshot().playing)
        mapping.noteResume(entry: 3, path: "/media/ep.mp4")
        mpv.timePos = 3
        let resumed = events(.endFile(entry: 2, reason: .stop), .startFile(entry: 3), .fileLoaded, .seek, .playbackRestart)
        XCTAssertEqual(resumed.map(\.change), [.playing(rate: 1)])
        XCTAssertEqual(resumed.last?.snapshot.item, item, "the same item")
        XCTAssertEqual(resumed.last?.snapshot.position, 3)
        XCTAssertEqual(feed(prop(.timePos, .double(3.04))), [])
        // Its reload failing later: the item's own entry is named.
        XCTAssertEqual(feed(.endFile(entry: 3, reason: .error(MpvError(code: -13, operation: "loading")))).last,
                       .failed(PlayerFailure(entry: 1, path: "/media/ep.mp4", code: MpvError(code: -13, operation: "x").name,
                                             message: MpvError(code: -13, operation: "loading").message)))
    }

    /// `stop` during a break lets the held item go.
    func testAStopDuringABreakLetsTheHeldItemGo() throws {
        _ = startPlaying()
        _ = try XCTUnwrap(mapping.hold(at: 2, now: now))
        mapping.noteAdLoad(entry: 2)
        _ = feed(.endFile(entry: 1, reason: .stop), .startFile(entry: 2))
        XCTAssertEqual(mapping.releaseHold(now: now).map(\.change), [.item(nil)])
        XCTAssertNil(mapping.snapshot().item)
        XCTAssertNil(mapping.hold(at: 1, now: now), "nothing to hold")
    }
}
