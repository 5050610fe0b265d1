import AdTestSupport
import Foundation
import XCTest

/// Loop affinity holds in release builds (SPEC R18): a loop-owned type's public entry point
/// called off the player's loop traps, in the build that ships — not only under `assert` in
/// debug. `make test` builds the release `adplayerd-dev` first; each probe runs it in a child
/// process and sees it die on the check.
final class LoopAffinityReleaseTests: XCTestCase {
    /// The release build of the developer's tools (`make test` builds it: `swift build -c release --product adplayerd-dev`).
    static let releaseTool = repositoryRoot.appendingPathComponent(".build/release/adplayerd-dev").path

    func testAnEntryPointCalledOffTheLoopTrapsInTheReleaseBuild() throws {
        XCTAssertTrue(FileManager.default.isExecutableFile(atPath: Self.releaseTool),
                      "\(Self.releaseTool) is missing: `make test` builds it (swift build -c release --product adplayerd-dev)")
        for probe in ["controller", "surface", "feed", "timer"] {
            let result = try runProcess(Self.releaseTool, ["off-loop", probe])
            let output = String(decoding: result.output + result.errors, as: UTF8.self)
            XCTAssertNotEqual(result.status, 0, "\(probe): the release build ran on after an off-loop call: \(output)")
            XCTAssertTrue(output.contains("called off the player's loop"), "\(probe): \(output)")
            XCTAssertFalse(output.contains("no trap"), "\(probe): \(output)")
        }
    }
}
