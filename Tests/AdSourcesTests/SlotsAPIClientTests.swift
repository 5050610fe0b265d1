import AdRuntime
import AdSources
import AdTestSupport
import Foundation
import XCTest

final class SlotsAPIClientTests: XCTestCase {
    private var server: FixtureServer!

    override func setUpWithError() throws { server = try FixtureServer(script: "slots_server.py") }
    override func tearDownWithError() throws { server.stop() }

    private func client(token: String = "test-token") -> SlotsAPIClient {
        SlotsAPIClient(endpoint: URL(string: server.base)!, token: token)
    }

    private func overlay(_ title: String, at position: Double = 0, token: String = "test-token") async throws -> AdCreative? {
        try await client(token: token).ad(for: AdRequest(content: ContentInfo(id: title), kind: .overlay, position: position))
    }

    func testSlotsBecomeHTMLOverlaysAtTheirTimes() async throws {
        let first = try await overlay("episode-1")
        XCTAssertEqual(first, AdCreative(id: "s-1", kind: .overlay, content: .html(url: "\(server.base)/overlay/s-1"), duration: 8, slotStart: 5,
                                           source: "slots"))
        let second = try await overlay("episode-1", at: 13)
        XCTAssertEqual(second?.id, "s-2")
        let none = try await overlay("episode-1", at: 21)
        XCTAssertNil(none)
        // The creative is served where the slot says, with the CTA message of the API.
        let html = String(decoding: try server.get("/overlay/s-1"), as: UTF8.self)
        XCTAssertTrue(html.contains(SlotsAPIClient.Fields.clickMessageType))
    }

    func testNoSlotsIsNoFillAndOtherKindsAreNotFromThisAPI() async throws {
        let none = try await overlay("episode-9")
        XCTAssertNil(none)
        let pause = try await client().ad(for: AdRequest(content: ContentInfo(id: "episode-1"), kind: .pauseAd, position: 0))
        XCTAssertNil(pause)
    }

    func testAWrongTokenAndGarbageAreClearErrors() async throws {
        do {
            _ = try await overlay("episode-1", token: "wrong")
            XCTFail("no error")
        } catch let error as SlotsAPIClient.APIError {
            XCTAssertTrue(error.message.contains("HTTP 401"), error.message)
        }
        do {
            _ = try await overlay("episode-garbage")
            XCTFail("no error")
        } catch let error as SlotsAPIClient.APIError {
            XCTAssertTrue(error.message.contains("not a JSON object"), error.message)
        }
    }
}
