import AdRuntime
import AdTestSupport
import XCTest

/// A VideoAds on a virtual player and virtual time, with a test source and surface.
final class Harness: Sendable {
    let loop = VirtualLoop()
    let player: VirtualPlayer
    let source: TestAdSource
    let surface = RecordingAdSurface()
    let log = AdEventLog()
    let ads: VideoAds

    init(content: String = "episode-1", mediaPath: String? = nil, source: TestAdSource = TestAdSource(),
         configure: (inout VideoAdsConfiguration) -> Void = { _ in }) {
        player = VirtualPlayer(loop: loop)
        self.source = source
        var configuration = VideoAdsConfiguration()
        configure(&configuration)
        let log = self.log
        ads = VideoAds(content: ContentInfo(id: content, mediaPath: mediaPath), source: source, surface: surface, loop: loop,
                       configuration: configuration, onEvent: { log.record($0) })
    }

    /// Loads an episode and tracks it, as the seed shows it.
    @discardableResult
    func start(duration: Double = 60) -> PlayerItem {
        let item = player.load("episode.mp4", duration: duration)
        ads.track(player)
        return item
    }

    func ad(_ kind: AdKind, file: StaticString = #filePath, line: UInt = #line) throws -> Ad {
        let result = try XCTUnwrap(requestAd(ads, kind), "no answer", file: file, line: line)
        return try result.get()
    }

    /// Shows `ad` now, recording its end.
    func show(_ ad: Ad) throws(AdError) { try ad.show(didEnd: log.didEnd(ad.id)) }

    /// The event log, once every callback queued so far ran.
    var settled: AdEventLog {
        ads.waitForCallbacks()
        return log
    }

    /// The ends delivered to `ad`'s `didEnd` (after every callback queued so far ran).
    func ends(_ ad: Ad) -> [AdEndReason] {
        ads.waitForCallbacks()
        return log.endReasons(ad.id)
    }
}

func XCTAssertThrowsAdError(_ expected: AdError, _ body: () throws -> Void,
                            file: StaticString = #filePath, line: UInt = #line) {
    do {
        try body()
        XCTFail("expected \(expected), nothing was thrown", file: file, line: line)
    } catch {
        XCTAssertEqual(error as? AdError, expected, file: file, line: line)
    }
}
