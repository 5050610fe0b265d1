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
    private var cache: CreativeCache!
    private let errorBeacons = StringLog()

    override func setUpWithError() throws {
        _ = try Media.path("overlay.png")   // the media the fixtures point at
        server = try FixtureServer(script: "vast_server.py")
        cache = try CreativeCache.temporary()
        errorBeacons.list.withLock { $0 = [] }
    }

    override func tearDownWithError() throws {
        server.stop()
        try? FileManager.default.removeItem(atPath: cache.folder)
    }

    /// An ad kept for when the server cannot be reached remembers its `<Advertiser>` and
    /// `<Category>`: separation holds for it as for a served one.
    func testAKeptAdRemembersItsAdvertiserForSeparation() async throws {
        let online = try await XCTUnwrapAsync(await client("separation-buffet.xml").ad(for: request(.overlay)))
        XCTAssertEqual(online.advertiser, "Autos")
        try server.get("/_down")
        defer { try? server.get("/_up") }
        let kept = try await XCTUnwrapAsync(await client("separation-buffet.xml").ad(for: request(.overlay)))
        XCTAssertEqual(kept.source, "vast-cache")
        XCTAssertEqual(kept.advertiser, "Autos")
        XCTAssertEqual(kept.categories, ["IAB2"])
        let separation = AdSeparation(seconds: 300, clock: VirtualScheduleClock(wall: Date()))
        separation.record(advertiser: "autos", categories: [])
        let separated = Locked(0)
        do {
            _ = try await client("separation-buffet.xml", separation: separation,
                                 onSeparated: { _ in separated.withLock { $0 += 1 } }).ad(for: request(.overlay))
            XCTFail("a kept ad of a separated advertiser is not shown")
        } catch is VASTError {
            XCTAssertEqual(separated.withLock { $0 }, 1)
        }
    }

    private func client(_ tag: String, firstTimeout: Double = 8, wrapperTimeout: Double = 1, offlineLifetime: Double = 86_400,
                        cache: CreativeCache? = nil, popDeadline: Double? = nil, separation: AdSeparation? = nil,
                        onSeparated: (@Sendable (AdKind) -> Void)? = nil) -> VASTClient {
        var configuration = VASTClient.Configuration()
        configuration.popDeadline = popDeadline
        configuration.separation = separation
        configuration.onSeparated = onSeparated
        configuration.firstTimeout = firstTimeout
        configuration.wrapperTimeout = wrapperTimeout
        configuration.offlineLifetime = offlineLifetime
        let cache = cache ?? self.cache!
        let beacons = errorBeacons
        return VASTClient(tag: tag.hasPrefix("http") ? tag : "\(server.base)/vast/\(tag)", cache: cache,
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
        XCTAssertTrue(path.hasPrefix(cache.folder), "downloaded into the cache: \(path)")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), try Data(contentsOf: repositoryRoot.appendingPathComponent("media/overlay.png")))
        XCTAssertEqual(creative.tracking["impression"]?.count, 2, "every Impression")
        XCTAssertEqual(creative.tracking["creativeView"], ["\(server.base)/b/creativeView"])
        XCTAssertEqual(creative.tracking["close"], ["\(server.base)/b/close"])
        XCTAssertEqual(creative.tracking["error"]?.count, 1)
    }

    /// R26: a NonLinear whose creative carries the squeezeback extension fills the overlay
    /// chain's slot as a squeezeback in its layout; a bad value in it is the document's error.
    func testR26ANonLinearMarkedAsASqueezebackIsOneInItsLayout() async throws {
        let resolution = try await XCTUnwrapAsync(await client("squeezeback.xml").resolve(request(.overlay)))
        let creative = resolution.creative
        XCTAssertEqual(creative.kind, .squeezeback)
        XCTAssertEqual(creative.squeezeback, SqueezebackLayout(shape: .lLeft, scale: 0.75, transition: 0.5, background: 0x102030))
        XCTAssertEqual(creative.duration, 4)
        XCTAssertEqual(creative.tracking["firstQuartile"], ["\(server.base)/b/sq-firstQuartile"])
        let pause = try await XCTUnwrapAsync(await client("squeezeback.xml").resolve(request(.pauseAd)))
        XCTAssertEqual(pause.creative.kind, .pauseAd, "asked for a pause ad, the same image is one")
        XCTAssertNil(pause.creative.squeezeback)
        await expectVASTError(.schemaValidation, "squeezeback-bad-scale.xml")
    }

    /// R27: a linear ad's icons, AdChoices first, each with its place, time and view tracking;
    /// its fallback image never fetched; an icon with no place or no image left out.
    func testR27ALinearAdsIconsAreKeptAdChoicesFirst() async throws {
        let resolution = try await XCTUnwrapAsync(await client("linear-icons.xml").resolve(request(.postroll)))
        let icons = resolution.creative.icons
        XCTAssertEqual(icons.map(\.program), ["AdChoices", "Sponsor"])
        XCTAssertEqual(icons[0].x, .end)
        XCTAssertEqual(icons[0].y, .start)
        XCTAssertEqual(icons[0].width, 60)
        XCTAssertEqual(icons[0].offset, 0)
        XCTAssertEqual(icons[0].duration, 5)
        XCTAssertEqual(icons[0].clickThrough, "https://example.com/why-this-ad")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: icons[0].image)),
                       try Data(contentsOf: repositoryRoot.appendingPathComponent("media/overlay.png")), "fetched with the ad")
        XCTAssertEqual(icons[1].offset, 0.5)
        XCTAssertNil(icons[1].duration, "until the ad ends")
        XCTAssertEqual(resolution.creative.tracking[AdIcon.viewEvent(0)]?.first?.hasPrefix("\(server.base)/b/icon-view-adchoices?t="), true)
        XCTAssertEqual(resolution.creative.tracking[AdIcon.viewEvent(1)], ["\(server.base)/b/icon-view-sponsor"])
        XCTAssertNil(try server.requests()["/media/never-fetched.png"], "no pointer: the fallback image is not fetched")
    }

    /// R26 from VMAP: a nonlinear break whose ad is marked as a squeezeback is one, at its break's time.
    func testR26AVMAPNonlinearBreakMarkedAsASqueezebackIsOneAtItsTime() async throws {
        let vast = client("vmap-squeezeback.xml")
        let request = AdRequest(content: ContentInfo(id: "episode-1", duration: 30), kind: .overlay, position: 0)
        let creative = try await XCTUnwrapAsync(await vast.ad(for: request))
        XCTAssertEqual(creative.kind, .squeezeback)
        XCTAssertEqual(creative.slotStart, 3)
        XCTAssertEqual(creative.squeezeback?.shape, .lLeft)
        XCTAssertEqual(creative.tracking["breakStart"], ["\(server.base)/b/break-start?break=sq"])
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
            // The same MediaFile: streamed the first time (and cached meanwhile), then maybe from the cache.
            let postroll = try await XCTUnwrapAsync(await client("inline-both-\(version).xml").ad(for: request(.postroll)))
            guard case .video(let location) = postroll.content else { return XCTFail("\(postroll.content)") }
            if location.hasPrefix("http") {
                XCTAssertEqual(location, "\(server.base)/media/postroll.mp4", version)
            } else {
                XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: location)), try Data(contentsOf: repositoryRoot.appendingPathComponent("media/postroll.mp4")))
            }
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

    // MARK: Pods, the buffet, the cache, offline, prefetch

    /// A pod plays in its sequence (not the file's order); its second ad has nothing mpv plays,
    /// so the response's stand-alone ad takes its place and the failed ad's Error URL carries
    /// 403; `about:blank` is no impression; the serving id is kept for `[ADSERVINGID]`.
    func testAPodPlaysInOrderAndAFailedAdIsReplacedFromTheBuffet() async throws {
        let vast = client("pod-buffet.xml")
        var served: [(String, Int)] = []
        for position in 0..<4 {
            let request = AdRequest(content: ContentInfo(id: "episode-1"), kind: .postroll, position: 4, podPosition: position)
            guard let creative = try await vast.ad(for: request) else { break }
            served.append((creative.id, creative.podRemaining))
            if creative.id == "pod-1" {
                XCTAssertEqual(creative.tracking["impression"], ["\(server.base)/b/imp-pod-1"], "about:blank is left out")
            }
            if creative.id == "pod-3" { XCTAssertEqual(creative.adServingID, "serving/3 a&b") }
        }
        XCTAssertEqual(served.map(\.0), ["pod-1", "buffet-1", "pod-3"])
        XCTAssertEqual(served.map(\.1), [2, 1, 0])
        XCTAssertEqual(errorBeacons.list.withLock { $0 }, ["\(server.base)/b/err-pod-2?code=403"])
    }

    /// Creatives come from the cache: an image is fetched once for any number of requests, and
    /// the file is the bytes served; a post-roll streams the first time and plays from the cache
    /// the next.
    func testCreativesAreFetchedOnceAndPlayedFromTheCache() async throws {
        let vast = client("inline-both-4.1.xml")
        for _ in 0..<3 { _ = try await vast.ad(for: request(.pauseAd)) }
        XCTAssertEqual(try server.requests()["/media/pause.png"], 1)
        let first = try await XCTUnwrapAsync(await vast.ad(for: request(.postroll)))
        XCTAssertEqual(first.content, .video(location: "\(server.base)/media/postroll.mp4"), "not cached yet: streamed")
        XCTAssertTrue(waitUntil(timeout: 20) { self.cache.file(for: "\(self.server.base)/media/postroll.mp4") != nil }, "cached meanwhile")
        let second = try await XCTUnwrapAsync(await vast.ad(for: request(.postroll)))
        guard case .video(let path) = second.content else { return XCTFail("\(second.content)") }
        XCTAssertTrue(path.hasPrefix(cache.folder + "/objects/"), path)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), try Data(contentsOf: repositoryRoot.appendingPathComponent("media/postroll.mp4")))
    }

    /// While the server cannot be reached, an ad it served is shown again from the cache until
    /// its Expires — by a new client on the same cache too (a restart) — and not once expired
    /// (a lifetime of 0 for an ad without Expires: never).
    func testWithTheServerDownAnAdWithinItsLifetimeIsServedFromTheCache() async throws {
        let online = try await XCTUnwrapAsync(await client("overlay-expiring.xml").ad(for: request(.overlay)))
        XCTAssertEqual(online.source, "vast")
        try server.get("/_down")
        let restarted = client("overlay-expiring.xml")
        let offline = try await XCTUnwrapAsync(await restarted.ad(for: request(.overlay)))
        XCTAssertEqual(offline.source, "vast-cache")
        XCTAssertEqual(offline.id, "ov-exp")
        XCTAssertEqual(offline.tracking["impression"], online.tracking["impression"], "its own tracking, to be sent when the network is back")
        guard case .image(let path, _, _) = offline.content else { return XCTFail("\(offline.content)") }
        XCTAssertTrue(path.hasPrefix(cache.folder))
        // Without Expires and with no lifetime configured, nothing is kept for offline use.
        try server.get("/_up")
        let other = try CreativeCache.temporary()
        defer { try? FileManager.default.removeItem(atPath: other.folder) }
        _ = try await client("inline-both-4.1.xml", offlineLifetime: 0, cache: other).ad(for: request(.pauseAd))
        try server.get("/_down")
        do {
            _ = try await client("inline-both-4.1.xml", offlineLifetime: 0, cache: other).ad(for: request(.pauseAd))
            XCTFail("no ad may stand in")
        } catch let error as VASTError {
            XCTAssertEqual(error.code, .undefined)
        }
    }

    /// A source with a proof-of-play deadline (`pop-deadline`): its ads carry it (their
    /// impressions are delivered within it or dropped), and an ad it served is not shown from
    /// the cache once the deadline has passed since it was fetched — though its Expires would
    /// allow it (an hour).
    func testAnAdOfADeadlineSourceIsNotShownOnceItsDeadlineHasPassedSinceItWasFetched() async throws {
        let online = try await XCTUnwrapAsync(await client("overlay-expiring.xml", popDeadline: 1).ad(for: request(.overlay)))
        XCTAssertEqual(online.popDeadline, 1)
        XCTAssertNotNil(online.transactionID)
        try server.get("/_down")
        let soon = try await XCTUnwrapAsync(await client("overlay-expiring.xml", popDeadline: 1).ad(for: request(.overlay)))
        XCTAssertEqual(soon.source, "vast-cache", "within its deadline: it may stand in")
        XCTAssertEqual(soon.popDeadline, 1)
        // Wait past the deadline (a bound on the wait, not a timed assertion).
        XCTAssertTrue(waitUntil(timeout: 5) { Date() > online.expires ?? .distantFuture })
        do {
            _ = try await client("overlay-expiring.xml", popDeadline: 1).ad(for: request(.overlay))
            XCTFail("past its deadline: never shown")
        } catch let error as VASTError {
            XCTAssertEqual(error.code, .undefined)
        }
    }

    /// Competitive separation across sources (issue 26): a catalog entry of the advertiser
    /// "Autos" shows (the daemon records it); the VAST answer's Autos ad is then passed over
    /// like a failed buffet ad — the next stand-alone ad serves, and it is counted — until
    /// `ad-separation` has passed on the monotonic clock.
    func testAVASTAdOfAnAdvertiserWithinItsSeparationIsPassedOver() async throws {
        let clock = VirtualScheduleClock(wall: Date())
        let separation = AdSeparation(seconds: 300, clock: clock)
        let separated = Locked(0)
        let vast = client("separation-buffet.xml", separation: separation, onSeparated: { _ in separated.withLock { $0 += 1 } })
        var served = try await XCTUnwrapAsync(await vast.ad(for: request(.overlay)))
        XCTAssertEqual(served.id, "autos-ad")
        XCTAssertEqual(served.advertiser, "Autos")
        XCTAssertEqual(served.categories, ["IAB2"])
        separation.record(advertiser: "autos", categories: [])   // a catalog entry of Autos went on screen
        served = try await XCTUnwrapAsync(await vast.ad(for: request(.overlay)))
        XCTAssertEqual(served.id, "drinks-ad", "passed over for separation")
        XCTAssertEqual(separated.withLock { $0 }, 1)
        clock.jumpWall(3600)   // the wall clock jumping does not end a separation
        served = try await XCTUnwrapAsync(await vast.ad(for: request(.overlay)))
        XCTAssertEqual(served.id, "drinks-ad")
        clock.advance(301)
        served = try await XCTUnwrapAsync(await vast.ad(for: request(.overlay)))
        XCTAssertEqual(served.id, "autos-ad", "after ad-separation")
    }

    /// VMAP 1.0 (issue 26): the tag answers an episode's schedule, requested once; overlays
    /// come at their breaks' times (`HH:MM:SS.mmm`, `repeatAfter`, `n%` of a known length), each
    /// from inline VAST or its own tag, with `breakStart`/`breakEnd`; the `end` break is the
    /// post-roll, the `start` break the pre-roll, the one at 6 s a mid-roll (its skip offset
    /// read); the breaks this player cannot play (a display break; a cue point the episode does
    /// not have, once its cue points are known) are told through their `error` URLs with 1003, once.
    func testAVMAPScheduleAnswersTheEpisodesRequests() async throws {
        let vast = client("vmap-episode.xml")
        let content = ContentInfo(id: "episode-1", duration: 10)
        func ask(_ kind: AdKind, at position: Double) async throws -> AdCreative? {
            try await vast.ad(for: AdRequest(content: content, kind: kind, position: position))
        }
        var overlay = try await XCTUnwrapAsync(await ask(.overlay, at: 0))
        XCTAssertEqual(overlay.id, "vmap-ov")
        XCTAssertEqual(overlay.slotStart, 1)
        XCTAssertEqual(overlay.tracking["breakStart"], ["\(server.base)/b/break-start?break=ov"])
        XCTAssertEqual(overlay.tracking["breakEnd"], ["\(server.base)/b/break-end?break=ov"])
        var served: [String] = []
        for position in [1.002, 4.002, 5.002] {
            overlay = try await XCTUnwrapAsync(await ask(.overlay, at: position))
            served.append("\(overlay.id)@\(overlay.slotStart ?? -1)")
        }
        XCTAssertEqual(served, ["vmap-ov@4.0", "nl-42@5.0", "vmap-ov@7.0"], "repeatAfter 3 s from 1 s, and 50 % of 10 s (its own tag)")
        let none = try await ask(.overlay, at: 7.002)
        XCTAssertNil(none, "the next repeat (10 s) is the episode's end")
        let postroll = try await XCTUnwrapAsync(await ask(.postroll, at: 10))
        XCTAssertEqual(postroll.id, "lin-30")
        XCTAssertEqual(postroll.tracking["breakStart"], ["\(server.base)/b/break-start?break=post"])
        XCTAssertEqual(postroll.tracking["breakEnd"], ["\(server.base)/b/break-end?break=post"])
        let pause = try await ask(.pauseAd, at: 3)
        XCTAssertNil(pause, "VMAP has no pause breaks")
        // The linear breaks before the end: the pre-roll, the mid-roll at 6 s.
        XCTAssertTrue(vast.mayFill(.preroll, content: content, at: 0), "the tag answers VMAP: pre-rolls are asked of it")
        let preroll = try await XCTUnwrapAsync(await ask(.preroll, at: 0))
        XCTAssertEqual(preroll.id, "lin-30")
        XCTAssertEqual(preroll.kind, .preroll)
        XCTAssertEqual(preroll.duration, 2)
        XCTAssertEqual(preroll.tracking["breakStart"], ["\(server.base)/b/break-start?break=pre"])
        let again = try await ask(.preroll, at: 0)
        XCTAssertNil(again, "a break is served once")
        XCTAssertEqual(vast.midrollTimes(for: content), [6])
        XCTAssertTrue(vast.mayFill(.midroll, content: content, at: 3))
        XCTAssertFalse(vast.mayFill(.midroll, content: content, at: 6.5))
        let midroll = try await XCTUnwrapAsync(await vast.ad(for: AdRequest(content: content, kind: .midroll, position: 1, breakTime: 6)))
        XCTAssertEqual(midroll.id, "vmap-mid")
        XCTAssertEqual(midroll.slotStart, 6)
        XCTAssertEqual(midroll.skipOffset, 1)
        XCTAssertEqual(midroll.tracking["breakEnd"], ["\(server.base)/b/break-end?break=mid"])
        let requests = try server.requests()
        XCTAssertEqual(requests["/vast/vmap-episode.xml"], 1, "the schedule is asked for once an episode: \(requests)")
        // The cue-point break (#2) waits for the episode's cue points; it has none: told then.
        XCTAssertFalse(errorBeacons.list.withLock { $0 }.contains { $0.contains("break=cue") }, "not before they are known")
        var known = content
        known.cuePoints = []
        XCTAssertEqual(vast.midrollTimes(for: known), [6])
        XCTAssertEqual(vast.midrollTimes(for: known), [6])
        let told = errorBeacons.list.withLock { $0 }
        for name in ["cue", "display"] {
            XCTAssertEqual(told.filter { $0 == "\(server.base)/b/vmap-error?break=\(name)&code=1003" }.count, 1, "\(name): \(told)")
        }
        XCTAssertFalse(told.contains { $0.contains("break=preroll") }, "the pre-roll break is played: \(told)")
        XCTAssertFalse(told.contains { $0.contains("break=post") }, "\(told)")
    }

    /// The breaks at an episode's end (issue 45, 12): a mid-roll timed at the 4 s episode's
    /// exact end (it is never crossed), one at 100 % and the `end` break. The `end` break is the
    /// post-roll and plays; the other two are told through their error URLs with 1003, once —
    /// the `end` break is no duplicate of the `100%` one. A second viewing (R14) gets them again.
    func testTheEndBreakPlaysAndTheOtherBreaksAtTheEndAreTold() async throws {
        let vast = client("vmap-end.xml")
        for viewing in [UInt64(1), 2] {
            var content = ContentInfo(id: "episode-4s", duration: 4)
            content.viewing = viewing
            XCTAssertEqual(vast.midrollTimes(for: content), [], "not before the schedule is loaded")
            _ = try await vast.ad(for: AdRequest(content: content, kind: .preroll, position: 0))
            XCTAssertEqual(vast.midrollTimes(for: content), [], "nothing before the end is a mid-roll")
            let postroll = try await XCTUnwrapAsync(await vast.ad(for: AdRequest(content: content, kind: .postroll, position: 4)))
            XCTAssertEqual(postroll.tracking["breakStart"], ["\(server.base)/b/break-start?break=end"], "the `end` break plays")
            let told = errorBeacons.list.withLock { $0 }.filter { $0.contains("vmap-error") }
            XCTAssertEqual(told.sorted(), Array(repeating: ["\(server.base)/b/vmap-error?break=at-4s&code=1003",
                                                            "\(server.base)/b/vmap-error?break=full&code=1003"], count: Int(viewing)).flatMap { $0 }.sorted(),
                           "viewing \(viewing): \(told)")
            let again = try await vast.ad(for: AdRequest(content: content, kind: .postroll, position: 4))
            XCTAssertNil(again)
            vast.endViewing(content)
        }
        XCTAssertEqual(try server.requests()["/vast/vmap-end.xml"], 2, "the schedule asked once a viewing")
    }

    /// VMAP's `#n`: the n-th of the episode's cue points (its chapters) — a mid-roll there.
    func testACuePointBreakIsAtTheEpisodesNthCuePoint() async throws {
        let vast = client("vmap-episode.xml")
        let content = ContentInfo(id: "episode-1", duration: 10, cuePoints: [2.5, 7.5])
        _ = try await vast.ad(for: AdRequest(content: content, kind: .overlay, position: 0))
        XCTAssertEqual(vast.midrollTimes(for: content), [6, 7.5], "#2 is the second cue point")
        let cue = try await XCTUnwrapAsync(await vast.ad(for: AdRequest(content: content, kind: .midroll, position: 7, breakTime: 7.5)))
        XCTAssertEqual(cue.id, "lin-30")
        XCTAssertEqual(cue.slotStart, 7.5)
        XCTAssertFalse(errorBeacons.list.withLock { $0 }.contains { $0.contains("break=cue") }, "played, not an error")
    }

    /// A tag that answers plain VAST is asked for a pre-roll once (the first episode learns
    /// it): that answer fills nothing — its linear ads are the post-roll's — and no pre-roll or
    /// mid-roll is asked of it again.
    func testAPlainVASTTagIsAskedForAPrerollOnceAndFillsNone() async throws {
        let vast = client("inline-linear-3.0.xml")
        let content = ContentInfo(id: "episode-1", duration: 10)
        XCTAssertTrue(vast.mayFill(.preroll, content: content, at: 0), "not known yet")
        let none = try await vast.ad(for: AdRequest(content: content, kind: .preroll, position: 0))
        XCTAssertNil(none)
        XCTAssertFalse(vast.mayFill(.preroll, content: content, at: 0))
        XCTAssertFalse(vast.mayFill(.midroll, content: content, at: 0))
        XCTAssertEqual(vast.midrollTimes(for: content), [])
        let postroll = try await XCTUnwrapAsync(await vast.ad(for: AdRequest(content: content, kind: .postroll, position: 10)))
        XCTAssertEqual(postroll.id, "lin-30", "the post-roll as before")
    }

    /// A tag whose server cannot be reached is asked for no pre-roll (no episode waits for it)
    /// until it answers again.
    func testNoPrerollIsWaitedForFromATagThatCannotBeReached() async throws {
        let vast = client("vmap-episode.xml")
        let first = ContentInfo(id: "episode-1", duration: 10)
        _ = try await vast.ad(for: AdRequest(content: first, kind: .overlay, position: 0))
        XCTAssertTrue(vast.mayFill(.preroll, content: first, at: 0), "the tag answers VMAP")
        try server.get("/_down")
        defer { try? server.get("/_up") }
        let second = ContentInfo(id: "episode-2", duration: 10)
        do {
            _ = try await vast.ad(for: AdRequest(content: second, kind: .preroll, position: 0))
            XCTFail("the server is down")
        } catch {}
        XCTAssertFalse(vast.mayFill(.preroll, content: second, at: 0), "not while it cannot be reached")
        try server.get("/_up")
        _ = try await vast.ad(for: AdRequest(content: ContentInfo(id: "episode-3", duration: 10), kind: .overlay, position: 0))
        XCTAssertTrue(vast.mayFill(.preroll, content: second, at: 0), "it answers again")
    }

    /// Every break plays or is told, once (issue 34, 15): a linear break at 00:00:00.000 is the
    /// pre-roll, at 100 % or exactly at the episode's end the post-roll (not a mid-roll that can
    /// never be reached); of three linear breaks at the same time one plays and the others are
    /// told through their error URLs with 1003; a negative offset is no offset (refused).
    func testTheEdgesOfAScheduleArePlayedOrTold() async throws {
        let vast = client("vmap-edges.xml")
        let episode = ContentInfo(id: "edges", duration: 10)
        let preroll = try await vast.ad(for: AdRequest(content: episode, kind: .preroll, position: 0))
        XCTAssertNotNil(preroll, "00:00:00.000 is the pre-roll")
        XCTAssertEqual(vast.midrollTimes(for: episode), [4], "one mid-roll time; nothing at the end")
        let told = errorBeacons.list.withLock { $0 }.filter { $0.contains("vmap-error") }
        XCTAssertEqual(Set(told.compactMap { URLComponents(string: $0)?.queryItems?.first { $0.name == "break" }?.value }), ["b", "c"],
                       "the two breaks at the same time as a: \(told)")
        XCTAssertTrue(told.allSatisfy { $0.hasSuffix("code=1003") }, "\(told)")
        let midroll = try await vast.ad(for: AdRequest(content: episode, kind: .midroll, position: 3.9, breakTime: 4))
        XCTAssertNotNil(midroll)
        let full = try await vast.ad(for: AdRequest(content: episode, kind: .postroll, position: 10))
        XCTAssertNotNil(full, "100 %: the post-roll (the first of the breaks at the end, with no `end` break)")
        // One post-roll plays at the end (a player asks once): the break exactly at the end is
        // told with 1003 as it is passed over, never left unplayed and unsaid (issue 45, 12).
        XCTAssertEqual(errorBeacons.list.withLock { $0 }.filter { $0.contains("break=at-end") }, ["\(server.base)/b/vmap-error?break=at-end&code=1003"])
        let atEnd = try await vast.ad(for: AdRequest(content: episode, kind: .postroll, position: 10))
        XCTAssertNil(atEnd, "told, not served later")
        // A `#n` break of an episode without chapters, its end reached before anything asked
        // for its mid-roll times: told with 1003 when the post-roll is asked for, once.
        let cues = client("vmap-episode.xml")
        let chapterless = ContentInfo(id: "no-chapters", duration: 10, cuePoints: [])
        _ = try? await cues.ad(for: AdRequest(content: chapterless, kind: .postroll, position: 10))
        _ = try? await cues.ad(for: AdRequest(content: chapterless, kind: .postroll, position: 10))
        let cueTold = errorBeacons.list.withLock { $0 }.filter { $0.contains("break=cue") }
        XCTAssertEqual(cueTold.count, 1, "\(cueTold)")
        XCTAssertTrue(cueTold.first?.hasSuffix("code=1003") == true, "\(cueTold)")
        for offset in ["-00:00:01", "+00:00:01", "-5%"] {
            XCTAssertNil(VMAPDocument.offset(offset), offset)
        }
        XCTAssertEqual(VMAPDocument.offset("00:00:01.500"), .seconds(1.5))
    }

    /// A VMAP answer cut short, or nested past the bound, is refused like a bad VAST.
    func testAMalformedOrDeeplyNestedVMAPIsRefused() async throws {
        await expectVASTError(.xmlParsing, "vmap-broken.xml")
        let deep = "<vmap:VMAP xmlns:vmap=\"http://www.iab.net/videosuite/vmap\" version=\"1.0\">" + String(repeating: "<a>", count: 100)
            + String(repeating: "</a>", count: 100) + "</vmap:VMAP>"
        XCTAssertThrowsError(try VMAPDocument.parse(Data(deep.utf8))) { XCTAssertTrue("\($0)".contains("deep"), "\($0)") }
        XCTAssertThrowsError(try VMAPDocument.parse(Data("<vmap:VMAP xmlns:vmap=\"http://www.iab.net/videosuite/vmap\" version=\"2.0\"></vmap:VMAP>".utf8))) {
            XCTAssertTrue("\($0)".contains("not supported"), "\($0)")
        }
        XCTAssertTrue(VMAPDocument.looksLikeVMAP(Data("<?xml version=\"1.0\"?>\n<!-- x --><vmap:VMAP>".utf8)))
        XCTAssertFalse(VMAPDocument.looksLikeVMAP(Data("<VAST version=\"4.2\"></VAST>".utf8)))
    }

    /// A prefetched answer serves the request that follows: no document or creative is fetched
    /// then; another content's request asks the server itself.
    func testAPrefetchedAnswerServesTheRequest() async throws {
        let vast = client("inline-both-4.1.xml")
        vast.prefetch(request(.pauseAd))
        XCTAssertTrue(waitUntil(timeout: 20) { ((try? self.server.requests()) ?? [:])["/media/pause.png"] == 1 })
        let before = try server.requests()
        try server.get("/_down")
        let creative = try await XCTUnwrapAsync(await vast.ad(for: request(.pauseAd)))
        XCTAssertEqual(creative.source, "vast", "the prefetched answer, not an offline stand-in")
        try server.get("/_up")
        XCTAssertEqual(try server.requests(), before, "nothing fetched for the request")
        _ = try await vast.ad(for: AdRequest(content: ContentInfo(id: "episode-2"), kind: .pauseAd, position: 0))
        XCTAssertEqual(try server.requests()["/vast/inline-both-4.1.xml"], 2)
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
