import AdRuntime
@testable import MpvPlayerAdapter
import XCTest

/// The mapping's rules on exact event sequences (no mpv): the cases real playback makes
/// rare or racy.
final class MappingRuleTests: XCTestCase {
    private var mapping = MpvPlayerMapping()
    private var eof: Bool? = false
    private var pause: Bool? = false
    private var timePos: Double? = 0
    private var now: UInt64 = 1_000_000_000

    override func setUp() {
        super.setUp()
        // These sequences jump time-pos at will; the backstop has a test of its own.
        mapping.backstopEnabled = false
    }

    private var query: MpvPlayerMapping.Query {
        let eof = self.eof, timePos = self.timePos, pause = self.pause
        return .init(pause: { pause }, eofReached: { eof }, timePos: { timePos }, path: { "/media/ep.mp4" })
    }

    private func feed(_ events: MpvEvent...) -> [PlayerChange] {
        events.flatMap { event -> [PlayerChange] in
            now += 40_000_000
            return mapping.apply(event, now: now, query: query)
        }
    }

    private func prop(_ p: MpvPlayerMapping.Observed, _ v: MpvValue) -> MpvEvent {
        .property(id: p.rawValue, name: p.name, value: v)
    }

    private func startPlaying() -> PlayerItem {
        mapping.noteLoad(entry: 1, path: "/media/ep.mp4")
        let item = PlayerItem(entry: 1, path: "/media/ep.mp4")
        XCTAssertEqual(feed(.startFile(entry: 1), .fileLoaded, prop(.duration, .double(10)), .playbackRestart),
                       [.item(item), .playing(rate: 1)])
        return item
    }

    /// R1: no value is unknown, never false or zero.
    func testUnavailableValuesAreUnknownNotFalseOrZero() {
        _ = startPlaying()
        XCTAssertEqual(feed(prop(.timePos, .double(4))), [])
        XCTAssertEqual(feed(prop(.pause, .unavailable), prop(.timePos, .unavailable), prop(.speed, .unavailable)), [])
        XCTAssertTrue(mapping.snapshot().playing)
        XCTAssertEqual(mapping.snapshot().position, 4)
        XCTAssertEqual(mapping.snapshot().rate, 1)
        XCTAssertEqual(feed(prop(.eofReached, .unavailable)), [], "unknown eof is not the end")
    }

    /// R2: keep-open's pause at the end arrives before eof-reached: still the end, no pause.
    func testKeepOpensPauseBeforeEofReachedIsTheEnd() {
        let item = startPlaying()
        eof = true
        pause = true
        XCTAssertEqual(feed(prop(.pause, .flag(true))), [.ended(item), .item(nil)])
        XCTAssertEqual(feed(prop(.eofReached, .flag(true))), [])
    }

    func testARestartWithoutSeekIsNotASeekAndSeekThenRestartIs() {
        _ = startPlaying()
        XCTAssertEqual(feed(prop(.timePos, .double(3)), .playbackRestart), [])
        timePos = 7
        XCTAssertEqual(feed(.seek, .playbackRestart), [.seeked(from: 3, to: 7)])
    }

    func testAStartPositionIsPartOfLoadingNotASeek() {
        mapping.noteLoad(entry: 1, path: "/media/ep.mp4")
        timePos = 5
        XCTAssertEqual(feed(.startFile(entry: 1), .fileLoaded, .seek, .playbackRestart),
                       [.item(PlayerItem(entry: 1, path: "")), .playing(rate: 1)])
    }

    func testAForeignSeekFromNearTheEndToTheStartWhileLoopingIsAWrap() {
        let item = startPlaying()
        XCTAssertEqual(feed(prop(.loopFile, .string("inf")), prop(.timePos, .double(9.96))), [])
        timePos = 0
        XCTAssertEqual(feed(.seek, .playbackRestart), [.item(item.nextLoop()), .playing(rate: 1)])
        // Our own seek to 0 from near the end is a seek, even while looping.
        XCTAssertEqual(feed(prop(.timePos, .double(9.9))), [])
        mapping.noteOwnSeek()
        XCTAssertEqual(feed(.seek, .playbackRestart), [.seeked(from: 9.9, to: 0)])
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

    func testAReplayAfterTheEndWithKeepOpenIsTheNextLoop() {
        let item = startPlaying()
        XCTAssertEqual(feed(prop(.eofReached, .flag(true))), [.ended(item), .item(nil)])
        eof = false
        timePos = 2
        XCTAssertEqual(feed(.seek, .playbackRestart), [.item(item.nextLoop()), .playing(rate: 1)])
        XCTAssertEqual(feed(prop(.eofReached, .flag(false))), [])
    }

    func testOwnPauseTakesEffectAtOnceAndTheLateNotificationIsNotRepeated() {
        _ = startPlaying()
        pause = true
        XCTAssertEqual(mapping.applyOwnPause(true), [.paused])
        XCTAssertEqual(feed(prop(.pause, .flag(true))), [])
        pause = false
        XCTAssertEqual(mapping.applyOwnPause(false), [.playing(rate: 1)])
        XCTAssertEqual(feed(prop(.pause, .flag(false))), [])
    }

    /// A notification made before our own play() arrives after it: the flag now decides.
    func testAStalePauseNotificationAfterOurOwnPlayIsNoPause() {
        _ = startPlaying()
        pause = true
        XCTAssertEqual(mapping.applyOwnPause(true), [.paused])
        pause = false
        XCTAssertEqual(mapping.applyOwnPause(false), [.playing(rate: 1)])
        XCTAssertEqual(feed(prop(.pause, .flag(true))), [], "the flag is no now: no pause")
    }

    func testAPauseFromElsewhereIsSeen() {
        _ = startPlaying()
        pause = true
        XCTAssertEqual(feed(prop(.pause, .flag(true))), [.paused])
    }

    func testALoadErrorIsAFailureWithMpvsReason() {
        mapping.noteLoad(entry: 3, path: "/media/bad.mp4")
        XCTAssertEqual(feed(.startFile(entry: 3), .endFile(entry: 3, reason: .error(MpvError(code: -17, operation: "play")))), [
            .item(PlayerItem(entry: 3, path: "")), .item(nil),
            .failed(PlayerFailure(entry: 3, path: "/media/bad.mp4", code: "unknown-format",
                                  message: MpvError(code: -17, operation: "").message)),
        ])
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
}
