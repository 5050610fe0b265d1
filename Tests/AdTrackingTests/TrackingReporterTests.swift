import AdRuntime
import AdSources
import AdTestSupport
@testable import AdTracking
import Foundation
import XCTest

/// The runtime's events become the creative's beacons and proof of play, through the outbox,
/// to a loopback endpoint that records every request as an ad server would see it.
final class TrackingReporterTests: XCTestCase {
    private var server: FixtureServer!
    private var directory: URL!
    private var outbox: BeaconOutbox!
    /// A synchronised wall clock (this machine's kernel may say it is not: then `[TIMESTAMP]`
    /// beacons would wait for it, `BeaconOutbox.Configuration.timeSyncWait`).
    private let clock = TestTrackingClock()

    override func setUpWithError() throws {
        server = try FixtureServer(script: "beacon_server.py")
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("reporter-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        var configuration = BeaconOutbox.Configuration()
        configuration.baseDelay = 0.01
        outbox = try BeaconOutbox(path: directory.appendingPathComponent("adplayerd.sqlite").path, configuration: configuration, clock: clock)
    }

    override func tearDownWithError() throws {
        server.stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// A VideoAds on a virtual player whose events go to `reporter`.
    private func rig(_ behaviours: [AdKind: TestAdSource.Behaviour], reporter: TrackingReporter, content: String = "e",
                     surface: RecordingAdSurface = RecordingAdSurface())
        -> (VirtualLoop, VirtualPlayer, VideoAds, RecordingAdSurface) {
        let loop = VirtualLoop()
        let player = VirtualPlayer(loop: loop)
        let ads = VideoAds(content: ContentInfo(id: content), source: TestAdSource(behaviours), surface: surface, loop: loop,
                           onEvent: { reporter.record($0) })
        player.load("e.mp4", duration: 10)
        ads.track(player)
        return (loop, player, ads, surface)
    }

    /// Everything the ads did, recorded and delivered. `player` is kept alive until then (the
    /// ads hold it weakly, R9).
    private func deliver(_ reporter: TrackingReporter, _ ads: VideoAds, _ player: VirtualPlayer) async {
        ads.waitForCallbacks()
        withExtendedLifetime(player) {}
        reporter.flush()
        await outbox.deliverAll(until: Date().addingTimeInterval(30))
    }

    func testAnOverlayAndAPostrollSendTheirBeacons() async throws {
        let reporter = TrackingReporter(outbox: outbox, clock: clock)
        func track(_ names: [String]) -> [String: [String]] {
            Dictionary(uniqueKeysWithValues: names.map { ($0, ["\(server.base)/b/\($0)?e=[ERRORCODE]"]) })
        }
        let (loop, player, ads, surface) = rig([
            .overlay: .creative(AdCreative(id: "ov", kind: .overlay, content: .text("hi"), duration: 5,
                                           tracking: track(["impression", "creativeView", "close"]))),
            .postroll: .creative(AdCreative(id: "pr", kind: .postroll, content: .video(location: "pr.mp4"),
                                            tracking: track(["start", "firstQuartile", "midpoint", "thirdQuartile", "complete"])
                                                .merging(["progress:00:00:01.5": ["\(server.base)/b/progress?ad=[ADPLAYHEAD]"]]) { $1 })),
        ], reporter: reporter)
        let overlay = try XCTUnwrap(requestAd(ads, .overlay)).get()
        try overlay.show { _ in }
        overlay.close()
        let postroll = try XCTUnwrap(requestAd(ads, .postroll)).get()
        loop.advance(by: 10)
        try postroll.show { _ in }
        let video = try XCTUnwrap(surface.reporter(postroll.id))
        for second in 0...4 { video.progress(Double(second), of: 4) }
        video.finished()
        await deliver(reporter, ads, player)
        let counts = try server.counts()
        for name in ["impression", "creativeView", "close", "start", "firstQuartile", "midpoint", "thirdQuartile", "complete"] {
            XCTAssertEqual(counts["/b/\(name)?e=-1"], 1, name)
        }
        XCTAssertEqual(counts["/b/progress?ad=00%3A00%3A02.000"], 1, "the progress offset, with the ad's playhead: \(counts)")
    }

    /// A creative that cannot be shown (here: refused by the surface) sends its Error URLs with
    /// VAST error 405, and no impression.
    func testACreativeThatCannotBeShownSendsItsErrorURLsWithTheCode() async throws {
        let reporter = TrackingReporter(outbox: outbox, clock: clock)
        let surface = RecordingAdSurface()
        surface.refuse(creativeID: "bad")
        let (_, player, ads, _) = rig([
            .overlay: .creative(AdCreative(id: "bad", kind: .overlay, content: .image(location: "x.png"), duration: 5,
                                           tracking: ["error": ["\(server.base)/b/error?code=[ERRORCODE]"],
                                                      "impression": ["\(server.base)/b/impression"]])),
        ], reporter: reporter, surface: surface)
        try XCTUnwrap(requestAd(ads, .overlay)).get().show { _ in }
        await deliver(reporter, ads, player)
        let counts = try server.counts()
        XCTAssertEqual(counts["/b/error?code=405"], 1)
        XCTAssertNil(counts["/b/impression"], "never on screen: no impression")
    }

    /// Every macro of the table, filled as documented and percent-encoded once: the endpoint
    /// decodes each value once and gets exactly it; unknown macros are -1, what policy withholds
    /// -2; no `[`…`]` ever leaves.
    func testMacrosAreFilledAndEncodedOnce() async throws {
        var policy = MacroPolicy()
        policy.gdprConsent = "CPc:Bn/VP+cq=="
        policy.gppString = "DBABMA~CPXxRfAPXxRfAAfKABENB"
        policy.gppSectionIDs = "2,6"
        policy.ifa = "6D92078A-8246-4BA4-AE5B-76104861E7DC"
        policy.ifaType = "rida"
        policy.appBundle = "tv.example.box"
        let reporter = TrackingReporter(outbox: outbox, policy: policy, clock: clock)
        reporter.setPlayerSize(width: 1920, height: 1080)
        let names = Macro.allCases.map(\.rawValue) + ["NOTAMACRO", "lowercase_thing"]
        let query = names.map { "\($0.lowercased())=[\($0)]" }.joined(separator: "&")
        let template = "\(server.base)/b/all?\(query)"
        let contentID = "ep 1/é?&=#x"
        let (loop, player, ads, _) = rig([
            .overlay: .creative(AdCreative(id: "ov", kind: .overlay, content: .text("hi"), duration: 5, tracking: ["impression": [template]],
                                           adServingID: "srv id/1", universalAdID: "ad-id.org CNPA0484000H")),
        ], reporter: reporter, content: contentID)
        loop.advance(by: 2.5)
        let overlay = try XCTUnwrap(requestAd(ads, .overlay)).get()
        try overlay.show { _ in }
        await deliver(reporter, ads, player)
        let sent = try XCTUnwrap(try server.counts().keys.first { $0.hasPrefix("/b/all?") })
        XCTAssertFalse(sent.contains("[") || sent.contains("]"), "a macro left the box: \(sent)")
        let items = try XCTUnwrap(URLComponents(string: "http://x" + sent)?.queryItems)
        let values = Dictionary(items.map { ($0.name, $0.value ?? "") }, uniquingKeysWith: { $1 })
        XCTAssertEqual(values["contentid"], contentID)
        XCTAssertEqual(values["placementtype"], "1")
        XCTAssertEqual(values["breakposition"], "2")
        XCTAssertEqual(values["contentplayhead"], "00:00:02.500")
        XCTAssertEqual(values["mediaplayhead"], "00:00:02.500")
        XCTAssertEqual(values["adplayhead"], "-1", "no ad playhead for an overlay")
        XCTAssertNotNil(values["timestamp"].flatMap { $0.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#, options: .regularExpression) },
                        "ISO 8601 with ms, decoded once: \(values["timestamp"] ?? "")")
        XCTAssertNotNil(values["cachebusting"].flatMap { $0.range(of: #"^\d{8}$"#, options: .regularExpression) })
        XCTAssertEqual(values["errorcode"], "-1")
        XCTAssertEqual(values["adservingid"], "srv id/1")
        XCTAssertEqual(values["universaladid"], "ad-id.org CNPA0484000H")
        XCTAssertEqual(values["limitadtracking"], "0")
        XCTAssertEqual(values["gdprconsent"], policy.gdprConsent)
        XCTAssertEqual(values["gppstring"], policy.gppString)
        XCTAssertEqual(values["gppsectionid"], "2,6")
        XCTAssertEqual(values["ifa"], policy.ifa)
        XCTAssertEqual(values["ifatype"], "rida")
        XCTAssertEqual(values["playersize"], "1920,1080")
        XCTAssertEqual(values["clientua"], UserAgent.string)
        XCTAssertEqual(values["deviceua"], UserAgent.string)
        XCTAssertEqual(values["appbundle"], "tv.example.box")
        XCTAssertEqual(values["notamacro"], "-1", "unknown: -1")
        XCTAssertEqual(values["lowercase_thing"], "-1")
        // Limit ad tracking: the advertising id is withheld (-2).
        policy.limitAdTracking = true
        XCTAssertEqual(Macros.expand("[IFA]|[IFATYPE]|[LIMITADTRACKING]", MacroContext(), policy), "-2%7C-2%7C1".replacingOccurrences(of: "%7C", with: "|"))
    }

    /// More URLs for one event than the bound: the first 64 go, the rest are refused and counted.
    func testURLsPastTheBoundOfAnEventAreRefusedAndCounted() async throws {
        let reporter = TrackingReporter(outbox: outbox, clock: clock)
        let urls = (0..<100).map { "\(server.base)/b/imp-\($0)" }
        let (_, player, ads, _) = rig([.overlay: .creative(AdCreative(id: "ov", kind: .overlay, content: .text("hi"), duration: 5,
                                                                 tracking: ["impression": urls]))], reporter: reporter)
        try XCTUnwrap(requestAd(ads, .overlay)).get().show { _ in }
        await deliver(reporter, ads, player)
        let counts = try server.counts()
        XCTAssertEqual(counts.keys.filter { $0.hasPrefix("/b/imp-") }.count, TrackingReporter.maxURLsPerEvent)
        XCTAssertEqual(outbox.status().dropped["too_many"], 100 - TrackingReporter.maxURLsPerEvent)
    }

    /// Viewability fires the creative's ViewableImpression URLs, and proof of play records every
    /// shown ad: when, for how long, why it ended, whether it was viewable, its beacons' outcome.
    func testViewabilityAndProofOfPlay() async throws {
        let reporter = TrackingReporter(outbox: outbox, clock: clock)
        let tracking = ["impression": ["\(server.base)/b/imp"], "viewable": ["\(server.base)/b/viewable"],
                        "notViewable": ["\(server.base)/b/not-viewable"], "ftp": []]
        let (loop, player, ads, _) = rig([.overlay: .creative(AdCreative(id: "ov", kind: .overlay, content: .text("hi"), duration: 5,
                                                                         tracking: tracking, source: "catalog"))], reporter: reporter)
        let first = try XCTUnwrap(requestAd(ads, .overlay)).get()
        try first.show { _ in }
        loop.advance(by: 1.2)
        player.pause()
        player.play()
        let second = try XCTUnwrap(requestAd(ads, .overlay)).get()
        try second.show { _ in }
        loop.advance(by: 0.4)
        player.pause()
        await deliver(reporter, ads, player)
        let counts = try server.counts()
        XCTAssertEqual(counts["/b/imp"], 2)
        XCTAssertEqual(counts["/b/viewable"], 1)
        XCTAssertEqual(counts["/b/not-viewable"], 1)
        let plays = outbox.plays()
        XCTAssertEqual(plays.count, 2)
        XCTAssertEqual(plays.map(\.viewable), ["viewable", "notViewable"])
        XCTAssertEqual(plays.map(\.reason), ["paused", "paused"])
        XCTAssertEqual(plays[0].seconds ?? 0, 1.2, accuracy: 0.001)
        XCTAssertEqual(plays[1].seconds ?? 0, 0.4, accuracy: 0.001)
        XCTAssertEqual(plays.map(\.source), ["catalog", "catalog"])
        XCTAssertEqual(plays.map(\.beaconsSent), [2, 2])
        XCTAssertEqual(plays.map(\.beaconsPending), [0, 0])
        XCTAssertEqual(plays.map(\.contentID), ["e", "e"])
    }

    /// `pop-require-display` (issue 36): an ad's start beacons wait for its display evidence.
    /// Verified, they go out; not verified — the pixels said no, or nothing came within the
    /// wait — the source's `notUsed` goes instead and the ad's later beacons are withheld,
    /// counted. Each play keeps its evidence, and the ledger still verifies.
    func testRequiredDisplayEvidenceHoldsTheImpressionAndSendsNotUsedWithoutIt() async throws {
        var placement = TrackingReporter.Placement()
        placement.requireDisplay = true
        placement.displayWait = 0.5
        let metrics = Metrics()
        let reporter = TrackingReporter(outbox: outbox, clock: clock, metrics: metrics, placement: placement)
        let started = Locked<[AdInfo]>([])
        let loop = VirtualLoop()
        let player = VirtualPlayer(loop: loop)
        let tracking = ["impression": ["\(server.base)/b/imp"], "creativeView": ["\(server.base)/b/view"],
                        "notUsed": ["\(server.base)/b/not-used"], "close": ["\(server.base)/b/close"]]
        let ads = VideoAds(content: ContentInfo(id: "e"), source: TestAdSource([.overlay: .creative(AdCreative(
            id: "ov", kind: .overlay, content: .text("hi"), duration: 5, tracking: tracking))]), surface: RecordingAdSurface(), loop: loop,
                           onEvent: { event in
                               if case .started(let info) = event { started.withLock { $0.append(info) } }
                               reporter.record(event)
                           })
        player.load("e.mp4", duration: 60)
        ads.track(player)
        let shown = (DisplayEvidence.Pixels.showTheAd, at: 1_800_000_000.0)
        for round in 0..<3 {
            let ad = try XCTUnwrap(requestAd(ads, .overlay)).get()
            try ad.show { _ in }
            ads.waitForCallbacks()
            let info = try XCTUnwrap(started.withLock { $0.last })
            switch round {
            case 0: reporter.recordDisplay(info, .judge(connector: nil, panel: nil, pixels: shown))
            case 1: reporter.recordDisplay(info, .judge(connector: nil, panel: nil,
                                                        pixels: (.doNotShowTheAd("the region differs from the creative"), at: 1_800_000_000)))
            default:
                // Nothing: the wait decides.
                XCTAssertTrue(waitUntil { let plays = self.outbox.plays(); return plays.count == 3 && plays[2].display != nil }, "the wait's verdict")
            }
            reporter.flush()
            loop.advance(by: 1)
            ad.close()
            ads.waitForCallbacks()
        }
        await deliver(reporter, ads, player)
        let counts = try server.counts()
        XCTAssertEqual(counts["/b/imp"], 1, "only the verified play's impression: \(counts)")
        XCTAssertEqual(counts["/b/view"], 1)
        XCTAssertEqual(counts["/b/close"], 1, "the unverified plays' later beacons are withheld")
        XCTAssertEqual(counts["/b/not-used"], 2)
        let plays = outbox.plays()
        XCTAssertEqual(plays.map(\.display), ["verified", "unverified", "unverified"])
        XCTAssertTrue(plays[1].displayEvidence?.contains("the pixels do not show the ad") == true, plays[1].displayEvidence ?? "")
        XCTAssertTrue(plays[2].displayEvidence?.contains("no display evidence within 0.5 s") == true, plays[2].displayEvidence ?? "")
        let samples = metrics.samples()
        func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
            samples.first { sample in sample.name == name && labels.allSatisfy { sample.labels[$0.key] == $0.value } }?.value
        }
        XCTAssertEqual(value("adplayerd_plays_unverified_total", ["reason": "pixels"]), 1)
        XCTAssertEqual(value("adplayerd_plays_unverified_total", ["reason": "no_evidence"]), 1)
        XCTAssertEqual(value("adplayerd_beacons_withheld_total"), 2, "one close each")
        let path = directory.appendingPathComponent("adplayerd.sqlite").path
        let (_, verdict) = try BeaconOutbox.verifyLedger(path: path)
        XCTAssertNil(verdict.broken, "\(String(describing: verdict.broken))")
        XCTAssertEqual(verdict.rows, 3)
        withExtendedLifetime(player) {}
    }

    /// A client hears `ad.started` one synced write after the ad went on screen — its proof-of-
    /// play row — not one per beacon and counter; the start's beacons (two impressions, two
    /// creativeView URLs) follow in one synced write of their own, counters included.
    func testAStartIsToldAfterThePlayRowAloneAndItsBeaconsAreOneWrite() async throws {
        let reporter = TrackingReporter(outbox: outbox, clock: clock)
        let commits = Locked<(before: Int, told: Int)?>(nil)
        let loop = VirtualLoop()
        let player = VirtualPlayer(loop: loop)
        let tracking = ["impression": ["\(server.base)/b/imp-1", "\(server.base)/b/imp-2"],
                        "creativeView": ["\(server.base)/b/view-1", "\(server.base)/b/view-2"]]
        let source = TestAdSource([.overlay: .creative(AdCreative(id: "ov", kind: .overlay, content: .text("hi"), duration: 5, tracking: tracking))])
        let ads = VideoAds(content: ContentInfo(id: "e"), source: source, surface: RecordingAdSurface(), loop: loop, onEvent: { event in
            guard case .started = event else { return reporter.record(event) }
            reporter.flush()   // what came before is written: from here, only this start's writes count
            let before = SQLiteDatabase.transactionCount()
            reporter.recordStart(event) { commits.withLock { $0 = (before, SQLiteDatabase.transactionCount()) } }
        })
        player.load("e.mp4", duration: 10)
        ads.track(player)
        try XCTUnwrap(requestAd(ads, .overlay)).get().show { _ in }
        ads.waitForCallbacks()
        reporter.flush()
        let told = try XCTUnwrap(commits.withLock { $0 })
        XCTAssertEqual(told.told - told.before, 1, "ad.started waits for the play row's write alone")
        XCTAssertEqual(SQLiteDatabase.transactionCount() - told.told, 1, "the start's four beacons and their counters: one write")
        XCTAssertEqual(outbox.plays().first?.beaconsPending, 4)
        await deliver(reporter, ads, player)
        let counts = try server.counts()
        for name in ["imp-1", "imp-2", "view-1", "view-2"] { XCTAssertEqual(counts["/b/\(name)"], 1, name) }
        XCTAssertEqual(outbox.plays().first?.beaconsSent, 4)
    }

    /// At stop the daemon waits for tracking a bounded time: a writer held up (a hung disk)
    /// makes `flush(timeout:)` answer false instead of holding the stop for ever.
    func testFlushAtStopIsBounded() throws {
        let reporter = TrackingReporter(outbox: outbox, clock: clock)
        let release = Handover<Bool>()
        let info = AdInfo(id: 1, kind: .overlay, creativeID: "ov", contentID: "e")
        reporter.recordStart(.started(info)) { _ = release.wait(timeout: 60) }   // the writer is held here
        XCTAssertFalse(reporter.flush(timeout: 0.2), "held: the flush gives up")
        release.fulfil(true)
        XCTAssertTrue(reporter.flush(timeout: 30))
    }
}
