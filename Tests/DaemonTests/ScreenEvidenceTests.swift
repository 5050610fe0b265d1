import AdRuntime
import AdTestSupport
import Foundation
import XCTest

/// No ghost impressions (issue 36), through the real daemon against the loopback ad server:
/// under Xvfb with `vo=gpu` (Mesa's software OpenGL) an overlay's play is verified by its
/// pixels and its impression arrives; the same ad the colour of the content under it shows
/// nothing — `unverified`, `notUsed` and no impression with `pop-require-display`. A stand-in
/// `cec-ctl` reporting standby and a stand-in sysfs connector going `disconnected`: the plays
/// are `off`, the source that requires display evidence is not asked, health says so.
final class ScreenEvidenceTests: XCTestCase {
    private var server: FixtureServer!
    private var scratch: URL!

    override func setUpWithError() throws {
        _ = try Media.path("overlay-grey.png")
        server = try FixtureServer(script: "vast_server.py")
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("evidence-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: scratch.appendingPathComponent("drm"), withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        server.stop()
        try? FileManager.default.removeItem(at: scratch)
    }

    private func plays(_ daemon: DaemonProcess) -> [[String: Any]] {
        ((try? daemon.connect().call("plays"))?["result"] as? [String: Any])?["plays"] as? [[String: Any]] ?? []
    }

    private func beacons(_ prefix: String) -> Int {
        ((try? server.counts()) ?? [:]).filter { $0.key.hasPrefix(prefix) }.values.reduce(0, +)
    }

    private func evidence(_ play: [String: Any]?) -> [String: Any] { play?["display_evidence"] as? [String: Any] ?? [:] }

    /// One overlay over the grey episode, from the tag of `fixture`, on a fresh daemon drawing
    /// into `display`: its play once its evidence is in.
    private func showOverlay(_ fixture: String, on display: XDisplay, vo: [String] = ["--vo", "gpu", "--mpv-option", "gpu-sw=yes"],
                             kind: String = "overlay") throws -> [String: Any] {
        var environment = ["DISPLAY": display.name]
        if let asan = ProcessInfo.processInfo.environment["ASAN_OPTIONS"] { environment["ASAN_OPTIONS"] = asan + ":detect_leaks=0" }
        let daemon = try DaemonProcess(extra: ["--ads", server.base + "/vast/\(fixture) pop-require-display=yes"] + vo + ["--cec-command", "none",
                                               "--drm-sysfs-root", scratch.appendingPathComponent("drm").path, "--time-sync-wait", "0"],
                                       environment: environment)
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.started"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("content-grey.mp4")])
        _ = try events.event(named("ad.started", "kind", kind))
        XCTAssertTrue(waitUntil(timeout: 30) {
            let play = self.plays(daemon).first
            // Not verified: its impression withheld, its audience 0 (written with the judgement).
            return play?["display"] as? String == "verified" || (play?["display"] is String && play?["impressions"] is Double)
        }, "the play's evidence: \(plays(daemon))")
        let play = plays(daemon).first ?? [:]
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        return play
    }

    /// R26: a squeezeback's play is verified by the pixels of its creative around the content's
    /// window, and only then billed.
    func testR26ASqueezebackIsVerifiedByItsPixelsBeforeItsImpression() throws {
        _ = try Media.path("squeezeback.png")
        let display = try XDisplay(width: 320, height: 240)
        defer { display.stop() }
        let play = try showOverlay("squeezeback.xml", on: display, kind: "squeezeback")
        XCTAssertEqual(play["kind"] as? String, "squeezeback")
        XCTAssertEqual(play["display"] as? String, "verified", "\(play)")
        let checks = evidence(play)["checks"] as? [[String: String]] ?? []
        XCTAssertEqual(checks.map { $0["what"] }, ["pixels"], "\(checks)")
        XCTAssertEqual(checks.first?["said"], "the ad is shown")
        XCTAssertTrue(waitUntil { self.beacons("/b/sq-impression") == 1 }, "the impression, once verified: \((try? server.counts()) ?? [:])")
        XCTAssertEqual(beacons("/b/sq-notUsed"), 0)
    }

    func testAnOverlayIsVerifiedByItsPixelsAndOneTheColourOfTheContentIsNot() throws {
        let display = try XDisplay(width: 320, height: 240)
        defer { display.stop() }

        var play = try showOverlay("evidence-overlay.xml", on: display)
        XCTAssertEqual(play["display"] as? String, "verified", "\(play)")
        let checks = evidence(play)["checks"] as? [[String: String]] ?? []
        XCTAssertEqual(checks.map { $0["what"] }, ["pixels"], "no connector here, no CEC configured: \(checks)")
        XCTAssertEqual(checks.first?["said"], "the ad is shown")
        XCTAssertNotNil(ISO8601DateFormatter().date(from: (checks.first?["at"] ?? "").replacingOccurrences(of: #"\.\d+"#, with: "", options: .regularExpression)))
        XCTAssertTrue(waitUntil { self.beacons("/b/imp-evidence?ad=overlay") == 1 }, "the impression, once verified: \((try? server.counts()) ?? [:])")
        XCTAssertEqual(beacons("/b/view-evidence?ad=overlay"), 1)
        XCTAssertEqual(beacons("/b/notused-evidence"), 0)

        play = try showOverlay("evidence-grey.xml", on: display)
        XCTAssertEqual(play["display"] as? String, "unverified", "\(play)")
        let reason = evidence(play)["reason"] as? String ?? ""
        XCTAssertTrue(reason.contains("cannot be told from what is around it"), reason)
        XCTAssertTrue(waitUntil { self.beacons("/b/notused-evidence?ad=overlay-grey") == 1 }, "notUsed instead: \((try? server.counts()) ?? [:])")
        XCTAssertEqual(beacons("/b/imp-evidence?ad=overlay-grey"), 0, "no impression for an ad the screen did not show")
        XCTAssertEqual(play["impressions"] as? Double, 0, "no impression, no audience in the ad log (issue 45, 10): \(play)")
        XCTAssertEqual(beacons("/b/view-evidence?ad=overlay-grey"), 0)

        // vo=x11 grabs the video without what mpv draws over it: no proof, said so.
        play = try showOverlay("evidence-overlay.xml", on: display, vo: ["--vo", "x11"])
        XCTAssertEqual(play["display"] as? String, "unverified", "\(play)")
        XCTAssertEqual(evidence(play)["reason"] as? String, "vo=x11 cannot be grabbed with the ads (gpu, gpu-next or drm can)")
        XCTAssertEqual(beacons("/b/imp-evidence?ad=overlay"), 1, "the first daemon's only")
    }

    /// The panel in standby (a stand-in `cec-ctl` first on PATH), then the output unplugged (a
    /// stand-in sysfs connector): each play `off`, the VAST source that requires display
    /// evidence never asked meanwhile (the catalog behind it fills), health `degraded`,
    /// "playing to a dark panel"; lit again, the VAST source is asked.
    func testAPanelInStandbyOrAnUnpluggedOutputMakesPlaysOffAndAsksNothingOfASourceThatNeedsTheScreen() throws {
        let bin = scratch.appendingPathComponent("bin"), panel = scratch.appendingPathComponent("panel")
        try FileManager.default.createDirectory(at: bin, withIntermediateDirectories: true)
        try Data("standby".utf8).write(to: panel)
        let standIn = bin.appendingPathComponent("cec-ctl")
        try Data("""
            #!/bin/sh
            # A stand-in for v4l-utils' cec-ctl: the panel's power from a file the test writes.
            state=$(cat "\(panel.path)")
            case "$*" in
              *--give-device-power-status*) printf 'Transmit from Playback Device 1 to TV (1 to 0):\\nGIVE_DEVICE_POWER_STATUS (0x8f)\\n\\tpwr-state: %s (0x01)\\n' "$state" ;;
            esac
            exit 0
            """.utf8).write(to: standIn)
        XCTAssertEqual(chmod(standIn.path, 0o755), 0)
        let connector = scratch.appendingPathComponent("drm/card0-HDMI-A-1")
        try FileManager.default.createDirectory(at: connector, withIntermediateDirectories: true)
        try Data("connected\n".utf8).write(to: connector.appendingPathComponent("status"))
        try Data("enabled\n".utf8).write(to: connector.appendingPathComponent("enabled"))
        let catalog = try makeCatalog("""
            {"version": 1, "overlays": [{"id": "house", "image": "overlay.png", "slots": [{"start": 0.5, "duration": 1.0}]}]}
            """)
        defer { try? FileManager.default.removeItem(at: catalog) }
        let path = (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")
        let daemon = try DaemonProcess(extra: ["--ads", server.base + "/vast/evidence-overlay.xml pop-require-display=yes", "--ads", catalog.path,
                                               "--cec-command", "cec-ctl", "--display-check-interval", "1",
                                               "--drm-sysfs-root", scratch.appendingPathComponent("drm").path, "--time-sync-wait", "0"],
                                       environment: ["PATH": bin.path + ":" + path])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.started", "ad.ended"]])
        func vastAsked() -> Int { ((try? server.requests()) ?? [:]).filter { $0.key.hasPrefix("/vast/evidence-overlay.xml") && !$0.key.contains("?") }.values.reduce(0, +) }
        func health() -> (status: String, display: String) {
            let result = (try? daemon.connect().call("health"))?["result"] as? [String: Any] ?? [:]
            let check = (result["checks"] as? [[String: Any]] ?? []).first { $0["name"] as? String == "display" }
            return (check?["status"] as? String ?? "?", check?["reason"] as? String ?? "?")
        }
        func showOne(_ count: Int) throws -> [String: Any] {
            // A new episode each time (the same one would resume past its overlay's slot).
            _ = try daemon.connect().call("open", ["path": try Media.path(["episode-10s.mp4", "episode-1.mp4", "episode-2.mp4"][count - 1])])
            _ = try events.event(named("ad.started", "kind", "overlay"))
            XCTAssertTrue(waitUntil(timeout: 20) { self.plays(daemon).count == count && self.plays(daemon).last?["display"] is String },
                          "\(plays(daemon))")
            return plays(daemon).last ?? [:]
        }

        // The panel in standby: the catalog's overlay plays, `off`; the tag is never asked.
        XCTAssertTrue(waitUntil { health().display.contains("dark") || health().display.contains("nothing plays") }, "\(health())")
        var play = try showOne(1)
        XCTAssertEqual(play["ad_id"] as? String, "house")
        XCTAssertEqual(play["display"] as? String, "off", "\(play)")
        XCTAssertEqual(evidence(play)["reason"] as? String, "the panel reports standby")
        let checks = evidence(play)["checks"] as? [[String: String]] ?? []
        XCTAssertEqual(checks.first { $0["what"] == "panel" }?["said"], "standby")
        XCTAssertEqual(checks.first { $0["what"] == "connector" }?["said"], "connected (card0-HDMI-A-1)")
        XCTAssertTrue(waitUntil { health().status == "degraded" }, "\(health())")
        XCTAssertTrue(health().display.hasPrefix("playing to a dark panel: the panel reports standby"), "\(health())")
        XCTAssertEqual(vastAsked(), 0, "no request while the panel is off")

        // The panel on, the output unplugged mid-episode: the next play is `off` by the connector.
        try Data("on".utf8).write(to: panel)
        try Data("disconnected\n".utf8).write(to: connector.appendingPathComponent("status"))
        XCTAssertTrue(waitUntil { health().display.contains("the output is not connected") }, "\(health())")
        play = try showOne(2)
        XCTAssertEqual(play["display"] as? String, "off", "\(play)")
        XCTAssertEqual(evidence(play)["reason"] as? String, "the output is not connected")
        XCTAssertEqual(vastAsked(), 0, "no request while the output is unplugged")

        // Lit again: the tag is asked, its ad shown (headless here: unverified, so notUsed).
        try Data("connected\n".utf8).write(to: connector.appendingPathComponent("status"))
        XCTAssertTrue(waitUntil { health().status == "ok" || !health().display.contains("dark") }, "\(health())")
        play = try showOne(3)
        XCTAssertGreaterThan(vastAsked(), 0, "asked once the screen is lit")
        XCTAssertEqual(play["ad_id"] as? String, "ev-overlay", "\(play)")
        XCTAssertEqual(play["display"] as? String, "unverified")
        XCTAssertTrue(waitUntil { self.beacons("/b/notused-evidence?ad=overlay") == 1 }, "\((try? server.counts()) ?? [:])")
        XCTAssertEqual(beacons("/b/imp-evidence"), 0)
        let metrics = ((try daemon.connect().call("metrics"))["result"] as? [String: Any])?["text"] as? String ?? ""
        XCTAssertTrue(metrics.contains(#"adplayerd_plays_unverified_total{reason="panel_off",verdict="off"} 1"#), metrics)
        XCTAssertTrue(metrics.contains(#"adplayerd_plays_unverified_total{reason="disconnected",verdict="off"} 1"#), metrics)
        XCTAssertTrue(metrics.contains(#"adplayerd_plays_unverified_total{reason="no_output",verdict="unverified"} 1"#), metrics)
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }
}
