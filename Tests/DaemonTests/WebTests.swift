import AdRuntime
import AdTestSupport
import Foundation
import XCTest

/// `adplayerd web` as a process beside a daemon: its stderr collected, its port read from
/// its `listening on http://HOST:PORT/` line.
final class WebProcess: @unchecked Sendable {
    let running: BackgroundProcess
    private(set) var port: UInt16 = 0
    var process: Process { running.process }
    var log: String { running.log }

    init(socket: String, extra: [String] = []) throws {
        running = try BackgroundProcess(Executables.adplayerd, ["web", "--socket", socket, "--listen", "127.0.0.1:0"] + extra)
        guard waitUntil(timeout: 30, { self.log.contains("listening on http://") || !self.process.isRunning }), process.isRunning,
              let line = log.split(separator: "\n").first(where: { $0.contains("listening on http://") }),
              let port = line.split(separator: ":").last.flatMap({ UInt16($0.trimmingCharacters(in: CharacterSet(charactersIn: "/"))) }) else {
            throw RawHTTPFailure(description: "adplayerd web did not start: \(log)")
        }
        self.port = port
    }

    /// RSS in KiB (/proc/PID/status VmRSS).
    var rssKiB: Int? {
        guard let text = try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8),
              let line = text.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }) else { return nil }
        return Int(line.split(separator: " ").dropFirst().first ?? "")
    }
}

/// The operator's window end to end: a real daemon playing generated media with a catalog,
/// `adplayerd web` as its own process, a real browser, and the health verdict's exit statuses.
final class WebTests: XCTestCase {
    private static let catalog = """
        {"version": 1,
         "overlays": [{"id": "ov-web", "image": "overlay.png", "slots": [{"start": 0.3, "duration": 120}]}],
         "postrolls": [{"id": "pr-1", "video": "postroll.mp4"}]}
        """

    private func json(_ response: RawHTTP.Response) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any], response.text)
    }

    /// `screenshot` is limited by the daemon for every client (issue 34, 10): fifty at once on
    /// the socket and thirty through the page's `POST /api/command` make at most one grab a
    /// second between them (each answer names a file that exists), not one a request.
    func testScreenshotsAreLimitedForEveryClient() throws {
        let daemon = try DaemonProcess()
        XCTAssertEqual(try daemon.ctl("open", Media.path("episode-long.mp4")).0, 0)
        let web = try WebProcess(socket: daemon.socket)
        let started = Date()
        let paths = Locked<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 50) { _ in
            if let path = ((try? daemon.connect().call("screenshot", ["with_ads": false]))?["result"] as? [String: Any])?["path"] as? String {
                paths.withLock { $0.append(path) }
            }
        }
        DispatchQueue.concurrentPerform(iterations: 30) { _ in
            guard let response = try? RawHTTP.command(port: web.port, #"{"id": 1, "cmd": "screenshot", "args": {"with_ads": false}}"#),
                  let reply = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any],
                  let path = (reply["result"] as? [String: Any])?["path"] as? String else { return }
            paths.withLock { $0.append(path) }
        }
        let elapsed = Date().timeIntervalSince(started)
        let answered = paths.withLock { $0 }
        XCTAssertEqual(answered.count, 80, "every request answered")
        let grabs = Set(answered)
        XCTAssertLessThanOrEqual(grabs.count, Int(elapsed / 1.0) + 2, "one grab a second, not one a request (\(elapsed) s)")
        XCTAssertTrue(grabs.allSatisfy { FileManager.default.fileExists(atPath: $0) })
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    /// A flood of event-stream requests, far past the caps (32 streams, 64 connections): every
    /// connection gets an answer — its stream, or a 503 with `Retry-After` — none is closed
    /// unanswered (issue 34, 9).
    func testEveryConnectionPastTheCapsIsAnswered() throws {
        let daemon = try DaemonProcess()
        let web = try WebProcess(socket: daemon.socket)
        let script = """
            import socket, sys, threading
            port = int(sys.argv[1]); n = 150
            barrier = threading.Barrier(n); results = [None] * n; keep = []
            def one(i):
                try:
                    barrier.wait()
                    s = socket.create_connection(("127.0.0.1", port), timeout=15)
                    s.sendall(("GET /events HTTP/1.1\\r\\nHost: 127.0.0.1:%d\\r\\n\\r\\n" % port).encode())
                    data = b""
                    while b"\\r\\n\\r\\n" not in data:
                        chunk = s.recv(4096)
                        if not chunk: break
                        data += chunk
                    keep.append(s)
                    results[i] = "200" if data.startswith(b"HTTP/1.1 200") else ("503+retry" if data.startswith(b"HTTP/1.1 503") and b"Retry-After" in data else "none:" + repr(data[:40]).replace(" ", "_"))
                except Exception as e:
                    results[i] = "none:" + type(e).__name__
            threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
            [t.start() for t in threads]; [t.join() for t in threads]
            print(",".join(sorted(set(results))), results.count("200"), sum(1 for r in results if r.startswith("none")))
            """
        let (status, output) = try runToEnd("/usr/bin/python3", ["-c", script, String(web.port)])
        XCTAssertEqual(status, 0, output)
        let words = output.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: " ")
        XCTAssertEqual(words.count, 3, output)
        XCTAssertEqual(words.last, "0", "every connection answered: \(output)")
        XCTAssertEqual(words.dropFirst().first, "32", "the streams up to the cap: \(output)")
        XCTAssertTrue(web.process.isRunning)
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    /// Chromium loads the page: it shows the episode and its overlay; a pause made by another
    /// client shows on the page (paused, no ad) without a reload; the page's buttons play and
    /// pause; a screenshot of the page is kept under .build/test-artifacts.
    func testThePageFollowsTheBoxInARealBrowser() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/chromedriver") else {
            return XCTFail("chromium-driver is missing: make test installs it (scripts/install-deps.sh)")
        }
        let daemon = try DaemonProcess(catalog: makeCatalog(Self.catalog))
        let web = try WebProcess(socket: daemon.socket)
        XCTAssertEqual(try daemon.ctl("open", Media.path("episode-long.mp4")).0, 0)
        let artifacts = repositoryRoot.appendingPathComponent(".build/test-artifacts").path
        let (status, output) = try runToEnd("/usr/bin/python3", [repositoryRoot.appendingPathComponent("scripts/web_browser_check.py").path,
                                                                 "http://127.0.0.1:\(web.port)/", Executables.adplayerctl, daemon.socket, artifacts])
        XCTAssertEqual(status, 0, output + "\nweb: " + web.log)
        XCTAssertTrue(FileManager.default.fileExists(atPath: artifacts + "/web-page.png"), output)
        print("web_browser_check: \(output)")
    }

    /// Each endpoint against the real daemon: status with the box and the output, health,
    /// metrics with the video counters, proof of play (JSON, the cursor, CSV), logs, a
    /// screenshot, identify; and a viewer may look but not pause.
    func testTheEndpointsAnswerFromTheRealDaemon() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("web-tokens-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let tokens = folder.appendingPathComponent("tokens").path
        let viewer = "viewer-0123456789abcdef", op = "operator-0123456789abcdef"
        try "viewer \(viewer)\noperator \(op)\n".write(toFile: tokens, atomically: true, encoding: .utf8)
        chmod(tokens, 0o600)
        // One short overlay on a long episode: one play, then nothing while the episode goes on.
        let daemon = try DaemonProcess(catalog: makeCatalog("""
            {"version": 1, "overlays": [{"id": "ov-web", "image": "overlay.png", "slots": [{"start": 0.3, "duration": 1}]}]}
            """))
        let web = try WebProcess(socket: daemon.socket, extra: ["--token-file", tokens])
        let events = try daemon.connect()
        XCTAssertEqual(try events.call("subscribe")["ok"] as? Bool, true)
        XCTAssertEqual(try daemon.ctl("open", Media.path("episode-long.mp4")).0, 0)
        _ = try events.event { $0["event"] as? String == "ad.ended" && $0["kind"] as? String == "overlay" }

        XCTAssertEqual(try RawHTTP.get(port: web.port, "/api/status").status, 401)
        let status = try json(try RawHTTP.get(port: web.port, "/api/status", token: viewer))
        let box = try XCTUnwrap(status["box"] as? [String: Any])
        XCTAssertNotNil(box["hostname"] as? String)
        XCTAssertNotNil(box["clock_synchronized"] as? Bool)
        let output = try XCTUnwrap(status["output"] as? [String: Any])
        XCTAssertEqual(output["vo"] as? String, "null")
        XCTAssertNotNil(output["frames_dropped"] as? [String: Any])
        XCTAssertNotNil(status["queue"] as? [Any], "with the queue")

        let health = try RawHTTP.get(port: web.port, "/api/health", token: viewer)
        XCTAssertEqual(health.status, 200, health.text)
        let verdict = try json(health)
        XCTAssertEqual(verdict["status"] as? String, "ok", health.text)
        let names = Set((verdict["checks"] as? [[String: Any]] ?? []).compactMap { $0["name"] as? String })
        for name in ["daemon", "playback", "frames", "ads", "beacons", "storage:state", "clock", "configuration"] {
            XCTAssertTrue(names.contains(name), "\(name) in \(names)")
        }

        let metrics = try RawHTTP.get(port: web.port, "/metrics", token: viewer)
        XCTAssertEqual(metrics.status, 200)
        XCTAssertTrue(metrics.headers["content-type"]?.hasPrefix("text/plain; version=0.0.4") == true)
        XCTAssertTrue(metrics.text.contains("adplayerd_ads_started_total{kind=\"overlay\"} 1"), metrics.text)

        let plays = try json(try RawHTTP.get(port: web.port, "/api/plays", token: viewer))
        let rows = try XCTUnwrap(plays["plays"] as? [[String: Any]])
        XCTAssertEqual(rows.first?["ad_id"] as? String, "ov-web")
        let row = try XCTUnwrap(rows.first?["row"] as? Int)
        let after = try json(try RawHTTP.get(port: web.port, "/api/plays?since=\(row)", token: viewer))
        XCTAssertEqual((after["plays"] as? [Any])?.count, 0, "the cursor: nothing after the last row yet")
        let csv = try RawHTTP.get(port: web.port, "/api/plays.csv", token: viewer)
        XCTAssertTrue(csv.text.hasPrefix("row,id,ad_id,kind"), csv.text)
        XCTAssertTrue(csv.text.contains(",ov-web,overlay,"), csv.text)
        XCTAssertEqual(try RawHTTP.get(port: web.port, "/api/plays?limit=0", token: viewer).status, 400)

        let logs = try json(try RawHTTP.get(port: web.port, "/api/logs?lines=500", token: viewer))
        let lines = try XCTUnwrap(logs["lines"] as? [[String: Any]])
        XCTAssertTrue(lines.contains { ($0["text"] as? String)?.contains("adplayerd starting") == true }, "\(lines.prefix(5))")

        // A viewer looks; pausing and screenshots are an operator's.
        XCTAssertEqual(try RawHTTP.command(port: web.port, #"{"cmd": "pause"}"#, token: viewer).status, 403)
        XCTAssertEqual(try RawHTTP.get(port: web.port, "/api/screenshot.png", token: viewer).status, 403)
        let shot = try RawHTTP.get(port: web.port, "/api/screenshot.png", token: op)
        XCTAssertEqual(shot.status, 200, shot.text)
        XCTAssertEqual(Array(shot.body.prefix(8)), [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A], "a PNG")
        XCTAssertNotNil(shot.headers["x-adplayerd-screenshot"])
        let identify = try RawHTTP.command(port: web.port, #"{"cmd": "identify", "args": {"seconds": 5}}"#, token: op)
        XCTAssertEqual(identify.status, 200, identify.text)
        XCTAssertTrue(identify.text.contains("\"code\""), identify.text)
        let pause = try RawHTTP.command(port: web.port, #"{"cmd": "pause"}"#, token: op)
        XCTAssertEqual(pause.status, 200, pause.text)
        _ = try events.event { $0["event"] as? String == "player.paused" }
    }

    /// Socket activation, as the units do it: systemd (here systemd-socket-activate) listens,
    /// and starts the web process at the first connection with the socket passed
    /// (`sd_listen_fds`); the first request is answered, from the real daemon.
    func testSocketActivationServesOnThePassedSocket() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-socket-activate") else {
            return XCTFail("systemd-socket-activate is missing (Debian's systemd package)")
        }
        let daemon = try DaemonProcess()
        let port = try freePort()   // handed to the activator
        let activator = Process()
        activator.executableURL = URL(fileURLWithPath: "/usr/bin/systemd-socket-activate")
        activator.arguments = ["-l", "127.0.0.1:\(port)", Executables.adplayerd, "web", "--socket", daemon.socket]
        activator.standardError = FileHandle.nullDevice
        activator.standardOutput = FileHandle.nullDevice
        try activator.run()
        defer {
            kill(activator.processIdentifier, SIGKILL)
            activator.waitUntilExit()
        }
        var health: RawHTTP.Response?
        XCTAssertTrue(waitUntil(timeout: 30) {
            health = try? RawHTTP.get(port: port, "/api/health")
            return health != nil
        })
        XCTAssertEqual(health?.status, 200, health?.text ?? "no answer")
        XCTAssertTrue(health?.text.contains("\"status\":\"ok\"") == true, health?.text ?? "")
    }

    /// Off loopback without a token file the web process refuses to start, naming the key.
    func testListeningOffLoopbackNeedsATokenFile() throws {
        let (status, output) = try runToEnd(Executables.adplayerd, ["web", "--socket", "/tmp/nothing.sock", "--listen", "0.0.0.0:0"])
        XCTAssertEqual(status, 2, output)
        XCTAssertTrue(output.contains("web-token-file"), output)
        let (bad, said) = try runToEnd(Executables.adplayerd, ["web", "--listen", "example.com:80"])
        XCTAssertEqual(bad, 2, said)
        XCTAssertTrue(said.contains("web-listen"), said)
    }

    /// `adplayerctl health` exits 0 for a healthy box, 1 for a box whose ad server is down.
    func testHealthExitStatusesForMonitors() throws {
        let healthy = try DaemonProcess(catalog: makeCatalog(Self.catalog))
        XCTAssertEqual(try healthy.ctl("open", Media.path("episode-long.mp4")).0, 0)
        let (ok, okOutput) = try healthy.ctl("health")
        XCTAssertEqual(ok, 0, okOutput)
        XCTAssertTrue(okOutput.hasPrefix("ok"), okOutput)

        // The ad server refuses every connection: the requests of the last 15 minutes failed.
        let serverDown = try DaemonProcess(extra: ["--ads", "http://127.0.0.1:9/vast.xml"])
        XCTAssertEqual(try serverDown.ctl("open", Media.path("episode-long.mp4")).0, 0)
        var degraded: (Int32, String) = (0, "")
        XCTAssertTrue(waitUntil(timeout: 60) {
            degraded = (try? serverDown.ctl("health")) ?? (-1, "")
            return degraded.0 == 1
        }, "degraded: \(degraded.1)")
        XCTAssertTrue(degraded.1.contains("degraded   ads:") || degraded.1.contains("degraded  ads:"), degraded.1)
    }

    /// `adplayerctl health` exits 2 for a box that cannot write its state folder: the daemon
    /// runs as nobody, the folder is root's. Needs root and setpriv; skipped with that reason.
    func testHealthExitStatusForABoxThatCannotWriteItsState() throws {
        guard getuid() == 0, FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else {
            throw XCTSkip("this case runs the daemon as nobody (setpriv), which needs root")
        }
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("readonly-\(UUID().uuidString.prefix(8))")
        let state = folder.appendingPathComponent("state").path
        try FileManager.default.createDirectory(atPath: state, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        chown(folder.path, 65534, 65534)   // the socket's folder is nobody's; the state folder stays root's (0755)
        var environment = ProcessInfo.processInfo.environment
        environment["HOME"] = folder.path
        if let options = environment["ASAN_OPTIONS"] { environment["ASAN_OPTIONS"] = options + ":detect_leaks=0" }
        let socket = folder.appendingPathComponent("ctl.sock").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/setpriv")
        process.arguments = ["--reuid=65534", "--regid=65534", "--clear-groups", "--", Executables.adplayerd,
                             "--socket", socket, "--state-dir", state, "--library", try Media.path("episode-1.mp4").components(separatedBy: "/").dropLast().joined(separator: "/")]
        process.environment = environment
        process.standardError = FileHandle.nullDevice
        try process.run()
        defer {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        XCTAssertTrue(waitUntil(timeout: 30) { FileManager.default.fileExists(atPath: socket) || !process.isRunning })
        var failing: (Int32, String) = (0, "")
        XCTAssertTrue(waitUntil(timeout: 30) {
            failing = (try? runToEnd(Executables.adplayerctl, ["--socket", socket, "health"])) ?? (-1, "")
            return failing.0 == 2
        }, "failing: \(failing.1)")
        XCTAssertTrue(failing.1.contains("storage:state") && failing.1.contains("cannot be written"), failing.1)
    }

    /// What happens to the web process never reaches playback: 200 idle keep-alive
    /// connections, a slowloris and a 1 MiB header against it while the daemon plays, then a
    /// foreign pause still ends the overlay (`latency_us` reported), the web process's memory
    /// stays bounded, and killing it (-9) leaves the daemon playing.
    func testWhatTheWebProcessSuffersNeverReachesPlayback() throws {
        let daemon = try DaemonProcess(catalog: makeCatalog(Self.catalog))
        let web = try WebProcess(socket: daemon.socket)
        let events = try daemon.connect()
        XCTAssertEqual(try events.call("subscribe")["ok"] as? Bool, true)
        XCTAssertEqual(try daemon.ctl("open", Media.path("episode-long.mp4")).0, 0)
        _ = try events.event { $0["event"] as? String == "ad.started" && $0["kind"] as? String == "overlay" }

        var idle: [RawHTTP] = []
        for _ in 0..<200 {
            guard let client = try? RawHTTP(port: web.port) else { break }
            client.send("GET /favicon.ico HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            idle.append(client)
        }
        let slow = try RawHTTP(port: web.port)
        slow.send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        let big = try RawHTTP(port: web.port)
        big.send("GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
        _ = big.send([UInt8](repeating: UInt8(ascii: "a"), count: 1 << 20))
        XCTAssertEqual(big.read()?.status, 431)
        // The web process still answers a request of its own among them.
        XCTAssertEqual(try RawHTTP.get(port: web.port, "/api/status").status, 200)

        let control = try daemon.connect()
        XCTAssertEqual(try control.call("pause")["ok"] as? Bool, true)
        let ended = try events.event { $0["event"] as? String == "ad.ended" && $0["kind"] as? String == "overlay" }
        XCTAssertEqual(ended["reason"] as? String, "paused")
        XCTAssertNotNil(ended["latency_us"] as? NSNumber, "\(ended)")
        let rss = try XCTUnwrap(web.rssKiB)
        XCTAssertLessThan(rss, 256 * 1024, "the web process's RSS is bounded: \(rss) KiB")
        print("web isolation: overlay ended \(ended["latency_us"] ?? "?") µs after the pause; web RSS \(rss) KiB with 200 idle connections")

        kill(web.process.processIdentifier, SIGKILL)
        web.process.waitUntilExit()
        idle.forEach { $0.close() }
        slow.close()
        big.close()
        XCTAssertEqual(try control.call("play")["ok"] as? Bool, true)
        _ = try events.event { $0["event"] as? String == "player.playing" }
        let status = try XCTUnwrap(try control.call("status")["result"] as? [String: Any])
        XCTAssertEqual(status["playing"] as? Bool, true, "the daemon plays on without the web process")
    }
}
