import AdPlayerDaemon
import AdRuntime
import AdSources
import AdTestSupport
import AdTracking
import ControlProtocol
import Foundation
import XCTest

/// The daemon's controller and episode policy in process, on a virtual player and virtual
/// time: the queue, resume, status, the ad policy's requests, the loop-affinity checks.
final class ControllerTests: XCTestCase {
    private var scratch: URL!

    override func setUpWithError() throws {
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("controller-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: scratch) }

    // MARK: State

    /// Positions live in memory on the loop (the database is the state writer's alone, R18):
    /// a restart resumes the episode where it was, and `open` of an episode left earlier
    /// resumes it too — without the loop reading SQLite.
    func testResumeUsesThePositionsKeptInMemory() throws {
        let path = scratch.appendingPathComponent("state.sqlite").path
        do {
            let h = try ControllerHarness(source: nil, statePath: path)
            h.start()
            _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/a.mp4"), QueueEntry(path: "/lib/b.mp4")]) }
            h.advance(5)
            _ = try h.onLoop { try h.controller.pause() }
            _ = try h.onLoop { try h.controller.next() }
            h.advance(7)
            h.onLoop { h.controller.stop() }
            h.store.flush()
            XCTAssertEqual(h.offLoop.take(), [])
        }
        let h = try ControllerHarness(source: nil, statePath: path)
        let saved = h.store.load()
        XCTAssertEqual(saved.current, 1)
        XCTAssertEqual(saved.positions["/lib/a.mp4"] ?? 0, 5, accuracy: 0.01)
        XCTAssertEqual(saved.positions["/lib/b.mp4"] ?? 0, 7, accuracy: 0.01)
        h.onLoop { h.controller.start(resuming: saved) }
        XCTAssertEqual(h.player.snapshot().item?.path, "/lib/b.mp4")
        XCTAssertEqual(h.player.snapshot().position, 7, accuracy: 0.01, "resumed where it was")
        _ = try h.onLoop { try h.controller.open(QueueEntry(path: "/lib/a.mp4"), start: nil) }
        XCTAssertEqual(h.player.snapshot().position, 5, accuracy: 0.01, "open resumes where the episode was left")
        XCTAssertEqual(h.offLoop.take(), [])
    }

    /// The position each second is a crash's promise (a `kill -9` resumes within a second or
    /// two): a daemon's state writes it while playing. A run-only state (a simulation's, which
    /// no kill ends; in memory, written whole to its file at a flush) keeps the positions of its
    /// save points only — a pause, a change of item, a stop — and what the run reads back
    /// (`open` resuming) is the same.
    func testARunOnlyStateSavesPositionsAtItsSavePointsOnly() throws {
        for durability in [StateDurability.crashSafe, .runOnly] {
            let path = scratch.appendingPathComponent("state-\(durability).sqlite").path
            do {
                let h = try ControllerHarness(source: nil, statePath: path, durability: durability)
                h.start()
                _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/a.mp4"), QueueEntry(path: "/lib/b.mp4")]) }
                h.store.flush()
                let before = SQLiteDatabase.transactionCount()
                h.advance(5.5)
                h.store.flush()
                let commits = SQLiteDatabase.transactionCount() - before
                switch durability {
                case .crashSafe:
                    XCTAssertGreaterThanOrEqual(commits, 1)
                    let saved = try SQLiteDatabase(path: path, readOnly: true).execute("SELECT seconds FROM positions WHERE path = '/lib/a.mp4'")
                    XCTAssertEqual(saved.first?.first?.real ?? 0, 5, accuracy: 0.01, "saved each second while playing (the writer takes the latest)")
                case .runOnly:
                    XCTAssertEqual(commits, 0, "nothing written while it plays")
                    let saved = try SQLiteDatabase(path: path, readOnly: true).execute("SELECT seconds FROM positions WHERE path = '/lib/a.mp4'")
                    XCTAssertTrue(saved.isEmpty, "the file written whole at a flush, not as it plays: \(saved)")
                }
                _ = try h.onLoop { try h.controller.next() }
                h.advance(3)
                _ = try h.onLoop { try h.controller.open(QueueEntry(path: "/lib/a.mp4"), start: nil) }
                XCTAssertEqual(h.player.snapshot().position, 5.5, accuracy: 0.01, "\(durability): open resumes where the episode was left")
                h.onLoop { h.controller.stop() }
                h.store.flush()
                XCTAssertEqual(h.offLoop.take(), [])
            }
            // The store gone, its file holds the save points' positions.
            let saved = try StateStore(path: path, log: Logger(level: .error)).load()
            XCTAssertEqual(saved.positions["/lib/a.mp4"] ?? 0, 5.5, accuracy: 0.01, "\(durability)")
            XCTAssertEqual(saved.positions["/lib/b.mp4"] ?? 0, 3, accuracy: 0.01, "\(durability)")
        }
    }

    /// A saved queue longer than the bounds (10,000 entries, 4 MiB of paths) is cut on load,
    /// in order, to the longest start that fits.
    func testASavedQueueIsCutToItsBoundsOnLoad() throws {
        let path = scratch.appendingPathComponent("state.sqlite").path
        do {
            let store = try StateStore(path: path, log: Logger(level: .error))
            store.saveQueue((0..<(QueueEntry.maxEntries + 50)).map { QueueEntry(path: "/lib/\($0).mp4") }, current: 3)
            store.flush()
        }
        var saved = try StateStore(path: path, log: Logger(level: .error)).load()
        XCTAssertEqual(saved.queue.count, QueueEntry.maxEntries)
        XCTAssertEqual(saved.queue.first?.path, "/lib/0.mp4")
        XCTAssertEqual(saved.queue.last?.path, "/lib/\(QueueEntry.maxEntries - 1).mp4")
        XCTAssertEqual(saved.current, 3)
        do {
            let store = try StateStore(path: path, log: Logger(level: .error))
            let long = String(repeating: "x", count: 4000)
            store.saveQueue((0..<1100).map { QueueEntry(path: "/lib/\($0)-\(long).mp4") }, current: nil)
            store.flush()
        }
        saved = try StateStore(path: path, log: Logger(level: .error)).load()
        XCTAssertTrue(QueueEntry.fits(saved.queue))
        XCTAssertFalse(QueueEntry.fits(saved.queue, [QueueEntry(path: "/lib/1099-" + String(repeating: "x", count: 4000) + ".mp4")]),
                       "the longest start that fits")
        XCTAssertEqual(saved.queue.first?.path.hasPrefix("/lib/0-"), true)
    }

    // MARK: Status

    /// `next` on the last entry stops: the status says nothing plays and nothing is in.
    func testNextOnTheLastEntryStopsAndTheStatusSaysSo() throws {
        let h = try ControllerHarness(source: nil)
        h.start()
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/only.mp4")]) }
        h.advance(1)
        let status = try h.onLoop { try h.controller.next() }
        XCTAssertEqual(status["item"], .null)
        XCTAssertEqual(status["playing"], false)
        XCTAssertEqual(status["rate"]?.number, 0)
        XCTAssertEqual(status["current"], .null)
    }

    // MARK: The ad policy

    /// With nothing the catalog could serve — no pause ad, no slot after the playhead — the
    /// policy asks for nothing: no request, no error, no "no fill" at each pause.
    func testThePolicyAsksOnlyForWhatTheSourceCanHave() throws {
        let catalog = try textCatalog("""
            {"version": 1, "overlays": [{"id": "ov-1", "text": "Sponsored", "slots": [{"start": 0.5, "duration": 5}]}]}
            """)
        let h = try ControllerHarness(source: catalog)
        h.start()
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/ep.mp4")]) }
        h.wait(for: .adLoaded)
        h.advance(1)
        h.wait(for: .adStarted)
        _ = try h.onLoop { try h.controller.pause() }
        h.advance(2)
        _ = try h.onLoop { try h.controller.play() }
        h.advance(1)
        _ = try h.onLoop { try h.controller.pause() }
        h.advance(2)
        h.onLoop {}
        let requested = h.events.filter { $0.name == .adRequested }.map { $0.fields["kind"]?.string }
        XCTAssertEqual(requested, ["overlay"], "one overlay request, for the one slot; none for pauses: \(h.eventNames)")
        XCTAssertFalse(h.eventNames.contains(.adError), "\(h.events)")
        XCTAssertFalse(h.eventNames.contains(.adNoFill), "\(h.events)")
        XCTAssertEqual(h.offLoop.take(), [])
    }

    /// An audio-only episode shows no video: no overlay and no pause ad is asked for (they would
    /// be on no screen); the next episode, a video, has its overlay (issue 23).
    func testAnAudioOnlyEpisodeAsksForNoOverlayAndNoPauseAd() throws {
        let catalog = try textCatalog("""
            {"version": 1, "overlays": [{"id": "ov-1", "text": "Sponsored", "slots": [{"start": 0.5, "duration": 5}]}],
             "pause_ads": [{"id": "pa-1", "text": "Paused"}]}
            """)
        let h = try ControllerHarness(source: catalog)
        h.start()
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/song.m4a"), QueueEntry(path: "/lib/ep.mp4")]) }
        h.advance(2)
        _ = try h.onLoop { try h.controller.pause() }
        h.advance(3)
        h.onLoop {}
        XCTAssertFalse(h.eventNames.contains(.adRequested), "nothing asked for over audio: \(h.eventNames)")
        _ = try h.onLoop { try h.controller.next() }
        h.wait(for: .adLoaded)
        h.advance(1)
        h.wait(for: .adStarted)
        XCTAssertEqual(h.events.filter { $0.name == .adRequested }.map { $0.fields["kind"]?.string }, ["overlay"])
    }

    /// With ads on and no post-roll, the episode's end and a broken file's failure are told
    /// and logged, whatever the policy does first (it loads the next item while the change is
    /// still being delivered, and its observers go away then): a finished episode is not
    /// resumed at its end, a failure is never silent.
    func testEveryEndAndFailureIsToldWhateverThePolicyDoes() throws {
        let catalog = try textCatalog("""
            {"version": 1, "overlays": [{"id": "ov-1", "text": "Sponsored", "slots": [{"start": 0.5, "duration": 1}]}]}
            """)
        let h = try ControllerHarness(source: catalog)
        h.player.setMedia("/lib/one.mp4", duration: 3)
        h.player.setMedia("/lib/broken.mp4", duration: nil)
        h.player.setMedia("/lib/two.mp4", duration: 3)
        h.start()
        _ = try h.onLoop { try h.controller.enqueue(["/lib/one.mp4", "/lib/broken.mp4", "/lib/two.mp4"].map { QueueEntry(path: $0) }) }
        h.advance(4)
        h.wait(for: .playerEnded) { $0.fields["path"] == "/lib/one.mp4" }
        h.wait(for: .playerFailed) { $0.fields["path"] == "/lib/broken.mp4" }
        h.wait(for: .playerItem) { $0.fields["path"] == "/lib/two.mp4" }
        h.advance(4)
        h.wait(for: .playerEnded) { $0.fields["path"] == "/lib/two.mp4" }
        // Played to its end: opened again, it starts from the beginning.
        _ = try h.onLoop { try h.controller.open(QueueEntry(path: "/lib/one.mp4"), start: nil) }
        XCTAssertEqual(h.player.snapshot().position, 0, accuracy: 0.01)
        XCTAssertEqual(h.offLoop.take(), [])
    }

    /// `repeat one`: each pass is a new item (R14) and gets its ads, as `repeat all` does —
    /// the slot's overlay shows in every pass, even one limited to once an episode (a pass is
    /// a new viewing).
    func testRepeatOneShowsTheOverlaysInEveryPass() throws {
        let h = try ControllerHarness { store in
            try textCatalog("""
                {"version": 1, "overlays": [{"id": "ov-1", "text": "Sponsored", "max_per_episode": 1,
                                             "slots": [{"start": 0.5, "duration": 1}]}]}
                """, counters: store)
        }
        h.player.setMedia("/lib/loop.mp4", duration: 3)
        h.start()
        _ = try h.onLoop { try h.controller.setRepeat(.one) }
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/loop.mp4")]) }
        for pass in 0..<3 {
            h.wait(for: .adLoaded) { _ in h.events.filter { $0.name == .adLoaded }.count > pass }
            h.advance(1)
            h.wait(for: .adStarted) { _ in h.events.filter { $0.name == .adStarted }.count > pass }
            h.advance(2.1)   // the end of the pass, and the wrap into the next
        }
        let passes = h.events.filter { $0.name == .playerItem }.compactMap { $0.fields["pass"]?.integer }
        XCTAssertEqual(Array(passes.prefix(4)), [0, 1, 2, 3], "\(h.eventNames)")
        XCTAssertEqual(h.events.filter { $0.name == .adStarted }.count, 3, "an overlay in each of three passes: \(h.eventNames)")
        XCTAssertEqual(h.offLoop.take(), [])
    }

    /// A pause that ends an overlay is told in one write: `player.paused`, then the overlay's
    /// `ad.ended` (issue 22), once proof of play holds the ad.
    func testAPauseAndTheOverlayItEndsAreOneWrite() throws {
        let catalog = try textCatalog("""
            {"version": 1, "overlays": [{"id": "ov-1", "text": "Sponsored", "slots": [{"start": 0.5, "duration": 5}]}]}
            """)
        let h = try ControllerHarness(source: catalog)
        h.start()
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/ep.mp4")]) }
        h.wait(for: .adLoaded)
        h.advance(1)
        h.wait(for: .adStarted)
        _ = try h.onLoop { try h.controller.pause() }
        let write = try XCTUnwrap(h.writes.first { $0.contains { $0.name == .playerPaused } }, "\(h.writes.map { $0.map(\.name) })")
        let names = write.map(\.name)
        XCTAssertEqual(names.first, .playerPaused, "\(names)")
        XCTAssertTrue(names.contains(.adEnded), "the overlay's end in the same write: \(names)")
        XCTAssertEqual(write.first { $0.name == .adEnded }?.fields["reason"], "paused")
    }

    /// On a pause, the overlay comes down before the policy calls its source: the order is
    /// the observers' phases (ads, then policy, then clients), not who registered first.
    func testAPausesOverlayIsDownBeforeAnySourceCall() throws {
        let catalog = try textCatalog("""
            {"version": 1, "overlays": [{"id": "ov-1", "text": "Sponsored", "slots": [{"start": 0.5, "duration": 5}]}],
             "pause_ads": [{"id": "pa-1", "text": "Paused"}]}
            """)
        let surface = Locked<RecordingAdSurface?>(nil)
        let seen = Locked<[(kind: AdKind, visible: Set<UInt64>)]>([])
        let source = WatchingSource(catalog) { kind in seen.withLock { $0.append((kind, surface.withLock { $0 }?.visible ?? [])) } }
        let h = try ControllerHarness(source: source)
        surface.withLock { $0 = h.surface }
        h.start()
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/ep.mp4")]) }
        h.wait(for: .adLoaded)   // loaded (on a worker, in real time) before its slot comes
        h.advance(1)
        h.wait(for: .adStarted)
        XCTAssertFalse(h.surface.visible.isEmpty, "the overlay is on screen")
        seen.withLock { $0 = [] }
        _ = try h.onLoop { try h.controller.pause() }
        h.wait(for: .adLoaded) { $0.fields["kind"] == "pause" }
        h.advance(2)
        h.wait(for: .adStarted) { $0.fields["kind"] == "pause" }
        let calls = seen.withLock { $0 }
        XCTAssertEqual(calls.first?.kind, .pauseAd, "the pause's first source call: \(calls.map(\.kind))")
        XCTAssertEqual(calls.first?.visible, [], "the overlay was down before the source was called")
        XCTAssertEqual(h.offLoop.take(), [])
    }

    /// A source with nothing to give is a normal outcome: `ad.nofill` and its counter, never
    /// an `ad.error`.
    func testNoFillIsAnEventAndACounterNotAnError() throws {
        let source = TestAdSource([.overlay: .noFill])
        let h = try ControllerHarness(source: source)
        h.start()
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/ep.mp4")]) }
        let nofill = h.wait(for: .adNoFill)
        XCTAssertEqual(nofill?.fields["kind"], "overlay")
        XCTAssertEqual(nofill?.fields["content_id"], "ep")
        XCTAssertFalse(h.eventNames.contains(.adError), "\(h.events)")
        func value(_ name: String) -> Double? {
            h.metrics.samples().first { $0.name == name && $0.labels["kind"] == "overlay" }?.value
        }
        XCTAssertTrue(waitUntil { value("adplayerd_ads_nofill_total") == 1 })
        XCTAssertEqual(value("adplayerd_ads_requested_total"), 1)
        XCTAssertNil(value("adplayerd_ad_errors_total"))
    }

    /// A post-roll pod plays as a break: after each ad, the next of its pod (the source says how
    /// many follow), then the next episode. The pause ad and the post-roll are prefetched as the
    /// episode starts — and the next pause ad after a pause ad is taken.
    func testAPostrollPodPlaysInOrderAndTheEpisodesAdsArePrefetched() throws {
        let source = PodSource(pod: 3)
        let h = try ControllerHarness(source: source, pauseAdDelay: 0)
        h.player.setMedia("/lib/ep.mp4", duration: 2)
        h.start()
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/ep.mp4"), QueueEntry(path: "/lib/ep2.mp4")]) }
        h.wait(for: .playerPlaying)
        XCTAssertTrue(waitUntil { source.prefetched.withLock { $0 } == [.pauseAd, .postroll] }, "\(source.prefetched.withLock { $0 })")
        _ = try h.onLoop { try h.controller.pause() }
        h.wait(for: .adStarted) { $0.fields["kind"] == "pause" }
        XCTAssertTrue(waitUntil { source.prefetched.withLock { $0 } == [.pauseAd, .postroll, .pauseAd] }, "the next pause's")
        _ = try h.onLoop { try h.controller.play() }
        for position in 0..<3 {
            h.advance(2)
            let started = h.wait(for: .adStarted) { $0.fields["kind"] == "postroll" && $0.fields["ad_id"]?.string == "pr-\(position)" }
            let id = try XCTUnwrap(started?.fields["instance"]?.string.flatMap { UInt64($0, radix: 16) })
            h.onLoop { h.surface.reporter(id)?.finished() }
        }
        h.wait(for: .playerItem) { $0.fields["path"]?.string == "/lib/ep2.mp4" }
        XCTAssertEqual(source.positions.withLock { $0 }, [0, 1, 2], "each ad of the pod asked for in turn")
        XCTAssertEqual(h.offLoop.take(), [])
    }

    // MARK: Queue modes

    /// Plays the queue through the virtual player for `episodes` episode ends and returns the
    /// paths that came in, in order.
    private func playedPaths(_ h: ControllerHarness, episodes: Int) -> [String] {
        for _ in 0..<episodes {
            h.advance(1.01)
            h.onLoop {}
        }
        return h.events.filter { $0.name == .playerItem }.compactMap { $0.fields["path"]?.string }
    }

    private func harnessWithEpisodes(_ count: Int, statePath: String = ":memory:") throws -> (ControllerHarness, [String]) {
        let h = try ControllerHarness(source: nil, statePath: statePath)
        let paths = (1...count).map { "/lib/ep\($0).mp4" }
        for path in paths { h.player.setMedia(path, duration: 1) }
        return (h, paths)
    }

    /// `repeat all`: at the queue's end it starts over, for ever; `off`: it stops at the end.
    func testRepeatAllPlaysTheQueueOverAndOver() throws {
        let (h, paths) = try harnessWithEpisodes(3)
        h.start()
        _ = try h.onLoop { try h.controller.setRepeat(.all) }
        _ = try h.onLoop { try h.controller.enqueue(paths.map { QueueEntry(path: $0) }) }
        let played = playedPaths(h, episodes: 7)
        XCTAssertEqual(played, paths + paths + paths.prefix(2), "the third pass plays its second episode")
        _ = try h.onLoop { try h.controller.setRepeat(.off) }
        let more = playedPaths(h, episodes: 6)
        XCTAssertEqual(more, paths + paths + paths, "what was left of the pass, then nothing")
        XCTAssertEqual(h.offLoop.take(), [])
    }

    /// Shuffle: each pass plays every episode once, in a new order, never the same episode
    /// twice in a row — across passes too.
    func testShuffleNeverPlaysAnEpisodeTwiceInARow() throws {
        let (h, paths) = try harnessWithEpisodes(4)
        h.start()
        _ = try h.onLoop { try h.controller.setRepeat(.all) }
        _ = h.onLoop { h.controller.setShuffle(true) }
        _ = try h.onLoop { try h.controller.enqueue(paths.map { QueueEntry(path: $0) }) }
        let played = Array(playedPaths(h, episodes: 40).prefix(40))
        XCTAssertEqual(played.count, 40)
        for (a, b) in zip(played, played.dropFirst()) { XCTAssertNotEqual(a, b, "\(played)") }
        for pass in stride(from: 0, to: 40, by: 4) {
            XCTAssertEqual(Set(played[pass..<pass + 4]), Set(paths), "pass \(pass / 4): each episode once: \(played)")
        }
        let orders = Set(stride(from: 0, to: 40, by: 4).map { played[$0..<$0 + 4].joined(separator: ",") })
        XCTAssertGreaterThan(orders.count, 1, "a new order each pass")
    }

    /// Editing the queue: remove, move and jump keep what plays (or play what they name).
    func testRemoveMoveAndJumpKeepTheCurrentEntry() throws {
        let (h, paths) = try harnessWithEpisodes(5)
        h.start()
        _ = try h.onLoop { try h.controller.enqueue(paths.map { QueueEntry(path: $0) }) }
        func state() -> (queue: [String], current: Int?) {
            let status = h.onLoop { h.controller.status(queue: true) }
            return (status["queue"]?.array?.compactMap(\.string) ?? [], status["current"]?.integer.map { Int($0) })
        }
        _ = try h.onLoop { try h.controller.jump(2) }
        XCTAssertEqual(state().current, 2)
        _ = try h.onLoop { try h.controller.remove(0) }
        XCTAssertEqual(state().queue, Array(paths.dropFirst()))
        XCTAssertEqual(state().current, 1, "ep3 still plays, one place up")
        _ = try h.onLoop { try h.controller.move(from: 1, to: 3) }
        XCTAssertEqual(state().queue, ["/lib/ep2.mp4", "/lib/ep4.mp4", "/lib/ep5.mp4", "/lib/ep3.mp4"])
        XCTAssertEqual(state().current, 3, "ep3 moved with its entry")
        _ = try h.onLoop { try h.controller.remove(3) }
        XCTAssertNil(state().current, "the last entry played and is gone: nothing plays")
        XCTAssertThrowsError(try h.onLoop { try h.controller.remove(7) }) { XCTAssertEqual(($0 as? ControlError)?.code, .badArgs) }
        let queueEvents = h.events.filter { $0.name == .playerQueue }
        XCTAssertGreaterThanOrEqual(queueEvents.count, 3)
    }

    /// Volume, mute, repeat and shuffle outlive the process.
    func testTheModesAndTheVolumeSurviveARestart() throws {
        let path = scratch.appendingPathComponent("modes.sqlite").path
        do {
            let (h, _) = try harnessWithEpisodes(2, statePath: path)
            h.start()
            _ = try h.onLoop { try h.controller.setVolume(.to(40)) }
            _ = try h.onLoop { try h.controller.setVolume(.by(-15)) }
            _ = try h.onLoop { try h.controller.setMute(nil) }
            _ = try h.onLoop { try h.controller.setRepeat(.all) }
            _ = h.onLoop { h.controller.setShuffle(true) }
            h.store.flush()
            XCTAssertEqual(h.events.filter { $0.name == .playerVolume }.last?.fields["volume"], .number(25))
        }
        let (h, _) = try harnessWithEpisodes(2, statePath: path)
        h.start()
        let status = h.onLoop { h.controller.status() }
        XCTAssertEqual(status["volume"], .number(25))
        XCTAssertEqual(status["mute"], .bool(true))
        XCTAssertEqual(status["repeat"], "all")
        XCTAssertEqual(status["shuffle"], .bool(true))
        XCTAssertEqual(status["loop"], .bool(false))
    }

    // MARK: Loop affinity

    /// The controller is loop-only: each entry point called off the loop is caught.
    func testTheControllerChecksItRunsOnTheLoop() throws {
        let h = try ControllerHarness(source: nil)
        h.start()
        XCTAssertEqual(h.offLoop.take(), [])
        _ = h.controller.status()
        _ = try? h.controller.pause()
        h.controller.setBackground(true, for: .control)
        let calls = h.offLoop.take()
        XCTAssertEqual(calls.count, 3, "\(calls)")
        XCTAssertTrue(calls[0].contains("Controller.swift") && calls[0].contains("status(queue:)"), "\(calls)")
    }

    /// The episode policy is loop-only too.
    func testTheEpisodePolicyChecksItRunsOnTheLoop() throws {
        let offLoop = OffLoopCalls()
        let loop = VirtualLoop(recordingOffLoopCallsIn: offLoop)
        let policy = EpisodePolicy(content: ContentInfo(id: "ep"), source: TestAdSource(), surface: RecordingAdSurface(), loop: loop,
                                   pauseAdDelay: 1, configuration: VideoAdsConfiguration(), onEvent: { _ in }, onFinished: {})
        _ = policy.closeAd()
        policy.setBackground(true)
        let calls = offLoop.take()
        XCTAssertTrue(calls.contains { $0.contains("EpisodePolicy.swift") && $0.contains("closeAd()") }, "\(calls)")
        XCTAssertTrue(calls.contains { $0.contains("EpisodePolicy.swift") && $0.contains("setBackground") }, "\(calls)")
        loop.execute { policy.stop() }
        XCTAssertEqual(offLoop.take(), [], "on the loop, nothing is reported")
    }

    /// Paths are text on the loop: a folder's path gets no trailing slash from a `stat`, and a
    /// content id is the file name without its extension.
    func testPathsOnTheLoopAreTextOnly() {
        let folder = FileManager.default.temporaryDirectory.path   // a folder that exists: a stat would add "/"
        XCTAssertEqual(DesktopState.Track(serial: 1, path: folder).url, "file://" + folder)
        XCTAssertEqual(DesktopState.Track(serial: 1, path: "/srv/tv/Ep 1 (é).mp4").url, "file:///srv/tv/Ep%201%20(%C3%A9).mp4")
        XCTAssertEqual(DesktopState.Track(serial: 1, path: "/srv/tv/ep-1.mp4").title, "ep-1")
        XCTAssertEqual(QueueEntry(path: "/srv/tv/show.s01e02.mkv").contentID, "show.s01e02")
        XCTAssertEqual(QueueEntry(path: folder).contentID, FilePath.lastComponent(folder))
    }

    /// Operating hours on virtual time across the night the clocks go forward in Europe/Paris
    /// (`daily 09:00-17:00`; 28 → 29 March 2026): at 17:00 CET the display goes off — the
    /// content paused where it is, the output blanked, standby asked for, no ad asked for,
    /// shown or counted through the night — and at 09:00 CEST (07:00 UTC, an hour earlier in
    /// UTC than the evening before) it comes on, is woken, and the same episode plays on from
    /// where it stopped. Then the overrides: `display off` holds until the next boundary,
    /// `display on` at night until the morning's, `display auto` returns to the hours.
    func testOperatingHoursAcrossADaylightSavingChange() throws {
        let catalog = try textCatalog("""
            {"version": 1, "overlays": [{"id": "ov-1", "text": "Sponsored", "slots": [{"start": 0.5, "duration": 5}, {"start": 30, "duration": 5}]}],
             "pause_ads": [{"id": "pa-1", "text": "Paused"}]}
            """)
        let h = try ControllerHarness(source: catalog, pauseAdDelay: 0)
        h.player.setMedia("/lib/long.mp4", duration: 500_000)
        h.start()
        let paris = TimeZone(identifier: "Europe/Paris")!
        let base = ISO8601DateFormatter().date(from: "2026-03-28T15:59:50Z")!   // 16:59:50 CET
        let t0 = h.loop.now()
        let loop = h.loop
        let now: @Sendable () -> Date = { base.addingTimeInterval(Double(loop.now() - t0) / 1e9) }
        let cec = Locked<[Bool]>([])
        h.player.screenRecord.forget()
        h.onLoop { h.controller.configureDisplay(hours: try! WeeklyHours("daily 09:00-17:00", timeZone: paris),
                                                 cec: { on in cec.withLock { $0.append(on) } }, now: now) }
        XCTAssertEqual(cec.withLock { $0 }, [], "on already: nothing to switch")
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/long.mp4")]) }
        h.wait(for: .adLoaded) { $0.fields["kind"] == "overlay" }   // loaded off the loop: in before time moves
        h.advance(2)
        h.wait(for: .adStarted)
        h.advance(9)   // 17:00:01 CET
        let off = try XCTUnwrap(h.events.firstIndex { $0.name == .playerDisplay })
        XCTAssertEqual(h.events[off].fields["power"], "off")
        XCTAssertEqual(h.events[off].fields["reason"], "schedule")
        XCTAssertEqual(cec.withLock { $0 }, [false], "standby")
        XCTAssertEqual(h.player.screenRecord.blanked, [true])
        XCTAssertFalse(h.player.snapshot().playing)
        let stoppedAt = h.player.snapshot().position
        XCTAssertEqual(stoppedAt, 10, accuracy: 0.01, "paused where it was at 17:00")
        let status = h.onLoop { h.controller.status() }
        XCTAssertEqual(status["display"]?["power"], "off")
        XCTAssertEqual(status["display"]?["next_change"], "2026-03-29T07:00:00.000Z", "09:00 CEST")
        XCTAssertThrowsError(try h.onLoop { try h.controller.play() }) { XCTAssertEqual(($0 as? ControlError)?.code, .unavailable) }
        let requestsAtClosing = h.events.filter { $0.name == .adRequested }.count
        XCTAssertEqual(h.metrics.samples().first { $0.name == "adplayerd_display_on" }?.value, 0)

        h.advance(14 * 3600 + 59 * 60 + 58)   // 08:59:59 CEST on the 29th
        XCTAssertEqual(cec.withLock { $0 }, [false], "still night")
        h.advance(2)   // 09:00:01 CEST
        XCTAssertEqual(cec.withLock { $0 }, [false, true], "woken at 09:00 local")
        XCTAssertEqual(h.player.screenRecord.blanked, [true, false])
        XCTAssertTrue(h.player.snapshot().playing, "the same episode plays on")
        XCTAssertEqual(h.player.snapshot().item?.path, "/lib/long.mp4")
        XCTAssertEqual(h.player.snapshot().position, stoppedAt, accuracy: 1.5, "from where it stopped")
        let on = try XCTUnwrap(h.events.lastIndex { $0.name == .playerDisplay })
        XCTAssertEqual(h.events[on].fields["power"], "on")
        XCTAssertEqual(h.events[on].fields["reason"], .null)
        let night = h.events[off..<on]
        XCTAssertFalse(night.contains { [.adRequested, .adStarted, .adLoaded, .adNoFill].contains($0.name) }, "nothing asked for or shown at night: \(night.map(\.name))")
        XCTAssertEqual(h.events[..<on].filter { $0.name == .adRequested }.count, requestsAtClosing, "none asked for until the opening")
        XCTAssertEqual(h.events.filter { $0.name == .playerDisplay }.count, 2, "once each way")
        h.advance(25)
        XCTAssertGreaterThan(h.events.filter { $0.name == .adRequested }.count, requestsAtClosing, "ads by their rules again")

        // Overrides: off until the next boundary (17:00), where the hours say off anyway.
        _ = h.onLoop { h.controller.setDisplay(.off) }
        XCTAssertEqual(h.events.last { $0.name == .playerDisplay }?.fields["reason"], "override")
        XCTAssertEqual(cec.withLock { $0 }.last, false)
        h.advance(8 * 3600)   // past 17:00 CEST
        XCTAssertEqual(h.onLoop { h.controller.status() }["display"]?["reason"], "schedule")
        _ = h.onLoop { h.controller.setDisplay(.on) }
        XCTAssertTrue(h.player.snapshot().playing, "on at night by override: it plays")
        h.advance(3600)
        XCTAssertEqual(h.onLoop { h.controller.status() }["display"]?["power"], "on", "held until the morning")
        _ = h.onLoop { h.controller.setDisplay(.auto) }
        XCTAssertEqual(h.onLoop { h.controller.status() }["display"]?["power"], "off", "auto: as the hours say")
        XCTAssertEqual(h.onLoop { h.controller.status() }["display"]?["reason"], "schedule")
    }

    /// An override kept across a reload of the hours holds until the boundary of the new hours
    /// (issue 34, 18), not the old one's.
    func testAnOverrideAcrossAReloadKeepsTheNewHoursBoundary() throws {
        let h = try ControllerHarness(source: nil)
        h.player.setMedia("/lib/long.mp4", duration: 500_000)
        h.start()
        let base = ISO8601DateFormatter().date(from: "2026-06-01T10:00:00Z")!
        let t0 = h.loop.now()
        let loop = h.loop
        let utc = TimeZone(identifier: "UTC")!
        h.onLoop { h.controller.configureDisplay(hours: try! WeeklyHours("daily 08:00-20:00", timeZone: utc), cec: nil,
                                                 now: { base.addingTimeInterval(Double(loop.now() - t0) / 1e9) }) }
        _ = h.onLoop { h.controller.setDisplay(.off) }
        XCTAssertEqual(h.onLoop { h.controller.status() }["display"]?["override_until"], "2026-06-01T20:00:00.000Z")
        h.onLoop { h.controller.setDisplayHours(try! WeeklyHours("daily 08:00-12:00", timeZone: utc)) }
        XCTAssertEqual(h.onLoop { h.controller.status() }["display"]?["override_until"], "2026-06-01T12:00:00.000Z", "the new hours' boundary")
        XCTAssertEqual(h.onLoop { h.controller.status() }["display"]?["power"], "off")
        h.advance(2 * 3600 + 1)   // 12:00:01: the override ends where the new hours change
        XCTAssertEqual(h.onLoop { h.controller.status() }["display"]?["reason"], "schedule")
        h.onLoop { h.controller.setDisplayHours(nil) }
        XCTAssertEqual(h.onLoop { h.controller.status() }["display"]?["power"], "on", "no hours: always on")
    }

    /// The wall clock jumps (NTP at boot, an operator) across a boundary: the display follows
    /// within 30 s, once; jumping back does it once the other way.
    func testAWallClockJumpAcrossABoundaryIsFollowedOnce() throws {
        let h = try ControllerHarness(source: nil)
        h.player.setMedia("/lib/long.mp4", duration: 500_000)
        h.start()
        let offset = Locked(0.0)
        let base = ISO8601DateFormatter().date(from: "2026-06-01T10:00:00Z")!
        let t0 = h.loop.now()
        let loop = h.loop
        let cec = Locked<[Bool]>([])
        h.onLoop { h.controller.configureDisplay(hours: try! WeeklyHours("daily 08:00-20:00", timeZone: TimeZone(identifier: "UTC")!),
                                                 cec: { on in cec.withLock { $0.append(on) } },
                                                 now: { base.addingTimeInterval(Double(loop.now() - t0) / 1e9 + offset.withLock { $0 }) }) }
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/long.mp4")]) }
        h.advance(5)
        offset.withLock { $0 = 12 * 3600 }   // 22:00: closed
        h.advance(31)
        XCTAssertEqual(cec.withLock { $0 }, [false])
        h.advance(120)
        XCTAssertEqual(cec.withLock { $0 }, [false], "once")
        offset.withLock { $0 = 0 }   // back to 10:02
        h.advance(31)
        XCTAssertEqual(cec.withLock { $0 }, [false, true])
        XCTAssertTrue(h.player.snapshot().playing)
        XCTAssertEqual(h.events.filter { $0.name == .playerDisplay }.count, 2)
    }

    /// `pause-ad-max` (issue 27, burn-in care): a pause ad on screen for its limit ends
    /// `limitReached` and the output rests black until the content plays again — no other
    /// pause ad that pause; with `pause-ad-rotate` the next pause ad takes its place instead.
    func testAPauseAdGivesWayAtItsLimitToARestOrTheNextPauseAd() throws {
        var configuration = VideoAdsConfiguration()
        configuration.pauseAdMaxShowing = 5
        for rotate in [false, true] {
            let catalog = try textCatalog("""
                {"version": 1, "pause_ads": [{"id": "pa-1", "text": "Paused"}, {"id": "pa-2", "text": "Still paused"}]}
                """)
            let h = try ControllerHarness(source: catalog, pauseAdDelay: 0, adsConfiguration: configuration)
            h.player.setMedia("/lib/ep.mp4", duration: 600)
            h.start()
            h.onLoop { h.controller.pauseAdRotate = rotate }
            h.player.screenRecord.forget()
            _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/ep.mp4")]) }
            h.advance(2)
            _ = try h.onLoop { try h.controller.pause() }
            h.wait(for: .adStarted)
            h.advance(4.9)
            XCTAssertFalse(h.eventNames.contains(.adEnded), "within its limit")
            h.advance(0.2)
            let ended = try XCTUnwrap(h.events.first { $0.name == .adEnded })
            XCTAssertEqual(ended.fields["reason"], "limitReached")
            if rotate {
                h.wait(for: .adStarted) { _ in h.events.filter { $0.name == .adStarted }.count == 2 }
                XCTAssertEqual(h.events.filter { $0.name == .adStarted }.count, 2, "the next pause ad in its place")
                XCTAssertEqual(h.player.screenRecord.blanked, [], "no rest")
                h.advance(5.1)
                XCTAssertEqual(h.events.filter { $0.name == .adEnded }.map { $0.fields["reason"] }, ["limitReached", "limitReached"])
            } else {
                XCTAssertEqual(h.player.screenRecord.blanked, [true], "the output rests")
                h.advance(60)
                h.onLoop {}
                XCTAssertEqual(h.events.filter { $0.name == .adStarted }.count, 1, "no other pause ad this pause")
                _ = try h.onLoop { try h.controller.play() }
                XCTAssertEqual(h.player.screenRecord.blanked, [true, false], "the content plays: shown again")
            }
        }
    }

    /// A cap counts shows, not servings (issue 26): a pause that ends before its pause ad
    /// appears uses up nothing of `max_per_episode` — the next pause has it; once it has shown,
    /// the cap holds.
    func testAPauseAdThatNeverShowedUsesUpNothingOfItsCap() throws {
        let h = try ControllerHarness { store in
            try textCatalog(#"{"version": 1, "pause_ads": [{"id": "pa", "text": "Paused", "max_per_episode": 1}]}"#, counters: store)
        }
        h.player.setMedia("/lib/ep.mp4", duration: 600)
        h.start()
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/ep.mp4")]) }
        h.advance(2)
        _ = try h.onLoop { try h.controller.pause() }
        h.wait(for: .adLoaded)
        h.advance(0.5)   // within the 1 s delay: never on screen
        _ = try h.onLoop { try h.controller.play() }
        h.advance(1)
        XCTAssertFalse(h.eventNames.contains(.adStarted))
        _ = try h.onLoop { try h.controller.pause() }
        h.wait(for: .adLoaded) { _ in h.events.filter { $0.name == .adLoaded }.count == 2 }
        h.advance(1.1)
        h.wait(for: .adStarted)
        _ = try h.onLoop { try h.controller.play() }
        h.advance(1)
        _ = try h.onLoop { try h.controller.pause() }
        h.advance(2)
        h.onLoop {}
        XCTAssertEqual(h.events.filter { $0.name == .adStarted }.count, 1, "shown once: capped now \(h.eventNames)")
    }
}

/// A source with a pause ad and a post-roll pod of `pod` ads; it records the pod positions
/// asked for and the kinds prefetched.
private final class PodSource: AdSource, @unchecked Sendable {
    // @unchecked: the records behind their locks.
    let pod: Int
    let positions = Locked<[Int]>([])
    let prefetched = Locked<[AdKind]>([])

    init(pod: Int) { self.pod = pod }

    func ad(for request: AdRequest) async throws -> AdCreative? {
        switch request.kind {
        case .overlay, .preroll, .midroll, .squeezeback, .screensaver: return nil
        case .pauseAd: return AdCreative(id: "pa", kind: .pauseAd, content: .text("Paused"))
        case .postroll:
            positions.withLock { $0.append(request.podPosition) }
            var creative = AdCreative(id: "pr-\(request.podPosition)", kind: .postroll, content: .video(location: "/ads/pr.mp4"))
            creative.podRemaining = pod - 1 - request.podPosition
            return creative
        }
    }

    func mayFill(_ kind: AdKind, content: ContentInfo, at position: Double) -> Bool { kind == .pauseAd || kind == .postroll }
    func prefetch(_ request: AdRequest) { prefetched.withLock { $0.append(request.kind) } }
}

/// A source that says when it is asked whether it may fill (`mayFill`), before answering.
private struct WatchingSource: AdSource {
    let inner: any AdSource
    let asked: @Sendable (AdKind) -> Void

    init(_ inner: any AdSource, asked: @escaping @Sendable (AdKind) -> Void) {
        self.inner = inner
        self.asked = asked
    }

    func ad(for request: AdRequest) async throws -> AdCreative? { try await inner.ad(for: request) }
    func mayFill(_ kind: AdKind, content: ContentInfo, at position: Double) -> Bool {
        asked(kind)
        return inner.mayFill(kind, content: content, at: position)
    }
    func prefetch(_ request: AdRequest) { inner.prefetch(request) }
}
