import AdRuntime
import AdTestSupport
import AdTracking
import Foundation
import XCTest

/// The runtime's events become the creative's beacons, through the outbox, to a real endpoint.
final class TrackingReporterTests: XCTestCase {
    func testAnOverlayAndAPostrollSendTheirBeacons() async throws {
        let server = try FixtureServer(script: "beacon_server.py")
        defer { server.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("reporter-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        var configuration = BeaconOutbox.Configuration()
        configuration.baseDelay = 0.01
        let outbox = try BeaconOutbox(path: directory.appendingPathComponent("adplayerd.sqlite").path, configuration: configuration)
        let reporter = TrackingReporter(outbox: outbox)
        func track(_ names: [String]) -> [String: [String]] {
            Dictionary(uniqueKeysWithValues: names.map { ($0, ["\(server.base)/b/\($0)?e=[ERRORCODE]"]) })
        }
        let source = TestAdSource([
            .overlay: .creative(AdCreative(id: "ov", kind: .overlay, content: .text("hi"), duration: 5,
                                           tracking: track(["impression", "creativeView", "close"]))),
            .postroll: .creative(AdCreative(id: "pr", kind: .postroll, content: .video(location: "pr.mp4"),
                                            tracking: track(["start", "firstQuartile", "midpoint", "thirdQuartile", "complete"]))),
        ])
        let loop = VirtualLoop()
        let player = ScriptedPlayer(loop: loop)
        let surface = RecordingAdSurface()
        let ads = VideoAds(content: ContentInfo(id: "e"), source: source, surface: surface, loop: loop,
                           onEvent: { reporter.record($0) })
        player.load("e.mp4", duration: 10)
        ads.track(player)
        let overlay = try XCTUnwrap(requestAd(ads, .overlay)).get()
        try overlay.show { _ in }
        overlay.close()
        let postroll = try XCTUnwrap(requestAd(ads, .postroll)).get()
        loop.advance(by: 10)
        try postroll.show { _ in }
        let reporterHandle = try XCTUnwrap(surface.reporter(postroll.id))
        for second in 0...4 { reporterHandle.progress(Double(second), of: 4) }
        reporterHandle.finished()
        ads.waitForCallbacks()
        reporter.flush()
        try await outbox.deliverAll(until: Date().addingTimeInterval(30))
        let counts = try server.counts()
        for name in ["impression", "creativeView", "close", "start", "firstQuartile", "midpoint", "thirdQuartile", "complete"] {
            XCTAssertEqual(counts["/b/\(name)?e=-1"], 1, name)
        }
    }

    func testACreativeThatCannotBeShownSendsItsErrorURLsWithTheCode() async throws {
        let server = try FixtureServer(script: "beacon_server.py")
        defer { server.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("reporter-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let outbox = try BeaconOutbox(path: directory.appendingPathComponent("adplayerd.sqlite").path)
        let reporter = TrackingReporter(outbox: outbox)
        let source = TestAdSource([
            .overlay: .creative(AdCreative(id: "bad", kind: .overlay, content: .image(location: "x.png"), duration: 5,
                                           tracking: ["error": ["\(server.base)/b/error?code=[ERRORCODE]"],
                                                      "impression": ["\(server.base)/b/impression"]])),
        ])
        let loop = VirtualLoop()
        let player = ScriptedPlayer(loop: loop)
        let surface = RecordingAdSurface()
        surface.refuse(creativeID: "bad")
        let ads = VideoAds(content: ContentInfo(id: "e"), source: source, surface: surface, loop: loop,
                           onEvent: { reporter.record($0) })
        player.load("e.mp4", duration: 10)
        ads.track(player)
        try XCTUnwrap(requestAd(ads, .overlay)).get().show { _ in }
        ads.waitForCallbacks()
        reporter.flush()
        try await outbox.deliverAll(until: Date().addingTimeInterval(30))
        let counts = try server.counts()
        XCTAssertEqual(counts["/b/error?code=502"], 1)
        XCTAssertNil(counts["/b/impression"], "never on screen: no impression")
    }
}
