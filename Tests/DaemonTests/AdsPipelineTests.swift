import AdRuntime
import AdTestSupport
import Foundation
import XCTest

/// The ad pipeline through the real daemon against a loopback ad server that records every
/// request and beacon (Tests/Fixtures/vast_server.py): overlays at every episode start, ads
/// from the cache while the server is gone (across a restart) with their impressions sent when
/// it is back, a box that starts with no network, a fallback chain, the request's macros.
final class AdsPipelineTests: XCTestCase {
    private var server: FixtureServer!

    override func setUpWithError() throws {
        _ = try Media.path("overlay.png")
        server = try FixtureServer(script: "vast_server.py")
    }

    override func tearDownWithError() throws { server.stop() }

    /// The overlay tag, with macros the daemon fills (and one it does not know).
    private var tag: String {
        server.base + "/vast/overlay-expiring.xml?cid=[CONTENTID]&pos=[BREAKPOSITION]&plc=[PLACEMENTTYPE]&cb=[CACHEBUSTING]"
            + "&ts=[TIMESTAMP]&lat=[LIMITADTRACKING]&gdpr=[GDPRCONSENT]&ifa=[IFA]&ua=[CLIENTUA]&x=[NOSUCHMACRO]"
    }

    private func startedOverlays(_ events: [[String: Any]]) -> [[String: Any]] {
        events.filter { $0["event"] as? String == "ad.started" && $0["kind"] as? String == "overlay" }
    }

    /// A fast server: an overlay at each of three episode starts (it loads in the moment
    /// between the episode coming in and its first frame, and waits for that frame). The tag
    /// reached the server with every macro filled as docs/reporting.md says: no `[` left.
    func testAFastServerShowsAnOverlayAtEveryEpisodeStartWithTheRequestsMacrosFilled() throws {
        let daemon = try DaemonProcess(extra: ["--ads", tag, "--gdpr-consent", "CO.y/z+1="])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.started", "player.item"]])
        let episodes = [try Media.path("episode-1.mp4"), try Media.path("episode-2.mp4"), try Media.path("episode-1.mp4")]
        _ = try daemon.connect().call("queue", ["paths": episodes])
        var overlays: [[String: Any]] = []
        while overlays.count < 3 { overlays.append(try events.event(named("ad.started", "kind", "overlay"))) }
        XCTAssertEqual(overlays.compactMap { $0["content_id"] as? String }, ["episode-1", "episode-2", "episode-1"])
        XCTAssertEqual(daemon.stop(), 0, daemon.log)

        let requested = try server.requests().keys.filter { $0.hasPrefix("/vast/overlay-expiring.xml?") }
        XCTAssertFalse(requested.isEmpty)
        // The first episode's pre-roll request learns that the tag answers plain VAST: once.
        XCTAssertEqual(requested.filter { $0.contains("&pos=1&") }.count, 1, "\(requested)")
        let prerolls = try server.requests().filter { $0.key.hasPrefix("/vast/overlay-expiring.xml?") && $0.key.contains("&pos=1&") }
        XCTAssertEqual(prerolls.values.reduce(0, +), 1, "one pre-roll request, then none: \(prerolls)")
        for path in requested {
            XCTAssertFalse(path.contains("[") || path.contains("]"), "a macro left: \(path)")
            let items = Dictionary(URLComponents(string: "http://x" + path)!.queryItems!.map { ($0.name, $0.value ?? "") }) { $1 }
            XCTAssertTrue(["episode-1", "episode-2"].contains(items["cid"] ?? ""), path)
            XCTAssertTrue(["1", "2", "3", "4"].contains(items["pos"] ?? ""), path)
            XCTAssertEqual(items["plc"], "1")
            XCTAssertNotNil(items["cb"]?.range(of: #"^\d{8}$"#, options: .regularExpression), path)
            XCTAssertNotNil(items["ts"]?.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#, options: .regularExpression), path)
            XCTAssertEqual(items["lat"], "0")
            XCTAssertEqual(items["gdpr"], "CO.y/z+1=", "decoded once: exactly the value")
            XCTAssertEqual(items["ifa"], "-1", "not configured")
            XCTAssertTrue(items["ua"]?.hasPrefix("adplayerd/") == true, path)
            XCTAssertEqual(items["x"], "-1", "an unknown macro")
        }
    }

    /// The server gone after one episode: the next episode shows the cached overlay, and so
    /// does the daemon after a restart (within the ad's Expires). Once the server is back, each
    /// impression arrives once, stamped with when its overlay was shown — not when it was sent.
    func testWithTheServerGoneTheCachedOverlayShowsAndItsImpressionsArriveWithTheirShowTime() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("pipeline-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: state) }
        let flags = ["--ads", tag, "--time-sync-wait", "0", "--beacon-max-delay", "1", "--state-dir", state]
        var shows: [(id: String, before: Date, after: Date)] = []
        func showOverlay(_ daemon: DaemonProcess, _ episode: String) throws {
            let events = try daemon.connect()
            _ = try events.call("subscribe", ["events": ["ad.started"]])
            let before = Date()
            _ = try daemon.connect().call("open", ["path": try Media.path(episode)])
            let started = try events.event(named("ad.started", "kind", "overlay"))
            shows.append((started["instance"] as? String ?? "?", before, Date()))
        }
        let first = try DaemonProcess(extra: flags)
        try showOverlay(first, "episode-1.mp4")
        XCTAssertTrue(waitUntil(timeout: 20) { ((try? self.server.counts()) ?? [:]).keys.contains { $0.hasPrefix("/b/imp-ov") } })
        try server.get("/_down")
        try showOverlay(first, "episode-2.mp4")
        XCTAssertEqual(first.stop(), 0, first.log)
        let second = try DaemonProcess(extra: flags)
        try showOverlay(second, "episode-1.mp4")
        let (status, export) = try runToEnd(Executables.adplayerd, ["plays", "export", "--state-dir", state, "--format", "jsonl"])
        XCTAssertEqual(status, 0, export)
        let sources = export.split(separator: "\n").compactMap { line -> String? in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["source"] as? String
        }
        XCTAssertEqual(sources, ["vast", "vast-cache", "vast-cache"], export)

        try server.get("/_up")
        XCTAssertTrue(waitUntil(timeout: 60) { ((try? self.server.counts()) ?? [:]).filter { $0.key.hasPrefix("/b/imp-ov") }.count == 3 },
                      "\(String(describing: try? server.counts()))")
        XCTAssertEqual(second.stop(), 0, second.log)
        let impressions = try server.counts().filter { $0.key.hasPrefix("/b/imp-ov") }
        XCTAssertTrue(impressions.values.allSatisfy { $0 == 1 }, "each once: \(impressions)")
        let stamps = impressions.keys.compactMap { path -> Date? in
            let items = URLComponents(string: "http://x" + path)?.queryItems ?? []
            XCTAssertEqual(items.first { $0.name == "sid" }?.value, "srv-42", path)
            return items.first { $0.name == "ts" }?.value.flatMap { ISO8601DateFormatter.withMilliseconds.date(from: $0) }
        }.sorted()
        XCTAssertEqual(stamps.count, 3)
        for (stamp, show) in zip(stamps, shows) {
            XCTAssertGreaterThanOrEqual(stamp.timeIntervalSince1970, show.before.timeIntervalSince1970 - 0.001, "stamped at show time")
            XCTAssertLessThanOrEqual(stamp.timeIntervalSince1970, show.after.timeIntervalSince1970 + 0.001, "stamped at show time, not at send")
        }
    }

    /// Issue 23 item 5: with the creative cache on a full disk (a real tmpfs, full), the VAST
    /// overlay still shows — held in memory — and is billed: its impression reaches the ad
    /// server and it is a play. The log says so once; nothing is written to the full disk.
    func testOnAFullDiskTheVASTOverlayShowsFromMemoryAndIsBilled() throws {
        let disk: FullDisk
        do { disk = try FullDisk(kib: 256) } catch let why as FullDisk.Unavailable { throw XCTSkip("\(why)") }
        defer { disk.unmount() }
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("fulldisk-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: state) }
        let daemon = try DaemonProcess(extra: ["--ads", tag, "--time-sync-wait", "0", "--beacon-max-delay", "1", "--state-dir", state],
                                       environment: ["CACHE_DIRECTORY": disk.path + "/creatives"])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.started", "ad.error"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-1.mp4")])
        let started = try events.event { $0["event"] as? String == "ad.error" || ($0["event"] as? String == "ad.started" && $0["kind"] as? String == "overlay") }
        XCTAssertEqual(started["event"] as? String, "ad.started", "\(started)\n\(daemon.log)")
        XCTAssertTrue(waitUntil(timeout: 20) { ((try? self.server.counts()) ?? [:]).keys.contains { $0.hasPrefix("/b/imp-ov") } },
                      "the impression reaches the ad server")
        XCTAssertTrue(waitUntil(timeout: 20) {
            let plays = ((try? daemon.connect().call("plays"))?["result"] as? [String: Any])?["plays"] as? [[String: Any]] ?? []
            return plays.contains { $0["kind"] as? String == "overlay" && $0["source"] as? String == "vast" }
        }, "a play")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        XCTAssertEqual(daemon.log.components(separatedBy: "kept in memory instead").count - 1, 1, daemon.log)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: disk.path + "/creatives/objects"), [])
        XCTAssertEqual((try? FileManager.default.contentsOfDirectory(atPath: "/dev/shm"))?.filter { $0.hasPrefix("adplayerd-creatives-") } ?? [], [],
                       "released at exit")
    }

    /// VAST 4's `notUsed` (issue 26): a pause ad fetched for a pause that ended before it
    /// appeared fires its `notUsed` URL once — the ad server sells the slot again — and no
    /// impression; a pause long enough shows the next one, billed, with no `notUsed`.
    func testAPauseAdFetchedAndNeverShownFiresNotUsedOnce() throws {
        let daemon = try DaemonProcess(extra: ["--ads", server.base + "/vast/notused-pause.xml", "--pause-ad-delay", "5",
                                               "--time-sync-wait", "0", "--beacon-max-delay", "1"])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.*", "player.playing"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-long.mp4")])
        _ = try events.event(named("player.playing"))
        _ = try daemon.connect().call("pause")
        _ = try events.event(named("ad.loaded", "kind", "pause"))
        _ = try daemon.connect().call("play")
        let ended = try events.event(named("ad.ended", "kind", "pause"))
        XCTAssertEqual(ended["reason"] as? String, "played")
        XCTAssertTrue(waitUntil(timeout: 20) { ((try? self.server.counts()) ?? [:]).keys.contains("/b/notused?cid=episode-long&pos=4") })
        // A pause long enough: shown and billed.
        _ = try daemon.connect().call("pause")
        _ = try events.event(named("ad.started", "kind", "pause"))
        XCTAssertTrue(waitUntil(timeout: 20) { ((try? self.server.counts()) ?? [:]).keys.contains("/b/imp-pause?pos=4") })
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        // (The tag fills the episode's overlays too — BREAKPOSITION 2 —, counted apart.)
        let counts = try server.counts()
        XCTAssertEqual(counts["/b/notused?cid=episode-long&pos=4"], 1, "once: \(counts)")
        XCTAssertEqual(counts["/b/imp-pause?pos=4"], 1, "\(counts)")
    }

    /// VMAP through the real daemon (issue 26): the schedule asked for once for the episode —
    /// by its pre-roll's request, before its first frame — the pre-roll played before the
    /// episode comes in, the overlay break's instances at 1 s and 4 s of content time, the
    /// mid-roll at 6 s holding the content there (skipped past its skip offset with `skip`,
    /// the content resuming at 6 s), `breakStart`/`breakEnd` once a break, the breaks this
    /// player does not play told through their `error` URLs once with 1003.
    func testAVMAPEpisodePlaysItsBreaksAndReportsWhatItCannotPlayOnce() throws {
        let daemon = try DaemonProcess(extra: ["--ads", server.base + "/vast/vmap-episode.xml?cid=[CONTENTID]", "--time-sync-wait", "0",
                                               "--beacon-max-delay", "1"])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.started", "ad.ended", "ad.break_started", "ad.break_ended", "ad.paused", "ad.resumed",
                                                     "ad.requested", "player.playing", "player.paused", "player.item"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-long.mp4")])
        _ = try events.event(named("ad.break_started", "kind", "preroll"))
        _ = try events.event(named("ad.started", "kind", "preroll"))
        XCTAssertFalse(events.events.contains { $0["event"] as? String == "player.item" }, "the episode waits for its pre-roll")
        XCTAssertEqual(try events.event(named("ad.ended", "kind", "preroll"))["reason"] as? String, "completed")
        _ = try events.event(named("ad.break_ended", "kind", "preroll"))
        _ = try events.event(named("player.item"))
        var starts: [Double] = []
        for _ in 0..<2 {
            _ = try events.event(named("ad.started", "kind", "overlay"))
            let ended = try events.event(named("ad.ended", "kind", "overlay"))
            XCTAssertEqual(ended["reason"] as? String, "completed")
            let status = try XCTUnwrap(try daemon.connect().call("status")["result"] as? [String: Any])
            starts.append(status["position"] as? Double ?? -1)
        }
        let held = try events.event(named("ad.break_started", "kind", "midroll"))
        XCTAssertEqual(held["position"] as? Double ?? 0, 6, accuracy: 0.001)
        _ = try events.event(named("ad.started", "kind", "midroll"))
        let status = try XCTUnwrap(try daemon.connect().call("status")["result"] as? [String: Any])
        XCTAssertEqual((status["break"] as? [String: Any])?["kind"] as? String, "midroll")
        XCTAssertEqual(status["position"] as? Double ?? 0, 6, accuracy: 0.05, "held at its time")
        let seek = try daemon.connect().call("seek", ["to": 20])
        XCTAssertEqual((seek["error"] as? [String: Any])?["code"] as? String, "ad_playing")
        // The viewer's pause pauses the ad, not the content: no pause ad, no player.paused.
        _ = try daemon.connect().call("pause")
        _ = try events.event(named("ad.paused", "kind", "midroll"))
        _ = try daemon.connect().call("play")
        _ = try events.event(named("ad.resumed", "kind", "midroll"))
        XCTAssertFalse(events.events.contains { $0["event"] as? String == "player.paused" }, "\(events.events)")
        XCTAssertFalse(events.events.contains { $0["event"] as? String == "ad.requested" && $0["kind"] as? String == "pause" })
        // Skippable after 1 s of the ad: asked until it is.
        XCTAssertTrue(waitUntil(timeout: 20) { (try? daemon.connect().call("skip"))?["ok"] as? Bool == true })
        XCTAssertEqual(try events.event(named("ad.ended", "kind", "midroll"))["reason"] as? String, "skipped")
        let resumedAt = try events.event(named("ad.break_ended", "kind", "midroll"))
        XCTAssertEqual(resumedAt["position"] as? Double ?? 0, 6, accuracy: 0.001)
        // (The episode's first `player.playing`, at 0, was kept meanwhile.)
        let playing = try events.event { named("player.playing")($0) && ($0["position"] as? Double ?? 0) > 1 }
        XCTAssertEqual(playing["position"] as? Double ?? 0, 6, accuracy: 0.05, "the same episode from 6 s")
        XCTAssertTrue(waitUntil(timeout: 20) {
            let counts = (try? self.server.counts()) ?? [:]
            return counts["/b/break-start?break=ov"] == 2 && counts["/b/break-end?break=ov"] == 2 && counts["/b/break-end?break=mid"] == 1
        }, "\(String(describing: try? server.counts()))")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        let counts = try server.counts()
        for name in ["cue", "display"] {
            XCTAssertEqual(counts["/b/vmap-error?break=\(name)&code=1003"], 1, "\(name): \(counts)")
        }
        XCTAssertNil(counts.keys.first { $0.contains("break=preroll") }, "\(counts)")
        for name in ["pre", "mid"] {
            XCTAssertEqual(counts["/b/break-start?break=\(name)"], 1, "\(name): \(counts)")
            XCTAssertEqual(counts["/b/break-end?break=\(name)"], 1, "\(name): \(counts)")
        }
        XCTAssertEqual(counts["/b/imp-vmap-mid?cp=00%3A00%3A06.000&bp=2"], 1, "the mid-roll's impression at 6 s, BREAKPOSITION 2: \(counts)")
        XCTAssertEqual(counts.filter { $0.key.hasPrefix("/b/imp-vmap-ov") }.values.reduce(0, +), 2, "\(counts)")
        let requested = try server.requests().filter { $0.key.hasPrefix("/vast/vmap-episode.xml?") }
        XCTAssertEqual(requested.values.reduce(0, +), 1, "the schedule, once for the episode: \(requested)")
        XCTAssertTrue(starts.allSatisfy { $0 > 1 }, "\(starts)")
    }

    /// No network at start: the first episode plays at once (its overlay request fails, nothing
    /// waits for it); once the server appears, the next episode has its overlay.
    /// Every VAST failure says its code: a wrapper loop is 302 in `ad.error`'s `vast_error`
    /// and in the errors metric's label (was: only a creative that could not be shown, 405).
    func testEveryVASTFailureCarriesItsCode() throws {
        let daemon = try DaemonProcess(extra: ["--ads", server.base + "/vast/wrapper-loop.xml"])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.error"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-1.mp4")])
        let error = try events.event(named("ad.error", "kind", "overlay"))
        XCTAssertEqual(error["vast_error"] as? Int, 302, "\(error)")
        // The metrics count the error as the reporter records it, after the event is told.
        var text = ""
        XCTAssertTrue(waitUntil(timeout: 20) {
            let metrics = try? daemon.connect().call("metrics")
            text = (metrics?["result"] as? [String: Any])?["text"] as? String ?? ""
            return text.contains(#"vast_error="302""#)
        }, text)
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    /// Without a state folder, a SIGHUP keeps the creatives the playing episode prefetched:
    /// its post-roll, downloaded at the episode's start, plays from the cache after the reload
    /// while the server is gone (was: the reload deleted the temporary cache under it).
    func testAReloadWithoutAStateFolderKeepsThePlayingEpisodesCreatives() throws {
        let daemon = try DaemonProcess(extra: ["--ads", server.base + "/vast/inline-linear-3.0.xml", "--state-dir", "/proc/adplayerd-no-state",
                                               "--pause-ad-delay", "600"])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.started", "ad.error", "player.ended"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-1.mp4")])
        XCTAssertTrue(waitUntil(timeout: 30) { ((try? self.server.requests()) ?? [:])["/media/postroll.mp4"] != nil }, "the post-roll is prefetched")
        _ = try daemon.connect().call("pause")
        try server.get("/_down")
        kill(daemon.process.processIdentifier, SIGHUP)
        XCTAssertTrue(waitUntil(timeout: 30) { daemon.log.contains("SIGHUP: configuration and ad source reloaded") }, daemon.log)
        _ = try daemon.connect().call("play")
        let started = try events.event(named("ad.started", "kind", "postroll"))
        XCTAssertEqual(started["content_id"] as? String, "episode-1")
        XCTAssertFalse(events.events.contains { $0["event"] as? String == "ad.error" && $0["kind"] as? String == "postroll" }, "\(events.events)")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    func testStartedWithNoNetworkItPlaysAtOnceAndShowsAdsWhenTheServerAppears() throws {
        try server.get("/_down")
        let daemon = try DaemonProcess(extra: ["--ads", tag])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.*", "player.*"]])
        _ = try daemon.connect().call("queue", ["paths": [try Media.path("episode-1.mp4"), try Media.path("episode-2.mp4")]])
        let playing = try events.event(named("player.playing"))
        XCTAssertEqual(playing["position"] as? Double ?? -1, 0, accuracy: 0.5)
        _ = try events.event(named("ad.error", "kind", "overlay"))
        try server.get("/_up")
        _ = try events.event { $0["event"] as? String == "player.item" && ($0["path"] as? String)?.hasSuffix("episode-2.mp4") == true }
        let overlay = try events.event(named("ad.started", "kind", "overlay"))
        XCTAssertEqual(overlay["content_id"] as? String, "episode-2")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    /// `ads` twice: a VAST tag with nothing to give, then the local catalog, which serves; the
    /// catalog's overlay shows. `ads-check` shows the chain, from the flags and from a file.
    func testAFallbackChainAsksTheNextSourceAndAdsCheckShowsIt() throws {
        let catalog = try makeCatalog(#"{"version": 1, "overlays": [{"id": "house", "image": "overlay.png", "slots": [{"start": 0.2, "duration": 1}]}]}"#)
        let empty = server.base + "/vast/empty.xml"
        let daemon = try DaemonProcess(extra: ["--ads", empty, "--ads", catalog.path])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.started"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-1.mp4")])
        XCTAssertEqual(try events.event(named("ad.started", "kind", "overlay"))["ad_id"] as? String, "house")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        XCTAssertTrue(daemon.log.contains("ads from VAST \(empty)"), daemon.log)
        XCTAssertTrue(daemon.log.contains(", then catalog \(catalog.path)"), daemon.log)

        let (status, output) = try runToEnd(Executables.adplayerd, ["ads-check", empty, catalog.path])
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(output.contains("1. \(empty) (vast-url)"), output)
        XCTAssertTrue(output.contains("2. \(catalog.path) (catalog), asked when the sources before it fill nothing"), output)
        let config = catalog.appendingPathComponent("adplayerd.conf").path
        try Data("ads = \(empty)\nads = \(catalog.path)\n".utf8).write(to: URL(fileURLWithPath: config))
        let (fromFile, json) = try runToEnd(Executables.adplayerd, ["ads-check", "--config", config, "--json"])
        XCTAssertEqual(fromFile, 0, json)
        let chain = (try JSONSerialization.jsonObject(with: Data(json.utf8)) as? [String: Any])?["chain"] as? [[String: Any]]
        XCTAssertEqual(chain?.compactMap { $0["source"] as? String }, [empty, catalog.path])
    }
    /// R14 as amended (issue 45): every pass of a looped episode is a new viewing for every
    /// source. Through the real daemon on real mpv, a 4 s episode looped three times — with
    /// `loop on` (repeat one) and with `repeat all` over it alone — gets its catalog pre-roll
    /// and post-roll each pass, and a VMAP episode its schedule asked again and its pre-roll,
    /// mid-roll and post-roll each pass. (Before: `loop on` played one pre-roll and no post-roll
    /// in seven passes; a VMAP episode's second pass had no ad at all.)
    func testEveryPassOfALoopedEpisodeGetsItsPrerollBreaksAndPostroll() throws {
        let catalog = try makeCatalog("""
            {"version": 1, "prerolls": [{"id": "pre-1", "video": "postroll.mp4"}], "postrolls": [{"id": "post-1", "video": "postroll.mp4"}]}
            """)
        defer { try? FileManager.default.removeItem(at: catalog) }
        let cases: [(ads: String, loop: [String: Any], kinds: [String])] = [
            (catalog.path, ["on": true], ["preroll", "postroll"]),
            (catalog.path, ["mode": "all"], ["preroll", "postroll"]),
            (server.base + "/vast/vmap-loop.xml", ["on": true], ["preroll", "midroll", "postroll"]),
        ]
        for (ads, mode, kinds) in cases {
            let daemon = try DaemonProcess(extra: ["--ads", ads, "--time-sync-wait", "0"])
            let events = try daemon.connect()
            _ = try events.call("subscribe", ["events": ["ad.started", "player.item"]])
            _ = try daemon.connect().call(mode["on"] != nil ? "loop" : "repeat", mode)
            _ = try daemon.connect().call("open", ["path": try Media.path("episode-1.mp4")])
            var seen: [String] = []
            // Three whole passes: each one's pre-roll, its item, its breaks, its post-roll.
            while seen.filter({ $0 == "postroll" }).count < 3 {
                let event = try events.event(timeout: 60) { $0["event"] as? String == "ad.started" || ($0["event"] as? String == "player.item" && $0["path"] is String) }
                seen.append(event["event"] as? String == "player.item" ? "item" : event["kind"] as? String ?? "?")
            }
            XCTAssertEqual(daemon.stop(), 0, daemon.log)
            let linear = seen.filter { kinds.contains($0) || $0 == "item" }
            let pass = ["preroll", "item"] + kinds.dropFirst()
            XCTAssertEqual(linear, pass + pass + pass, "\(ads) \(mode): \(seen)")
            if ads.hasPrefix("http") {
                let asked = try server.requests().filter { $0.key.hasPrefix("/vast/vmap-loop.xml") }.values.reduce(0, +)
                XCTAssertGreaterThanOrEqual(asked, 3, "the schedule asked again each viewing")
                XCTAssertEqual(try server.counts()["/b/break-start?break=post"], 3)
            }
        }
    }
}

/// R26 through the real daemon: a VAST NonLinear marked as a squeezeback fills the overlay
/// chain's slot, plays in its layout over the episode and is billed like one.
extension AdsPipelineTests {
    func testR26AVASTSqueezebackPlaysInItsLayoutAndIsBilledWhenOutWithQuartilesOverItsTime() throws {
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("squeeze-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: state) }
        let daemon = try DaemonProcess(extra: ["--ads", server.base + "/vast/squeezeback.xml", "--state-dir", state, "--time-sync-wait", "0"])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.started", "ad.ended"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-long.mp4")])
        let started = try events.event(named("ad.started", "kind", "squeezeback"))
        XCTAssertEqual(started["ad_id"] as? String, "sq-42")
        // What the page, `adplayerctl status` and the bridge show: the status's ad on screen.
        let status = try daemon.connect().call("status")
        let onScreen = (status["result"] as? [String: Any])?["ad"] as? [String: Any]
        XCTAssertEqual(onScreen?["kind"] as? String, "squeezeback", "\(status)")
        let ended = try events.event(named("ad.ended", "kind", "squeezeback"))
        XCTAssertEqual(ended["reason"] as? String, "completed", "\(ended)")
        let billed = ["sq-creativeView", "sq-start", "sq-firstQuartile", "sq-midpoint", "sq-thirdQuartile", "sq-complete"]
        XCTAssertTrue(waitUntil(timeout: 20) {
            let counts = (try? self.server.counts()) ?? [:]
            return billed.allSatisfy { counts["/b/\($0)"] == 1 } && counts.keys.contains { $0.hasPrefix("/b/sq-impression?cp=") }
        }, "\(String(describing: try? server.counts()))")
        let plays = try daemon.connect().call("plays", ["limit": 10])
        let rows = ((plays["result"] as? [String: Any])?["plays"] as? [[String: Any]]) ?? []
        let row = try XCTUnwrap(rows.first { $0["ad_id"] as? String == "sq-42" }, "\(plays)")
        XCTAssertEqual(row["kind"] as? String, "squeezeback")
        XCTAssertEqual(row["reason"] as? String, "completed")
        XCTAssertEqual(row["seconds"] as? Double ?? 0, 4, accuracy: 0.5, "on screen: its time out, not the content's moves")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        let counts = try server.counts()
        XCTAssertNil(counts["/b/sq-close"], "\(counts)")
        XCTAssertNil(counts["/b/sq-notUsed"], "\(counts)")
        XCTAssertEqual(counts.filter { $0.key.hasPrefix("/b/sq-impression") }.values.reduce(0, +), 1, "\(counts)")
    }
}

/// R27 through the real daemon: a linear ad's icons drawn over it, each `IconViewTracking`
/// sent once to the ad server (macros filled), the fallback image never fetched.
extension AdsPipelineTests {
    func testR27ALinearAdsIconViewsReachTheAdServerOnce() throws {
        let daemon = try DaemonProcess(extra: ["--ads", server.base + "/vast/linear-icons.xml", "--time-sync-wait", "0"])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.ended"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-1.mp4")])
        let ended = try events.event(named("ad.ended", "kind", "postroll"))
        XCTAssertEqual(ended["reason"] as? String, "completed", "\(ended)")
        XCTAssertTrue(waitUntil(timeout: 20) {
            let counts = (try? self.server.counts()) ?? [:]
            return counts["/b/icon-view-sponsor"] == 1 && counts.keys.contains { $0.hasPrefix("/b/icon-view-adchoices?t=") }
        }, "\(String(describing: try? server.counts()))")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        let counts = try server.counts()
        let adChoices = counts.filter { $0.key.hasPrefix("/b/icon-view-adchoices") }
        XCTAssertEqual(adChoices.values.reduce(0, +), 1, "once: \(counts)")
        XCTAssertFalse(adChoices.keys.contains { $0.contains("[TIMESTAMP]") }, "its macro filled: \(adChoices)")
        XCTAssertEqual(counts["/b/icon-view-sponsor"], 1)
        XCTAssertNil(try server.requests()["/media/never-fetched.png"])
    }
}

/// R27 through the real daemon: a pause that lasts `screensaver-after` makes the screen idle;
/// the screensavers take the pause ad's place, each its own play with its impression, in turn
/// every `screensaver-rotate`, until the content plays.
extension AdsPipelineTests {
    func testR27AnIdleScreenShowsScreensaversInTurnEachItsOwnPlayUntilPlay() throws {
        let base = server.base
        let catalog = try makeCatalog("""
            {"version": 2, "pause_ads": [{"id": "pa-1", "image": "pause.png", "impression": ["\(base)/b/ss-pa"]}],
             "screensavers": [{"id": "ss-1", "image": "pause.png", "impression": ["\(base)/b/ss-1"]},
                              {"id": "ss-2", "image": "overlay.png", "impression": ["\(base)/b/ss-2"]}]}
            """)
        defer { try? FileManager.default.removeItem(at: catalog) }
        let daemon = try DaemonProcess(extra: ["--ads", catalog.path, "--screensaver-after", "3", "--screensaver-rotate", "5",
                                               "--time-sync-wait", "0"])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.started", "ad.ended", "player.playing"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-long.mp4")])
        _ = try events.event(named("player.playing"))
        _ = try daemon.connect().call("pause")
        _ = try events.event(named("ad.started", "kind", "pause"))
        let replaced = try events.event(named("ad.ended", "kind", "pause"))
        XCTAssertEqual(replaced["reason"] as? String, "replaced", "\(replaced)")
        let first = try events.event(named("ad.started", "kind", "screensaver"))
        let rotated = try events.event(named("ad.ended", "kind", "screensaver"))
        XCTAssertEqual(rotated["reason"] as? String, "limitReached")
        let second = try events.event(named("ad.started", "kind", "screensaver"))
        XCTAssertEqual(Set([first["ad_id"] as? String, second["ad_id"] as? String]), ["ss-1", "ss-2"], "in turn")
        _ = try daemon.connect().call("play")
        let played = try events.event(named("ad.ended", "kind", "screensaver"))
        XCTAssertEqual(played["reason"] as? String, "played", "anything that plays ends it")
        XCTAssertTrue(waitUntil(timeout: 20) {
            let counts = (try? self.server.counts()) ?? [:]
            return counts["/b/ss-1"] == 1 && counts["/b/ss-2"] == 1 && counts["/b/ss-pa"] == 1
        }, "each creative its own impression: \(String(describing: try? server.counts()))")
        let plays = try daemon.connect().call("plays", ["limit": 10])
        let rows = ((plays["result"] as? [String: Any])?["plays"] as? [[String: Any]]) ?? []
        XCTAssertEqual(rows.filter { $0["kind"] as? String == "screensaver" }.count, 2, "\(rows)")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }
}

extension ISO8601DateFormatter {
    /// `2026-12-01T06:08:41.123Z`: what `[TIMESTAMP]` holds.
    static var withMilliseconds: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}
