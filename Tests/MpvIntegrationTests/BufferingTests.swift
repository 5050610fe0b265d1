import AdRuntime
import AdTestSupport
import Foundation
@_spi(Foreign) import MpvPlayerAdapter
import XCTest

/// Buffering counts as playing (SPEC §2): a stream served slower than its bitrate makes
/// mpv stall for its cache (`paused-for-cache`), which is not a pause.
final class BufferingTests: MpvTestCase {
    func testBufferingFromAThrottledServerIsStillPlaying() throws {
        let server = try FixtureServer(script: "throttled_http.py", arguments: [Media.path("stream-60s.mp4"), "12000"])
        defer { server.stop() }
        let (player, recorder) = try makePlayer {
            $0.extraOptions = [("cache", "yes"), ("cache-pause-wait", "0.5"), ("demuxer-readahead-secs", "1")]
        }
        try player.load("http://127.0.0.1:\(server.port)/stream.mp4")
        XCTAssertNotNil(recorder.next(timeout: 30) { $0.isPlaying }, "the stream never started")
        // Watch mpv itself until it has stalled for the cache at least once, then resumed.
        let mpv = try player.makeForeignClient(name: "observer")
        defer { mpv.close() }
        var sawStall = false
        let resumedAfterStall = waitUntil(timeout: 60) {
            let stalled = (try? mpv.get("paused-for-cache", as: .flag))?.flag == true
            if stalled { sawStall = true }
            return sawStall && !stalled
        }
        XCTAssertTrue(sawStall, "mpv never buffered; the test proves nothing")
        XCTAssertTrue(resumedAfterStall)
        XCTAssertFalse(recorder.changes.contains(.paused), "buffering was reported as a pause: \(recorder.changes)")
        XCTAssertTrue(player.snapshot().playing)
        XCTAssertEqual(recorder.changes.filter(\.isSeek), [], "a stall and catch-up is not a seek")
        XCTAssertEqual(logs.unexpectedErrors, [], "mpv errors while buffering")
        // Shutting down cuts the stream in the middle of a packet, which the decoder may
        // log; that is the test's doing. And before the server goes, or mpv logs the loss.
        logs.expectError(containing: "Invalid NAL unit size")
        logs.expectError(containing: "missing picture in access unit")
        player.shutdown()
    }
}

