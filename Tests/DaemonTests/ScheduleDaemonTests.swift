import AdRuntime
import AdTestSupport
import Bounds
import Foundation
import XCTest

/// The schedule in the real daemon (issue 37): `schedule-check` prints what a daemon under
/// `faketime` plays; a takeover through `adplayerctl`, the page and an MQTT group command,
/// each audited with who; a broken schedule at reload keeps the one that plays; content plays
/// recorded in proof of play.
final class ScheduleDaemonTests: XCTestCase {
    private var library: URL!

    override func setUpWithError() throws {
        library = FileManager.default.temporaryDirectory.appendingPathComponent("schedule-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: library, withIntermediateDirectories: true)
        for name in ["episode-1.mp4", "episode-2.mp4", "clip-1s.mp4", "overlay.png", "episode-long.mp4", "episode-10s.mp4"] {
            try FileManager.default.copyItem(atPath: try Media.path(name), toPath: library.appendingPathComponent(name).path)
        }
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: library)
    }

    private func write(_ json: String, _ name: String = "schedule.json") throws -> String {
        let path = library.appendingPathComponent(name).path
        try Data(json.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    private static let libfaketime = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

    /// The daemon's environment under libfaketime.
    private static func fakeClock() -> [String: String] {
        ["TZ": "Europe/Paris", "FAKETIME": "@2026-12-07 05:59:50", "LD_PRELOAD": libfaketime]
    }

    private static let dawn = """
        {"version": 1,
         "playlists": {"filler": {"items": ["episode-1.mp4", "episode-2.mp4"]},
                       "promo": {"items": [{"path": "overlay.png", "seconds": 3}, "clip-1s.mp4"]}},
         "default": "filler",
         "slots": [{"id": "promo", "playlist": "promo", "hours": "daily 06:00-06:01", "priority": 5}]}
        """

    /// The first items a daemon plays under `faketime` from 05:59:50 (Paris) are those
    /// `schedule-check --at` the same instant prints: the filler, cut at 06:00 for the slot's
    /// image (3 s) and clip.
    func testScheduleCheckPrintsWhatTheDaemonPlays() throws {
        guard FileManager.default.fileExists(atPath: Self.libfaketime) else {
            return XCTFail("faketime is missing: make test installs it (scripts/install-deps.sh)")
        }
        let schedule = try write(Self.dawn)
        let (status, output) = try runToEnd(Executables.adplayerd, ["schedule-check", schedule, "--library", library.path, "--timezone", "Europe/Paris",
                                                                    "--at", "2026-12-07T05:59:50+01:00", "--for", "40s", "--json"])
        XCTAssertEqual(status, 0, output)
        let planned = output.split(separator: "\n").compactMap { line -> String? in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])?["path"] as? String
        }
        XCTAssertGreaterThanOrEqual(planned.count, 8, output)
        XCTAssertEqual(planned.prefix(6).map { ($0 as NSString).lastPathComponent },
                       ["episode-1.mp4", "episode-2.mp4", "episode-1.mp4", "overlay.png", "clip-1s.mp4", "overlay.png"], output)

        let environment = ProcessInfo.processInfo.environment
        if environment["TSAN_OPTIONS"] != nil || environment["ASAN_OPTIONS"] != nil {
            throw XCTSkip("libfaketime cannot be preloaded into a sanitized build (its clock_gettime recurses under the sanitizer's "
                          + "interceptors at start); `make test` runs this part")
        }
        // libfaketime preloaded (faketime(1) would run the daemon as its child, and a stop would
        // signal faketime), through env(1), which execs it (the same pid): a program started
        // with libfaketime preloaded straight from this process lost its arguments on this
        // machine, one exec'd by a preloaded parent does not. The monotonic clock is faked too
        // (with a real one, libfaketime's timed waits return at once and spin).
        let daemon = try DaemonProcess(library: library.path, extra: ["--schedule", schedule, "--timezone", "Europe/Paris", "--cec-command", "none"],
                                       environment: Self.fakeClock(),
                                       wrapper: ["/usr/bin/env"])
        func played() -> [String] {
            daemon.log.split(separator: "\n").compactMap { line -> String? in
                guard let range = line.range(of: "schedule: "), line.contains(": /") else { return nil }
                return String(line[range.upperBound...].split(separator: " ").last ?? "")
            }
        }
        XCTAssertTrue(waitUntil(timeout: 60) { played().count >= 6 }, daemon.log)
        XCTAssertEqual(Array(played().prefix(6)), Array(planned.prefix(6)), daemon.log)
        let rule = try XCTUnwrap((try daemon.connect().call("schedule")["result"] as? [String: Any])?["rule"] as? [String: Any])
        XCTAssertNotNil(rule["kind"] as? String)
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    /// `schedule-check` is the box with its ads (issue 46, 3): with a catalog of pre-rolls and
    /// post-rolls, over 150 s that cross a slot's start and end and an interrupt's turns, the
    /// items a daemon under libfaketime plays (its content plays, recorded in proof of play) are
    /// those schedule-check lists, in order, each starting at the same time within a second —
    /// ad time included (without the ads the forecast drifted an item's pre- and post-roll each item).
    func testScheduleCheckWithAdsPlaysTheSameItemsAtTheSameTimesAsTheDaemon() throws {
        guard FileManager.default.fileExists(atPath: Self.libfaketime) else {
            return XCTFail("faketime is missing: make test installs it (scripts/install-deps.sh)")
        }
        let environment = ProcessInfo.processInfo.environment
        if environment["TSAN_OPTIONS"] != nil || environment["ASAN_OPTIONS"] != nil {
            throw XCTSkip("libfaketime cannot be preloaded into a sanitized build; `make test` runs this test")
        }
        let catalog = library.appendingPathComponent("catalog").path
        try FileManager.default.createDirectory(atPath: catalog, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: try Media.path("clip-1s.mp4"), toPath: catalog + "/clip.mp4")
        try Data("""
            {"version": 1, "prerolls": [{"id": "pre", "video": "clip.mp4"}], "postrolls": [{"id": "post", "video": "clip.mp4"}]}
            """.utf8).write(to: URL(fileURLWithPath: catalog + "/catalog.json"))
        let schedule = try write("""
            {"version": 1,
             "playlists": {"filler": {"items": ["episode-10s.mp4", "episode-1.mp4"]},
                           "promo": {"items": ["episode-2.mp4", "clip-1s.mp4"]},
                           "news": {"items": ["episode-1.mp4"]}},
             "default": "filler",
             "slots": [{"id": "promo", "playlist": "promo", "hours": "daily 06:00-06:01", "priority": 5}],
             "interrupts": [{"id": "news", "playlist": "news", "share": "8%"}]}
            """)
        let options = ["--library", library.path, "--timezone", "Europe/Paris", "--ads", catalog]
        let (status, output) = try runToEnd(Executables.adplayerd, ["schedule-check", schedule] + options
                                            + ["--at", "2026-12-07T05:59:30+01:00", "--for", "150s", "--json"])
        XCTAssertEqual(status, 0, output)
        let planned = output.split(separator: "\n").compactMap { line -> (start: Double, path: String, rule: String, ads: Double)? in
            guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                  let start = (object["start"] as? String).flatMap(ISO8601.parse), let path = object["path"] as? String else { return nil }
            return (start, path, "\(object["rule"] ?? "") \(object["id"] ?? "")", object["ads"] as? Double ?? 0)
        }
        XCTAssertTrue(planned.contains { $0.rule == "slot promo" } && planned.contains { $0.rule == "interrupt news" }, output)
        XCTAssertTrue(planned.contains { $0.ads >= 1.5 }, "ad time is in the items' turns: \(output)")

        let daemon = try DaemonProcess(library: library.path, extra: ["--schedule", schedule, "--timezone", "Europe/Paris", "--cec-command", "none",
                                                                      "--ads", catalog, "--record-content-plays"],
                                       environment: ["TZ": "Europe/Paris", "FAKETIME": "@2026-12-07 05:59:30", "LD_PRELOAD": Self.libfaketime],
                                       wrapper: ["/usr/bin/env"])
        func played() throws -> [(start: Double, path: String)] {
            let plays = (try daemon.connect().call("plays", ["limit": 1000])["result"] as? [String: Any])?["plays"] as? [[String: Any]] ?? []
            return plays.filter { $0["kind"] as? String == "content" }.compactMap { play in
                guard let started = play["started"] as? String, let at = ISO8601.parse(started), let path = play["content_id"] as? String else { return nil }
                return (at, path)
            }.sorted { $0.start < $1.start }
        }
        // The daemon runs until its clock passes the listing's last start (150 s of real time).
        let last = planned.last?.start ?? 0
        XCTAssertTrue(waitUntil(timeout: 240) { ((try? played()) ?? []).contains { $0.start >= last - 0.5 } || ((try? played()) ?? []).count >= planned.count },
                      daemon.log)
        let actual = try played()
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        let compared = min(actual.count, planned.count)
        XCTAssertGreaterThanOrEqual(compared, planned.count - 1, "planned \(planned.map(\.path)), played \(actual.map(\.path))")
        var worst = 0.0
        for index in 0..<compared {
            XCTAssertEqual(Self.stem(actual[index].path), Self.stem(planned[index].path),
                           "item \(index + 1): planned \(planned.map { Self.stem($0.path) }), played \(actual.map { Self.stem($0.path) })")
            worst = max(worst, abs(actual[index].start - planned[index].start))
            XCTAssertLessThanOrEqual(abs(actual[index].start - planned[index].start), 1.0,
                                     "item \(index + 1) (\(planned[index].path)): planned \(ISO8601.format(planned[index].start)), played \(ISO8601.format(actual[index].start))")
        }
        print("schedule-check against the daemon: \(compared) items, the furthest apart \(String(format: "%.2f", worst)) s: "
              + (0..<compared).map { String(format: "%@ %+.2f", Self.stem(planned[$0].path), actual[$0].start - planned[$0].start) }.joined(separator: ", "))
    }

    private static func stem(_ path: String) -> String { ((path as NSString).lastPathComponent as NSString).deletingPathExtension }

    /// A person's Next on a box with a schedule of one default playlist (issue 45, 3): through
    /// the socket, the schedule's next item plays — the status says `playing`, the rule
    /// `default`, no override (it said `stopped`, `manual`, until two days later).
    func testNextOnAScheduledBoxKeepsTheScreenLit() throws {
        let file = try write("""
            {"version": 1, "playlists": {"filler": {"items": ["episode-long.mp4"]}}, "default": "filler"}
            """)
        let daemon = try DaemonProcess(library: library.path, extra: ["--schedule", file, "--cec-command", "none"])
        XCTAssertTrue(waitUntil { ((try? self.schedule(daemon))?["playing"] as? [String: Any])?["path"] as? String == self.library.path + "/episode-long.mp4" })
        var (code, output) = try daemon.ctl("previous")
        XCTAssertNotEqual(code, 0, "nothing played before: refused — \(output)")
        XCTAssertEqual((try schedule(daemon)["rule"] as? [String: Any])?["kind"] as? String, "default", "a refused command overrides nothing")
        (code, output) = try daemon.ctl("next")
        XCTAssertEqual(code, 0, output)
        XCTAssertTrue(waitUntil { ((try? daemon.connect().call("status"))?["result"] as? [String: Any])?["playing"] as? Bool == true }, daemon.log)
        let now = try schedule(daemon)
        XCTAssertEqual((now["rule"] as? [String: Any])?["kind"] as? String, "default", "\(now)")
        XCTAssertNil(now["override_until"], "\(now)")
        XCTAssertEqual((now["playing"] as? [String: Any])?["path"] as? String, library.path + "/episode-long.mp4")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    private func schedule(_ daemon: DaemonProcess) throws -> [String: Any] {
        try XCTUnwrap(try daemon.connect().call("schedule")["result"] as? [String: Any])
    }

    /// A takeover from each client: `adplayerctl`, the page (admin role) and an MQTT group
    /// command; each plays at once, above the schedule, and is audited with who sent it; its
    /// end gives the screen back. Content plays are recorded as plays of kind `content`.
    func testATakeoverFromEachClientIsAuditedAndABrokenReloadKeepsTheSchedule() throws {
        let file = try write("""
            {"version": 1, "playlists": {"filler": {"items": ["episode-long.mp4"]}, "promo": {"items": ["clip-1s.mp4"]}},
             "default": "filler"}
            """)
        let daemon = try DaemonProcess(library: library.path, extra: ["--schedule", file, "--cec-command", "none", "--record-content-plays"])
        XCTAssertTrue(waitUntil { ((try? self.schedule(daemon))?["playing"] as? [String: Any])?["path"] as? String == self.library.path + "/episode-long.mp4" })
        XCTAssertEqual((try schedule(daemon)["rule"] as? [String: Any])?["kind"] as? String, "default")
        let status = try XCTUnwrap(try daemon.connect().call("status")["result"] as? [String: Any])
        XCTAssertNotNil(status["schedule"] as? [String: Any], "status.schedule")

        // adplayerctl: a file, for an hour.
        var (code, output) = try daemon.ctl("takeover", library.path + "/overlay.png", "--for", "1h")
        XCTAssertEqual(code, 0, output)
        var now = try schedule(daemon)
        XCTAssertEqual((now["rule"] as? [String: Any])?["kind"] as? String, "takeover")
        XCTAssertEqual((now["playing"] as? [String: Any])?["path"] as? String, library.path + "/overlay.png")
        XCTAssertNotNil((now["takeover"] as? [String: Any])?["until"] as? String)
        (code, output) = try daemon.ctl("schedule")
        XCTAssertTrue(output.contains("takeover") && output.contains("by adplayerctl (user "), output)
        (code, output) = try daemon.ctl("takeover", "end")
        XCTAssertEqual(code, 0, output)
        XCTAssertEqual((try schedule(daemon)["rule"] as? [String: Any])?["kind"] as? String, "default")

        // The page, admin role: the schedule's playlist.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("tokens-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let tokens = folder.appendingPathComponent("tokens").path
        let admin = String(repeating: "a7", count: 12), viewer = String(repeating: "b8", count: 12)
        try "admin \(admin)\nviewer \(viewer)\n".write(toFile: tokens, atomically: true, encoding: .utf8)
        chmod(tokens, 0o600)
        let web = try WebProcess(socket: daemon.socket, extra: ["--token-file", tokens])
        let refused = try RawHTTP.command(port: web.port, #"{"cmd": "takeover", "args": {"target": "promo"}}"#, token: viewer)
        XCTAssertEqual(refused.status, 403, refused.text)
        let taken = try RawHTTP.command(port: web.port, #"{"cmd": "takeover", "args": {"target": "promo", "by": "someone else"}}"#, token: admin)
        XCTAssertEqual(taken.status, 200, taken.text)
        now = try schedule(daemon)
        let who = (now["takeover"] as? [String: Any])?["who"] as? String ?? ""
        XCTAssertTrue(who.hasPrefix("web page (admin role)") && !who.contains("someone else"), "the page says who, not the client: \(who)")
        XCTAssertEqual((now["playing"] as? [String: Any])?["path"] as? String, library.path + "/clip-1s.mp4")
        XCTAssertEqual(try RawHTTP.command(port: web.port, #"{"cmd": "takeover-end"}"#, token: admin).status, 200)

        // An MQTT group command (the bridge with the admin tier).
        let broker = try Broker()
        let bridge = try BridgeProcess(daemon: daemon, broker: broker.url, box: "box-s", groups: ["lobby"], extra: ["--mqtt-commands", "admin"])
        try bridge.waitConnected()
        XCTAssertTrue(waitUntil(timeout: 20) {
            (try? broker.publish("adplayer/group/lobby/cmd", #"{"id": 7, "cmd": "takeover", "args": {"target": "promo", "seconds": 600}}"#)) != nil
                && ((try? self.schedule(daemon))?["takeover"] as? [String: Any]) != nil
        }, bridge.log)
        XCTAssertTrue((((try schedule(daemon))["takeover"] as? [String: Any])?["who"] as? String ?? "").hasPrefix("mqtt (adplayer/group/lobby/cmd)"))
        let audit = try schedule(daemon)["audit"] as? [[String: Any]] ?? []
        XCTAssertEqual(audit.map { $0["by"] as? String ?? "" }.filter { $0.hasPrefix("adplayerctl") }.count, 2, "\(audit)")
        XCTAssertEqual(Set(audit.compactMap { $0["by"] as? String }.map { $0.components(separatedBy: " (").first ?? "" }),
                       ["adplayerctl", "web page", "mqtt", "adplayerctl"].reduce(into: Set<String>()) { $0.insert($1) })
        XCTAssertTrue(daemon.log.contains("takeover of promo started (by mqtt (adplayer/group/lobby/cmd)"), daemon.log)

        // A broken schedule at reload: the one that plays stays, and the log says why.
        try Data(#"{"version": 1, "playlists": {}, "default": "gone"}"#.utf8).write(to: URL(fileURLWithPath: file))
        (code, output) = try daemon.ctl("reload")
        XCTAssertEqual(code, 0, output)
        XCTAssertTrue(waitUntil { daemon.log.contains("SIGHUP: schedule: \(file)") && daemon.log.contains("keeping the schedule that plays") }, daemon.log)
        XCTAssertTrue(daemon.log.contains("$.default: no playlist \"gone\""), daemon.log)
        let (checked, said) = try runToEnd(Executables.adplayerd, ["check-config", "--library", library.path, "--schedule", file,
                                                                  "--state-dir", daemon.stateDir, "--vo", "null"])
        XCTAssertNotEqual(checked, 0, said)
        XCTAssertTrue(said.contains("schedule: \(file): $.default: no playlist \"gone\""), "check-config names it: \(said)")
        XCTAssertEqual(((try schedule(daemon))["takeover"] as? [String: Any])?["target"] as? String, "promo", "the running schedule, its takeover kept")

        // Content plays: rows of kind `content`, ended ones with their reason.
        let plays = ((try daemon.connect().call("plays")["result"] as? [String: Any])?["plays"] as? [[String: Any]]) ?? []
        XCTAssertTrue(plays.contains { $0["kind"] as? String == "content" && $0["ad_id"] as? String == "episode-long" }, "\(plays)")
        XCTAssertTrue(plays.contains { $0["kind"] as? String == "content" && $0["reason"] as? String == "cut" }, "\(plays)")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }
}
