import AdPlayerDaemon
import AdRuntime
import AdTestSupport
import Foundation
import XCTest

/// `ad-loudness` (R28) as an operator writes it: `match` by default, `target LUFS`, `off`;
/// `ad-loudnorm` kept as the alias it was (`yes`: a fixed -24 LUFS; `no`: as mastered); a value
/// that is not one of them refused with what is allowed.
final class LoudnessConfigurationTests: XCTestCase {
    func testR28AdLoudnessIsMatchByDefaultAndTakesATargetOrOff() throws {
        XCTAssertEqual(try Configuration.load(arguments: []).adLoudness, .match)
        XCTAssertEqual(try Configuration.load(arguments: ["--ad-loudness", "target -23"]).adLoudness, .target(-23))
        XCTAssertEqual(try Configuration.load(arguments: ["--ad-loudness", "OFF"]).adLoudness, .off)
        XCTAssertEqual(try Configuration.load(arguments: ["--ad-loudnorm"]).adLoudness, .target(-24), "the old switch: a fixed -24 LUFS")
        let folder = NSTemporaryDirectory() + "loudness-config-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try Data("ad-loudness = target -16.5\n".utf8).write(to: URL(fileURLWithPath: folder + "/a.conf"))
        XCTAssertEqual(try Configuration.load(arguments: ["--config", folder + "/a.conf"]).adLoudness, .target(-16.5))
        try Data("ad-loudnorm = no\n".utf8).write(to: URL(fileURLWithPath: folder + "/b.conf"))
        XCTAssertEqual(try Configuration.load(arguments: ["--config", folder + "/b.conf"]).adLoudness, .off)
        for bad in ["loud", "target", "target -3", "target -90", "target nan", "target -24 LUFS", "match please"] {
            XCTAssertThrowsError(try Configuration.load(arguments: ["--ad-loudness", bad]), bad) { error in
                XCTAssertTrue("\(error)".contains("ad-loudness"), "\(error)")
            }
        }
    }
}

/// R28 in the controller (virtual player and time): an episode's loudness is asked for when it
/// starts, and the next episode's too, so that its pre-roll matches it at its first viewing;
/// nothing is asked of a stream.
final class LoudnessControllerTests: XCTestCase {
    func testR28AnEpisodeAndTheNextOneAreMeasuredAhead() throws {
        let book = RefreshLog()
        var configuration = VideoAdsConfiguration()
        configuration.loudnessSource = book
        let h = try ControllerHarness(source: nil, pauseAdDelay: 0, adsConfiguration: configuration)
        for path in ["/lib/a.mp4", "/lib/b.mp4"] { h.player.setMedia(path, duration: 10) }
        h.start()
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/a.mp4"), QueueEntry(path: "/lib/b.mp4"),
                                                     QueueEntry(path: "http://example.invalid/c.mp4")]) }
        h.advance(1)
        XCTAssertEqual(book.refreshed, ["/lib/a.mp4", "/lib/b.mp4"], "the episode, then the next one")
        h.advance(10)
        XCTAssertEqual(book.refreshed, ["/lib/a.mp4", "/lib/b.mp4", "/lib/b.mp4"], "b starts; the next is a stream: not asked")
    }
}

/// A loudness source that records what it is asked to refresh (on the loop).
private final class RefreshLog: LoudnessSource {
    private let asked = Locked<[String]>([])
    var refreshed: [String] { asked.withLock { $0 } }
    func measure(_ path: String) async -> Loudness? { nil }
    func known(_ path: String) -> Loudness? { nil }
    func refresh(_ path: String) { asked.withLock { $0.append(path) } }
}

/// R27's keys as an operator writes them: `screensaver-after` (5 min by default, or `none`),
/// `screensaver-rotate` (30 s by default, at least 5).
final class ScreensaverConfigurationTests: XCTestCase {
    func testR27ScreensaverAfterAndRotateAreReadAndBounded() throws {
        let defaults = try Configuration.load(arguments: [])
        XCTAssertEqual(defaults.screensaverAfter, 300)
        XCTAssertEqual(defaults.screensaverRotate, 30)
        XCTAssertNil(try Configuration.load(arguments: ["--screensaver-after", "none"]).screensaverAfter)
        XCTAssertEqual(try Configuration.load(arguments: ["--screensaver-after", "00:10:00"]).screensaverAfter, 600)
        XCTAssertEqual(try Configuration.load(arguments: ["--screensaver-rotate", "45"]).screensaverRotate, 45)
        for (key, bad) in [("screensaver-after", "soon"), ("screensaver-rotate", "2"), ("screensaver-rotate", "none")] {
            XCTAssertThrowsError(try Configuration.load(arguments: ["--" + key, bad]), "\(key) \(bad)") { error in
                XCTAssertTrue("\(error)".contains(key), "\(error)")
            }
        }
    }
}
