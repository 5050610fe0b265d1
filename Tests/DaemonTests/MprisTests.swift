import AdRuntime
import AdTestSupport
import Foundation
import XCTest

/// The desktop and the system (issue 11): MPRIS2 driven by the real `playerctl` and watched
/// with `dbus-monitor`, logind's PrepareForSleep from a stand-in, mpv's window minimized under
/// Xvfb — each test on private buses of its own.
final class MprisTests: XCTestCase {
    private static let catalog = """
        {"version": 1,
         "overlays": [{"id": "ov-long", "image": "overlay.png", "slots": [{"start": 0.3, "duration": 60}]}],
         "postrolls": [{"id": "pr-1", "video": "postroll.mp4"}]}
        """

    private var session: PrivateBus!
    private var system: PrivateBus!

    override func setUpWithError() throws {
        session = try PrivateBus()
        system = try PrivateBus()
    }

    override func tearDown() {
        session?.stop()
        system?.stop()
        super.tearDown()
    }

    private func media(_ name: String) throws -> String { try Media.path(name) }

    /// adplayerd with `--mpris` on this test's buses.
    private func daemon(catalog: String? = nil, extra: [String] = [], environment: [String: String] = [:]) throws -> DaemonProcess {
        try DaemonProcess(catalog: catalog.map { try makeCatalog($0) }, extra: ["--mpris"] + extra,
                          environment: ["DBUS_SESSION_BUS_ADDRESS": session.address, "DBUS_SYSTEM_BUS_ADDRESS": system.address]
                            .merging(environment) { $1 })
    }

    /// Waits until `playerctl` has found adplayerd on the bus.
    private func waitForPlayer() {
        XCTAssertTrue(waitUntil(timeout: 20) { (try? self.session.playerctl("status"))?.status == 0 })
    }

    /// adplayerd on the bus, a `dbus-monitor` on its signals, a connection following its
    /// `player.*` events and one for commands.
    private func watchedDaemon() throws -> (DaemonProcess, BusMonitor, ControlConnection, ControlConnection) {
        let daemon = try daemon()
        let monitor = try BusMonitor(session)
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["player.*"]])
        let control = try daemon.connect()
        waitForPlayer()
        return (daemon, monitor, events, control)
    }

    /// `playerctl -p adplayerd status/play/pause/next/position/metadata/loop/stop` do what they say.
    func testPlayerctlDrivesTheDaemon() throws {
        let daemon = try daemon()
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["player.*"]])
        let control = try daemon.connect()
        waitForPlayer()
        XCTAssertEqual(try session.playerctl("status").output, "Stopped")
        _ = try control.call("queue", ["paths": [try media("episode-long.mp4"), try media("episode-1.mp4")]])
        _ = try events.event(named("player.playing"))
        XCTAssertEqual(try session.playerctl("status").output, "Playing")

        XCTAssertEqual(try session.playerctl("pause").status, 0)
        _ = try events.event(named("player.paused"))
        XCTAssertEqual(try session.playerctl("status").output, "Paused")
        XCTAssertEqual((try control.call("status")["result"] as? [String: Any])?["playing"] as? Bool, false)

        XCTAssertEqual(try session.playerctl("play").status, 0)
        _ = try events.event(named("player.playing"))
        XCTAssertEqual(try session.playerctl("status").output, "Playing")

        // position N: SetPosition with the current track id.
        XCTAssertEqual(try session.playerctl("position", "12").status, 0)
        let seeked = try events.event(named("player.seeked"))
        XCTAssertEqual(seeked["to"] as? Double ?? -1, 12, accuracy: 0.5)
        let position = try XCTUnwrap(Double(try session.playerctl("position").output))
        XCTAssertTrue((12...30).contains(position), "\(position)")

        let format = "{{mpris:trackid}}|{{xesam:title}}|{{xesam:url}}|{{mpris:length}}"
        let first = try session.playerctl("metadata", "--format", format).output.split(separator: "|").map(String.init)
        XCTAssertEqual(first.count, 4, "\(first)")
        XCTAssertEqual(first[1], "episode-long")
        XCTAssertEqual(first[2], URL(fileURLWithPath: try media("episode-long.mp4")).absoluteString)
        XCTAssertEqual(Double(first[3]) ?? 0, 30_000_000, accuracy: 500_000, "mpris:length in µs")

        XCTAssertEqual(try session.playerctl("next").status, 0)
        _ = try events.event { $0["event"] as? String == "player.item" && ($0["path"] as? String)?.hasSuffix("episode-1.mp4") == true }
        let second = try session.playerctl("metadata", "--format", "{{mpris:trackid}}|{{xesam:title}}").output.split(separator: "|")
        XCTAssertEqual(second.last, "episode-1")
        XCTAssertNotEqual(second.first.map(String.init), first[0], "a new track id for a new episode")
        XCTAssertEqual(try session.playerctl("previous").status, 0)
        _ = try events.event { $0["event"] as? String == "player.item" && ($0["path"] as? String)?.hasSuffix("episode-long.mp4") == true }
        XCTAssertEqual(try session.playerctl("metadata", "--format", "{{xesam:title}}").output, "episode-long")

        XCTAssertEqual(try session.playerctl("loop", "Track").status, 0)
        XCTAssertEqual(try session.playerctl("loop").output, "Track")
        XCTAssertEqual((try control.call("status")["result"] as? [String: Any])?["loop"] as? Bool, true)
        XCTAssertEqual(try session.playerctl("loop", "Playlist").status, 0)
        XCTAssertEqual(try session.playerctl("loop").output, "Playlist")
        XCTAssertEqual((try control.call("status")["result"] as? [String: Any])?["repeat"] as? String, "all")
        XCTAssertEqual(try session.playerctl("loop", "None").status, 0)
        XCTAssertEqual((try control.call("status")["result"] as? [String: Any])?["repeat"] as? String, "off")
        XCTAssertNotEqual(try session.playerctl("loop", "Sometimes").status, 0, "None, Track or Playlist")

        // Volume and Shuffle, both ways: playerctl sets them, the socket sees it; the socket
        // sets them, playerctl reads them back.
        XCTAssertEqual(try session.playerctl("volume", "0.4").status, 0)
        XCTAssertTrue(waitUntil { ((try? control.call("status")["result"] as? [String: Any])?["volume"] as? Double) == 40 })
        _ = try control.call("volume", ["value": 65])
        XCTAssertTrue(waitUntil { (try? self.session.playerctl("volume"))?.output == "0.650000" }, "\(String(describing: try? session.playerctl("volume")))")
        XCTAssertEqual(try session.playerctl("shuffle", "On").status, 0)
        XCTAssertTrue(waitUntil { ((try? control.call("status")["result"] as? [String: Any])?["shuffle"] as? Bool) == true })
        XCTAssertEqual(try session.playerctl("shuffle").output, "On")
        _ = try control.call("shuffle", ["on": false])
        XCTAssertTrue(waitUntil { (try? self.session.playerctl("shuffle"))?.output == "Off" })

        XCTAssertEqual(try session.playerctl("stop").status, 0)
        XCTAssertEqual(try session.playerctl("status").output, "Stopped")
        XCTAssertTrue((try control.call("status")["result"] as? [String: Any])?["item"] is NSNull)
        XCTAssertEqual(daemon.stop(), 0)
        // No error logged (to a pipe an error's line starts `error: `; `<3>` is the journal's form).
        XCTAssertFalse(daemon.log.split(separator: "\n").contains { $0.hasPrefix("error: ") || $0.hasPrefix("<3>") }, daemon.log)
    }

    /// A `playerctl pause` while an overlay shows ends it with `reason: paused` (R6), like a
    /// pause from anywhere else.
    func testAPlayerctlPauseEndsTheOverlayAsPaused() throws {
        let daemon = try daemon(catalog: Self.catalog)
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.*"]])
        _ = try daemon.connect().call("open", ["path": try media("episode-long.mp4")])
        _ = try events.event(named("ad.started", "kind", "overlay"))
        waitForPlayer()
        XCTAssertEqual(try session.playerctl("pause").status, 0)
        let end = try events.event(named("ad.ended", "kind", "overlay"))
        XCTAssertEqual(end["reason"] as? String, "paused")
        XCTAssertNotNil(end["latency_us"] as? NSNumber)
        XCTAssertEqual(daemon.stop(), 0)
    }

    /// `Seeked` comes once per real seek, with the new position — from the socket, from MPRIS
    /// — and never when a file starts (even at a saved position) or a loop wraps.
    func testSeekedOncePerSeekWithTheNewPositionNeverOnStartOrWrap() throws {
        let (daemon, monitor, events, control) = try watchedDaemon()
        /// For a failure: the Seeked signals and the player events (those not read yet too).
        func seen() -> String {
            _ = try? events.event(timeout: 0.5) { _ in false }
            return "Seeked: \(monitor.signals("Seeked").map(\.text)); events: \(events.events)"
        }

        _ = try control.call("open", ["path": try media("episode-long.mp4"), "start": 5])
        _ = try events.event(named("player.playing"))
        _ = try control.call("pause")   // paused, a relative seek lands where the test says
        _ = try control.call("seek", ["to": 10])
        XCTAssertEqual(Double(try monitor.wait(for: "Seeked").int64 ?? 0) / 1e6, 10, accuracy: 0.2, seen())
        XCTAssertEqual(try session.playerctl("position", "3").status, 0)
        XCTAssertEqual(Double(try monitor.wait(for: "Seeked", after: 1).int64 ?? 0) / 1e6, 3, accuracy: 0.2, seen())
        XCTAssertEqual(try session.playerctl("position", "2-").status, 0)   // Seek by −2 s
        XCTAssertEqual(Double(try monitor.wait(for: "Seeked", after: 2).int64 ?? 0) / 1e6, 1, accuracy: 0.2, seen())

        // A file start and two loop wraps: no Seeked.
        _ = try control.call("loop", ["on": true])
        // (`repeat one` plays each pass as a new viewing, issue 45: a 4 s file, paused in its
        // second pass so that the seek lands on content, not between two passes.)
        _ = try control.call("open", ["path": try media("episode-1.mp4")])
        _ = try events.event { $0["event"] as? String == "player.item" && ($0["pass"] as? Int) == 2 }
        // A second into the pass (its start is behind it), paused, then a seek back.
        XCTAssertTrue(waitUntil(timeout: 20) {
            (((try? control.call("status"))?["result"] as? [String: Any])?["position"] as? Double ?? 0) >= 1
        }, seen())
        _ = try control.call("pause")
        _ = try control.call("seek", ["to": 0.5])
        let last = try monitor.wait(for: "Seeked", after: 3)
        XCTAssertEqual(Double(last.int64 ?? 0) / 1e6, 0.5, accuracy: 0.2,
                       seen())
        XCTAssertEqual(monitor.signals("Seeked").count, 4, "\(monitor.signals("Seeked"))")
        XCTAssertEqual(daemon.stop(), 0)
    }

    /// `PropertiesChanged` follows pause (PlaybackStatus), rate (Rate, also set over D-Bus)
    /// and track changes (Metadata, with the new track id), and Position never has one.
    func testPropertiesChangedFollowsPauseRateAndTrack() throws {
        let (daemon, monitor, events, control) = try watchedDaemon()
        _ = try control.call("queue", ["paths": [try media("episode-long.mp4"), try media("episode-1.mp4")]])
        _ = try events.event(named("player.playing"))
        _ = try monitor.wait(for: "PropertiesChanged") { $0.names("Metadata") && $0.text.contains("episode-long") }

        _ = try control.call("pause")
        _ = try monitor.wait(for: "PropertiesChanged") { $0.names("PlaybackStatus") && $0.text.contains("\"Paused\"") }
        _ = try control.call("speed", ["value": 2])
        _ = try monitor.wait(for: "PropertiesChanged") { $0.names("Rate") && $0.text.contains("double 2") }
        XCTAssertEqual(try session.setPlayerProperty("Rate", "double:1.5").status, 0)
        _ = try monitor.wait(for: "PropertiesChanged") { $0.names("Rate") && $0.text.contains("double 1.5") }
        XCTAssertEqual(try session.playerProperty("Rate"), "double 1.5")
        XCTAssertNotEqual(try session.setPlayerProperty("Rate", "double:1000").status, 0, "beyond MaximumRate")
        _ = try control.call("play")
        _ = try monitor.wait(for: "PropertiesChanged") { $0.names("PlaybackStatus") && $0.text.contains("\"Playing\"") }

        let before = try session.playerProperty("Metadata")
        _ = try control.call("next")
        let change = try monitor.wait(for: "PropertiesChanged") { $0.names("Metadata") && $0.text.contains("episode-1") }
        XCTAssertTrue(change.text.contains("/org/mpris/MediaPlayer2/adplayerd/episode/"), change.text)
        XCTAssertNotEqual(try session.playerProperty("Metadata"), before)
        XCTAssertFalse(monitor.signals("PropertiesChanged").contains { $0.names("Position") }, "Position has no change signal")
        XCTAssertEqual(daemon.stop(), 0)
    }

    /// While a post-roll plays, MPRIS says it cannot be seeked or skipped (the policy: the
    /// viewer may pause it, not skip it) and means it: `playerctl next` changes nothing, the
    /// socket's `next` is refused, `Rate` reads 1 and setting it is refused, the post-roll
    /// plays to its end, then the next episode.
    func testCanFlagsAreHonestDuringAPostroll() throws {
        let daemon = try daemon(catalog: Self.catalog)
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.*", "player.item"]])
        let control = try daemon.connect()
        waitForPlayer()
        _ = try control.call("queue", ["paths": [try media("clip-1s.mp4"), try media("episode-1.mp4")]])
        _ = try events.event(named("ad.started", "kind", "postroll"))
        XCTAssertEqual(try session.playerProperty("PlaybackStatus"), "Playing")
        // Paused, so that the checks cannot outlast the post-roll's two seconds.
        _ = try control.call("pause")
        _ = try events.event(named("ad.paused", "kind", "postroll"))
        XCTAssertEqual(try session.playerProperty("PlaybackStatus"), "Paused")
        XCTAssertEqual(try session.playerProperty("CanSeek"), "boolean false")
        XCTAssertEqual(try session.playerProperty("CanGoNext"), "boolean false")
        XCTAssertEqual(try session.playerProperty("CanPause"), "boolean true")
        _ = try session.playerctl("next")
        _ = try session.playerctl("position", "0.5")
        let refused = try control.call("next")
        XCTAssertEqual((refused["error"] as? [String: Any])?["code"] as? String, "ad_playing")
        // A linear ad plays at its own pace: MPRIS's Rate reads 1 and cannot be set (issue 33).
        XCTAssertEqual(try session.playerProperty("Rate"), "double 1")
        XCTAssertNotEqual(try session.setPlayerProperty("Rate", "double:100").status, 0, "Rate refused during a post-roll")
        XCTAssertEqual(try session.playerProperty("Rate"), "double 1")
        XCTAssertEqual(try session.playerctl("play").status, 0)
        let end = try events.event(named("ad.ended", "kind", "postroll"))
        XCTAssertEqual(end["reason"] as? String, "completed", "\(events.events)")
        _ = try events.event { $0["event"] as? String == "player.item" && ($0["path"] as? String)?.hasSuffix("episode-1.mp4") == true }
        XCTAssertTrue(waitUntil(timeout: 20) { (try? self.session.playerProperty("CanSeek")) == "boolean true" })
        XCTAssertEqual(daemon.stop(), 0)
    }

    /// logind's PrepareForSleep (from a stand-in that owns its name on a private system bus):
    /// going to sleep is background and a pause — the overlay freezes instead of ending —
    /// and waking is foreground and play, so the overlay goes on (R13). Paused on purpose
    /// while asleep, it stays paused on waking, and the frozen overlay ends `interrupted`.
    func testSleepIsBackgroundAndWakingGoesOnOrInterrupts() throws {
        let logind = try LogindStandIn(on: system)
        let daemon = try daemon(catalog: """
            {"version": 1,
             "overlays": [{"id": "ov-long", "image": "overlay.png",
                           "slots": [{"start": 0.3, "duration": 60}, {"start": 4, "duration": 60}]}]}
            """)
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.*", "player.background", "player.paused", "player.playing"]])
        let control = try daemon.connect()
        _ = try control.call("open", ["path": try media("episode-long.mp4")])
        _ = try events.event(named("ad.started", "kind", "overlay"))

        try logind.prepareForSleep(true)
        let hidden = try events.event(named("player.background"))
        XCTAssertEqual(hidden["background"] as? Bool, true)
        XCTAssertEqual(hidden["reasons"] as? [String], ["sleep"])
        _ = try events.event(named("player.paused"))
        try logind.prepareForSleep(false)
        let shown = try events.event(named("player.background"))
        XCTAssertEqual(shown["background"] as? Bool, false)
        _ = try events.event(named("player.playing"))
        // The overlay went on: closing it now ends it `closed` (not `paused`, not `interrupted`).
        XCTAssertEqual(try control.call("close-ad")["ok"] as? Bool, true)
        let closed = try events.event(named("ad.ended", "kind", "overlay"))
        XCTAssertEqual(closed["reason"] as? String, "closed", "\(events.events)")

        // The next slot's overlay: asleep, paused on purpose, awake — it stays paused.
        _ = try control.call("seek", ["to": 3.8])
        _ = try events.event(named("ad.started", "kind", "overlay"))
        try logind.prepareForSleep(true)
        _ = try events.event(named("player.paused"))
        _ = try control.call("pause")
        try logind.prepareForSleep(false)
        _ = try events.event { $0["event"] as? String == "player.background" && $0["background"] as? Bool == false }
        let interrupted = try events.event(named("ad.ended", "kind", "overlay"))
        XCTAssertEqual(interrupted["reason"] as? String, "interrupted", "\(events.events)")
        XCTAssertEqual((try control.call("status")["result"] as? [String: Any])?["playing"] as? Bool, false)
        XCTAssertEqual(daemon.stop(), 0)
    }

    /// mpv's window minimized (Xvfb; the test plays the window manager) is background: a
    /// pause then freezes the overlay instead of ending it; restored and not played again
    /// within 1 s, it ends `interrupted` (R13). The control socket's background adds to it.
    func testAMinimizedWindowIsBackground() throws {
        let display = try XDisplay(width: 640, height: 480)
        defer { display.stop() }
        try display.announceNetWM()
        let daemon = try daemon(catalog: Self.catalog, extra: ["--vo", "x11"], environment: ["DISPLAY": display.name])
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["ad.*", "player.background"]])
        let control = try daemon.connect()
        _ = try control.call("open", ["path": try media("episode-long.mp4")])
        _ = try events.event(named("ad.started", "kind", "overlay"))

        try display.minimize(true, windowTitled: "adplayerd")
        let hidden = try events.event(named("player.background"))
        XCTAssertEqual(hidden["reasons"] as? [String], ["minimized"])
        _ = try control.call("background")
        let status = try control.call("status")["result"] as? [String: Any]
        XCTAssertEqual(status?["background_reasons"] as? [String], ["control", "minimized"])
        _ = try control.call("pause")
        XCTAssertEqual(((try control.call("status")["result"] as? [String: Any])?["ad"] as? [String: Any])?["ad_id"] as? String,
                       "ov-long", "frozen, not ended")
        try display.minimize(false, windowTitled: "adplayerd")
        _ = try control.call("foreground")
        _ = try events.event { $0["event"] as? String == "player.background" && $0["background"] as? Bool == false }
        let end = try events.event(named("ad.ended", "kind", "overlay"))
        XCTAssertEqual(end["reason"] as? String, "interrupted", "\(events.events)")
        XCTAssertEqual(daemon.stop(), 0)
    }
}
