import AdRuntime
import AdTestSupport
import AdTracking
import Bounds
import Foundation
import XCTest

/// The long part of the reliability suite, run by `make stress` (not `make test`): `kill -9`
/// at random moments, and 500 episodes back to back. Figures are printed for
/// docs/reliability.md; the assertions are bounds, never timings.
final class StressTests: XCTestCase {
    private func run(_ arguments: [String]) throws -> (Int32, String) {
        try runToEnd(arguments[0], Array(arguments.dropFirst()))
    }

    private func integrity(_ path: String) throws -> String {
        try SQLiteDatabase(path: path, readOnly: true).execute("PRAGMA integrity_check").first?.first?.text ?? "?"
    }

    /// R17 under `kill -9` at random moments, 50 times: 3,000 beacons, a delivery killed
    /// mid-flight again and again; at the end every one arrived, the database passed
    /// `integrity_check` after every kill, and each kill cost at most the requests in flight
    /// then (`--concurrency 4`: four re-sent beacons a kill at most, as each outcome is written
    /// when it is known).
    ///
    /// A beacon is sent again only because a kill interrupted its delivery: the server notes
    /// when each request arrived, and **no beacon is sent twice within one run**, and **every
    /// send but a beacon's last was in a run that was killed**. The bound is per kill, not
    /// "at most twice": one beacon can be in flight at two kills (issue 34, 22: a fresh clone
    /// once saw one sent three times — the attempt written before it is made makes it wait its
    /// backoff, of run time, which does not count the process's restart: dispatched again at
    /// the end of the next run's queue, it can be in flight at that run's kill too).
    func testKillNineAtRandomMomentsLosesNoBeacon() throws {
        let server = try FixtureServer(script: "beacon_server.py")
        defer { server.stop() }
        try server.get("/_delay/15")
        let state = FileManager.default.temporaryDirectory.appendingPathComponent("stress-outbox-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: state) }
        let urls = (0..<3000).map { "\(server.base)/b/beacon-\($0)" }
        for chunk in stride(from: 0, to: urls.count, by: 500) {
            XCTAssertEqual(try run([Executables.adplayerd, "beacons", "add", "--state-dir", state] + urls[chunk..<chunk + 500]).0, 0)
        }
        var kills = 0
        var runs: [(start: Double, end: Double, killed: Bool)] = []
        for _ in 0..<50 {
            let flush = Process()
            flush.executableURL = URL(fileURLWithPath: Executables.adplayerd)
            flush.arguments = ["beacons", "flush", "--state-dir", state, "--base-delay", "0.05", "--max-delay", "0.2", "--concurrency", "4"]
            flush.standardOutput = FileHandle.nullDevice
            flush.standardError = FileHandle.nullDevice
            let start = Date().timeIntervalSince1970
            try flush.run()
            usleep(UInt32.random(in: 50_000...400_000))
            var killed = false
            if flush.isRunning { kill(flush.processIdentifier, SIGKILL); kills += 1; killed = true }
            flush.waitUntilExit()
            runs.append((start, Date().timeIntervalSince1970, killed))
            XCTAssertEqual(try integrity(state + "/adplayerd.sqlite"), "ok")
        }
        let lastStart = Date().timeIntervalSince1970
        let (status, output) = try run([Executables.adplayerd, "beacons", "flush", "--state-dir", state])
        XCTAssertEqual(status, 0, output)
        runs.append((lastStart, Date().timeIntervalSince1970 + 1, false))
        let counts = try server.counts()
        let delivered = urls.map { counts["/b/" + $0.components(separatedBy: "/b/")[1]] ?? 0 }
        let resent = delivered.reduce(0) { $0 + max(0, $1 - 1) }
        XCTAssertEqual(delivered.filter { $0 == 0 }.count, 0, "beacons lost")
        XCTAssertLessThanOrEqual(resent, kills * 4, "more re-sent than was in flight at the kills")
        let arrivals = try XCTUnwrap(try JSONSerialization.jsonObject(with: try server.get("/_arrivals")) as? [String: [Double]])
        var sameRun = 0, unexplained = 0
        for (_, times) in arrivals where times.count > 1 {
            let indices = times.sorted().map { time in runs.firstIndex { $0.start <= time && time <= $0.end } ?? -1 }
            if Set(indices).count < indices.count { sameRun += 1 }
            if indices.dropLast().contains(where: { $0 < 0 || !runs[$0].killed }) { unexplained += 1 }
        }
        XCTAssertEqual(sameRun, 0, "a beacon sent twice within one run")
        XCTAssertEqual(unexplained, 0, "a beacon sent again after a run that was not killed")
        print("stress: kill -9 of a delivery \(kills) times in 50 runs; 3000 beacons: \(delivered.filter { $0 == 1 }.count) once, "
              + "\(delivered.filter { $0 == 2 }.count) twice, \(delivered.filter { $0 > 2 }.count) more (\(resent) extra requests, "
              + "bound \(kills * 4)), 0 lost, none twice in a run; integrity_check ok after every kill")
    }

    /// The daemon killed at random moments of playback, 50 times: its state database passes
    /// `integrity_check` after each, and it starts again and plays each time.
    func testTheDaemonKilledAtRandomMomentsStartsAgainEveryTime() throws {
        let daemon = try DaemonProcess()
        _ = try daemon.connect().call("queue", ["paths": [try Media.path("episode-long.mp4"), try Media.path("episode-1.mp4")]])
        for round in 0..<50 {
            usleep(UInt32.random(in: 200_000...1_500_000))
            daemon.stop(SIGKILL)
            XCTAssertEqual(try integrity(daemon.stateDir + "/adplayerd.sqlite"), "ok", "round \(round)")
            try daemon.launch()
            let c = try daemon.connect()
            XCTAssertTrue(waitUntil(timeout: 30) {
                let status = try? c.call("status")["result"] as? [String: Any]
                return status?["playing"] as? Bool == true || status?["item"] is NSNull
            }, "round \(round): \(daemon.log)")
        }
        XCTAssertEqual(daemon.stop(), 0)
        print("stress: the daemon killed -9 at random moments 50 times; integrity_check ok and playing again each time")
    }

    /// 500 episodes back to back with an overlay and a post-roll each: resident memory, open
    /// files and threads stay flat (first vs last reported).
    func testFiveHundredEpisodesBackToBack() throws {
        let catalog = try makeCatalog("""
            {"version": 1,
             "overlays": [{"id": "ov", "image": "overlay.png", "slots": [{"start": 0.1, "duration": 0.5}]}],
             "postrolls": [{"id": "pr", "video": "short-postroll.mp4"}]}
            """)
        defer { try? FileManager.default.removeItem(at: catalog) }
        let ffmpeg = try run(["/usr/bin/env", "ffmpeg", "-hide_banner", "-loglevel", "error", "-y",
                              "-f", "lavfi", "-i", "color=c=0xFFFF00:size=160x120:rate=25:duration=0.5",
                              "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
                              catalog.appendingPathComponent("short-postroll.mp4").path])
        XCTAssertEqual(ffmpeg.0, 0, ffmpeg.1)
        let daemon = try DaemonProcess(catalog: catalog)
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["player.item", "ad.ended"]])
        let control = try daemon.connect()
        _ = try control.call("speed", ["value": 4])
        let clip = try Media.path("clip-1s.mp4")
        _ = try control.call("queue", ["paths": Array(repeating: clip, count: 500)])
        let pid = daemon.process.processIdentifier
        var first: (rss: Int, files: Int, threads: Int)?
        var episodes = 0
        while episodes < 500 {
            let event = try events.event(timeout: 60) { $0["event"] as? String == "player.item" && $0["path"] is String }
            _ = event
            episodes += 1
            if episodes == 20 { first = Self.measure(pid) }
        }
        _ = try events.event(timeout: 60) { $0["event"] as? String == "ad.ended" && $0["kind"] as? String == "postroll" }
        let last = Self.measure(pid)
        let start = try XCTUnwrap(first)
        print("stress: 500 episodes with ads; at episode 20: RSS \(start.rss / 1024) MiB, \(start.files) open files, "
              + "\(start.threads) threads; at 500: RSS \(last.rss / 1024) MiB, \(last.files) open files, \(last.threads) threads")
        XCTAssertLessThanOrEqual(last.files, start.files + 4, "open files grew")
        XCTAssertLessThanOrEqual(last.threads, start.threads + 2, "threads grew")
        XCTAssertLessThan(last.rss, start.rss + start.rss / 4 + 20 * 1024, "resident memory grew")
        XCTAssertEqual(daemon.stop(), 0)
    }

    /// VmRSS (KiB), open files and threads of `pid`.
    static func measure(_ pid: Int32) -> (rss: Int, files: Int, threads: Int) {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }
            .flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
        let files = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd").count) ?? -1
        let threads = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/task").count) ?? -1
        return (rss, files, threads)
    }

    /// The long-life run (issue 45): a month of a busy box on virtual time, by the box's own
    /// code (`adplayerd simulate`, issue 46) — three looping episodes under a schedule with a
    /// morning slot and an hourly interrupt, a VMAP server with pre-, mid- and post-rolls and a
    /// catalog of every kind behind it, a viewer who pauses every hour and presses Next every two,
    /// an operator's takeover each evening, the ledger at its smallest (`plays-max-rows 1000`) so
    /// that some 35,000 plays pass through a ledger of 1,000 (scripts/month_scenario.py). It ends with every rule held —
    /// each viewing's VMAP breaks played (`vmap-breaks` counts per viewing), no stretch of
    /// operating hours with nothing on screen (`screen-lit`), every file played (`media-plays`) —
    /// the ledger it left verifying whole (`plays verify --state-dir`), and no play left open but
    /// the one on at the end.
    ///
    /// The release build runs it (`make stress` builds it; about 70 s on the 2-core machine with its media made,
    /// docs/benchmarks.md §14 — the debug build takes several times as long).
    func testAMonthOfABusyBoxHoldsEveryRuleAndItsLedgerVerifies() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
        let adplayerd = root.appendingPathComponent(".build/release/adplayerd").path
        guard FileManager.default.isExecutableFile(atPath: adplayerd) else {
            return XCTFail("\(adplayerd) is missing: `make stress` builds it (swift build -c release --product adplayerd)")
        }
        let server = try FixtureServer(script: "vast_server.py")
        defer { server.stop() }
        let folder = NSTemporaryDirectory() + "month-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: folder) }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let script = root.appendingPathComponent("scripts/month_scenario.py").path
        let made = try runProcess("/usr/bin/python3", [script, "inputs", folder, server.base], mergeErrors: false)
        XCTAssertEqual(made.status, 0, String(decoding: made.errors, as: UTF8.self))
        let arguments = try XCTUnwrap(try JSONSerialization.jsonObject(with: made.output) as? [String])
        let state = folder + "/state"
        let (status, summary) = try run([adplayerd, "simulate", "--from", "2026-12-01T00:00:00Z", "--for", "720h", "--seed", "45",
                                         "--out", folder + "/out", "--keep-state", state] + arguments)
        print("stress: a month of a busy box:\n" + summary)
        XCTAssertEqual(status, 0, summary)
        XCTAssertTrue(summary.contains("every rule held"), summary)
        for rule in ["screen-lit", "vmap-breaks", "media-plays", "impressions-once", "overlays-end-on-pause"] {
            XCTAssertTrue(summary.contains("PASS \(rule)"), "\(rule): \(summary)")
        }
        // A lit month: about 900 ads a day (a month dark after the first Next showed a third as many).
        let counts = summary.split(separator: "\n").first.map(String.init) ?? ""
        let started = Int(counts.components(separatedBy: ": ").last?.components(separatedBy: " ads started").first ?? "") ?? 0
        XCTAssertGreaterThan(started, 20_000, counts)

        let (verified, verdict) = try run([adplayerd, "plays", "verify", "--state-dir", state])
        XCTAssertEqual(verified, 0, verdict)
        XCTAssertTrue(verdict.lowercased().contains("whole"), verdict)
        // Pruned again and again: the ledger keeps about its limit of some 35,000 plays.
        let csv = try String(contentsOfFile: folder + "/out/plays.csv", encoding: .utf8)
        let rows = CSV.records(Substring(csv)).compactMap { CSV.split($0)?.text }
        let header = try XCTUnwrap(rows.first)
        let sequence = try XCTUnwrap(header.firstIndex(of: "sequence"))
        let ended = try XCTUnwrap(header.firstIndex(of: "ad_end_utc"))
        let kept = rows.dropFirst()
        XCTAssertLessThanOrEqual(kept.count, 1100, "the ledger kept its limit")
        let last = kept.compactMap { Int($0[sequence]) }.max() ?? 0
        XCTAssertGreaterThan(last, 20 * kept.count, "pruned again and again: \(last) plays in all, \(kept.count) kept")
        XCTAssertTrue(kept.allSatisfy { !$0[ended].isEmpty }, "the log holds closed plays")
        // The state the run left: no play open but the one on at the end (a play left open is one the fleet never gets).
        let database = try SQLiteDatabase(path: state + "/adplayerd.sqlite", readOnly: true)
        let open = try database.execute("SELECT id, ad_id, started_wall FROM plays WHERE ended_wall IS NULL")
        XCTAssertLessThanOrEqual(open.count, 1, "plays left open: \(open.prefix(3))")
        let (listed, _) = try run([adplayerd, "plays", "verify", folder + "/out/plays.csv"])
        XCTAssertEqual(listed, 0, "the exported log verifies too")
    }
}
