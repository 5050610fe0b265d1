import AdRuntime
import AdSources
import Foundation
import XCTest

final class LocalCatalogTests: XCTestCase {
    private var folder: URL!

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for name in ["overlay.png", "pause.png", "pause2.png", "postroll.mp4"] {
            try Data([1, 2, 3]).write(to: folder.appendingPathComponent(name))
        }
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: folder)
    }

    private func write(_ json: String) throws -> LocalCatalog {
        try Data(json.utf8).write(to: folder.appendingPathComponent("catalog.json"))
        return try LocalCatalog(folder: folder)
    }

    private func expectError(_ json: String, field: String, reason: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try write(json), file: file, line: line) { error in
            guard let error = error as? CatalogError else { return XCTFail("\(error)", file: file, line: line) }
            XCTAssertTrue(error.file.hasSuffix("catalog.json"), file: file, line: line)
            if field.hasSuffix("…") {
                XCTAssertTrue(error.field.hasPrefix(String(field.dropLast())), "\(error)", file: file, line: line)
            } else {
                XCTAssertEqual(error.field, field, file: file, line: line)
            }
            XCTAssertTrue(error.reason.contains(reason), "\(error)", file: file, line: line)
        }
    }

    private func ad(_ catalog: LocalCatalog, _ kind: AdKind, _ content: String = "episode-1", at position: Double = 0) async throws -> AdCreative? {
        try await catalog.ad(for: AdRequest(content: ContentInfo(id: content), kind: kind, position: position))
    }

    /// The fixed part of SPEC §4.1, exactly as shown there.
    func testTheSpecsExampleLoadsAndServes() async throws {
        let catalog = try write("""
        {
          "version": 1,
          "overlays":  [{"id": "ov-1", "image": "overlay.png", "slots": [{"start": 2.0, "duration": 5.0}]},
                        {"id": "ov-2", "text": "Sponsored: example.com", "slots": [{"start": 20, "duration": 8}],
                         "content": ["episode-2"]}],
          "pause_ads": [{"id": "pa-1", "image": "pause.png"}],
          "postrolls": [{"id": "pr-1", "video": "postroll.mp4"}]
        }
        """)
        XCTAssertEqual(catalog.entries.count, 4)
        let first = try await ad(catalog, .overlay)
        XCTAssertEqual(first?.id, "ov-1")
        XCTAssertEqual(first?.slotStart, 2)
        XCTAssertEqual(first?.duration, 5)
        XCTAssertEqual(first?.content, .image(location: folder.appendingPathComponent("overlay.png").standardizedFileURL.path))
        let afterIt = try await ad(catalog, .overlay, at: 7)
        XCTAssertNil(afterIt, "ov-2 is for episode-2 only")
        let second = try await ad(catalog, .overlay, "episode-2", at: 3)
        XCTAssertEqual(second?.id, "ov-2")
        XCTAssertEqual(second?.content, .text("Sponsored: example.com"))
        let pause = try await ad(catalog, .pauseAd)
        XCTAssertEqual(pause?.id, "pa-1")
        let postroll = try await ad(catalog, .postroll)
        XCTAssertEqual(postroll?.content, .video(location: folder.appendingPathComponent("postroll.mp4").standardizedFileURL.path))
    }

    func testRotationAndFrequencyCaps() async throws {
        let catalog = try write("""
        {"version": 1, "pause_ads": [{"id": "a", "image": "pause.png"}, {"id": "b", "image": "pause2.png", "max_per_episode": 1}]}
        """)
        // Served but never shown (the pause ended before its pause ad appeared): nothing used up.
        var served: [String?] = []
        for _ in 0..<4 { served.append(try await ad(catalog, .pauseAd)?.id) }
        XCTAssertEqual(served, ["a", "b", "a", "b"], "a cap counts shows, not servings")
        // Each one shown: b once an episode.
        served = []
        for _ in 0..<4 {
            let creative = try await ad(catalog, .pauseAd)
            served.append(creative?.id)
            if let creative { catalog.didShow(creative, content: ContentInfo(id: "episode-1")) }
        }
        XCTAssertEqual(served, ["a", "b", "a", "a"])
        let other = try await ad(catalog, .pauseAd, "episode-9")
        XCTAssertNotNil(other, "caps count per episode")
    }

    func testAMissingCreativeFailsThatAdOnly() async throws {
        let catalog = try write("""
        {"version": 1, "overlays": [{"id": "gone", "image": "nope.png", "slots": [{"start": 1, "duration": 2}]},
                                    {"id": "here", "image": "overlay.png", "slots": [{"start": 5, "duration": 2}]}]}
        """)
        do {
            _ = try await ad(catalog, .overlay)
            XCTFail("a missing file must fail the ad")
        } catch let error as CatalogError {
            XCTAssertTrue(error.reason.contains("nope.png"), "\(error)")
        }
        let next = try await ad(catalog, .overlay, at: 3)
        XCTAssertEqual(next?.id, "here")
    }

    func testACreativeOutsideTheFolderIsRefused() async throws {
        let catalog = try write("""
        {"version": 1, "pause_ads": [{"id": "x", "image": "../../etc/passwd"}]}
        """)
        do {
            _ = try await ad(catalog, .pauseAd)
            XCTFail("escaped the folder")
        } catch let error as CatalogError {
            XCTAssertTrue(error.reason.contains("outside"), "\(error)")
        }
    }

    func testEachClassOfBadManifest() throws {
        expectError("not json", field: "line 1, column …", reason: "not valid JSON")
        expectError("{\"version\": 1,\n  \"overlays\": [1,,2]}", field: "line 2, column …", reason: "not valid JSON")
        expectError("[1]", field: "(document)", reason: "object")
        expectError("{}", field: "version", reason: "missing")
        expectError(#"{"version": 3}"#, field: "version", reason: "not supported")
        expectError(#"{"version": 1, "overlays": {}}"#, field: "overlays", reason: "array")
        expectError(#"{"version": 1, "overlays": [7]}"#, field: "overlays[0]", reason: "object")
        expectError(#"{"version": 1, "overlays": [{"image": "overlay.png", "slots": [{"start": 1, "duration": 1}]}]}"#,
                    field: "overlays[0].id", reason: "missing")
        expectError(#"{"version": 1, "pause_ads": [{"id": "a", "image": "pause.png"}, {"id": "a", "image": "pause.png"}]}"#,
                    field: "pause_ads[1].id", reason: "twice")
        expectError(#"{"version": 1, "overlays": [{"id": "a", "image": "o.png", "text": "t", "slots": [{"start": 1, "duration": 1}]}]}"#,
                    field: "overlays[0]", reason: "exactly one")
        expectError(#"{"version": 1, "overlays": [{"id": "a", "image": "overlay.png"}]}"#, field: "overlays[0].slots", reason: "at least one")
        expectError(#"{"version": 1, "overlays": [{"id": "a", "image": "overlay.png", "slots": [{"start": -1, "duration": 1}]}]}"#,
                    field: "overlays[0].slots[0].start", reason: "a finite number of seconds in [0, 2592000] s")
        expectError(#"{"version": 1, "overlays": [{"id": "a", "image": "overlay.png", "slots": [{"start": 1, "duration": 0}]}]}"#,
                    field: "overlays[0].slots[0].duration", reason: "a finite number of seconds in (0, 86400] s")
        // Times from outside are bounded where they come in (a huge one trapped a timer once).
        expectError(#"{"version": 1, "overlays": [{"id": "a", "image": "overlay.png", "slots": [{"start": 1e300, "duration": 1}]}]}"#,
                    field: "overlays[0].slots[0].start", reason: "[0, 2592000]")
        expectError(#"{"version": 1, "overlays": [{"id": "a", "image": "overlay.png", "slots": [{"start": 1, "duration": 18000000000}]}]}"#,
                    field: "overlays[0].slots[0].duration", reason: "(0, 86400]")
        expectError(#"{"version": 1, "overlays": [{"id": "a", "image": "overlay.png", "slots": [{"start": 1, "duration": 1e999}]}]}"#,
                    field: "line 1, column …", reason: "not representable")
        expectError(#"{"version": 1, "overlays": [{"id": "a", "image": "overlay.png", "slots": [{"start": true, "duration": 1}]}]}"#,
                    field: "overlays[0].slots[0].start", reason: "number")
        expectError(#"{"version": 1, "postrolls": [{"id": "p"}]}"#, field: "postrolls[0].video", reason: "missing")
        // Ids are bounded where they come in (issue 45, 5): one line, 256 bytes at most.
        expectError(#"{"version": 1, "pause_ads": [{"id": "a\nb", "image": "pause.png"}]}"#, field: "pause_ads[0].id", reason: "line break")
        expectError("{\"version\": 1, \"pause_ads\": [{\"id\": \"\(String(repeating: "x", count: 300))\", \"image\": \"pause.png\"}]}",
                    field: "pause_ads[0].id", reason: "256 bytes")
        expectError(#"{"version": 1, "pause_ads": [{"id": "a", "image": "pause.png", "content": "episode-1"}]}"#,
                    field: "pause_ads[0].content", reason: "array")
        expectError(#"{"version": 1, "pause_ads": [{"id": "a", "image": "pause.png", "max_per_episode": 0}]}"#,
                    field: "pause_ads[0].max_per_episode", reason: "positive")
        XCTAssertThrowsError(try LocalCatalog(folder: folder.appendingPathComponent("nowhere"))) { error in
            XCTAssertEqual((error as? CatalogError)?.field, "(file)")
        }
    }

    /// An id from outside keeps to one bound (`AdIdentifier`): a VAST ad's id of a hundred
    /// kilobytes with line breaks in it comes out on one line of 256 bytes at most — the ledger's
    /// line, the CSV logs and the fleet's messages never carry it as it came (issue 45, 5).
    func testIdsFromOutsideAreBoundedWhereTheyComeIn() throws {
        let huge = String(repeating: "ab\ncd\r", count: 20_000)
        let document = try VASTDocument.parse(Data("""
            <VAST version="4.1"><Ad id="\(huge)"><InLine><AdSystem>x</AdSystem><AdTitle>t</AdTitle>
            <AdServingId>\(huge)</AdServingId><Creatives><Creative id="\(huge)"><NonLinearAds><NonLinear id="\(huge)">
            <StaticResource creativeType="image/png"><![CDATA[http://127.0.0.1/x.png]]></StaticResource></NonLinear></NonLinearAds></Creative></Creatives>
            </InLine></Ad></VAST>
            """.utf8))
        let ad = try XCTUnwrap(document.ads.first)
        for id in [ad.id, ad.adServingID, ad.creatives.first?.id, ad.creatives.first?.nonLinears.first?.id] {
            let id = try XCTUnwrap(id)
            XCTAssertLessThanOrEqual(id.utf8.count, AdIdentifier.maxBytes)
            XCTAssertNil(AdIdentifier.refusal(id), id)
            XCTAssertTrue(id.hasPrefix("ab"), id)
            XCTAssertFalse(id.unicodeScalars.contains { $0.value < 0x20 }, "no line break: \(id)")
        }
        XCTAssertEqual(AdIdentifier.bounded("plain-id"), "plain-id", "an id within the bound is untouched")
    }

    /// Files are resolved in one place (`SafeFile`): a symlink inside the folder to a good
    /// file serves; one that leads outside, a FIFO and a directory are refused, the size taken
    /// from the target.
    func testSymlinksFIFOsAndDirectoriesAmongTheCreatives() async throws {
        let outside = FileManager.default.temporaryDirectory.appendingPathComponent("outside-\(UUID().uuidString).png")
        try Data([1, 2, 3]).write(to: outside)
        defer { try? FileManager.default.removeItem(at: outside) }
        try FileManager.default.createSymbolicLink(atPath: folder.appendingPathComponent("inside-link.png").path, withDestinationPath: "overlay.png")
        try FileManager.default.createSymbolicLink(atPath: folder.appendingPathComponent("escape.png").path, withDestinationPath: outside.path)
        XCTAssertEqual(mkfifo(folder.appendingPathComponent("fifo.png").path, 0o600), 0)
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("dir.png"), withIntermediateDirectories: true)
        let catalog = try write(#"{"version": 1, "pause_ads": [{"id": "a", "image": "inside-link.png"}, {"id": "b", "image": "escape.png"},"# +
                                #"{"id": "c", "image": "fifo.png"}, {"id": "d", "image": "dir.png"}]}"#)
        let inside = try await ad(catalog, .pauseAd)
        guard case .image(let path, _, _)? = inside?.content else { return XCTFail("\(String(describing: inside))") }
        XCTAssertEqual(path, folder.resolvingSymlinksInPath().appendingPathComponent("overlay.png").path, "served by its real path")
        for (id, reason) in [("b", "outside"), ("c", "FIFO"), ("d", "directory")] {
            do {
                _ = try await ad(catalog, .pauseAd)
                XCTFail("\(id) was served")
            } catch let error as CatalogError {
                XCTAssertTrue(error.reason.contains(reason), "\(id): \(error)")
                XCTAssertEqual(error.field, "\(id).image")
            }
        }
    }

    func testAManifestThatIsNoFileOrNoTextIsAClearError() throws {
        try FileManager.default.createDirectory(at: folder.appendingPathComponent("catalog.json"), withIntermediateDirectories: true)
        XCTAssertThrowsError(try LocalCatalog(folder: folder)) { error in
            XCTAssertTrue("\(error)".contains("is a directory"), "\(error)")
        }
        try FileManager.default.removeItem(at: folder.appendingPathComponent("catalog.json"))
        try Data([0x7B, 0xFF, 0xFE, 0x7D]).write(to: folder.appendingPathComponent("catalog.json"))
        XCTAssertThrowsError(try LocalCatalog(folder: folder)) { error in
            XCTAssertTrue("\(error)".contains("UTF-8"), "\(error)")
        }
    }

    /// Text that would cost the renderer what a freeze costs — 1,000 characters of a letter and
    /// 49 combining marks each (99 KB) — is refused by name, with the bound it passes.
    func testTextBeyondItsBoundIsRefusedWithTheReason() throws {
        let stacked = String(repeating: "a" + String(repeating: "\u{301}", count: 49), count: 1000)
        try Data(#"{"version": 1, "overlays": [{"id": "heavy", "text": "\#(stacked)", "slots": [{"start": 1, "duration": 2}]}]}"#.utf8)
            .write(to: folder.appendingPathComponent("catalog.json"))
        XCTAssertThrowsError(try LocalCatalog(folder: folder)) { error in
            XCTAssertTrue("\(error)".contains("overlays[0].text") && "\(error)".contains("2048 bytes"), "\(error)")
        }
    }

    /// A large catalog is an indexed one: the earliest slot at or after a position, per
    /// content id and for every episode, among 20,000 slots.
    func testManySlotsAreServedInOrderOfStart() async throws {
        var overlays: [String] = []
        for e in 0..<200 {
            let slots = (0..<100).map { #"{"start": \#(Double($0 * 200 + e)), "duration": 5}"# }.joined(separator: ",")
            let content = e % 2 == 0 ? "" : #", "content": ["episode-2"]"#
            overlays.append(#"{"id": "ov-\#(e)", "text": "t", "slots": [\#(slots)]\#(content)}"#)
        }
        let catalog = try write(#"{"version": 1, "overlays": [\#(overlays.joined(separator: ","))]}"#)
        let forOne = try await ad(catalog, .overlay, "episode-1", at: 1001.5)
        XCTAssertEqual(forOne?.slotStart, 1002, "ov-2's slot 5 (odd entries are episode 2's)")
        XCTAssertEqual(forOne?.id, "ov-2")
        let forTwo = try await ad(catalog, .overlay, "episode-2", at: 1000.5)
        XCTAssertEqual(forTwo?.slotStart, 1001)
        XCTAssertEqual(forTwo?.id, "ov-1")
        let last = try await ad(catalog, .overlay, "episode-1", at: 19_999)
        XCTAssertNil(last, "nothing starts after the last slot")
    }

    /// A slot whose overlay ended is not served again while the position has not moved past
    /// its start (time-pos moves a frame at a time): the cursor looks after it. A seek moves
    /// the cursor to the playhead, back as well as forward.
    func testTheSlotCursorNeverServesAnEndedSlotAgainUntilASeekBack() async throws {
        let cursor = SlotCursor(try write("""
            {"version": 1, "overlays": [{"id": "a", "image": "overlay.png", "slots": [{"start": 2, "duration": 1}]},
                                        {"id": "b", "image": "overlay.png", "slots": [{"start": 4, "duration": 1}]}]}
            """))
        var served: String?
        func next(at position: Double) async throws -> String? {
            try await cursor.ad(for: AdRequest(content: ContentInfo(id: "e"), kind: .overlay, position: position))?.id
        }
        served = try await next(at: 0)
        XCTAssertEqual(served, "a")
        cursor.passed(2)                                   // a's overlay ended at 2.000 (paused in its first frame)
        served = try await next(at: 2)
        XCTAssertEqual(served, "b", "the ended slot was served again")
        cursor.passed(4)
        served = try await next(at: 4)
        XCTAssertNil(served)
        cursor.seeked(to: 1)                               // the viewer went back
        served = try await next(at: 1)
        XCTAssertEqual(served, "a")
        cursor.seeked(to: 3)
        served = try await next(at: 3)
        XCTAssertEqual(served, "b")
        let pause = try await cursor.ad(for: AdRequest(content: ContentInfo(id: "e"), kind: .pauseAd, position: 0))
        XCTAssertNil(pause, "other kinds pass through (this catalog has no pause ad)")
    }

    /// R26: squeezebacks share the overlay chain's slots (a request for the next non-linear
    /// slot gets whichever comes first), with their layout; every layout field is judged.
    func testR26SqueezebacksAreSlotsOfTheOverlayChainWithTheirLayout() async throws {
        let catalog = try write("""
        {"version": 2,
         "overlays": [{"id": "ov-1", "image": "overlay.png", "slots": [{"start": 2, "duration": 5}, {"start": 40, "duration": 5}]}],
         "squeezebacks": [{"id": "sq-1", "image": "overlay.png", "slots": [{"start": 20, "duration": 15}], "layout": "frame", "scale": 0.8,
                           "transition": 0.5, "background": "#112233", "advertiser": "Acme"},
                          {"id": "sq-2", "text": "Winter sale", "slots": [{"start": 60, "duration": 10}]}]}
        """)
        let first = try await ad(catalog, .overlay, at: 0)
        XCTAssertEqual(first?.kind, .overlay)
        let second = try await ad(catalog, .overlay, at: 10)
        XCTAssertEqual(second?.id, "sq-1")
        XCTAssertEqual(second?.kind, .squeezeback)
        XCTAssertEqual(second?.slotStart, 20)
        XCTAssertEqual(second?.duration, 15)
        XCTAssertEqual(second?.squeezeback, SqueezebackLayout(shape: .frame, scale: 0.8, transition: 0.5, background: 0x112233))
        XCTAssertEqual(second?.advertiser, "Acme")
        let third = try await ad(catalog, .overlay, at: 50)
        XCTAssertEqual(third?.id, "sq-2")
        XCTAssertEqual(third?.squeezeback, .standard, "the defaults: l-right, 0.66, 1 s")
        XCTAssertTrue(catalog.mayFill(.overlay, content: ContentInfo(id: "episode-1"), at: 55), "a squeezeback slot is the chain's")
        let none = try await ad(catalog, .squeezeback, at: 0)
        XCTAssertNil(none, "a squeezeback is asked for as the overlay chain's slot, never alone")

        expectError(#"{"version": 1, "squeezebacks": [{"id": "s", "image": "overlay.png"}]}"#, field: "squeezebacks[0].slots", reason: "a squeezeback needs at least one slot")
        expectError(#"{"version": 1, "squeezebacks": [{"id": "s", "video": "postroll.mp4", "slots": [{"start": 1, "duration": 2}]}]}"#,
                    field: "squeezebacks[0]", reason: "exactly one of")
        for (field, value, reason) in [("layout", #""l-shape""#, "is not a layout (l-right, l-left, frame, side-by-side)"),
                                       ("scale", "0.3", "0.5–0.9"), ("scale", "0.95", "0.5–0.9"), ("transition", "6", "0–5"),
                                       ("background", #""red""#, "#RRGGBB"), ("background", ##""#12345G""##, "#RRGGBB")] {
            expectError(#"{"version": 1, "squeezebacks": [{"id": "s", "image": "overlay.png", "slots": [{"start": 1, "duration": 2}], ""#
                        + field + #"": "# + value + "}]}", field: "squeezebacks[0].\(field)", reason: reason)
        }
        expectError(#"{"version": 1, "overlays": [{"id": "o", "image": "overlay.png", "slots": [{"start": 1, "duration": 2}], "layout": "frame"}]}"#,
                    field: "overlays[0]", reason: "a squeezeback's")
    }

    /// R27: screensavers are pictures, rotated in turn (weights, caps, flights as every kind).
    func testR27ScreensaversArePicturesServedInTurn() async throws {
        let catalog = try write("""
        {"version": 2, "screensavers": [{"id": "ss-1", "image": "pause.png", "weight": 2}, {"id": "ss-2", "image": "pause2.png"}]}
        """)
        var served: [String] = []
        for _ in 0..<6 { served.append(try await ad(catalog, .screensaver)?.id ?? "-") }
        XCTAssertEqual(served.filter { $0 == "ss-1" }.count, 4, "2:1 by weight: \(served)")
        let next = try await ad(catalog, .screensaver)
        XCTAssertEqual(next?.kind, .screensaver)
        XCTAssertTrue(catalog.mayFill(.screensaver, content: ContentInfo(id: "episode-1"), at: 0))
        expectError(#"{"version": 1, "screensavers": [{"id": "s", "text": "Idle"}]}"#, field: "screensavers[0]", reason: "a screensaver is a picture")
    }
}
