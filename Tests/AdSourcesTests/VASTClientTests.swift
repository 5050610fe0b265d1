import AdRuntime
import AdSources
import AdTestSupport
import Foundation
import XCTest

/// The VAST client against fixtures written for this project, served on loopback
/// (Tests/Fixtures/vast_server.py): each version, inline and wrapper chains, non-linear and
/// linear, every macro, every error code it reports.
final class VASTClientTests: XCTestCase {
    private var server: FixtureServer!
    private var cache: URL!
    private let errorBeacons = StringLog()

    override func setUpWithError() throws {
        _ = try Media.path("overlay.png")   // the media the fixtures point at
        server = try FixtureServer(script: "vast_server.py")
        cache = FileManager.default.temporaryDirectory.appendingPathComponent("vast-cache-\(UUID().uuidString)")
        errorBeacons.list.withLock { $0 = [] }
    }

    override func tearDownWithError() throws {
        server.stop()
        try? FileManager.default.removeItem(at: cache)
    }

    private func client(_ tag: String, firstTimeout: Double = 8, wrapperTimeout: Double = 1) -> VASTClient {
        var configuration = VASTClient.Configuration()
        configuration.firstTimeout = firstTimeout
        configuration.wrapperTimeout = wrapperTimeout
        let beacons = errorBeacons
        return VASTClient(tag: tag.hasPrefix("http") ? tag : "\(server.base)/vast/\(tag)", cacheDirectory: cache,
                          configuration: configuration, onErrorURLs: { urls, context in
                              beacons.list.withLock { $0 += urls.map { Macros.expand($0, context, MacroPolicy()) } }
                          })
    }

    private func request(_ kind: AdKind, at position: Double = 12.5) -> AdRequest {
        AdRequest(content: ContentInfo(id: "episode-1"), kind: kind, position: position)
    }

    private func expectVASTError(_ code: VASTErrorCode, _ tag: String, _ kind: AdKind = .overlay,
                                 file: StaticString = #filePath, line: UInt = #line) async {
        do {
            _ = try await client(tag).resolve(request(kind))
            XCTFail("\(tag): no error", file: file, line: line)
        } catch let error as VASTError {
            XCTAssertEqual(error.code, code, "\(tag): \(error)", file: file, line: line)
        } catch {
            XCTFail("\(tag): \(error)", file: file, line: line)
        }
    }

    func testANonLinearInline42IsAnOverlayWithItsImageDownloadedAndItsTracking() async throws {
        let resolution = try await XCTUnwrapAsync(await client("inline-nonlinear-4.2.xml").resolve(request(.overlay)))
        let creative = resolution.creative
        XCTAssertEqual(creative.id, "nl-42")
        XCTAssertEqual(creative.duration, 7.5, "minSuggestedDuration")
        guard case .image(let path, let width, let height) = creative.content else { return XCTFail("\(creative.content)") }
        XCTAssertEqual(width, 200)
        XCTAssertEqual(height, 100)
        XCTAssertTrue(path.hasPrefix(cache.path), "downloaded into the cache: \(path)")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), try Data(contentsOf: repositoryRoot.appendingPathComponent("media/overlay.png")))
        XCTAssertEqual(creative.tracking["impression"]?.count, 2, "every Impression")
        XCTAssertEqual(creative.tracking["creativeView"], ["\(server.base)/b/creativeView"])
        XCTAssertEqual(creative.tracking["close"], ["\(server.base)/b/close"])
        XCTAssertEqual(creative.tracking["error"]?.count, 1)
    }

    func testALinearInline30IsAPostrollWithAProgressiveMP4() async throws {
        let creative = try await XCTUnwrapAsync(await client("inline-linear-3.0.xml").ad(for: request(.postroll)))
        XCTAssertEqual(creative.content, .video(location: "\(server.base)/media/postroll.mp4"))
        for event in ["start", "firstQuartile", "midpoint", "thirdQuartile", "complete"] {
            XCTAssertEqual(creative.tracking[event]?.count, 1, event)
        }
    }

    func testVAST20And40And41() async throws {
        let v20 = try await XCTUnwrapAsync(await client("inline-nonlinear-2.0.xml").ad(for: request(.pauseAd)))
        guard case .image(_, 300, 200) = v20.content else { return XCTFail("\(v20.content)") }
        for version in ["4.0", "4.1"] {
            let postroll = try await XCTUnwrapAsync(await client("inline-both-\(version).xml").ad(for: request(.postroll)))
            XCTAssertEqual(postroll.content, .video(location: "\(server.base)/media/postroll.mp4"), version)
            let pause = try await XCTUnwrapAsync(await client("inline-both-\(version).xml").ad(for: request(.pauseAd)))
            guard case .image = pause.content else { return XCTFail(version) }
        }
    }

    func testAWrapperChainMergesEveryWrappersTracking() async throws {
        let resolution = try await XCTUnwrapAsync(await client("wrapper-4.1.xml").resolve(request(.overlay)))
        XCTAssertEqual(resolution.chain.count, 3)
        let impressions = resolution.creative.tracking["impression"] ?? []
        XCTAssertEqual(Set(impressions.map { URL(string: $0)!.path }),
                       ["/b/impression-wrapper-1", "/b/impression-wrapper-2", "/b/impression-a", "/b/impression-b"])
        XCTAssertEqual(resolution.creative.tracking["creativeView"]?.count, 2, "the wrapper's and the inline's")
        XCTAssertEqual(resolution.creative.tracking["error"]?.count, 3)
    }

    func testAnEmptyResponseIsNoFillAndReports303() async throws {
        let nothing = try await client("empty.xml").resolve(request(.overlay))
        XCTAssertNil(nothing)
        XCTAssertEqual(errorBeacons.list.withLock { $0 }, ["\(server.base)/b/error-empty?code=303"])
    }

    func testErrorCodes() async throws {
        await expectVASTError(.wrapperLimit, "wrapper-loop.xml")
        await expectVASTError(.wrapperError, "wrapper-to-500.xml")
        await expectVASTError(.wrapperTimeout, "wrapper-to-slow.xml")
        await expectVASTError(.noAdsAfterWrapper, "wrapper-to-empty.xml")
        await expectVASTError(.xmlParsing, "wrapper-to-garbage.xml")
        await expectVASTError(.xmlParsing, "wrapper-to-huge.xml")
        await expectVASTError(.unsupportedVersion, "version-1.0.xml")
        await expectVASTError(.schemaValidation, "not-vast.xml")
        await expectVASTError(.schemaValidation, "wrapper-without-uri.xml")
        await expectVASTError(.noSupportedNonLinear, "html-only-nonlinear.xml", .pauseAd)
        await expectVASTError(.noSupportedMedia, "streaming-only-linear.xml", .postroll)
        await expectVASTError(.undefined, "\(server.base)/status/500")
        await expectVASTError(.noSupportedNonLinear, "inline-linear-3.0.xml", .overlay)
        await expectVASTError(.nonLinearFetchFailed, "nonlinear-missing-image.xml", .overlay)
        await expectVASTError(.wrapperError, "wrapper-to-redirect-loop.xml")
    }

    func testAnHTMLNonLinearIsAnHTMLOverlay() async throws {
        let creative = try await XCTUnwrapAsync(await client("html-only-nonlinear.xml").ad(for: request(.overlay)))
        XCTAssertEqual(creative.content, .html(url: "https://ads.example/overlay/slot-7"))
    }

    func testTheErrorURLsOfTheWholeChainCarryTheCode() async throws {
        await expectVASTError(.wrapperLimit, "wrapper-loop.xml")
        let sent = errorBeacons.list.withLock { $0 }
        XCTAssertEqual(sent.count, 6, "one per document: the tag and the five wrappers followed")
        XCTAssertTrue(sent.allSatisfy { $0.hasSuffix("code=302") }, "\(sent)")
    }

    func testMacros() {
        let now = Date(timeIntervalSince1970: 1_800_000_000.25)
        let url = "https://t.example/e?c=[ERRORCODE]&t=[TIMESTAMP]&cb=[CACHEBUSTING]&cp=[CONTENTPLAYHEAD]&ap=[ADPLAYHEAD]&mp=[MEDIAPLAYHEAD]"
        let expanded = Macros.expand(url, MacroContext(contentPlayhead: 3723.5, adPlayhead: 1.25, errorCode: 405, timestamp: now), MacroPolicy())
        let query = Dictionary(uniqueKeysWithValues: URLComponents(string: expanded)!.queryItems!.map { ($0.name, $0.value ?? "") })
        XCTAssertEqual(query["c"], "405")
        XCTAssertEqual(query["t"], "2027-01-15T08:00:00.250Z")
        XCTAssertEqual(query["cb"]?.count, 8)
        XCTAssertTrue(query["cb"]?.allSatisfy(\.isNumber) == true)
        XCTAssertEqual(query["cp"], "01:02:03.500")
        XCTAssertEqual(query["ap"], "00:00:01.250")
        XCTAssertEqual(query["mp"], "01:02:03.500")
        let unknown = Macros.expand("https://t.example/e?c=[ERRORCODE]&cp=[CONTENTPLAYHEAD]&x=[WHATEVER]", MacroContext(), MacroPolicy())
        XCTAssertEqual(unknown, "https://t.example/e?c=-1&cp=-1&x=-1")
        // A request's own context: the content id, the kind, where the content is.
        let tag = Macros.expand("https://ads.example/vast?cid=[CONTENTID]&pos=[BREAKPOSITION]&plc=[PLACEMENTTYPE]",
                                MacroContext(contentID: "s01/e02", kind: .postroll), MacroPolicy())
        XCTAssertEqual(tag, "https://ads.example/vast?cid=s01%2Fe02&pos=3&plc=1")
        // An IPv6 host is no macro.
        XCTAssertEqual(Macros.expand("http://[::1]:8080/b?x=1", MacroContext(), MacroPolicy()), "http://[::1]:8080/b?x=1")
    }

    func testOnlyHTTPTagsAreFetched() async {
        await expectVASTError(.undefined, "file:///etc/passwd")
    }
}

func XCTUnwrapAsync<T>(_ value: T?, file: StaticString = #filePath, line: UInt = #line) async throws -> T {
    try XCTUnwrap(value, file: file, line: line)
}

final class StringLog: Sendable {
    let list = Locked<[String]>([])
}
