import AdRuntime
import AdTestSupport
import Foundation
import XCTest

/// The daemon end to end through its control socket: real processes, real mpv, generated
/// media (issue: adplayerd and adplayerctl). Every wait is bounded only for a failing test.
final class DaemonTests: XCTestCase {
    private static let catalog = """
        {"version": 1,
         "overlays": [{"id": "ov-long", "image": "overlay.png", "slots": [{"start": 0.3, "duration": 60}]}],
         "pause_ads": [{"id": "pa-1", "image": "pause.png"}],
         "postrolls": [{"id": "pr-1", "video": "postroll.mp4"}]}
        """

    private func media(_ name: String) throws -> String { try Media.path(name) }

    /// The whole flow for two episodes: an overlay, a pause through adplayerctl that ends it,
    /// a pause ad, play, the post-roll, the next episode.
    func testTwoEpisodesWithEveryKindOfAd() throws {
        let daemon = try DaemonProcess(catalog: makeCatalog(Self.catalog), extra: ["--pause-ad-delay", "0.3"])
        let events = try daemon.connect()
        XCTAssertEqual(try events.call("subscribe")["ok"] as? Bool, true)
        let control = try daemon.connect()
        let queued = try control.call("queue", ["paths": [try media("episode-1.mp4"), try media("episode-2.mp4")]])
        XCTAssertEqual(queued["ok"] as? Bool, true, "\(queued)")
        _ = try events.event(named("ad.started", "kind", "overlay"))
        let (status, output) = try daemon.ctl("pause")
        XCTAssertEqual(status, 0, output)
        let overlayEnd = try events.event(named("ad.ended", "kind", "overlay"))
        XCTAssertEqual(overlayEnd["reason"] as? String, "paused")
        XCTAssertNotNil(overlayEnd["latency_us"] as? NSNumber, "latency_us: \(overlayEnd)")
        _ = try events.event(named("ad.started", "kind", "pause"))
        XCTAssertEqual(try daemon.ctl("play").0, 0)
        XCTAssertEqual(try events.event(named("ad.ended", "kind", "pause"))["reason"] as? String, "played")
        _ = try events.event(named("player.ended"))
        XCTAssertEqual(try events.event(named("ad.started", "kind", "postroll"))["ad_id"] as? String, "pr-1")
        XCTAssertEqual(try events.event(named("ad.ended", "kind", "postroll"))["reason"] as? String, "completed")
        let next = try events.event { $0["event"] as? String == "player.item" && ($0["path"] as? String)?.hasSuffix("episode-2.mp4") == true }
        XCTAssertEqual(next["content_id"] as? String, "episode-2")
        let state = try control.call("status")["result"] as? [String: Any]
        XCTAssertEqual((state?["item"] as? [String: Any])?["content_id"] as? String, "episode-2")
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    /// R3 through the daemon: a pause from a foreign client of mpv's own IPC socket ends the
    /// overlay as a pause from our socket does.
    func testAPauseThroughMpvsIPCSocketEndsTheOverlay() throws {
        let ipc = FileManager.default.temporaryDirectory.appendingPathComponent("mpv-\(UUID().uuidString.prefix(8)).sock").path
        defer { unlink(ipc) }
        let withIPC = try DaemonProcess(catalog: makeCatalog(Self.catalog), extra: ["--mpv-ipc-socket", ipc])
        let events = try withIPC.connect()
        _ = try events.call("subscribe", ["events": ["ad.*"]])
        _ = try withIPC.connect().call("open", ["path": try media("episode-long.mp4")])
        _ = try events.event(named("ad.started", "kind", "overlay"))
        XCTAssertTrue(withIPC.log.contains("unsafe"), "the unsafe option is said to be unsafe")
        let mpv = try ControlConnection(path: ipc)
        try mpv.sendLine(#"{"command": ["set_property", "pause", true], "request_id": 7}"#)
        let end = try events.event(named("ad.ended", "kind", "overlay"))
        XCTAssertEqual(end["reason"] as? String, "paused")
        XCTAssertEqual(withIPC.stop(), 0)
    }

    /// R13 through the daemon: background → pause → foreground → play within 1 s keeps the
    /// overlay; without the play it ends `interrupted`.
    func testBackgroundThenPauseThenForegroundKeepsOrInterruptsTheOverlay() throws {
        let daemon = try DaemonProcess(catalog: makeCatalog(Self.catalog))
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.*"]])
        let control = try daemon.connect()
        _ = try control.call("open", ["path": try media("episode-long.mp4")])
        _ = try events.event(named("ad.started", "kind", "overlay"))
        for command in ["background", "pause", "foreground", "play"] {
            XCTAssertEqual(try control.call(command)["ok"] as? Bool, true, command)
        }
        // Still on: the status after the return names it (no ad.ended came).
        let kept = try control.call("status")["result"] as? [String: Any]
        XCTAssertEqual((kept?["ad"] as? [String: Any])?["ad_id"] as? String, "ov-long")
        for command in ["background", "pause", "foreground"] {
            XCTAssertEqual(try control.call(command)["ok"] as? Bool, true, command)
        }
        let end = try events.event(named("ad.ended", "kind", "overlay"))
        XCTAssertEqual(end["reason"] as? String, "interrupted", "\(events.events)")
        XCTAssertEqual(daemon.stop(), 0)
    }

    /// A seek past a slot that has not shown yet — here as the file starts, which mpv folds
    /// into the start (no seek event), as a resume at a saved position does — moves the
    /// policy on to the slot after the playhead (the skipped overlay ends `seeked`, never
    /// having started); closing the overlay that shows there does not serve it again.
    func testASeekPastAWaitingSlotMovesOnToTheNextSlot() throws {
        let daemon = try DaemonProcess(catalog: makeCatalog("""
            {"version": 1,
             "overlays": [{"id": "ov-a", "image": "overlay.png", "slots": [{"start": 5, "duration": 60}]},
                          {"id": "ov-b", "image": "overlay.png", "slots": [{"start": 8, "duration": 60}]}]}
            """))
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.*"]])
        let control = try daemon.connect()
        _ = try control.call("open", ["path": try media("episode-long.mp4")])
        _ = try events.event(named("ad.loaded", "ad_id", "ov-a"))
        _ = try control.call("seek", ["to": 7])
        let skipped = try events.event(named("ad.ended", "ad_id", "ov-a"))
        XCTAssertEqual(skipped["reason"] as? String, "seeked")
        let started = try events.event(named("ad.started"))
        XCTAssertEqual(started["ad_id"] as? String, "ov-b", "\(events.events)")
        XCTAssertFalse(events.events.contains { $0["event"] as? String == "ad.started" }, "ov-a never started: \(events.events)")
        XCTAssertEqual(try control.call("close-ad")["ok"] as? Bool, true)
        XCTAssertEqual(try events.event(named("ad.ended", "ad_id", "ov-b"))["reason"] as? String, "closed")
        let status = try control.call("status")["result"] as? [String: Any]
        XCTAssertTrue(status?["ad"] is NSNull, "\(String(describing: status))")
        XCTAssertEqual(daemon.stop(), 0)
    }

    /// Every class of protocol error gets an error reply and the connection stays usable; a
    /// line over 1 MiB closes that connection only.
    func testEveryProtocolErrorClass() throws {
        let library = FileManager.default.temporaryDirectory.appendingPathComponent("library-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: library, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: library) }
        try FileManager.default.copyItem(atPath: try media("episode-1.mp4"), toPath: library.appendingPathComponent("ep.mp4").path)
        try FileManager.default.createSymbolicLink(atPath: library.appendingPathComponent("escape.mp4").path,
                                                   withDestinationPath: try media("episode-2.mp4"))
        XCTAssertEqual(mkfifo(library.appendingPathComponent("fifo.mp4").path, 0o600), 0)
        let daemon = try DaemonProcess(library: library.path)
        let c = try daemon.connect()
        func error(_ line: String) throws -> String? {
            try c.sendLine(line)
            let reply = try c.reply(id: nil)
            XCTAssertEqual(reply["ok"] as? Bool, false, line)
            return (reply["error"] as? [String: Any])?["code"] as? String
        }
        XCTAssertEqual(try error("this is not json"), "malformed")
        XCTAssertEqual(try error("[1, 2]"), "malformed")
        XCTAssertEqual(try error(#"{"id": "seven", "cmd": "status"}"#), "malformed")
        XCTAssertEqual(try error(#"{"id": 1}"#), "malformed")
        XCTAssertEqual(try error(#"{"id": 2, "cmd": "status", "args": [1]}"#), "malformed")
        XCTAssertEqual(try error(#"{"id": 3, "cmd": "explode"}"#), "unknown_command")
        XCTAssertEqual(try error(#"{"id": 4, "cmd": "speed", "args": {"value": 500}}"#), "bad_args")
        XCTAssertEqual(try error(#"{"id": 5, "cmd": "seek", "args": {"to": 1, "by": 2}}"#), "bad_args")
        XCTAssertEqual(try error(#"{"id": 6, "cmd": "seek", "args": {"to": 1e300}}"#), "bad_args")
        XCTAssertEqual(try error(#"{"id": 7, "cmd": "open", "args": {"path": "relative.mp4"}}"#), "bad_args")
        XCTAssertEqual(try error(#"{"id": 8, "cmd": "open", "args": {"path": "/etc/hostname"}}"#), "outside_library")
        XCTAssertEqual(try error(#"{"id": 9, "cmd": "open", "args": {"path": "\#(library.path)/../\#(library.lastPathComponent)/escape.mp4"}}"#),
                       "outside_library", "a symlink out of the library")
        XCTAssertEqual(try error(#"{"id": 10, "cmd": "open", "args": {"path": "\#(library.path)/fifo.mp4"}}"#), "not_a_file")
        XCTAssertEqual(try error(#"{"id": 11, "cmd": "open", "args": {"path": "\#(library.path)/missing.mp4"}}"#), "not_found")
        XCTAssertEqual(try error(#"{"id": 12, "cmd": "queue", "args": {"paths": []}}"#), "bad_args")
        XCTAssertEqual(try error(#"{"id": 13, "cmd": "loop", "args": {"on": "yes"}}"#), "bad_args")
        XCTAssertEqual(try error(#"{"id": 14, "cmd": "close-ad"}"#), "no_ad")
        XCTAssertEqual(try error(#"{"id": 15, "cmd": "pause"}"#), "not_playing")
        // Still usable, and a good file plays.
        let opened = try c.call("open", ["path": library.appendingPathComponent("ep.mp4").path])
        XCTAssertEqual(opened["ok"] as? Bool, true, "\(opened)")
        // A line over 1 MiB closes that connection only.
        let other = try daemon.connect()
        try c.sendRaw(Data(repeating: UInt8(ascii: "x"), count: 1024 * 1024 + 10))
        let last = try c.nextMessage(timeout: 20)
        XCTAssertEqual((last["error"] as? [String: Any])?["code"] as? String, "line_too_long")
        XCTAssertTrue(c.isClosedByPeer(), "the connection stays open after a line over 1 MiB")
        XCTAssertEqual(try other.call("status")["ok"] as? Bool, true)
        XCTAssertEqual(daemon.stop(), 0)
    }

    /// The queue: a file that fails gives way to the next entry; `clear` stops and empties it;
    /// an `open` or `queue` past its bounds (10,000 entries) is refused whole, adding nothing,
    /// and the daemon serves on.
    func testAFailureGivesWayTheQueueIsBoundedAndClearEmptiesIt() throws {
        let daemon = try DaemonProcess()
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["player.*"]])
        let c = try daemon.connect()
        _ = try c.call("queue", ["paths": [try media("truncated.mp4"), try media("episode-1.mp4")]])
        XCTAssertTrue((try events.event(named("player.failed"))["path"] as? String)?.hasSuffix("truncated.mp4") == true)
        _ = try events.event { $0["event"] as? String == "player.item" && ($0["path"] as? String)?.hasSuffix("episode-1.mp4") == true }

        func status() throws -> [String: Any] { try XCTUnwrap(c.call("status", ["queue": true])["result"] as? [String: Any]) }
        let cleared = try XCTUnwrap(c.call("clear")["result"] as? [String: Any])
        XCTAssertEqual(cleared["queue_length"] as? NSNumber, 0)
        XCTAssertNil(cleared["queue"], "a reply carries the queue only when asked")
        XCTAssertTrue(cleared["item"] is NSNull && cleared["current"] is NSNull, "\(cleared)")

        let long = try media("episode-long.mp4")
        for round in 0..<10 {
            let reply = try c.call("queue", ["paths": Array(repeating: long, count: 1000)])
            XCTAssertEqual(reply["ok"] as? Bool, true, "round \(round): \(reply)")
        }
        XCTAssertEqual((try status()["queue"] as? [String])?.count, 10_000)
        let brief = try XCTUnwrap(c.call("status")["result"] as? [String: Any])
        XCTAssertEqual(brief["queue_length"] as? NSNumber, 10_000)
        XCTAssertNil(brief["queue"], "status without queue: true carries its length only")
        for (command, args) in [("queue", ["paths": [long]]), ("open", ["path": long])] as [(String, [String: Any])] {
            let refused = try c.call(command, args)
            let error = refused["error"] as? [String: Any]
            XCTAssertEqual(error?["code"] as? String, "queue_full", "\(command): \(refused)")
            XCTAssertTrue((error?["message"] as? String)?.contains("10000 entries") == true, "\(refused)")
        }
        XCTAssertEqual((try status()["queue"] as? [String])?.count, 10_000, "nothing was added")
        _ = try c.call("clear")
        XCTAssertEqual(try c.call("open", ["path": long])["ok"] as? Bool, true)
        XCTAssertEqual(try status()["queue"] as? [String], [long])
        XCTAssertEqual(daemon.stop(), 0, daemon.log)
    }

    /// `kill -9`, then a restart, resumes the same episode within 2 s of where it was.
    func testKillNineThenRestartResumesWhereItWas() throws {
        let daemon = try DaemonProcess()
        let c = try daemon.connect()
        _ = try c.call("open", ["path": try media("episode-long.mp4")])
        var position = 0.0
        XCTAssertTrue(waitUntil(timeout: 30) {
            position = ((try? c.call("status")["result"] as? [String: Any])?["position"] as? NSNumber)?.doubleValue ?? 0
            return position >= 4
        })
        daemon.stop(SIGKILL)
        try daemon.launch()
        let resumed = try daemon.connect()
        var state: [String: Any] = [:]
        XCTAssertTrue(waitUntil(timeout: 30) {
            state = (try? resumed.call("status")["result"] as? [String: Any]) ?? [:]
            return state["playing"] as? Bool == true
        }, "\(state)")
        XCTAssertEqual((state["item"] as? [String: Any])?["path"] as? String,
                       URL(fileURLWithPath: try media("episode-long.mp4")).resolvingSymlinksInPath().path)
        let at = (state["position"] as? NSNumber)?.doubleValue ?? -1
        XCTAssertEqual(at, position, accuracy: 2, "resumed at \(at) s, killed at \(position) s")
        XCTAssertEqual(daemon.stop(), 0)
    }

    /// SIGTERM: exit 0, and the state is saved (the next start has the same queue and episode).
    func testSIGTERMExitsZeroWithTheStateSaved() throws {
        let daemon = try DaemonProcess()
        let c = try daemon.connect()
        _ = try c.call("queue", ["paths": [try media("episode-long.mp4"), try media("episode-1.mp4")]])
        XCTAssertTrue(waitUntil(timeout: 30) {
            ((try? c.call("status")["result"] as? [String: Any])?["position"] as? NSNumber)?.doubleValue ?? 0 >= 1.5
        })
        XCTAssertEqual(daemon.stop(SIGTERM), 0, daemon.log)
        XCTAssertTrue(daemon.log.contains("stopped"), daemon.log)
        try daemon.launch()
        let again = try daemon.connect()
        var state: [String: Any]?
        XCTAssertTrue(waitUntil(timeout: 30) {
            state = try? again.call("status", ["queue": true])["result"] as? [String: Any]
            return state?["playing"] as? Bool == true
        })
        XCTAssertEqual((state?["queue"] as? [String])?.count, 2)
        XCTAssertEqual(state?["current"] as? NSNumber, 0)
        XCTAssertGreaterThanOrEqual((state?["position"] as? NSNumber)?.doubleValue ?? 0, 1)
        XCTAssertEqual(daemon.stop(SIGINT), 0)
    }

    /// 20 clients subscribed at once while one never reads (and floods requests): it is cut
    /// off, and the others and the player go on.
    func testOneClientThatNeverReadsBlocksNobody() throws {
        let daemon = try DaemonProcess()
        let control = try daemon.connect()
        _ = try control.call("open", ["path": try media("episode-long.mp4")])
        _ = try control.call("loop", ["on": true])
        // A long queue makes every `status {"queue": true}` answer about 50 KB.
        _ = try control.call("queue", ["paths": Array(repeating: try media("episode-1.mp4"), count: 1000)])
        var readers: [ControlConnection] = []
        for _ in 0..<19 {
            let reader = try daemon.connect()
            XCTAssertEqual(try reader.call("subscribe", ["events": ["player.*"]])["ok"] as? Bool, true)
            readers.append(reader)
        }
        let stuck = try daemon.connect()
        _ = try stuck.call("subscribe")
        // Requests it never reads the answers to: its queue of output grows past the bound.
        let flood = Data(String(repeating: #"{"id": 1, "cmd": "status", "args": {"queue": true}}"# + "\n", count: 2_000).utf8)
        let writer = Thread { try? stuck.sendRaw(flood) }
        writer.start()
        for round in 0..<5 {
            _ = try control.call("seek", ["to": Double(2 + round)])
            for reader in readers {
                let seeked = try reader.event(named("player.seeked"))
                XCTAssertEqual((seeked["to"] as? NSNumber)?.doubleValue ?? -1, Double(2 + round), accuracy: 0.5)
            }
        }
        XCTAssertTrue(waitUntil(timeout: 60) { daemon.log.contains("reads too slowly") }, "the stuck client was never cut off")
        let before = ((try control.call("status")["result"] as? [String: Any])?["position"] as? NSNumber)?.doubleValue ?? 0
        XCTAssertTrue(waitUntil(timeout: 20) {
            ((try? control.call("status")["result"] as? [String: Any])?["position"] as? NSNumber)?.doubleValue ?? 0 > before + 0.5
        }, "the player stopped")
        XCTAssertEqual(daemon.stop(), 0)
    }
}
