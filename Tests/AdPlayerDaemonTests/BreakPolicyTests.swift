import AdPlayerDaemon
import AdRuntime
import AdSources
import AdTestSupport
import ControlProtocol
import Foundation
import XCTest

/// The episode policy's linear breaks through the controller, on the virtual player and
/// virtual time: a catalog's pre-roll before the first frame, mid-rolls held at their time and
/// resumed there, snapback, pods, the refusals and `skip`.
final class BreakPolicyTests: XCTestCase {
    private var folder: URL!

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("breaks-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        for name in ["pre.mp4", "mid.mp4", "mid6.mp4"] { try Data("video".utf8).write(to: folder.appendingPathComponent(name)) }
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: folder) }

    private func catalog(_ json: String) throws -> LocalCatalog {
        try Data(json.utf8).write(to: folder.appendingPathComponent("catalog.json"))
        return try LocalCatalog(folder: folder)
    }

    private func harness(_ json: String) throws -> ControllerHarness {
        let source = try catalog(json)
        let h = try ControllerHarness(source: source, pauseAdDelay: 0.5)
        h.player.setMedia("/lib/ep.mp4", duration: 10)
        h.player.setMedia("/lib/ep2.mp4", duration: 10)
        h.start()
        return h
    }

    /// Plays the episode for 1 s, until the next break's ad (asked for ahead) is in.
    private func playUntilTheBreaksAdIsIn(_ h: ControllerHarness) {
        _ = try? h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/ep.mp4")]) }
        h.wait(for: .playerPlaying)
        h.advance(1)
        h.onLoop {}
        XCTAssertTrue(waitUntil { h.events.contains { $0.name == .adLoaded } }, "the break's ad, asked for ahead")
    }

    private func instance(_ event: ControlEvent?) throws -> UInt64 {
        try XCTUnwrap(event?.fields["instance"]?.string.flatMap { UInt64($0, radix: 16) }, "\(String(describing: event))")
    }

    private func names(_ h: ControllerHarness) -> [String] {
        h.events.compactMap { event -> String? in
            switch event.name {
            case .adBreakStarted, .adBreakEnded, .adStarted, .adEnded: "\(event.name.rawValue) \(event.fields["kind"]?.string ?? "")"
            case .playerItem: "player.item"
            case .playerPaused: "player.paused"
            case .playerPlaying: "player.playing"
            default: nil
            }
        }
    }

    private func refusal(_ body: () throws -> JSONValue) -> ErrorCode? {
        do {
            _ = try body()
            return nil
        } catch let error as ControlError {
            return error.code
        } catch {
            return nil
        }
    }

    /// The pre-roll plays before the episode is even loaded; seek, next and skip (it has no skip
    /// offset) are refused while it plays; the episode comes in after the break, from its start.
    func testAPrerollPlaysBeforeTheEpisodeIsLoaded() throws {
        let h = try harness(#"{"version": 1, "prerolls": [{"id": "pre", "video": "pre.mp4"}]}"#)
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/ep.mp4")]) }
        let started = h.wait(for: .adStarted) { $0.fields["kind"] == "preroll" }
        XCTAssertNil(h.player.snapshot().item, "the episode is not in the player")
        XCTAssertFalse(h.eventNames.contains(.playerItem))
        XCTAssertEqual(h.onLoop { refusal { try h.controller.perform(.seek(.to(5))) } }, .adPlaying)
        XCTAssertEqual(h.onLoop { refusal { try h.controller.perform(.next) } }, .adPlaying)
        XCTAssertEqual(h.onLoop { refusal { try h.controller.skipAd() } }, .notSkippable)
        let id = try instance(started)
        h.onLoop { h.surface.reporter(id)?.progress(1, of: 5) }
        h.onLoop { h.surface.reporter(id)?.finished() }
        h.wait(for: .playerPlaying)
        XCTAssertEqual(names(h), ["ad.break_started preroll", "ad.started preroll", "ad.ended preroll", "ad.break_ended preroll",
                                  "player.item", "player.playing"])
        XCTAssertEqual(h.player.snapshot().position, 0, accuracy: 0.01)
    }

    /// What a linear ad refuses is its command's row, for every row of the table: while a
    /// mid-roll plays, each example request of every command (ProtocolTests' examples) is refused
    /// `ad_playing` exactly when its row's `duringLinearAd` says so — `remove` of the entry that
    /// plays, not of another — and nothing is refused for it once the break is over. `speed`
    /// (the socket, the page, the bridge and MPRIS's `Rate` all reach `perform`) leaves the
    /// rate as it was, and MPRIS reads 1 while the ad plays.
    func testWhatALinearAdRefusesIsItsRowsColumnForEveryRow() throws {
        XCTAssertEqual(Set(Commands.all.filter { if case .refused = $0.duringLinearAd { true } else { false } }.map(\.name)),
                       ["jump", "next", "open", "previous", "seek", "speed"])
        let h = try harness(#"{"version": 1, "midrolls": [{"id": "mid", "video": "mid.mp4", "at": 3}]}"#)
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/ep.mp4"), QueueEntry(path: "/lib/ep2.mp4")]) }
        h.wait(for: .playerPlaying)
        _ = try h.onLoop { try h.controller.perform(.speed(2)) }
        h.advance(3)
        let started = h.wait(for: .adStarted) { $0.fields["kind"] == "midroll" }
        func refusal(_ request: Request) -> ErrorCode? {
            h.onLoop { () -> ErrorCode? in
                do {
                    try h.controller.admit(request)
                    return nil
                } catch let error as ControlError {
                    return error.code
                } catch {
                    return nil
                }
            }
        }
        for (name, requests) in ProtocolTests.examples {
            for request in requests + (name == "remove" ? [.remove(index: 1)] : []) {
                let row = try XCTUnwrap(Commands.row(of: request))
                let refused: Bool = switch row.duringLinearAd {
                case .allowed: false
                case .refused: true
                case .refusedForPlayingEntry: request.entryIndex == 0
                }
                XCTAssertEqual(refusal(request), refused ? .adPlaying : nil, "\(request) during a mid-roll")
            }
        }
        XCTAssertEqual(h.onLoop { self.refusal { try h.controller.perform(.speed(100)) } }, .adPlaying)
        XCTAssertEqual(h.onLoop { h.controller.desktopState().rate }, 1, "MPRIS's Rate reads 1 while a linear ad plays")
        let id = try instance(started)
        h.onLoop { h.surface.reporter(id)?.finished() }
        h.wait(for: .adBreakEnded)
        for requests in ProtocolTests.examples.values {
            for request in requests { XCTAssertNil(refusal(request), "\(request) after the break") }
        }
        XCTAssertEqual(h.onLoop { h.controller.desktopState().rate }, 2, "the content's speed is as it was before the break")
    }

    /// During a mid-roll `status` names the mid-roll as the ad on screen, not the overlay it
    /// took down; once the break is over, the overlay again (issue 34, 17).
    func testDuringAMidrollTheStatusNamesItNotTheSuspendedOverlay() throws {
        let h = try harness(#"""
            {"version": 1, "overlays": [{"id": "ov", "text": "Hello", "slots": [{"start": 1, "duration": 6}]}],
             "midrolls": [{"id": "mid", "video": "mid.mp4", "at": 3}]}
            """#)
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/ep.mp4")]) }
        h.wait(for: .playerPlaying)
        // The overlay is loaded on the ads' threads: before virtual time crosses its slot, or the
        // playhead lands past the slot's start and the slot is withdrawn (R12) — a race under load.
        XCTAssertTrue(waitUntil { h.ads.contains { if case .loaded(let info, _) = $0 { info.kind == .overlay } else { false } } })
        h.advance(1.5)
        h.wait(for: .adStarted) { $0.fields["kind"] == "overlay" }
        XCTAssertEqual(h.onLoop { h.controller.status() }["ad"]?["kind"], "overlay")
        XCTAssertTrue(waitUntil { h.ads.contains { if case .loaded(let info, _) = $0 { info.kind == .midroll } else { false } } })
        h.advance(1.5)
        let started = h.wait(for: .adStarted) { $0.fields["kind"] == "midroll" }
        for _ in 0..<12 {
            XCTAssertEqual(h.onLoop { h.controller.status() }["ad"]?["kind"], "midroll")
            h.advance(0.1)
        }
        let id = try instance(started)
        h.onLoop { h.surface.reporter(id)?.finished() }
        h.wait(for: .adBreakEnded)
        h.onLoop {}
        XCTAssertEqual(h.onLoop { h.controller.status() }["ad"]?["kind"], "overlay", "the overlay is back")
    }

    /// A percentage break is placed by the first length the player knows: a length refined
    /// after it played (VBR, TS) does not move it ahead to play again (issue 34, 17).
    func testAPlayedPercentageBreakDoesNotPlayAgainWhenTheLengthIsRefined() throws {
        let h = try harness(#"{"version": 1, "midrolls": [{"id": "half", "video": "mid.mp4", "at": "50%"}]}"#)
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/ep.mp4")]) }
        h.wait(for: .playerPlaying)
        h.advance(1)
        h.onLoop {}
        XCTAssertTrue(waitUntil { h.ads.contains { if case .loaded(let info, _) = $0 { info.kind == .midroll } else { false } } })
        h.advance(4.5)
        let started = h.wait(for: .adStarted) { $0.fields["kind"] == "midroll" }
        let id = try instance(started)
        h.onLoop { h.surface.reporter(id)?.finished() }
        h.wait(for: .adBreakEnded)
        h.player.refineDuration(16)   // 50 % would now be 8 s
        for _ in 0..<40 {
            h.advance(0.25)
            _ = waitUntil(timeout: 2) {
                h.onLoop {}
                let asked = h.events.filter { $0.name == .adRequested && $0.fields["kind"] == "midroll" }.count
                return asked == h.events.filter { [.adLoaded, .adNoFill, .adError].contains($0.name) && $0.fields["kind"] == "midroll" }.count
            }
        }
        XCTAssertEqual(h.events.filter { $0.name == .adStarted && $0.fields["kind"] == "midroll" }.count, 1, "played once: \(names(h))")
    }

    /// Breaks a frame apart (issue 34, 14): the first's resume lands on the next frame, past
    /// the second — which plays at the landing, as a snapback does — and every later break
    /// still plays, none waits for ever.
    func testABreakTheResumeLandsPastPlaysAndLaterBreaksStillDo() throws {
        let h = try harness(#"""
            {"version": 1, "midrolls": [{"id": "m1", "video": "mid.mp4", "at": 1.02}, {"id": "m2", "video": "mid.mp4", "at": 1.03},
                                        {"id": "m3", "video": "mid.mp4", "at": 2.02}, {"id": "m4", "video": "mid.mp4", "at": 4.02}]}
            """#)
        h.player.setBreakResumeLanding(0.04)   // mpv: the next frames
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/ep.mp4")]) }
        h.wait(for: .playerPlaying)
        var played: [String] = []
        for expected in 1...4 {
            var found: ControlEvent?
            for _ in 0..<80 where found == nil {
                // Every break's ad asked for is in (loaded off the loop, in real time) before
                // virtual time moves on.
                _ = waitUntil(timeout: 10) {
                    h.onLoop {}
                    let asked = h.events.filter { $0.name == .adRequested && $0.fields["kind"] == "midroll" }.count
                    let answered = h.events.filter { [.adLoaded, .adNoFill, .adError].contains($0.name) && $0.fields["kind"] == "midroll" }.count
                    return asked == answered
                }
                h.advance(0.05)
                h.onLoop {}
                found = h.events.first { $0.name == .adStarted && $0.fields["kind"] == "midroll" && !played.contains($0.fields["instance"]?.string ?? "") }
            }
            guard let started = found else {
                return XCTFail("break \(expected) never played: \(h.events.map { "\($0.name.rawValue) \($0.fields["kind"]?.string ?? "") \($0.fields["position"].map { "\($0)" } ?? "") \($0.fields["reason"]?.string ?? "")" })")
            }
            played.append(started.fields["instance"]?.string ?? "")
            let id = try instance(started)
            h.onLoop { h.surface.reporter(id)?.finished() }
            h.onLoop {}
        }
        XCTAssertEqual(played.count, 4, "every break played")
    }

    /// Crossing the mid-roll's time holds the content there — no `player.paused`, no pause ad
    /// for the viewer's pause during it, seek and next refused — and the same episode resumes at
    /// that time; the overlay slot after it is still the episode's.
    func testAMidrollHoldsTheContentAtItsTimeAndResumesThere() throws {
        let h = try harness(#"""
            {"version": 1,
             "pause_ads": [{"id": "pa", "text": "Paused"}],
             "overlays": [{"id": "ov", "text": "Hello", "slots": [{"start": 5, "duration": 2}]}],
             "midrolls": [{"id": "mid", "video": "mid.mp4", "at": 3}]}
            """#)
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/ep.mp4")]) }
        h.wait(for: .playerPlaying)
        let item = h.player.snapshot().item
        h.advance(2.5)
        h.onLoop {}
        XCTAssertTrue(waitUntil { h.ads.contains { if case .loaded(let info, _) = $0 { info.kind == .midroll } else { false } } },
                      "asked for ahead of its time")
        h.advance(0.5)
        let started = h.wait(for: .adStarted) { $0.fields["kind"] == "midroll" }
        XCTAssertTrue(h.player.isHeld)
        XCTAssertEqual(h.player.snapshot().position, 3, accuracy: 1e-6)
        XCTAssertEqual(h.player.snapshot().item, item)
        XCTAssertEqual(h.onLoop { refusal { try h.controller.perform(.seek(.to(8))) } }, .adPlaying)
        XCTAssertEqual(h.onLoop { refusal { try h.controller.perform(.next) } }, .adPlaying)
        _ = try h.onLoop { try h.controller.pause() }
        h.advance(2)
        h.onLoop {}
        XCTAssertFalse(h.events.contains { $0.name == .adRequested && $0.fields["kind"] == "pause" }, "no pause ad over a linear ad")
        XCTAssertFalse(h.eventNames.contains(.playerPaused), "the break is no pause")

        let id = try instance(started)
        h.onLoop { h.surface.reporter(id)?.progress(1, of: 5) }
        h.onLoop { h.surface.reporter(id)?.finished() }
        h.wait(for: .adBreakEnded)
        XCTAssertFalse(h.player.isHeld)
        XCTAssertEqual(h.player.snapshot().item, item, "the same item")
        XCTAssertEqual(h.player.snapshot().position, 3, accuracy: 1e-6)
        XCTAssertEqual(h.events.first { $0.name == .adBreakStarted }?.fields["position"]?.number ?? 0, 3, accuracy: 1e-6)
        h.advance(2)
        h.wait(for: .adStarted) { $0.fields["kind"] == "overlay" }
        XCTAssertEqual(h.events.filter { $0.name == .adStarted && $0.fields["kind"] == "midroll" }.count, 1)
        XCTAssertEqual(h.offLoop.take(), [])
    }

    /// A seek past two unplayed breaks plays the last of them at the landing, then lands there;
    /// a seek back over them plays neither again.
    func testASeekPastUnplayedBreaksPlaysTheLastOfThemAtTheLanding() throws {
        let h = try harness(#"""
            {"version": 1, "midrolls": [{"id": "mid", "video": "mid.mp4", "at": 3}, {"id": "mid6", "video": "mid6.mp4", "at": 6}]}
            """#)
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/ep.mp4")]) }
        h.wait(for: .playerPlaying)
        h.advance(1)
        h.onLoop {}
        _ = waitUntil { !h.events.filter { $0.name == .adLoaded }.isEmpty }   // the first break's ad, asked for ahead
        _ = try h.onLoop { try h.controller.seek(.to(8)) }
        let started = h.wait(for: .adStarted) { $0.fields["kind"] == "midroll" }
        XCTAssertEqual(started?.fields["ad_id"]?.string, "mid6", "the last break passed")
        XCTAssertEqual(h.player.snapshot().position, 8, accuracy: 1e-6, "held at the landing")
        let id = try instance(started)
        h.onLoop { h.surface.reporter(id)?.progress(1, of: 5) }
        h.onLoop { h.surface.reporter(id)?.finished() }
        h.wait(for: .adBreakEnded)
        XCTAssertEqual(h.player.snapshot().position, 8, accuracy: 1e-6, "the viewer lands where they asked")
        _ = try h.onLoop { try h.controller.seek(.to(1)) }
        h.advance(7)
        h.onLoop {}
        XCTAssertEqual(h.events.filter { $0.name == .adStarted }.count, 1, "no break played twice: \(names(h))")
        XCTAssertEqual(h.events.filter { $0.name == .adBreakStarted }.count, 1)
    }

    /// `skip`: refused before the ad's skip offset, then ends it `skipped` and the content resumes.
    func testSkipEndsASkippableMidrollPastItsOffset() throws {
        let h = try harness(#"{"version": 1, "midrolls": [{"id": "mid", "video": "mid.mp4", "at": 2, "skip_offset": 5}]}"#)
        playUntilTheBreaksAdIsIn(h)
        h.advance(1)
        let started = h.wait(for: .adStarted) { $0.fields["kind"] == "midroll" }
        let id = try instance(started)
        h.onLoop { h.surface.reporter(id)?.progress(4, of: 30) }
        XCTAssertEqual(h.onLoop { refusal { try h.controller.skipAd() } }, .notSkippable)
        h.onLoop { h.surface.reporter(id)?.progress(5.5, of: 30) }
        _ = try h.onLoop { try h.controller.skipAd() }
        let ended = h.wait(for: .adEnded) { $0.fields["kind"] == "midroll" }
        XCTAssertEqual(ended?.fields["reason"]?.string, "skipped")
        h.wait(for: .adBreakEnded)
        XCTAssertTrue(h.player.snapshot().playing)
        XCTAssertEqual(h.player.snapshot().position, 2, accuracy: 1e-6)
    }

    /// A mid-roll whose video cannot be played fails at once: the break ends and the content
    /// plays on from the break's time — it does not wait for the break's own timeout (R16).
    func testAMidrollThatCannotPlayEndsItsBreakAtOnce() throws {
        let h = try harness(#"{"version": 1, "midrolls": [{"id": "mid", "video": "mid.mp4", "at": 2}]}"#)
        h.surface.refuse(creativeID: "mid")
        playUntilTheBreaksAdIsIn(h)
        h.advance(1)
        let ended = h.wait(for: .adEnded) { $0.fields["kind"] == "midroll" }
        XCTAssertEqual(ended?.fields["reason"]?.string, "failed")
        h.wait(for: .adBreakEnded)
        XCTAssertFalse(h.player.isHeld)
        XCTAssertTrue(h.player.snapshot().playing)
        XCTAssertEqual(h.player.snapshot().position, 2, accuracy: 1e-6)
        h.advance(20)
        h.onLoop {}
        XCTAssertEqual(h.events.filter { $0.name == .adBreakStarted }.count, 1, "not played again")
    }

    /// A break's pod (the source says more follow): its ads in sequence, the content held
    /// between them, one break.
    func testAMidrollPodPlaysInOrderWithinOneBreak() throws {
        let source = MidrollPodSource(at: 2, pod: 3)
        let h = try ControllerHarness(source: source, pauseAdDelay: 1)
        h.player.setMedia("/lib/ep.mp4", duration: 10)
        h.start()
        playUntilTheBreaksAdIsIn(h)
        h.advance(1)
        for position in 0..<3 {
            let started = h.wait(for: .adStarted) { $0.fields["ad_id"]?.string == "mid-\(position)" }
            XCTAssertTrue(h.player.isHeld)
            let id = try instance(started)
            h.onLoop { h.surface.reporter(id)?.progress(0.5, of: 5) }
            h.onLoop { h.surface.reporter(id)?.finished() }
        }
        h.wait(for: .adBreakEnded)
        XCTAssertEqual(source.podPositions.withLock { $0 }, [0, 1, 2])
        XCTAssertEqual(h.events.filter { $0.name == .adBreakStarted }.count, 1)
        XCTAssertEqual(h.player.snapshot().position, 2, accuracy: 1e-6)
        XCTAssertTrue(h.player.snapshot().playing)
    }

    /// Through the controller: the episode's length comes from the player, and the break at
    /// 50 % of a 10 s episode holds it at 5 s.
    func testAPercentageMidrollPlaysAtItsShareOfTheEpisodesLength() throws {
        let h = try harness(#"{"version": 1, "midrolls": [{"id": "mid", "video": "mid.mp4", "at": "50%"}]}"#)
        playUntilTheBreaksAdIsIn(h)
        h.advance(4)
        let started = h.wait(for: .adBreakStarted)
        XCTAssertEqual(started?.fields["position"]?.number ?? 0, 5, accuracy: 1e-6)
        XCTAssertEqual(h.player.snapshot().position, 5, accuracy: 1e-6)
    }

    /// A mid-roll at a percentage of the episode is placed once its length is known.
    func testAPercentageMidrollIsAtItsShareOfTheEpisode() throws {
        let source = try catalog(#"{"version": 1, "midrolls": [{"id": "mid", "video": "mid.mp4", "at": "25%"}]}"#)
        XCTAssertEqual(source.midrollTimes(for: ContentInfo(id: "e", duration: 120)), [30])
        XCTAssertEqual(source.midrollTimes(for: ContentInfo(id: "e")), [], "not before the length is known")
        XCTAssertThrowsError(try catalog(#"{"version": 1, "midrolls": [{"id": "mid", "video": "mid.mp4"}]}"#)) { error in
            XCTAssertTrue("\(error)".contains("midrolls[0].at"), "\(error)")
        }
        XCTAssertThrowsError(try catalog(#"{"version": 1, "midrolls": [{"id": "mid", "video": "mid.mp4", "at": "150%"}]}"#))
        XCTAssertThrowsError(try catalog(#"{"version": 1, "postrolls": [{"id": "p", "video": "mid.mp4", "at": 3}]}"#))
        XCTAssertThrowsError(try catalog(#"{"version": 1, "overlays": [{"id": "o", "text": "x", "slots": [{"start": 1, "duration": 1}], "skip_offset": 3}]}"#))
    }
}

/// Mid-roll breaks at one time, each a pod of `pod` ads.
private final class MidrollPodSource: AdSource, @unchecked Sendable {
    // @unchecked: the record behind its lock.
    let at: Double
    let pod: Int
    let podPositions = Locked<[Int]>([])

    init(at: Double, pod: Int) {
        self.at = at
        self.pod = pod
    }

    func ad(for request: AdRequest) async throws -> AdCreative? {
        guard request.kind == .midroll else { return nil }
        podPositions.withLock { $0.append(request.podPosition) }
        var creative = AdCreative(id: "mid-\(request.podPosition)", kind: .midroll, content: .video(location: "/ads/mid.mp4"))
        creative.slotStart = at
        creative.podRemaining = pod - 1 - request.podPosition
        return creative
    }

    func mayFill(_ kind: AdKind, content: ContentInfo, at position: Double) -> Bool { kind == .midroll && position <= at + 0.001 }
    func midrollTimes(for content: ContentInfo) -> [Double] { [at] }
}
