import AdRuntime
import AdTestSupport
import Foundation
import XCTest

/// The fast part of the reliability suite (docs/reliability.md): hostile media, catalogs,
/// state files and signals fed to the real daemon and tools. Each case asserts the outcome —
/// a clear error naming the input, the content playing on, memory bounded, nothing lost —
/// not only that nothing crashed.
final class ReliabilityTests: XCTestCase {
    private var scratch: URL!

    override func setUpWithError() throws {
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("reliability-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        _ = try? run(["/bin/chmod", "-R", "u+w", scratch.path])
        try? FileManager.default.removeItem(at: scratch)
    }

    @discardableResult
    private func run(_ arguments: [String], environment: [String: String]? = nil) throws -> (Int32, String) {
        try runToEnd(arguments[0], Array(arguments.dropFirst()), environment: environment)
    }

    private func copy(_ name: String, to folder: URL, as target: String? = nil) throws {
        try FileManager.default.copyItem(atPath: try Media.path(name), toPath: folder.appendingPathComponent(target ?? name).path)
    }

    // MARK: Hostile media

    /// A media folder anyone can drop files into: a playlist and an EDL named `.mp4` (mpv
    /// must not fetch or open what they list), random bytes, a truncated file, an empty one, a
    /// directory and a FIFO named `.mp4`, a file deleted while it plays. Each is refused or
    /// fails with its reason; a good file plays after every one.
    func testHostileMediaIsRefusedOrFailsAndTheDaemonPlaysOn() throws {
        let server = try FixtureServer(script: "hostile_http.py")
        defer { server.stop() }
        let library = scratch.appendingPathComponent("library")
        try FileManager.default.createDirectory(at: library, withIntermediateDirectories: true)
        try Data("#EXTM3U\n\(server.base)/b/fetched-by-a-playlist\n/etc/hostname\n".utf8)
            .write(to: library.appendingPathComponent("playlist.mp4"))
        try Data("# mpv EDL v0\n\(server.base)/b/fetched-by-an-edl,0,1\n".utf8).write(to: library.appendingPathComponent("edl.mp4"))
        for name in ["random-bytes.mp4", "truncated.mp4", "empty.mp4", "episode-1.mp4", "episode-long.mp4"] { try copy(name, to: library) }
        try FileManager.default.createDirectory(at: library.appendingPathComponent("folder.mp4"), withIntermediateDirectories: true)
        XCTAssertEqual(mkfifo(library.appendingPathComponent("fifo.mp4").path, 0o600), 0)
        try copy("episode-long.mp4", to: library, as: "deleted.mp4")

        let daemon = try DaemonProcess(library: library.path)
        let c = try daemon.connect()
        _ = try c.call("subscribe", ["events": ["player.*"]])
        func playsAGoodFile() throws {
            let opened = try c.call("open", ["path": library.appendingPathComponent("episode-1.mp4").path])
            XCTAssertEqual(opened["ok"] as? Bool, true, "\(opened)")
            _ = try c.event { $0["event"] as? String == "player.playing" }
            // Emptied, so that the next bad file is alone in the queue: a failure gives way to
            // the next entry, and an earlier bad file's second failure would race the next open.
            _ = try c.call("clear")
        }
        for (name, code) in [("folder.mp4", "not_a_file"), ("fifo.mp4", "not_a_file"), ("absent.mp4", "not_found")] {
            let reply = try c.call("open", ["path": library.appendingPathComponent(name).path])
            XCTAssertEqual((reply["error"] as? [String: Any])?["code"] as? String, code, "\(name): \(reply)")
            XCTAssertTrue(((reply["error"] as? [String: Any])?["message"] as? String)?.contains(name) == true, "the error names \(name)")
        }
        for name in ["playlist.mp4", "edl.mp4", "random-bytes.mp4", "truncated.mp4", "empty.mp4"] {
            let reply = try c.call("open", ["path": library.appendingPathComponent(name).path])
            XCTAssertEqual(reply["ok"] as? Bool, true, "\(name) is a regular file: mpv decides")
            let failed = try c.event { $0["event"] as? String == "player.failed" }
            XCTAssertTrue((failed["path"] as? String)?.hasSuffix(name) == true, "\(failed)")
            XCTAssertFalse((failed["message"] as? String ?? "").isEmpty)
            try playsAGoodFile()
        }
        let counts = try server.counts()
        XCTAssertNil(counts["/b/fetched-by-a-playlist"], "mpv fetched a URL a playlist named")
        XCTAssertNil(counts["/b/fetched-by-an-edl"], "mpv fetched a URL an EDL named")
        // Deleted while playing: mpv has it open; it plays on, and the daemon goes on serving.
        _ = try c.call("open", ["path": library.appendingPathComponent("deleted.mp4").path])
        _ = try c.event { $0["event"] as? String == "player.playing" }
        try FileManager.default.removeItem(at: library.appendingPathComponent("deleted.mp4"))
        try playsAGoodFile()
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    // MARK: Hostile catalogs

    /// A catalog someone else wrote: a symlink out of the folder, a FIFO, a sparse 1 GB file
    /// and an absurd header. `ads-check` names each with the reason the daemon would refuse it
    /// for (one check for both), and the daemon plays the content on with bounded memory.
    func testAHostileCatalogIsReportedAndTheContentPlaysOn() throws {
        let catalog = scratch.appendingPathComponent("catalog")
        try FileManager.default.createDirectory(at: catalog, withIntermediateDirectories: true)
        try copy("overlay.png", to: catalog)
        try copy("huge-header.png", to: catalog)
        let outside = scratch.appendingPathComponent("outside.png")
        try copy("pause.png", to: scratch, as: "outside.png")
        try FileManager.default.createSymbolicLink(atPath: catalog.appendingPathComponent("escape.png").path, withDestinationPath: outside.path)
        XCTAssertEqual(mkfifo(catalog.appendingPathComponent("fifo.png").path, 0o600), 0)
        let sparse = catalog.appendingPathComponent("sparse.png")
        XCTAssertTrue(FileManager.default.createFile(atPath: sparse.path, contents: nil))
        let handle = try FileHandle(forWritingTo: sparse)
        try handle.truncate(atOffset: 1 << 30)
        try handle.close()
        try Data("""
            {"version": 1,
             "pause_ads": [{"id": "escape", "image": "escape.png"}, {"id": "dotdot", "image": "../outside.png"},
                           {"id": "fifo", "image": "fifo.png"}, {"id": "sparse", "image": "sparse.png"},
                           {"id": "huge", "image": "huge-header.png"}],
             "overlays": [{"id": "good", "image": "overlay.png", "slots": [{"start": 0.2, "duration": 30}]}]}
            """.utf8).write(to: catalog.appendingPathComponent("catalog.json"))
        let (status, report) = try run([Executables.adplayerd, "ads-check", catalog.path])
        XCTAssertEqual(status, 0, "one ad resolves: \(report)")
        for (id, fragment) in [("escape", "outside"), ("dotdot", "outside"), ("fifo", "FIFO"), ("sparse", "limit"), ("huge", "30000×30000")] {
            XCTAssertTrue(report.split(separator: "\n").contains { $0.contains("\(id):") && $0.contains(fragment) }, "\(id): \(report)")
        }
        // The daemon: a pause ad from this catalog each pause; every bad one fails alone.
        let daemon = try DaemonProcess(catalog: catalog, extra: ["--pause-ad-delay", "0"])
        let c = try daemon.connect()
        _ = try c.call("subscribe", ["events": ["ad.*", "player.*"]])
        _ = try c.call("open", ["path": try Media.path("episode-long.mp4")])
        _ = try c.event(named("ad.started", "kind", "overlay"))
        for _ in 0..<5 {
            _ = try c.call("pause")
            let outcome = try c.event { ($0["event"] as? String == "ad.error" || $0["event"] as? String == "ad.ended")
                && $0["kind"] as? String == "pause" }
            XCTAssertNotEqual(outcome["event"] as? String, "ad.started", "\(outcome)")
            _ = try c.call("play")
            _ = try c.event { $0["event"] as? String == "player.playing" }
        }
        let peak = Self.peakResidentMiB(daemon.process.processIdentifier)
        XCTAssertLessThan(peak, 400, "the daemon's peak memory was \(peak) MiB (a 1 GB creative was read?)")
        XCTAssertEqual(daemon.stop(), 0)
    }

    // MARK: State faults

    /// The state database truncated to 0 bytes, filled with random bytes, missing, or in a
    /// read-only folder: the daemon starts and plays every time; a bad file is moved aside
    /// with a warning naming both paths; `beacons status` reads a read-only folder.
    func testStateFaultsNeverGatePlayback() throws {
        let daemon = try DaemonProcess()
        let database = daemon.stateDir + "/adplayerd.sqlite"
        _ = try daemon.connect().call("queue", ["paths": [try Media.path("episode-long.mp4")]])
        XCTAssertEqual(daemon.stop(), 0)
        func playsAgain(_ what: String) throws {
            try daemon.launch()
            let c = try daemon.connect()
            let reply = try c.call("open", ["path": try Media.path("episode-1.mp4")])
            XCTAssertEqual(reply["ok"] as? Bool, true, "\(what): \(reply)")
            XCTAssertTrue(waitUntil(timeout: 20) { (try? c.call("status")["result"] as? [String: Any])?["playing"] as? Bool == true },
                          "\(what): nothing plays")
            XCTAssertEqual(daemon.stop(), 0, what)
        }
        try Data().write(to: URL(fileURLWithPath: database))
        try? FileManager.default.removeItem(atPath: database + "-wal")
        try playsAgain("emptied")
        XCTAssertTrue(daemon.log.contains("is empty (0 bytes)") && daemon.log.contains(".bad-"), daemon.log)
        try Data((0..<20000).map { _ in UInt8.random(in: 0...255) }).write(to: URL(fileURLWithPath: database))
        try playsAgain("random bytes")
        XCTAssertTrue(daemon.log.contains("moved it to \(database).bad-"), daemon.log)
        try FileManager.default.removeItem(atPath: daemon.stateDir)
        try playsAgain("missing")
        XCTAssertEqual(chmod(daemon.stateDir, 0o500), 0)
        defer { chmod(daemon.stateDir, 0o700) }
        if getuid() != 0 {   // root writes anywhere: the read-only case needs another user
            try playsAgain("read-only")
            XCTAssertTrue(daemon.log.contains("not writable"), daemon.log)
        }
        let (status, output) = try run([Executables.adplayerd, "beacons", "status", "--state-dir", daemon.stateDir])
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(output.contains("pending"), output)
    }

    /// An outbox whose header is destroyed is moved aside (with a warning naming both files)
    /// and tracking goes on in a new one. (Reading back what a damaged file still holds:
    /// BeaconOutboxTests.testADamagedOutboxIsMovedAsideAndItsBeaconsReadBack.)
    func testADestroyedOutboxIsMovedAsideAndTrackingGoesOn() throws {
        let state = scratch.appendingPathComponent("state").path
        let urls = (0..<50).map { "http://127.0.0.1:9/b/\($0)" }
        XCTAssertEqual(try run([Executables.adplayerd, "beacons", "add", "--state-dir", state] + urls).0, 0)
        // Damage the file's header: it no longer opens as a database.
        let database = state + "/adplayerd.sqlite"
        _ = try run([Executables.adplayerd, "beacons", "status", "--state-dir", state])
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: database))
        try handle.write(contentsOf: Data(repeating: 0x41, count: 16))
        try handle.close()
        let (status, output) = try run([Executables.adplayerd, "beacons", "add", "--state-dir", state, "http://127.0.0.1:9/b/new"])
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(output.contains("moved it to"), output)
        XCTAssertTrue(output.contains(database) && output.contains(".bad-"), "both paths named: \(output)")
        let after = try run([Executables.adplayerd, "beacons", "status", "--state-dir", state]).1
        XCTAssertEqual(after.trimmingCharacters(in: .whitespacesAndNewlines), "pending 1, sent 0, dropped 0", after)
    }

    // MARK: Signals

    /// SIGTERM, SIGINT and SIGQUIT each stop the daemon in order and exit 0 (SIGQUIT used to
    /// print "Program crashed" and play on).
    func testEachStopSignalStopsInOrderWithExitZero() throws {
        for signal in [SIGTERM, SIGINT, SIGQUIT] {
            let daemon = try DaemonProcess()
            _ = try daemon.connect().call("open", ["path": try Media.path("episode-long.mp4")])
            XCTAssertEqual(daemon.stop(signal), 0, "signal \(signal): \(daemon.log)")
            XCTAssertTrue(daemon.log.contains("stopped"), daemon.log)
            XCTAssertFalse(daemon.log.contains("crashed"), daemon.log)
        }
    }

    /// `play` stops cleanly on SIGTERM with the timeline on a pipe complete, and exits 0; a file
    /// that cannot be played makes it exit 1 with one line naming it.
    func testPlayStopsCleanlyAndItsExitCodeSaysWhetherEveryFilePlayed() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: Executables.adplayerdDev)
        process.arguments = ["play", try Media.path("episode-long.mp4")]
        let output = Pipe()
        process.standardOutput = output
        let read = Locked(Data())
        output.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            read.withLock { $0.append(data) }
        }
        try process.run()
        // It plays (the timeline says so through the pipe), then it is stopped.
        XCTAssertTrue(waitUntil(timeout: 30) { String(decoding: read.withLock { $0 }, as: UTF8.self).contains("playing") },
                      "the timeline through a pipe: \(String(decoding: read.withLock { $0 }, as: UTF8.self))")
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        output.fileHandleForReading.readabilityHandler = nil
        XCTAssertEqual(process.terminationStatus, 0)
        let (status, text) = try run([Executables.adplayerdDev, "play", "/no/such/episode.mp4", try Media.path("random-bytes.mp4")])
        XCTAssertEqual(status, 1, text)
        XCTAssertEqual(text.components(separatedBy: "/no/such/episode.mp4").count - 1, 1, "named once: \(text)")
        let (usage, _) = try run([Executables.adplayerdDev, "play", "--pause-ad-delay", "inf", try Media.path("episode-1.mp4")])
        XCTAssertEqual(usage, 2, "a bad flag is a usage error")
    }

    static func peakResidentMiB(_ pid: Int32) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return 0 }
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) / 1024
    }
}
