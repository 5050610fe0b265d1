import AdRuntime
import AdTestSupport
import AdTracking
import Foundation
import XCTest

/// What operators bill from and fleets watch, through the real daemon: proof of play against
/// what the socket said, a `kill -9` mid-play, the metrics file read by Prometheus' own parser,
/// the catalog's tracking URLs at a loopback ad server, a wall clock a month off.
final class ReportingTests: XCTestCase {
    private var server: FixtureServer!
    private var scratch: URL!

    override func setUpWithError() throws {
        server = try FixtureServer(script: "beacon_server.py")
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("reporting-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        server.stop()
        try? FileManager.default.removeItem(at: scratch)
    }

    /// A catalog whose entries carry tracking URLs (with macros) to the loopback ad server.
    private func trackedCatalog(overlaySlots: String = #"[{"start": 0.3, "duration": 1}]"#) throws -> URL {
        let b = server.base
        return try makeCatalog("""
            {"version": 1,
             "overlays": [{"id": "ov-1", "image": "overlay.png", "slots": \(overlaySlots),
                           "impression": ["\(b)/b/imp?cid=[CONTENTID]&ts=[TIMESTAMP]&pos=[BREAKPOSITION]"],
                           "tracking": {"creativeView": ["\(b)/b/view?cid=[CONTENTID]"], "close": ["\(b)/b/close"]}}],
             "pause_ads": [{"id": "pa-1", "image": "pause.png", "impression": ["\(b)/b/pause-imp?cid=[CONTENTID]"]}],
             "postrolls": [{"id": "pr-1", "video": "postroll.mp4", "impression": ["\(b)/b/pr-imp"],
                            "tracking": {"complete": ["\(b)/b/pr-complete"]}}]}
            """)
    }

    /// Two episodes with every kind of ad: `plays export`, run on the live daemon's database,
    /// lists exactly the ads the socket reported as started, with the time each was on screen;
    /// the catalog's tracking URLs reached the ad server with their macros filled.
    func testTheExportListsExactlyWhatTheSocketReportedStarted() throws {
        let daemon = try DaemonProcess(catalog: try trackedCatalog(), extra: ["--pause-ad-delay", "0.2", "--time-sync-wait", "0"])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.*", "player.*"]])
        let control = try daemon.connect()
        _ = try control.call("queue", ["paths": [try Media.path("episode-1.mp4"), try Media.path("episode-2.mp4")]])
        // Events a wait takes are not kept on the connection: kept here, with the rest at the end.
        var taken: [[String: Any]] = []
        taken.append(try events.event(named("ad.started", "kind", "overlay")))
        _ = try control.call("pause")
        taken.append(try events.event(named("ad.started", "kind", "pause")))
        _ = try control.call("play")
        // Both episodes to their end, with their post-rolls.
        taken.append(try events.event { $0["event"] as? String == "player.item" && ($0["path"] as? String)?.hasSuffix("episode-2.mp4") == true })
        var postrolls = 0
        while postrolls < 2 {
            taken.append(try events.event(named("ad.ended", "kind", "postroll")))
            postrolls += 1
        }
        let seen = taken + events.events
        let started = Set(seen.filter { $0["event"] as? String == "ad.started" }.compactMap { $0["instance"] as? String })
        let onScreen = Dictionary(seen.filter { $0["event"] as? String == "ad.ended" }.compactMap { e -> (String, Double)? in
            guard let id = e["instance"] as? String, let seconds = (e["on_screen"] as? NSNumber)?.doubleValue else { return nil }
            return (id, seconds)
        }, uniquingKeysWith: { $1 })
        XCTAssertGreaterThanOrEqual(started.count, 4, "an overlay, a pause ad, two post-rolls: \(seen)")

        let (status, output) = try runToEnd(Executables.adplayerd, ["plays", "export", "--state-dir", daemon.stateDir, "--format", "jsonl"])
        XCTAssertEqual(status, 0, output)
        let plays = output.split(separator: "\n").compactMap { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        XCTAssertEqual(Set(plays.compactMap { $0["id"] as? String }), started, "exactly the ads reported as started")
        for play in plays {
            guard let id = play["id"] as? String, let reported = onScreen[id] else { continue }
            XCTAssertEqual((play["seconds"] as? NSNumber)?.doubleValue ?? -1, reported, accuracy: 0.002, "\(play)")
            XCTAssertNotNil(play["ended"] as? String, "\(play)")
            XCTAssertEqual(play["source"] as? String, "catalog")
        }
        let csv = try runToEnd(Executables.adplayerd, ["plays", "export", "--state-dir", daemon.stateDir, "--format", "csv"]).output
        XCTAssertEqual(csv.split(separator: "\n").count, plays.count + 1, "a header and a row a play")

        // The catalog's tracking at the ad server: each impression once a start, macros filled.
        XCTAssertTrue(waitUntil(timeout: 30) { ((try? self.server.counts()) ?? [:]).keys.contains { $0.hasPrefix("/b/pr-complete") } })
        let counts = try server.counts()
        let impressions = counts.filter { $0.key.hasPrefix("/b/imp?") }
        XCTAssertEqual(impressions.values.reduce(0, +), plays.filter { $0["kind"] as? String == "overlay" }.count)
        for path in impressions.keys {
            let items = URLComponents(string: "http://x" + path)?.queryItems ?? []
            XCTAssertTrue(["episode-1", "episode-2"].contains(items.first { $0.name == "cid" }?.value ?? ""), path)
            XCTAssertEqual(items.first { $0.name == "pos" }?.value, "2", path)
            XCTAssertNotNil(items.first { $0.name == "ts" }?.value?.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"#, options: .regularExpression), path)
        }
        XCTAssertEqual(counts["/b/pr-imp"], 2)
        XCTAssertEqual(counts.filter { $0.key.hasPrefix("/b/pause-imp?cid=episode-1") }.count, 1)
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    /// `kill -9` while ads go on screen and proof of play is written: after it, every ad the
    /// socket reported as started has its row (a client hears `ad.started` only once the row is
    /// on disk), and the database is whole.
    func testKillNineLosesNoPlayOfAShownAd() throws {
        let slots = (0..<40).map { #"{"start": \#(0.3 + Double($0) * 0.35), "duration": 0.2}"# }.joined(separator: ",")
        let daemon = try DaemonProcess(catalog: try trackedCatalog(overlaySlots: "[\(slots)]"))
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.started"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-long.mp4")])
        var started: Set<String> = []
        for _ in 0..<6 { if let id = try events.event(named("ad.started"))["instance"] as? String { started.insert(id) } }
        daemon.stop(SIGKILL)
        // What else reached the socket before the kill.
        while let more = try? events.nextMessage(timeout: 0.2) {
            if more["event"] as? String == "ad.started", let id = more["instance"] as? String { started.insert(id) }
        }
        let (status, output) = try runToEnd(Executables.adplayerd, ["plays", "export", "--state-dir", daemon.stateDir, "--format", "jsonl"])
        XCTAssertEqual(status, 0, output)
        let rows = Set(output.split(separator: "\n").compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["id"] as? String
        })
        XCTAssertTrue(started.isSubset(of: rows), "lost: \(started.subtracting(rows))")
    }

    /// `metrics-file`: written for node_exporter's textfile collector, it parses with
    /// Prometheus' own text parser, and its counters are the events the socket saw; `metrics`
    /// on the socket says the same.
    func testTheMetricsFileParsesAndMatchesTheEvents() throws {
        let file = scratch.appendingPathComponent("adplayerd.prom").path
        let daemon = try DaemonProcess(catalog: try trackedCatalog(), extra: ["--metrics-file", file, "--metrics-interval", "1",
                                                                             "--time-sync-wait", "0"])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.*", "beacon.sent"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-1.mp4")])
        _ = try events.event(named("ad.ended", "kind", "postroll"))
        _ = try events.event(named("beacon.sent"))
        let reply = try daemon.connect().call("metrics")
        let samples = ((reply["result"] as? [String: Any])?["samples"] as? [[String: Any]]) ?? []
        XCTAssertTrue(samples.contains { $0["name"] as? String == "adplayerd_uptime_seconds" }, "\(reply)")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)   // the file is written once more at stop

        let parser = """
            import json, sys
            from prometheus_client.parser import text_string_to_metric_families
            out = []
            for family in text_string_to_metric_families(open(sys.argv[1]).read()):
                for s in family.samples:
                    out.append({"name": s.name, "labels": s.labels, "value": s.value})
            print(json.dumps(out))
            """
        let script = scratch.appendingPathComponent("parse.py").path
        try Data(parser.utf8).write(to: URL(fileURLWithPath: script))
        let (status, output) = try runToEnd("/usr/bin/python3", [script, file])
        XCTAssertEqual(status, 0, "Prometheus' parser refused the file: \(output)")
        let parsed = (try? JSONSerialization.jsonObject(with: Data(output.utf8)) as? [[String: Any]]) ?? []
        func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
            parsed.first { sample in
                let have = (sample["labels"] as? [String: String]) ?? [:]
                return sample["name"] as? String == name && labels.allSatisfy { have[$0.key] == $0.value }
            }.flatMap { ($0["value"] as? NSNumber)?.doubleValue }
        }
        let seen = events.events
        func count(_ event: String, _ kind: String) -> Double {
            Double(seen.filter { $0["event"] as? String == event && $0["kind"] as? String == kind }.count)
        }
        for kind in ["overlay", "postroll"] {
            XCTAssertEqual(value("adplayerd_ads_requested_total", ["kind": kind]), count("ad.requested", kind), kind)
            XCTAssertEqual(value("adplayerd_ads_filled_total", ["kind": kind]), count("ad.loaded", kind), kind)
            XCTAssertEqual(value("adplayerd_ads_started_total", ["kind": kind]), count("ad.started", kind), kind)
        }
        XCTAssertEqual(value("adplayerd_ads_ended_total", ["kind": "postroll", "reason": "completed"]), 1)
        XCTAssertGreaterThanOrEqual(value("adplayerd_beacons_sent_total") ?? 0, Double(seen.filter { $0["event"] as? String == "beacon.sent" }.count))
        XCTAssertEqual(value("adplayerd_beacons_dropped_total", ["reason": "outbox_full"]), 0)
        XCTAssertEqual(value("adplayerd_playing"), 0, "stopped")
        XCTAssertNotNil(value("adplayerd_uptime_seconds"))
    }

    /// The wall clock a month off between queueing and sending, for real: beacons queued by
    /// `adplayerd beacons add`, their saved wall times then moved a month into the future (a box
    /// that queued them with a clock set ahead, then synced back) and a month into the past (a
    /// stale clock that NTP then set forward) — the state database a restarted daemon finds.
    /// `flush` delivers all of them and drops none for age: age is the time the box has run.
    /// (libfaketime is no help here: under it, Swift's CommandLine.arguments comes out empty and
    /// its timerfd stand-in never fires a dispatch timer.)
    func testAWallClockAMonthOffDropsNothing() throws {
        let state = scratch.appendingPathComponent("state").path
        let urls = (0..<20).map { "\(server.base)/b/w\($0)" }
        XCTAssertEqual(try runToEnd(Executables.adplayerd, ["beacons", "add", "--state-dir", state] + urls).status, 0)
        let month = 31.0 * 86_400
        do {
            let db = try SQLiteDatabase(path: state + "/adplayerd.sqlite")
            try db.execute("UPDATE beacons SET wall = wall + ? WHERE id % 2 = 0", [.real(month)])
            try db.execute("UPDATE beacons SET wall = wall - ? WHERE id % 2 = 1", [.real(month)])
            let shifted = try db.execute("SELECT COUNT(*) FROM beacons WHERE abs(wall - ?) > ?", [.real(Date().timeIntervalSince1970), .real(month - 60)])
            XCTAssertEqual(shifted.first?.first?.integer, 20, "every saved wall time a month off")
        }
        let (status, output) = try runToEnd(Executables.adplayerd, ["beacons", "flush", "--state-dir", state, "--base-delay", "0.01"])
        XCTAssertEqual(status, 0, output)
        let counts = try server.counts()
        XCTAssertEqual((0..<20).filter { counts["/b/w\($0)"] == 1 }.count, 20, "every beacon delivered once: \(output)")
        let report = try runToEnd(Executables.adplayerd, ["beacons", "status", "--state-dir", state, "--json"]).output
        XCTAssertTrue(report.contains(#""dropped":{}"#), report)
        XCTAssertTrue(report.contains(#""sent":20"#), report)
    }
}
