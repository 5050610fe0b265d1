import AdRuntime
import AdTestSupport
import Foundation
@_spi(Foreign) import MpvPlayerAdapter
import XCTest

/// Missing, empty, truncated and random-bytes files: a clear error value, and the same
/// handle then plays a good file.
final class BadMediaTests: MpvTestCase {
    func testFilesThatCannotBeOpenedAreRefusedAtLoad() throws {
        let (player, recorder) = try makePlayer { $0.untimed = true }
        let cases: [(String, String)] = [
            (repositoryRoot.appendingPathComponent("media/no-such-episode.mp4").path, "not-found"),
            (try Media.path("empty.mp4"), "empty"),
            (repositoryRoot.appendingPathComponent("media").path, "not-a-file"),
        ]
        for (path, code) in cases {
            XCTAssertThrowsError(try player.load(path), path) { error in
                let failure = error as? PlayerFailure
                XCTAssertEqual(failure?.code, code, "\(error)")
                XCTAssertTrue(failure?.message.contains(path) == true, "the message names the file: \(error)")
            }
        }
        try assertPlaysAGoodFile(player, recorder)
    }

    func testFilesMpvCannotPlayFailWithMpvsReason() throws {
        logs.expectError(containing: "Failed to recognize file format")
        logs.expectError(containing: "moov atom not found")
        logs.expectError(containing: "avformat_open_input() failed")
        let (player, recorder) = try makePlayer { $0.untimed = true }
        for (name, codes) in [("random-bytes.mp4", ["unknown-format"]), ("truncated.mp4", ["unknown-format", "loading-failed"])] {
            let before = recorder.count
            let entry = try player.load(Media.path(name))
            let failed = try XCTUnwrap(recorder.next(after: before) { $0.isFailed }, name)
            guard case .failed(let failure) = failed.change else { return XCTFail() }
            XCTAssertEqual(failure.entry, entry)
            XCTAssertEqual(failure.path, try Media.path(name))
            XCTAssertTrue(codes.contains(failure.code), "\(name): \(failure)")
            XCTAssertFalse(failure.message.isEmpty)
            XCTAssertNil(player.snapshot().item, "a failed entry leaves no item")
            XCTAssertFalse(recorder.changes.dropFirst(before).contains { $0.isPlaying }, "\(name) never plays")
        }
        XCTAssertFalse(logs.all.filter(\.isError).isEmpty, "mpv logged the failures as errors")
        try assertPlaysAGoodFile(player, recorder)
    }

    /// The guard itself: an mpv error that a test did not declare fails it.
    func testAnUnexpectedMpvErrorIsCaught() throws {
        let (player, recorder) = try makePlayer { $0.untimed = true }
        try player.load(Media.path("random-bytes.mp4"))
        XCTAssertNotNil(recorder.next { $0.isFailed })
        XCTAssertTrue(waitUntil { !self.logs.unexpectedErrors.isEmpty }, "mpv logged no error for random bytes")
        XCTAssertTrue(logs.unexpectedErrors.contains { $0.text.contains("Failed to recognize file format") })
        // Declared now, so that tearDown passes: the point was that it was caught.
        logs.expectError(containing: "Failed to recognize file format")
        XCTAssertEqual(logs.unexpectedErrors, [])
    }

    private func assertPlaysAGoodFile(_ player: MpvPlayer, _ recorder: PlayerRecorder,
                                      file: StaticString = #filePath, line: UInt = #line) throws {
        let before = recorder.count
        let entry = try player.load(Media.path("episode-1.mp4"))
        XCTAssertNotNil(recorder.next(after: before) { $0.isPlaying }, file: file, line: line)
        XCTAssertNotNil(recorder.next(after: before) { $0.isEnded }, file: file, line: line)
        XCTAssertEqual(recorder.changes.dropFirst(before).filter(\.isFailed), [], file: file, line: line)
        XCTAssertNotNil(recorder.changes.first { $0 == .ended(PlayerItem(entry: entry, path: "")) }, file: file, line: line)
    }
}
