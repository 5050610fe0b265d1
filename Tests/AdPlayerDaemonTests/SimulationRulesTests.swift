@testable import AdPlayerDaemon
import AdRuntime
import ControlProtocol
import Foundation
import XCTest

/// The simulation's rules on runs written by hand: each catches what it names, with the evidence,
/// and passes what is right (SimulateTests runs them on real runs).
final class SimulationRulesTests: XCTestCase {
    private let from = 1_796_600_000.0

    private func outcome(ads: [(at: Double, event: AdEvent)], exchanges: [RecordedExchange] = [],
                         player: [(at: Double, change: PlayerChange, snapshot: PlayerSnapshot)] = [],
                         surface: [(at: Double, id: UInt64, shown: Bool)] = []) -> Simulation.Outcome {
        Simulation.Outcome(timeline: [], exchanges: exchanges, adEvents: ads, playerEvents: player, viewerSteps: [], surface: surface,
                           statePath: "", popDeadline: nil, configuration: Configuration(), from: from, seconds: 60, problems: [])
    }

    private func beacon(_ event: String, _ play: UInt64, at: Double, _ url: String) -> RecordedExchange {
        var exchange = RecordedExchange(kind: .beacon, started: at, url: url)
        exchange.event = event
        exchange.play = String(play, radix: 16)
        return exchange
    }

    private func rule(_ name: String, _ outcome: Simulation.Outcome) -> SimulationRules.Result {
        SimulationRules.check(outcome, caps: [:], sentBeacons: false).first { $0.name == name }!
    }

    func testAContentPlayheadThatIsNotWhereTheContentWasFails() {
        let creative = AdCreative(id: "ov", kind: .overlay, content: .text("Hi"), duration: 5,
                                  tracking: ["impression": ["http://ads/imp?cp=[CONTENTPLAYHEAD]&x=1"]])
        let info = AdInfo(id: 0xabc, kind: .overlay, creativeID: "ov", contentID: "ep", contentPosition: 6)
        let events: [(at: Double, event: AdEvent)] = [(from + 1, .loaded(info, creative)), (from + 2, .started(info))]
        let right = outcome(ads: events, exchanges: [beacon("impression", 0xabc, at: from + 2, "http://ads/imp?cp=00%3A00%3A06.000&x=1")])
        XCTAssertTrue(rule("macros-filled", right).passed, "\(rule("macros-filled", right).failures)")
        let wrong = outcome(ads: events, exchanges: [beacon("impression", 0xabc, at: from + 2, "http://ads/imp?cp=00%3A00%3A07.000&x=1")])
        let result = rule("macros-filled", wrong)
        XCTAssertEqual(result.failures.count, 1)
        XCTAssertTrue(result.failures.first?.message.contains("[CONTENTPLAYHEAD] says 00:00:07.000, the content was at 00:00:06.000") == true,
                      "\(result.failures)")
        let unfilled = outcome(ads: events, exchanges: [beacon("impression", 0xabc, at: from + 2, "http://ads/imp?cp=[CONTENTPLAYHEAD]&x=1")])
        XCTAssertTrue(rule("macros-filled", unfilled).failures.first?.message.contains("left [CONTENTPLAYHEAD] unfilled") == true)
    }

    func testAQuartileBeforeItsPointOrOutOfOrderFails() {
        let creative = AdCreative(id: "mid", kind: .midroll, content: .video(location: "http://ads/v.mp4"), duration: 8,
                                  tracking: ["firstQuartile": ["http://ads/q1"], "midpoint": ["http://ads/q2"], "complete": ["http://ads/done"]])
        let info = AdInfo(id: 7, kind: .midroll, creativeID: "mid", contentID: "ep", contentPosition: 30)
        var ended = info
        ended.onScreenSeconds = 3   // skipped at 3 s of 8: only the first quartile was reached
        let events: [(at: Double, event: AdEvent)] = [(from, .loaded(info, creative)), (from, .started(info)),
                                                      (from + 3, .ended(ended, reason: .skipped, latencyMicroseconds: nil))]
        let early = outcome(ads: events, exchanges: [beacon("firstQuartile", 7, at: from + 2, "http://ads/q1"),
                                                     beacon("midpoint", 7, at: from + 2.5, "http://ads/q2")])
        let result = rule("quartiles-in-order", early)
        XCTAssertEqual(result.failures.count, 1, "\(result.failures)")
        XCTAssertTrue(result.failures.first?.message.contains("midpoint sent after 3.000 s played of 8 s") == true, "\(result.failures)")
        let right = outcome(ads: events, exchanges: [beacon("firstQuartile", 7, at: from + 2, "http://ads/q1")])
        XCTAssertTrue(rule("quartiles-in-order", right).passed, "\(rule("quartiles-in-order", right).failures)")
        let missing = outcome(ads: events)
        XCTAssertTrue(rule("quartiles-in-order", missing).failures.first?.message.contains("firstQuartile reached") == true)
    }

    func testAnOverlayLeftUpThroughAPauseFailsUnlessTheOutputIsHidden() {
        let creative = AdCreative(id: "ov", kind: .overlay, content: .text("Hi"), duration: 10)
        let info = AdInfo(id: 9, kind: .overlay, creativeID: "ov", contentID: "ep", contentPosition: 1)
        let item = PlayerItem(entry: 1, path: "/m/ep.mp4")
        let paused = PlayerSnapshot(item: item, position: 4, playing: false, rate: 1)
        let events: [(at: Double, event: AdEvent)] = [(from, .loaded(info, creative)), (from + 1, .started(info))]
        let late = outcome(ads: events, player: [(from + 4, .paused, paused)], surface: [(from + 1, 9, true), (from + 6, 9, false)])
        let result = rule("overlays-end-on-pause", late)
        XCTAssertEqual(result.failures.count, 1)
        XCTAssertTrue(result.failures.first?.message.contains("was still on screen when the content paused") == true, "\(result.failures)")
        let onTime = outcome(ads: events, player: [(from + 4, .paused, paused)], surface: [(from + 1, 9, true), (from + 4, 9, false)])
        XCTAssertTrue(rule("overlays-end-on-pause", onTime).passed)
        var hidden = late
        hidden.timeline = [Simulation.TimelineEntry(at: from + 3, order: 0, json: ["event": "player.background", "background": true])]
        XCTAssertTrue(rule("overlays-end-on-pause", hidden).passed, "R13: frozen while hidden")
    }
}
