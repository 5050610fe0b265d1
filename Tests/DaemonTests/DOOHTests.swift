import AdRuntime
import AdTestSupport
import Bounds
import Foundation
import XCTest

/// Proof of play for digital-out-of-home buyers (issue 27), through the real daemon against
/// the loopback ad server, as an ad-ops engineer checks it: the deadline (an impression not
/// delivered in time is never sent late, and its play says so), the place and the request
/// chain in the macros, the venue and audience in the rows, and a signed ad log that
/// `openssl` verifies — and refuses once a row is changed.
final class DOOHTests: XCTestCase {
    private var server: FixtureServer!
    private var scratch: URL!

    override func setUpWithError() throws {
        _ = try Media.path("overlay.png")
        server = try FixtureServer(script: "vast_server.py")
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("dooh-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        server.stop()
        try? FileManager.default.removeItem(at: scratch)
    }

    private var tag: String { server.base + "/vast/dooh-wrapper.xml?tx=[TRANSACTIONID]&ll=[LATLONG]&n=[ADCOUNT]" }

    private func plays(_ daemon: DaemonProcess) -> [[String: Any]] {
        ((try? daemon.connect().call("plays"))?["result"] as? [String: Any])?["plays"] as? [[String: Any]] ?? []
    }

    private func impressions() -> [String: Int] { ((try? server.counts()) ?? [:]).filter { $0.key.hasPrefix("/b/imp-dooh?") } }

    private func query(_ path: String) -> [String: String] {
        Dictionary((URLComponents(string: "http://x" + path)?.queryItems ?? []).map { ($0.name, $0.value ?? "") }) { $1 }
    }

    /// The tracking endpoint down across the deadline: the impression is dropped at it and
    /// never arrives, even once the endpoint is back; the play's row says `deadline`, and the
    /// metrics count it. Down for less than the deadline (another daemon, a longer deadline):
    /// every impression arrives, once.
    func testAnImpressionPastItsDeadlineIsNeverSentLateAndOneWithinItArrivesOnce() throws {
        let state = scratch.appendingPathComponent("state").path
        try server.get("/_beacons_down")
        var daemon = try DaemonProcess(extra: ["--ads", tag + " pop-deadline=3", "--beacon-max-delay", "1", "--time-sync-wait", "0",
                                               "--state-dir", state])
        var events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.started"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-1.mp4")])
        _ = try events.event(named("ad.started", "kind", "overlay"))
        XCTAssertTrue(waitUntil(timeout: 30) {
            (self.plays(daemon).first?["beacons"] as? [String: Any])?["deadline"] as? Int == 2
        }, "the play says deadline (its two impressions, the wrapper's and the ad's): \(plays(daemon))")
        try server.get("/_beacons_up")
        let metrics = try XCTUnwrap(try daemon.connect().call("metrics")["result"] as? [String: Any])
        XCTAssertTrue((metrics["text"] as? String)?.contains("adplayerd_beacons_dropped_total{reason=\"deadline\"} 2") == true,
                      "\(metrics["text"] ?? "")")
        let (_, status) = try runToEnd(Executables.adplayerd, ["beacons", "status", "--state-dir", state, "--json"])
        XCTAssertTrue(status.contains("\"deadline\" : 2") || status.contains("\"deadline\":2"), status)
        // Nothing of it is left to send (pending 0): with the endpoint back, no impression arrives.
        XCTAssertEqual((plays(daemon).first?["beacons"] as? [String: Any])?["pending"] as? Int, 0, "\(plays(daemon))")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        XCTAssertEqual(impressions(), [:], "never sent late")
        var (code, export) = try runToEnd(Executables.adplayerd, ["plays", "export", "--state-dir", state, "--format", "csv"])
        XCTAssertEqual(code, 0, export)
        XCTAssertTrue(export.split(separator: "\n").first?.contains("beacons_deadline") == true, export)

        // Down for less than its deadline: it arrives, once.
        try server.get("/_beacons_down")
        daemon = try DaemonProcess(extra: ["--ads", tag + " pop-deadline=60", "--beacon-max-delay", "1", "--time-sync-wait", "0",
                                           "--state-dir", scratch.appendingPathComponent("state-2").path])
        events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.started"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-1.mp4")])
        _ = try events.event(named("ad.started", "kind", "overlay"))
        XCTAssertTrue(waitUntil(timeout: 20) {
            let text = ((try? daemon.connect().call("metrics"))?["result"] as? [String: Any])?["text"] as? String ?? ""
            return text.contains("adplayerd_beacon_attempts_failed_total") && !text.contains("adplayerd_beacon_attempts_failed_total 0")
        }, "an attempt failed while the endpoint was down")
        try server.get("/_beacons_up")
        XCTAssertTrue(waitUntil(timeout: 30) { self.impressions().count == 1 }, "\(impressions())")
        XCTAssertTrue(waitUntil(timeout: 10) { (self.plays(daemon).first?["beacons"] as? [String: Any])?["pending"] as? Int == 0 })
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        XCTAssertEqual(Array(impressions().values), [1], "once")
        (code, export) = try runToEnd(Executables.adplayerd, ["plays", "export", "--state-dir", scratch.appendingPathComponent("state-2").path,
                                                              "--format", "jsonl"])
        XCTAssertEqual(code, 0, export)
        XCTAssertTrue(export.contains("\"deadline\":0"), export)
    }

    /// The macros an ad server sees (one transaction id through the request, its wrapper and
    /// the ad's impressions; the place; the count), the rows' venue and audience, and the
    /// signed `dooh-csv` log: verified by `openssl`, refused once a row is edited.
    func testMacrosRowsAndASignedAdLogThatOpenSSLVerifies() throws {
        let state = scratch.appendingPathComponent("state").path
        let daemon = try DaemonProcess(extra: ["--ads", tag, "--latlong", "48.8566,2.3522", "--venue-id", "lobby-7", "--impressions-per-play", "4.5",
                                               "--time-sync-wait", "0", "--state-dir", state])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.started", "ad.ended"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-1.mp4")])
        _ = try events.event(named("ad.started", "kind", "overlay"))
        _ = try events.event(named("ad.ended", "kind", "overlay"))
        XCTAssertTrue(waitUntil(timeout: 20) { self.impressions().count == 1 && ((try? self.server.counts()) ?? [:]).keys.contains { $0.hasPrefix("/b/imp-dooh-wrap") } })
        XCTAssertEqual(daemon.stop(), 0, daemon.log)

        // Requests may be more than one chain (a prefetch for the next episode): the chain of the
        // ad shown is the one its impression names, and each of its steps carries that id.
        let requested = try server.requests().keys
        let impression = try XCTUnwrap(impressions().keys.first)
        let wrapperImpression = try XCTUnwrap(try server.counts().keys.first { $0.hasPrefix("/b/imp-dooh-wrap?") })
        let transaction = try XCTUnwrap(query(impression)["tx"])
        XCTAssertNotNil(UUID(uuidString: transaction), transaction)
        let request = try XCTUnwrap(requested.first { $0.hasPrefix("/vast/dooh-wrapper.xml?") && query($0)["tx"] == transaction },
                                    "the tag's request: \(requested)")
        XCTAssertTrue(requested.contains { $0.hasPrefix("/vast/dooh-inline.xml?") && query($0)["tx"] == transaction },
                      "the wrapper's request: the same chain \(requested)")
        XCTAssertEqual(query(wrapperImpression)["tx"], transaction)
        let chains = Set(requested.filter { $0.hasPrefix("/vast/dooh-wrapper.xml?") }.compactMap { query($0)["tx"] })
        XCTAssertEqual(chains.count, requested.filter { $0.hasPrefix("/vast/dooh-wrapper.xml?") }.count, "a new id for each request")
        XCTAssertEqual(query(request)["ll"], "48.856600,2.352200")
        XCTAssertEqual(query(impression)["ll"], "48.856600,2.352200")
        XCTAssertEqual(query(request)["n"], "1")
        XCTAssertEqual(query(impression)["n"], "1")

        // The rows and the signed log.
        let key = scratch.appendingPathComponent("screen.key").path, pub = scratch.appendingPathComponent("screen.pub").path
        XCTAssertEqual(try runToEnd("/usr/bin/openssl", ["genpkey", "-algorithm", "ed25519", "-out", key]).status, 0)
        XCTAssertEqual(try runToEnd("/usr/bin/openssl", ["pkey", "-in", key, "-pubout", "-out", pub]).status, 0)
        let log = scratch.appendingPathComponent("log.csv").path
        var (status, output) = try runToEnd(Executables.adplayerd, ["plays", "export", "--state-dir", state, "--format", "dooh-csv",
                                                                     "--output", log, "--sign", key, "--screen-id", "screen-42"])
        XCTAssertEqual(status, 0, output)
        let text = try String(contentsOfFile: log, encoding: .utf8)
        let rows = text.split(separator: "\n").compactMap { CSV.split($0)?.text }
        XCTAssertEqual(rows.first?.first, "sequence")
        XCTAssertEqual(rows.count, 2, text)
        let header = rows[0], row = rows[1]
        func field(_ name: String) -> String? { header.firstIndex(of: name).map { row[$0] } }
        XCTAssertEqual(field("screen_id"), "screen-42")
        XCTAssertEqual(field("latitude"), "48.856600")
        XCTAssertEqual(field("longitude"), "2.352200")
        XCTAssertEqual(field("venue_id"), "lobby-7")
        XCTAssertEqual(field("impressions"), "4.5")
        XCTAssertEqual(field("creative_id"), "dooh-ad")
        XCTAssertEqual(field("ad_duration_seconds"), "2.000")
        XCTAssertGreaterThan(Double(field("play_seconds") ?? "") ?? 0, 1)
        // What the screen showed (issue 36): headless, nothing was drawn anywhere.
        XCTAssertEqual(field("display"), "unverified")
        let evidence = try XCTUnwrap(JSONSerialization.jsonObject(with: Data((field("display_evidence") ?? "").utf8)) as? [String: Any])
        XCTAssertEqual(evidence["reason"] as? String, "no output")
        XCTAssertEqual((evidence["checks"] as? [[String: String]])?.last?["said"], "no grab: no output")
        // A buyer's own tools check a row's hash: SHA-256 of the row's text up to its previous_hash.
        let line = text.split(separator: "\n")[1]
        let hashed = try XCTUnwrap(line.range(of: "," + (field("row_hash") ?? "?")).map { String(line[..<$0.lowerBound]) })
        let (_, sum) = try runToEnd("/bin/sh", ["-c", "printf '%s' \"$0\" | sha256sum", hashed])
        XCTAssertEqual(field("row_hash"), String(sum.prefix(64)), "row_hash is SHA-256 of the row up to its previous_hash")
        XCTAssertEqual(try runToEnd(Executables.adplayerd, ["plays", "verify", log]).status, 0)
        (status, output) = try runToEnd("/usr/bin/openssl", ["pkeyutl", "-verify", "-pubin", "-inkey", pub, "-rawin", "-in", log, "-sigfile", log + ".sig"])
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(output.contains("Signature Verified Successfully"), output)
        // A row edited: refused.
        try Data(text.replacingOccurrences(of: ",4.5,", with: ",45,").utf8).write(to: URL(fileURLWithPath: log))
        (status, output) = try runToEnd("/usr/bin/openssl", ["pkeyutl", "-verify", "-pubin", "-inkey", pub, "-rawin", "-in", log, "-sigfile", log + ".sig"])
        XCTAssertNotEqual(status, 0, output)
        // A key that is no Ed25519 key is refused in words; --sign without --output too.
        let rsa = scratch.appendingPathComponent("rsa.key").path
        XCTAssertEqual(try runToEnd("/usr/bin/openssl", ["genpkey", "-algorithm", "rsa", "-pkeyopt", "rsa_keygen_bits:1024", "-out", rsa]).status, 0)
        (status, output) = try runToEnd(Executables.adplayerd, ["plays", "export", "--state-dir", state, "--format", "dooh-csv",
                                                                 "--output", log, "--sign", rsa, "--screen-id", "s"])
        XCTAssertEqual(status, 1, output)
        XCTAssertTrue(output.contains("not Ed25519") && !output.contains("usage:"), output)
        (status, output) = try runToEnd(Executables.adplayerd, ["plays", "export", "--state-dir", state, "--format", "dooh-csv", "--sign", key])
        XCTAssertEqual(status, 2, output)
        // The jsonl export carries the venue and the audience.
        (status, output) = try runToEnd(Executables.adplayerd, ["plays", "export", "--state-dir", state, "--format", "jsonl"])
        XCTAssertTrue(output.contains("\"venue_id\":\"lobby-7\"") || output.contains("\"venue_id\": \"lobby-7\""), output)
    }
}
