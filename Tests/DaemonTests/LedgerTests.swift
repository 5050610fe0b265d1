import AdRuntime
import AdTestSupport
import Foundation
import XCTest

/// Every billed play can be defended (issue 33), through the real daemon and its tools as a
/// DOOH buyer, an ad-ops engineer and a power cut would try it: plays a `kill -9` left open
/// closed `interrupted` at the next start, a signed export west of Greenwich that a buyer's
/// tools read as numbers and verify, an edited row named, exports that link, a bad key that
/// leaves the previous pair as it was, a state file locked at start that loses nothing, and
/// linear ads that keep their pace.
final class LedgerTests: XCTestCase {
    private var server: FixtureServer!
    private var scratch: URL!

    override func setUpWithError() throws {
        server = try FixtureServer(script: "beacon_server.py")
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        server.stop()
        try? FileManager.default.removeItem(at: scratch)
    }

    /// An overlay for the length of any episode, a post-roll, each with an impression.
    private func catalog(overlay: Double = 30) throws -> URL {
        let b = server.base
        return try makeCatalog("""
            {"version": 1,
             "overlays": [{"id": "ov-long", "image": "overlay.png", "slots": [{"start": 0.3, "duration": \(overlay)}],
                           "impression": ["\(b)/b/ov-imp"]}],
             "postrolls": [{"id": "pr-1", "video": "postroll.mp4", "impression": ["\(b)/b/pr-imp"]}]}
            """)
    }

    private func plays(_ daemon: DaemonProcess) throws -> [[String: Any]] {
        ((try daemon.connect().call("plays"))["result"] as? [String: Any])?["plays"] as? [[String: Any]] ?? []
    }

    private func export(_ stateDir: String, _ extra: [String] = []) throws -> (status: Int32, output: String) {
        try runToEnd(Executables.adplayerd, ["plays", "export", "--state-dir", stateDir] + extra)
    }

    /// The DOOH log's rows as Python's `csv` module reads them (a buyer's spreadsheet would),
    /// each field as Python typed it after `float()` where it can be one.
    private func pythonRows(_ file: String) throws -> [[String: Any]] {
        let script = """
            import csv, json, sys
            rows = []
            for row in csv.DictReader(open(sys.argv[1], newline='')):
                for key in ('latitude', 'longitude', 'play_seconds', 'impressions'):
                    row[key] = float(row[key]) if row[key] else None
                rows.append(row)
            print(json.dumps(rows))
            """
        let (status, output) = try runToEnd("/usr/bin/python3", ["-c", script, file])
        XCTAssertEqual(status, 0, output)
        return (try JSONSerialization.jsonObject(with: Data(output.utf8)) as? [[String: Any]]) ?? []
    }

    /// R28 through the daemon: a post-roll's `ad.started` says the level it plays at — its
    /// creative measured, a static gain toward the episode's loudness (or the fixed -24 LUFS
    /// while the episode is still being measured) — and its play in the ledger says the same,
    /// hashed: the DOOH export verifies and carries the five columns. The measurements are kept
    /// beside the state (`loudness.tsv`) and a restart measures nothing again: the second
    /// viewing's post-roll matches the episode's loudness.
    func testR28APostrollsLevelIsInItsStartAndItsLedgerRowAndKeptAcrossARestart() throws {
        let daemon = try DaemonProcess(catalog: try catalog(overlay: 0.5), extra: ["--time-sync-wait", "0"])
        func postroll() throws -> (id: String, loudness: [String: Any]) {
            let events = try daemon.connect()
            _ = try events.call("subscribe", ["events": ["ad.started"]])
            _ = try daemon.connect().call("open", ["path": try Media.path("episode-10s.mp4")])
            let started = try events.event(named("ad.started", "kind", "postroll"))
            return (try XCTUnwrap(started["instance"] as? String), try XCTUnwrap(started["loudness"] as? [String: Any], "\(started)"))
        }
        var (id, level) = try postroll()
        let adLevel = try XCTUnwrap(level["ad_lufs"] as? Double, "the creative is measured before it plays: \(level)")
        XCTAssertNotNil(level["ad_peak_dbtp"] as? Double)
        let target = try XCTUnwrap(level["target_lufs"] as? Double)
        if let content = level["content_lufs"] as? Double {
            XCTAssertEqual(target, content, "matched to the episode")
        } else {
            XCTAssertEqual(target, -24, "the episode not measured yet: the fixed target")
        }
        XCTAssertEqual(try XCTUnwrap(level["gain_db"] as? Double), target - adLevel, accuracy: 0.02, "one static gain")
        XCTAssertEqual(level["dynamic"] as? Bool, false)
        XCTAssertEqual(level["rule"] as? String, level["content_lufs"] is Double ? "matched" : "target")
        XCTAssertTrue(waitUntil(timeout: 30) { ((try? self.plays(daemon)) ?? []).contains { $0["id"] as? String == id && $0["ended"] is String } })
        let row = try XCTUnwrap(try plays(daemon).first { $0["id"] as? String == id }?["loudness"] as? [String: Any])
        XCTAssertEqual(row["ad_lufs"] as? Double, adLevel)
        XCTAssertEqual(row["gain_db"] as? Double, level["gain_db"] as? Double)
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        let book = try String(contentsOfFile: daemon.stateDir + "/loudness.tsv", encoding: .utf8)
        XCTAssertTrue(book.contains(try Media.path("episode-10s.mp4")) && book.contains("postroll.mp4"), book)

        try daemon.launch()
        (id, level) = try postroll()
        let episode = try XCTUnwrap(level["content_lufs"] as? Double, "known from the book at once after a restart: \(level)")
        XCTAssertEqual(level["target_lufs"] as? Double, episode)
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        XCTAssertFalse(daemon.log.contains("loudness:"), "nothing to say about loudness: \(daemon.log)")

        let log = scratch.appendingPathComponent("loud.csv").path
        let (status, output) = try export(daemon.stateDir, ["--format", "dooh-csv", "--output", log, "--screen-id", "s1"])
        XCTAssertEqual(status, 0, output)
        let rows = try pythonRows(log)
        let exported = try XCTUnwrap(rows.first { $0["play_id"] as? String == id })
        XCTAssertEqual(Double(exported["content_lufs"] as? String ?? ""), episode)
        XCTAssertEqual(exported["audio"] as? String, "matched")
        XCTAssertEqual(rows.first { $0["kind"] as? String == "overlay" }?["audio"] as? String, "none", "an overlay: no sound to level")
        XCTAssertNotNil(Double(exported["gain_db"] as? String ?? ""))
        let (verified, said) = try runToEnd(Executables.adplayerd, ["plays", "verify", log])
        XCTAssertEqual(verified, 0, said)
    }

    /// `kill -9` while an overlay is on screen, and again while a post-roll plays: at each
    /// restart the play left open is closed `interrupted`, ended no later than the kill and not
    /// before its start, and it is in the DOOH export with its reason; the chain is whole.
    func testAKillDuringAnOverlayAndDuringAPostrollLeavesNoPlayOpen() throws {
        let daemon = try DaemonProcess(catalog: try catalog(), extra: ["--time-sync-wait", "0"])
        var events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.started"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-long.mp4")])
        let overlay = try XCTUnwrap(try events.event(named("ad.started", "kind", "overlay"))["instance"] as? String)
        let overlayShown = Date()
        Thread.sleep(forTimeInterval: 6)   // on screen past a heartbeat (every 5 s)
        daemon.stop(SIGKILL)
        let overlayKilled = Date()

        try daemon.launch()
        var closed = try XCTUnwrap(try plays(daemon).first { $0["id"] as? String == overlay })
        XCTAssertEqual(closed["reason"] as? String, "interrupted", "\(closed)")
        var seconds = try XCTUnwrap(closed["seconds"] as? Double)
        XCTAssertTrue(seconds >= 0 && seconds <= overlayKilled.timeIntervalSince(overlayShown) + 1, "\(seconds) s")
        XCTAssertTrue(daemon.log.contains("closed as interrupted"), daemon.log)

        events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.started"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("clip-1s.mp4")])
        let postroll = try XCTUnwrap(try events.event(named("ad.started", "kind", "postroll"))["instance"] as? String)
        daemon.stop(SIGKILL)

        try daemon.launch()
        closed = try XCTUnwrap(try plays(daemon).first { $0["id"] as? String == postroll })
        XCTAssertEqual(closed["reason"] as? String, "interrupted", "\(closed)")
        seconds = try XCTUnwrap(closed["seconds"] as? Double)
        XCTAssertTrue(seconds >= 0 && seconds <= 2.5, "at most the post-roll's length: \(seconds) s")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)

        let log = scratch.appendingPathComponent("log.csv").path
        let (status, output) = try export(daemon.stateDir, ["--format", "dooh-csv", "--output", log, "--screen-id", "s1"])
        XCTAssertEqual(status, 0, output)
        let rows = try pythonRows(log)
        for id in [overlay, postroll] {
            XCTAssertEqual(rows.first { $0["play_id"] as? String == id }?["reason"] as? String, "interrupted", "\(id) in \(rows)")
        }
        let (verified, said) = try runToEnd(Executables.adplayerd, ["plays", "verify", "--state-dir", daemon.stateDir])
        XCTAssertEqual(verified, 0, said)
    }

    /// West of Greenwich: the longitude is a number in the signed log (Python's `csv` reads it
    /// as -74.006); `plays verify FILE --public-key` and openssl verify it; an export that goes
    /// on from it (`--after-sequence`) links to it. A row edited with sqlite3 afterwards:
    /// `plays verify --state-dir` names it, and a new export of it does not verify. A missing or
    /// over-shared key, or an output that cannot be written, leaves the previous pair as it was,
    /// with one line saying why.
    func testASignedLogWestOfGreenwichVerifiesAndAnEditIsNamed() throws {
        let daemon = try DaemonProcess(catalog: try catalog(overlay: 1), extra: ["--latlong", "40.7128,-74.0060", "--time-sync-wait", "0"])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.ended"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-1.mp4")])
        _ = try events.event(named("ad.ended", "kind", "postroll"))
        XCTAssertEqual(daemon.stop(), 0, daemon.log)

        let key = scratch.appendingPathComponent("screen.key").path, pub = scratch.appendingPathComponent("screen.pub").path
        XCTAssertEqual(try runToEnd("/usr/bin/openssl", ["genpkey", "-algorithm", "ed25519", "-out", key]).status, 0)
        chmod(key, 0o600)
        XCTAssertEqual(try runToEnd("/usr/bin/openssl", ["pkey", "-in", key, "-pubout", "-out", pub]).status, 0)
        let log = scratch.appendingPathComponent("log.csv").path
        var (status, output) = try export(daemon.stateDir, ["--format", "dooh-csv", "--output", log, "--sign", key, "--screen-id", "nyc-1"])
        XCTAssertEqual(status, 0, output)
        let rows = try pythonRows(log)
        XCTAssertEqual(rows.count, 2, "the overlay and the post-roll: \(rows)")
        for row in rows {
            XCTAssertEqual(row["latitude"] as? Double, 40.7128)
            XCTAssertEqual(row["longitude"] as? Double, -74.006)
        }
        XCTAssertFalse(try String(contentsOfFile: log, encoding: .utf8).contains("'-74"), "no formula guard on a number")
        (status, output) = try runToEnd(Executables.adplayerd, ["plays", "verify", log, "--public-key", pub])
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(output.contains("signature: verified") && output.contains("2 plays chained, whole"), output)
        (status, output) = try runToEnd("/usr/bin/openssl", ["pkeyutl", "-verify", "-pubin", "-inkey", pub, "-rawin", "-in", log, "-sigfile", log + ".sig"])
        XCTAssertEqual(status, 0, output)

        // Failures leave the pair as it was, with one line (not the usage text).
        let pair = (try Data(contentsOf: URL(fileURLWithPath: log)), try Data(contentsOf: URL(fileURLWithPath: log + ".sig")))
        let open = scratch.appendingPathComponent("open.key").path
        try FileManager.default.copyItem(atPath: key, toPath: open)
        chmod(open, 0o644)
        for (badKey, why) in [(scratch.appendingPathComponent("missing.key").path, "No such file"), (open, "readable by others")] {
            (status, output) = try export(daemon.stateDir, ["--format", "dooh-csv", "--output", log, "--sign", badKey, "--screen-id", "nyc-1"])
            XCTAssertEqual(status, 1, output)
            XCTAssertTrue(output.contains(why) && !output.contains("usage:"), output)
            XCTAssertEqual(output.split(separator: "\n").count, 1, output)
        }
        (status, output) = try export(daemon.stateDir, ["--format", "dooh-csv", "--output", scratch.appendingPathComponent("no/such/dir/log.csv").path,
                                                        "--sign", key, "--screen-id", "nyc-1"])
        XCTAssertEqual(status, 1, output)
        XCTAssertFalse(output.contains("usage:"), output)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: log)), pair.0, "the previous log as it was")
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: log + ".sig")), pair.1, "the previous signature as it was")

        // More plays; an export that goes on from the first links to it.
        try daemon.launch()
        let more = try daemon.connect()
        _ = try more.call("subscribe", ["events": ["ad.ended"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-1.mp4")])
        _ = try more.event(named("ad.ended", "kind", "postroll"))
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        let last = try XCTUnwrap(rows.last)
        let next = scratch.appendingPathComponent("next.csv").path
        (status, output) = try export(daemon.stateDir, ["--format", "dooh-csv", "--output", next, "--screen-id", "nyc-1",
                                                        "--after-sequence", try XCTUnwrap(last["sequence"] as? String)])
        XCTAssertEqual(status, 0, output)
        let following = try pythonRows(next)
        XCTAssertEqual(following.count, 2, "\(following)")
        XCTAssertEqual(following.first?["previous_hash"] as? String, last["row_hash"] as? String, "the export links to the one before")
        // ... and a buyer checks it does (issue 45, 8): one ledger, the chain unbroken between them.
        (status, output) = try runToEnd(Executables.adplayerd, ["plays", "verify", next, "--after", log])
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(output.contains("continues") && output.contains("chains from play"), output)
        XCTAssertTrue(output.contains("unsigned: nothing vouches"), "without the key, nothing vouches for it: \(output)")
        (status, output) = try runToEnd(Executables.adplayerd, ["plays", "verify", log, "--after", next])
        XCTAssertEqual(status, 1, output)
        XCTAssertTrue(output.contains("does NOT continue"), output)

        // A row edited by hand: named on the box, and an export of it does not verify.
        let edit = "import sqlite3, sys; db = sqlite3.connect(sys.argv[1]); db.execute('UPDATE plays SET seconds = 30 WHERE seq = 2'); db.commit()"
        (status, output) = try runToEnd("/usr/bin/python3", ["-c", edit, daemon.stateDir + "/adplayerd.sqlite"])
        XCTAssertEqual(status, 0, output)
        (status, output) = try runToEnd(Executables.adplayerd, ["plays", "verify", "--state-dir", daemon.stateDir])
        XCTAssertEqual(status, 1, output)
        XCTAssertTrue(output.contains("BROKEN at play 2"), output)
        let edited = scratch.appendingPathComponent("edited.csv").path
        (status, output) = try export(daemon.stateDir, ["--format", "dooh-csv", "--output", edited, "--sign", key, "--screen-id", "nyc-1"])
        XCTAssertEqual(status, 0, output)
        (status, output) = try runToEnd(Executables.adplayerd, ["plays", "verify", edited, "--public-key", pub])
        XCTAssertEqual(status, 1, "signed, but its chain does not hold: \(output)")
        XCTAssertTrue(output.contains("BROKEN at play 2"), output)
    }

    /// A state file another process holds locked (BEGIN EXCLUSIVE on a rollback journal) when
    /// the daemon starts: it plays while the lock is still held; once the lock goes, every beacon
    /// queued before is delivered and every play — before and during — is listed, the chain
    /// whole. A stop while still locked leaves a side file that the next start imports: nothing
    /// billed in that run is lost.
    func testAStateFileLockedAtStartLosesNothing() throws {
        let daemon = try DaemonProcess(catalog: try catalog(overlay: 1), extra: ["--time-sync-wait", "0", "--beacon-max-delay", "1"])
        try server.get("/_down")
        var events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.ended"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-1.mp4")])
        _ = try events.event(named("ad.ended", "kind", "postroll"))
        let before = try plays(daemon).compactMap { $0["id"] as? String }
        XCTAssertEqual(before.count, 2)
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        try server.get("/_up")

        let database = daemon.stateDir + "/adplayerd.sqlite"
        func hold() throws -> (BackgroundProcess, String) {
            let release = scratch.appendingPathComponent("release-\(UUID().uuidString.prefix(6))").path
            let script = """
                import os, sqlite3, sys, time
                db = sqlite3.connect(sys.argv[1], isolation_level=None)
                db.execute('PRAGMA journal_mode=DELETE')
                db.execute('BEGIN EXCLUSIVE')
                print('locked', flush=True)
                while not os.path.exists(sys.argv[2]): time.sleep(0.05)
                db.execute('COMMIT')
                """
            let holder = try BackgroundProcess("/usr/bin/python3", ["-c", script, database, release], collectOutput: true)
            XCTAssertTrue(waitUntil(timeout: 20) { holder.log.contains("locked") }, holder.log)
            return (holder, release)
        }

        // Locked for 12 s from before the start.
        var (holder, release) = try hold()
        let lockedAt = Date()
        try daemon.launch()
        events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.ended", "player.playing"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-1.mp4")])
        _ = try events.event(named("player.playing"))
        XCTAssertTrue(holder.isRunning, "it plays while the lock is held")
        _ = try events.event(named("ad.ended", "kind", "postroll"))
        XCTAssertTrue(holder.isRunning, "its ads too")
        XCTAssertTrue(daemon.log.contains("locked by another process"), daemon.log)
        Thread.sleep(forTimeInterval: max(0, 12 - Date().timeIntervalSince(lockedAt)))
        FileManager.default.createFile(atPath: release, contents: nil)
        holder.process.waitUntilExit()
        XCTAssertTrue(waitUntil(timeout: 30) {
            ((try? self.server.counts()) ?? [:]).filter { $0.key.hasPrefix("/b/") }.values.reduce(0, +) >= 4
        }, "every impression, queued before and during: \((try? server.counts()) ?? [:]) \(daemon.log)")
        XCTAssertEqual(try server.counts()["/b/ov-imp"], 2)
        XCTAssertEqual(try server.counts()["/b/pr-imp"], 2)
        let listed = try plays(daemon).compactMap { $0["id"] as? String }
        XCTAssertEqual(listed.count, 4, "the plays from before and this run's: \(listed)")
        XCTAssertTrue(Set(before).isSubset(of: Set(listed)))
        XCTAssertTrue(daemon.log.contains("took what was kept in memory"), daemon.log)

        // Locked again, and stopped while locked.
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        (holder, release) = try hold()
        try daemon.launch()
        events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.ended"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-1.mp4")])
        _ = try events.event(named("ad.ended", "kind", "postroll"))
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        XCTAssertTrue(daemon.log.contains("still locked at the stop"), daemon.log)
        FileManager.default.createFile(atPath: release, contents: nil)
        holder.process.waitUntilExit()
        try daemon.launch()
        XCTAssertTrue(waitUntil(timeout: 30) { (try? self.server.counts()["/b/pr-imp"]) == 3 }, "\((try? server.counts()) ?? [:])")
        XCTAssertEqual(try plays(daemon).count, 6)
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        let (verified, said) = try runToEnd(Executables.adplayerd, ["plays", "verify", "--state-dir", daemon.stateDir])
        XCTAssertEqual(verified, 0, said)
        XCTAssertTrue(said.contains("6 plays chained, whole"), said)
    }

    /// A linear ad keeps its pace: `speed 100` during a pre-roll, a mid-roll and a post-roll is
    /// refused `ad_playing`, and each ends `completed` after its own length on screen.
    /// The same in WAL mode, as the daemon makes its file (issue 45, 9): a writer's
    /// `BEGIN EXCLUSIVE` lets readers in, so the file opened and the first write waited, then
    /// failed — the daemon exited 1 "database is locked" and nothing played. Now it plays at
    /// once, and once the lock goes every play is in the file, the chain whole (R21: busy is
    /// "later").
    func testAStateFileHeldByAWriterInWALModeAtStartPlaysAndWaits() throws {
        let daemon = try DaemonProcess(catalog: try catalog(overlay: 1), extra: ["--time-sync-wait", "0", "--beacon-max-delay", "1"])
        var events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.ended"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-1.mp4")])
        _ = try events.event(named("ad.ended", "kind", "postroll"))
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        let database = daemon.stateDir + "/adplayerd.sqlite"
        let release = scratch.appendingPathComponent("release-wal").path
        let script = """
            import os, sqlite3, sys, time
            db = sqlite3.connect(sys.argv[1], isolation_level=None)
            print(db.execute('PRAGMA journal_mode').fetchone()[0], flush=True)
            db.execute('BEGIN EXCLUSIVE')
            print('locked', flush=True)
            while not os.path.exists(sys.argv[2]): time.sleep(0.05)
            db.execute('COMMIT')
            """
        let holder = try BackgroundProcess("/usr/bin/python3", ["-c", script, database, release], collectOutput: true)
        XCTAssertTrue(waitUntil(timeout: 20) { holder.log.contains("locked") }, holder.log)
        XCTAssertTrue(holder.log.hasPrefix("wal"), "the daemon's file is in WAL mode: \(holder.log)")
        try daemon.launch()
        events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.ended", "player.playing"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-1.mp4")])
        _ = try events.event(named("player.playing"))
        _ = try events.event(named("ad.ended", "kind", "postroll"))
        XCTAssertTrue(holder.isRunning, "it played while the lock was held")
        XCTAssertTrue(daemon.log.contains("locked by another process"), daemon.log)
        FileManager.default.createFile(atPath: release, contents: nil)
        holder.process.waitUntilExit()
        XCTAssertTrue(waitUntil(timeout: 30) { daemon.log.contains("took what was kept in memory") }, daemon.log)
        XCTAssertEqual(try plays(daemon).count, 4, "the plays from before and this run's")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        let (verified, said) = try runToEnd(Executables.adplayerd, ["plays", "verify", "--state-dir", daemon.stateDir])
        XCTAssertEqual(verified, 0, said)
    }

    func testSpeedIsRefusedDuringEveryLinearKind() throws {
        let daemon = try DaemonProcess(catalog: try makeCatalog("""
            {"version": 1,
             "prerolls": [{"id": "pre", "video": "postroll.mp4"}],
             "midrolls": [{"id": "mid", "video": "postroll.mp4", "at": 2}],
             "postrolls": [{"id": "post", "video": "postroll.mp4"}]}
            """))
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.started", "ad.ended"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-10s.mp4")])
        for kind in ["preroll", "midroll", "postroll"] {
            _ = try events.event(timeout: 60, named("ad.started", "kind", kind))
            let refused = try daemon.connect().call("speed", ["value": 100])
            XCTAssertEqual((refused["error"] as? [String: Any])?["code"] as? String, "ad_playing", "\(kind): \(refused)")
            let (status, output) = try daemon.ctl("speed", "100")
            XCTAssertEqual(status, 1, "\(kind): \(output)")
            let ended = try events.event(timeout: 60, named("ad.ended", "kind", kind))
            XCTAssertEqual(ended["reason"] as? String, "completed", "\(kind): \(ended)")
        }
        // A play's end is written by the outbox's thread after `ad.ended` is sent: wait for it.
        var linear: [[String: Any]] = []
        XCTAssertTrue(waitUntil(timeout: 30) {
            linear = ((try? self.plays(daemon)) ?? []).filter { ["preroll", "midroll", "postroll"].contains($0["kind"] as? String ?? "") }
            return linear.count == 3 && linear.allSatisfy { $0["seconds"] as? Double != nil }
        }, "\(linear)")
        for play in linear {
            XCTAssertGreaterThan(play["seconds"] as? Double ?? 0, 1.5, "on screen for its own two seconds: \(play)")
        }
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    /// A mid-roll whose file is random bytes (issue 34, 16): real mpv never shows a frame of it,
    /// so it is never `started` — no impression reaches the ad server, no proof-of-play row —
    /// it fails with `render_failed`, and the episode plays on from the break.
    func testAMidrollThatNeverShowsAFrameIsNeverBilled() throws {
        let b = server.base
        let folder = try makeCatalog("""
            {"version": 1, "midrolls": [{"id": "mid-bad", "video": "random-bytes.mp4", "at": 2, "impression": ["\(b)/b/mid-imp"]}]}
            """)
        try FileManager.default.copyItem(atPath: try Media.path("random-bytes.mp4"), toPath: folder.appendingPathComponent("random-bytes.mp4").path)
        let daemon = try DaemonProcess(catalog: folder, extra: ["--time-sync-wait", "0"])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.*", "player.playing"]])
        _ = try daemon.connect().call("open", ["path": try Media.path("episode-10s.mp4")])
        let error = try events.event { $0["event"] as? String == "ad.error" && $0["kind"] as? String == "midroll" }
        XCTAssertEqual(error["code"] as? String, "render_failed", "\(error)")
        _ = try events.event { $0["event"] as? String == "player.playing" && ($0["position"] as? Double ?? 0) >= 1.9 }
        XCTAssertFalse(events.events.contains { $0["event"] as? String == "ad.started" && $0["kind"] as? String == "midroll" },
                       "never started: \(events.events)")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
        XCTAssertNil(try server.counts()["/b/mid-imp"], "no impression")
        let (status, output) = try export(daemon.stateDir, ["--format", "jsonl"])
        XCTAssertEqual(status, 0, output)
        XCTAssertFalse(output.contains("mid-bad"), "no proof of play: \(output)")
    }
}
