import AdPlayerDaemon
import AdRuntime
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
