import AdTestSupport
import Foundation
import XCTest

/// `adplayerd ads-check` on the three source kinds, as an operator runs it.
final class AdsCheckTests: XCTestCase {
    private func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
        let result = try runProcess(Executables.adplayerd, ["ads-check"] + arguments, mergeErrors: false)
        return (result.status, String(decoding: result.output, as: UTF8.self))
    }

    private func json(_ text: String) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any])
    }

    func testTheSampleCatalog() throws {
        _ = try Media.path("catalog/catalog.json")
        let (status, output) = try run([repositoryRoot.appendingPathComponent("media/catalog").path, "--json"])
        XCTAssertEqual(status, 0, output)
        let report = try json(output)
        let ads = try XCTUnwrap(report["ads"] as? [[String: Any]])
        XCTAssertEqual(Set(ads.compactMap { $0["id"] as? String }), ["ov-1", "ov-2", "pa-1", "pr-1"])
        XCTAssertEqual(ads.first { $0["id"] as? String == "ov-1" }?["width"] as? Int, 240)
    }

    /// A VMAP tag's plan: its pre-roll and its mid-roll at 6 s beside the overlay and post-roll.
    func testAVMAPTagShowsItsLinearBreaks() throws {
        _ = try Media.path("overlay.png")
        let server = try FixtureServer(script: "vast_server.py")
        defer { server.stop() }
        let (_, output) = try run(["\(server.base)/vast/vmap-episode.xml", "--json"])
        let report = try json(output)
        let ads = try XCTUnwrap(report["ads"] as? [[String: Any]], output)
        XCTAssertEqual(Set(ads.compactMap { $0["kind"] as? String }), ["overlay", "postroll", "preroll", "midroll"], output)
        XCTAssertEqual(ads.first { $0["kind"] as? String == "midroll" }?["at"] as? Double, 6)
    }

    func testAVASTURLResolvesEveryKindItHas() throws {
        _ = try Media.path("overlay.png")
        let server = try FixtureServer(script: "vast_server.py")
        defer { server.stop() }
        let (status, output) = try run(["\(server.base)/vast/inline-both-4.1.xml", "--json"])
        XCTAssertEqual(status, 0, output)
        let report = try json(output)
        let ads = try XCTUnwrap(report["ads"] as? [[String: Any]])
        XCTAssertEqual(Set(ads.compactMap { $0["kind"] as? String }), ["overlay", "pause_ad", "postroll"])
        let pause = try XCTUnwrap(ads.first { $0["kind"] as? String == "pause_ad" })
        XCTAssertEqual(pause["creative"] as? String, "png image")
        XCTAssertEqual(pause["width"] as? Int, 300)
        XCTAssertEqual((pause["tracking"] as? [String: Int])?["impression"], 1)
    }

    func testNothingResolvedExitsOneWithTheVASTCode() throws {
        let server = try FixtureServer(script: "vast_server.py")
        defer { server.stop() }
        let (status, output) = try run(["\(server.base)/vast/wrapper-loop.xml"])
        XCTAssertEqual(status, 1, output)
        XCTAssertTrue(output.contains("[vast-302]"), output)
        let file = try run([repositoryRoot.appendingPathComponent("Tests/Fixtures/vast/version-1.0.xml").path])
        XCTAssertEqual(file.status, 1)
        XCTAssertTrue(file.output.contains("[vast-102]"), file.output)
    }

    func testBadUsageExitsTwo() throws {
        XCTAssertEqual(try run([]).status, 2)
        XCTAssertEqual(try run(["/no/such/source"]).status, 2)
        XCTAssertEqual(try run(["a", "b"]).status, 2)
    }
}
