import AdRuntime
import AdTestSupport
import Foundation
@_spi(Foreign) import MpvPlayerAdapter
import XCTest

/// Creating, playing and shutting down mpv handles (R5).
final class HandleLifecycleTests: MpvTestCase {
    func testFiftyHandlesInARowLeaveNoThreadsOrDescriptors() throws {
        let file = try Media.path("clip-1s.mp4")
        // One round first: libraries start their own once-per-process threads and files.
        try playOnce(file)
        let threads = Self.count("/proc/self/task")
        let descriptors = Self.count("/proc/self/fd")
        for round in 0..<50 {
            try playOnce(file, round: round)
        }
        XCTAssertTrue(waitUntil { Self.count("/proc/self/task") <= threads },
                      "threads: \(Self.count("/proc/self/task")) after, \(threads) before")
        XCTAssertLessThanOrEqual(Self.count("/proc/self/fd"), descriptors, "file descriptors leaked")
    }

    func testCommandsAfterShutdownAreRefusedNotSentToMpv() throws {
        let (player, _) = try makePlayer()
        player.shutdown()
        XCTAssertThrowsError(try player.load(Media.path("episode-1.mp4"))) { error in
            XCTAssertEqual((error as? MpvError)?.name, "uninitialized", "\(error)")
        }
        XCTAssertThrowsError(try player.pause())
        XCTAssertThrowsError(try player.seek(1))
        XCTAssertThrowsError(try player.makeForeignClient(name: "late"), "no client of a core that is gone")
        XCTAssertEqual(player.snapshot(), .empty)
        player.shutdown()   // idempotent
    }

    func testMpvQuittingByItselfIsHandled() throws {
        let (player, recorder) = try makePlayer()
        try player.load(Media.path("episode-long.mp4"))
        XCTAssertNotNil(recorder.next { $0.isPlaying })
        let client = try player.makeForeignClient(name: "quitter")
        try client.command(["quit"])
        client.close()
        XCTAssertNotNil(recorder.next { $0 == .item(nil) }, "the item goes when mpv quits")
        player.shutdown()   // joins the thread that already saw SHUTDOWN; must not hang
    }

    func testUnknownOptionIsAClearError() {
        var configuration = MpvPlayerConfiguration()
        configuration.extraOptions = [("no-such-option", "1")]
        XCTAssertThrowsError(try MpvPlayer(configuration: configuration)) { error in
            XCTAssertEqual((error as? MpvError)?.name, "option-not-found", "\(error)")
            XCTAssertTrue("\(error)".contains("no-such-option"), "\(error)")
        }
    }

    private func playOnce(_ file: String, round: Int = -1) throws {
        var configuration = MpvPlayerConfiguration()
        configuration.untimed = true
        let logs = self.logs
        let player = try MpvPlayer(configuration: configuration) { logs.record($0) }
        let recorder = PlayerRecorder()
        let observation = player.addObserver(recorder)
        try player.load(file)
        XCTAssertNotNil(recorder.next { $0.isEnded }, "round \(round)")
        observation.cancel()
        player.shutdown()
    }

    private static func count(_ directory: String) -> Int {
        (try? FileManager.default.contentsOfDirectory(atPath: directory).count) ?? -1
    }
}
