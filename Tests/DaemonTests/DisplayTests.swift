import AdRuntime
import AdTestSupport
import Foundation
import XCTest

/// Operating hours on a real daemon and real mpv, with a stand-in `cec-ctl` first on `PATH`
/// that writes down how it was called: hours that are closed now are loaded while the episode
/// plays, and open again a few seconds later (`daily OPEN-CLOSE` in UTC, made from the clock).
final class DisplayTests: XCTestCase {
    private var scratch: URL!

    override func setUpWithError() throws {
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("display-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: scratch) }

    /// `HH:MM:SS` in UTC, `seconds` from now.
    private func clock(_ seconds: Double) -> String {
        let formatter = DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "HH:mm:ss"
        return formatter.string(from: Date().addingTimeInterval(seconds))
    }

    private func stubCEC() throws -> (folder: String, calls: () -> [String]) {
        let folder = scratch.appendingPathComponent("bin").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let log = scratch.appendingPathComponent("cec-calls").path
        let script = "#!/bin/sh\necho \"$@\" >> '\(log)'\n"
        try Data(script.utf8).write(to: URL(fileURLWithPath: folder + "/cec-ctl"))
        chmod(folder + "/cec-ctl", 0o755)
        // The switches only: the display monitor's power queries (`--give-device-power-status`,
        // issue 36) are not what these tests count.
        return (folder, { ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
                            .filter { !$0.contains("give-device-power-status") } })
    }

    func testOutsideTheHoursTheDisplaySleepsNothingIsAskedForAndTheSameEpisodePlaysOn() throws {
        let catalog = try makeCatalog("""
            {"version": 1, "overlays": [{"id": "ov-1", "image": "overlay.png", "slots": [{"start": 1, "duration": 2}, {"start": 8, "duration": 2},
                                                                                           {"start": 16, "duration": 2}]}],
             "pause_ads": [{"id": "pa-1", "image": "pause.png"}]}
            """)
        let (bin, calls) = try stubCEC()
        // The hours are set once the first overlay is up, by a reload, closed from a second ago
        // to 8 s from then: closed at once whenever that is (no window of the clock to hit).
        let config = scratch.appendingPathComponent("adplayerd.conf").path
        try Data("timezone = UTC\n".utf8).write(to: URL(fileURLWithPath: config))
        let environment = ["PATH": bin + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")]
        let daemon = try DaemonProcess(catalog: catalog, extra: ["--config", config, "--pause-ad-delay", "0"], environment: environment)
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["player.*", "ad.*"]])
        // Reads everything, in order, and gives up nothing until the display is on again.
        let watcher = try daemon.connect()
        _ = try watcher.call("subscribe", ["events": ["player.display", "ad.*"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-long.mp4")])
        _ = try events.event(named("ad.started", "kind", "overlay"))
        try Data("timezone = UTC\ndisplay-hours = daily \(clock(8))-\(clock(-1))\n".utf8).write(to: URL(fileURLWithPath: config))
        XCTAssertEqual(try daemon.connect().call("reload")["ok"] as? Bool, true)
        let off = try events.event(named("player.display"))
        XCTAssertEqual(off["power"] as? String, "off")
        XCTAssertEqual(off["reason"] as? String, "schedule")
        XCTAssertTrue(waitUntil(timeout: 10) { calls() == ["--standby"] }, "\(calls())")
        let paused = try events.event(named("player.paused"))
        let stoppedAt = try XCTUnwrap(paused["position"] as? Double)
        let status = try XCTUnwrap(try daemon.connect().call("status")["result"] as? [String: Any])
        XCTAssertEqual((status["display"] as? [String: Any])?["power"] as? String, "off", "\(status)")
        XCTAssertEqual(status["playing"] as? Bool, false)
        let (healthStatus, health) = try runToEnd(Executables.adplayerctl, ["--socket", daemon.socket, "health"])
        XCTAssertEqual(healthStatus, 0, "deliberately off is healthy: \(health)")
        let metrics = try XCTUnwrap(try daemon.connect().call("metrics")["result"] as? [String: Any])
        XCTAssertTrue((metrics["text"] as? String)?.contains("adplayerd_display_on 0") == true)
        let refused = try daemon.connect().call("play")
        XCTAssertEqual((refused["error"] as? [String: Any])?["code"] as? String, "unavailable", "\(refused)")

        let on = try events.event(named("player.display"))
        XCTAssertEqual(on["power"] as? String, "on")
        XCTAssertTrue(on["reason"] is NSNull, "\(on)")
        events.dropKept()   // the playing before the hours closed
        let playing = try events.event(named("player.playing"))
        XCTAssertEqual(try XCTUnwrap(playing["position"] as? Double), stoppedAt, accuracy: 1, "the same episode, from where it stopped")
        XCTAssertTrue(waitUntil(timeout: 10) { calls() == ["--standby", "--image-view-on"] }, "\(calls())")
        _ = try watcher.event(named("player.display", "power", "on"))
        let seen = watcher.events
        let dark = try XCTUnwrap(seen.firstIndex { $0["event"] as? String == "player.display" })
        let night = seen[dark...].compactMap { $0["event"] as? String }
        XCTAssertFalse(night.contains { ["ad.requested", "ad.loaded", "ad.started", "ad.nofill"].contains($0) },
                       "no ad asked for or shown at night: \(night) \(seen[dark...].map { "\($0["event"] ?? "") \($0["kind"] ?? "") \($0["position"] ?? "")" })")
        // Ads by their rules again: the content's next overlay.
        _ = try events.event(named("ad.started", "kind", "overlay"))

        // The overrides, through adplayerctl: off until the next boundary (a day away), auto back to on.
        var (code, output) = try runToEnd(Executables.adplayerctl, ["--socket", daemon.socket, "display", "off"])
        XCTAssertEqual(code, 0, output)
        XCTAssertEqual(try events.event(named("player.display"))["reason"] as? String, "override")
        (code, output) = try runToEnd(Executables.adplayerctl, ["--socket", daemon.socket, "display", "auto"])
        XCTAssertEqual(code, 0, output)
        XCTAssertEqual(try events.event(named("player.display"))["power"] as? String, "on")
        XCTAssertTrue(waitUntil(timeout: 10) { calls() == ["--standby", "--image-view-on", "--standby", "--image-view-on"] }, "\(calls())")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        XCTAssertFalse(daemon.log.contains("no cec-ctl"), daemon.log)
    }

    /// A `cec-command` that hangs with a child of its own holding its output, after printing 50
    /// MB: killed at 10 s with what it started, never a zombie, its output not held (the
    /// daemon's peak memory does not follow it), said once — and the next command runs.
    func testAHangingTalkativeCECCommandCostsNothingAndTheNextOneRuns() throws {
        let folder = scratch.appendingPathComponent("bin").path
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let calls = scratch.appendingPathComponent("cec-calls").path
        let script = """
            #!/bin/sh
            echo "$@" >> '\(calls)'
            case "$*" in *--standby*) sleep 300 & head -c 50000000 /dev/zero | tr '\\0' x; sleep 300 ;; esac
            exit 0
            """
        try Data(script.utf8).write(to: URL(fileURLWithPath: folder + "/cec-ctl"))
        chmod(folder + "/cec-ctl", 0o755)
        let environment = ["PATH": folder + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")]
        let daemon = try DaemonProcess(environment: environment)
        let pid = daemon.process.processIdentifier
        let before = ReliabilityTests.peakResidentMiB(pid)
        XCTAssertEqual(try runToEnd(Executables.adplayerctl, ["--socket", daemon.socket, "display", "off"]).status, 0)
        XCTAssertEqual(try runToEnd(Executables.adplayerctl, ["--socket", daemon.socket, "display", "on"]).status, 0)
        XCTAssertTrue(waitUntil(timeout: 30) { daemon.log.contains("did not finish within 10 s") }, daemon.log)
        XCTAssertTrue(waitUntil(timeout: 20) {
            ((try? String(contentsOfFile: calls, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
                .filter { !$0.contains("give-device-power-status") } == ["--standby", "--image-view-on"]   // (the display monitor's queries aside)
        }, "the next command ran: \((try? String(contentsOfFile: calls, encoding: .utf8)) ?? "")")
        XCTAssertTrue(waitUntil(timeout: 20) { daemon.log.contains("--image-view-on works again") }, daemon.log)
        func zombies() -> [Int32] {
            ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }.filter { child in
                guard let stat = try? String(contentsOfFile: "/proc/\(child)/stat", encoding: .utf8),
                      let fields = stat.split(separator: ")").last?.split(separator: " "), fields.count > 2 else { return false }
                return fields[0] == "Z" && Int32(fields[1]) == pid
            }
        }
        XCTAssertEqual(zombies(), [], "every child reaped")
        XCTAssertLessThan(ReliabilityTests.peakResidentMiB(pid) - before, 32, "50 MB of output not held")
        XCTAssertEqual(daemon.log.components(separatedBy: "did not finish within").count - 1, 1, "said once")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    /// A box without `cec-ctl` says so once and blanks only; the display still goes off and on.
    func testWithoutCECItSaysSoOnceAndBlanksOnly() throws {
        let daemon = try DaemonProcess(extra: ["--cec-command", scratch.appendingPathComponent("no-such-cec-ctl").path])
        for mode in ["off", "on", "off", "auto"] {
            let (code, output) = try runToEnd(Executables.adplayerctl, ["--socket", daemon.socket, "display", mode])
            XCTAssertEqual(code, 0, output)
        }
        XCTAssertTrue(waitUntil(timeout: 10) { daemon.log.contains("blanked only") }, daemon.log)
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        XCTAssertEqual(daemon.log.components(separatedBy: "blanked only").count - 1, 1, "once: \(daemon.log)")
    }
}
