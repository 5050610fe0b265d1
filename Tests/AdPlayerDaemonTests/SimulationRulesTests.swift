@testable import AdPlayerDaemon
import AdRuntime
import ControlProtocol
import AdPlayerSimulation
import AdSchedule
import Foundation
import XCTest

/// The simulation's rules on runs written by hand: each catches what it names, with the evidence,
/// and passes what is right (SimulateTests runs them on real runs).
final class SimulationRulesTests: XCTestCase {
    private let from = 1_796_600_000.0

    /// One thing that happened in a hand-written run, fed to the rule book in the order written.
    private enum Happened {
        case ad(Double, AdEvent)
        case exchange(RecordedExchange)
        case player(Double, PlayerChange, PlayerSnapshot)
        case surface(Double, UInt64, Bool)
        case event(Double, ControlEvent)
        case viewer(Double, Request)
    }

    private func results(_ run: [Happened], _ settings: RuleBook.Settings = RuleBook.Settings(), until: Double? = nil) -> [SimulationRules.Result] {
        let book = RuleBook(settings)
        for happened in run {
            switch happened {
            case .ad(let at, let event): book.adEvent(at, event)
            case .exchange(let exchange): book.exchange(exchange)
            case .player(let at, let change, let snapshot): book.player(at, change, snapshot)
            case .surface(let at, let id, let shown): book.surface(at, id, shown)
            case .event(let at, let event): book.event(at, event)
            case .viewer(let at, let request): book.viewer(at, request, ok: true)
            }
        }
        return book.finish(at: until ?? from + 60)
    }

    private func beacon(_ event: String, _ play: UInt64, at: Double, _ url: String) -> RecordedExchange {
        var exchange = RecordedExchange(kind: .beacon, started: at, url: url)
        exchange.event = event
        exchange.play = String(play, radix: 16)
        return exchange
    }

    private func rule(_ name: String, _ run: [Happened], _ settings: RuleBook.Settings = RuleBook.Settings(), until: Double? = nil) -> SimulationRules.Result {
        results(run, settings, until: until).first { $0.name == name }!
    }

    func testAContentPlayheadThatIsNotWhereTheContentWasFails() {
        let creative = AdCreative(id: "ov", kind: .overlay, content: .text("Hi"), duration: 5,
                                  tracking: ["impression": ["http://ads/imp?cp=[CONTENTPLAYHEAD]&x=1"]])
        let info = AdInfo(id: 0xabc, kind: .overlay, creativeID: "ov", contentID: "ep", contentPosition: 6)
        let events: [Happened] = [.ad(from + 1, .loaded(info, creative)), .ad(from + 2, .started(info))]
        let right = events + [.exchange(beacon("impression", 0xabc, at: from + 2, "http://ads/imp?cp=00%3A00%3A06.000&x=1"))]
        XCTAssertTrue(rule("macros-filled", right).passed, "\(rule("macros-filled", right).failures)")
        let wrong = events + [.exchange(beacon("impression", 0xabc, at: from + 2, "http://ads/imp?cp=00%3A00%3A07.000&x=1"))]
        let result = rule("macros-filled", wrong)
        XCTAssertEqual(result.failures.count, 1)
        XCTAssertTrue(result.failures.first?.message.contains("[CONTENTPLAYHEAD] says 00:00:07.000, the content was at 00:00:06.000") == true,
                      "\(result.failures)")
        let unfilled = events + [.exchange(beacon("impression", 0xabc, at: from + 2, "http://ads/imp?cp=[CONTENTPLAYHEAD]&x=1"))]
        XCTAssertTrue(rule("macros-filled", unfilled).failures.first?.message.contains("left [CONTENTPLAYHEAD] unfilled") == true)
    }

    func testAQuartileBeforeItsPointOrOutOfOrderFails() {
        let creative = AdCreative(id: "mid", kind: .midroll, content: .video(location: "http://ads/v.mp4"), duration: 8,
                                  tracking: ["firstQuartile": ["http://ads/q1"], "midpoint": ["http://ads/q2"], "complete": ["http://ads/done"]])
        let info = AdInfo(id: 7, kind: .midroll, creativeID: "mid", contentID: "ep", contentPosition: 30)
        var ended = info
        ended.onScreenSeconds = 3   // skipped at 3 s of 8: only the first quartile was reached
        let events: [Happened] = [.ad(from, .loaded(info, creative)), .ad(from, .started(info))]
        let end: Happened = .ad(from + 3, .ended(ended, reason: .skipped, latencyMicroseconds: nil))
        let early = events + [.exchange(beacon("firstQuartile", 7, at: from + 2, "http://ads/q1")),
                              .exchange(beacon("midpoint", 7, at: from + 2.5, "http://ads/q2")), end]
        let result = rule("quartiles-in-order", early)
        XCTAssertEqual(result.failures.count, 1, "\(result.failures)")
        XCTAssertTrue(result.failures.first?.message.contains("midpoint sent after 3.000 s played of 8 s") == true, "\(result.failures)")
        let right = events + [.exchange(beacon("firstQuartile", 7, at: from + 2, "http://ads/q1")), end]
        XCTAssertTrue(rule("quartiles-in-order", right).passed, "\(rule("quartiles-in-order", right).failures)")
        let missing = events + [end]
        XCTAssertTrue(rule("quartiles-in-order", missing).failures.first?.message.contains("firstQuartile reached") == true)
    }

    func testAnOverlayLeftUpThroughAPauseFailsUnlessTheOutputIsHidden() {
        let creative = AdCreative(id: "ov", kind: .overlay, content: .text("Hi"), duration: 10)
        let info = AdInfo(id: 9, kind: .overlay, creativeID: "ov", contentID: "ep", contentPosition: 1)
        let item = PlayerItem(entry: 1, path: "/m/ep.mp4")
        let paused = PlayerSnapshot(item: item, position: 4, playing: false, rate: 1)
        let events: [Happened] = [.ad(from, .loaded(info, creative)), .ad(from + 1, .started(info)), .surface(from + 1, 9, true)]
        let late = events + [.player(from + 4, .paused, paused), .surface(from + 6, 9, false)]
        let result = rule("overlays-end-on-pause", late)
        XCTAssertEqual(result.failures.count, 1)
        XCTAssertTrue(result.failures.first?.message.contains("was still on screen when the content paused") == true, "\(result.failures)")
        let onTime = events + [.surface(from + 4, 9, false), .player(from + 4, .paused, paused)]
        XCTAssertTrue(rule("overlays-end-on-pause", onTime).passed)
        let hidden = events + [.event(from + 3, ControlEvent(.playerBackground, ["background": true])), .player(from + 4, .paused, paused),
                               .surface(from + 6, 9, false)]
        XCTAssertTrue(rule("overlays-end-on-pause", hidden).passed, "R13: frozen while hidden")
    }

    /// A run where nothing ever played is not green (issue 46): the screen was dark from the
    /// run's start to its end, named. One lit until a gap names the gap; a person's stop
    /// darkens it for at most the schedule's override.
    func testAScreenDarkWhenItShouldPlayFailsWithEveryGapNamed() {
        var settings = RuleBook.Settings()
        settings.start = from
        let nothing = rule("screen-lit", [], settings, until: from + 3600)
        XCTAssertEqual(nothing.failureCount, 1)
        XCTAssertTrue(nothing.failures.first?.message.contains("(3600 s) while the display was on") == true, "\(nothing.failures)")

        let item = PlayerItem(entry: 1, path: "/m/ep.mp4")
        let playing = PlayerSnapshot(item: item, position: 0, playing: true, rate: 1)
        let empty = PlayerSnapshot(item: nil, position: 0, playing: false, rate: 1)
        let gap: [Happened] = [.player(from + 1, .item(item), playing), .player(from + 100, .item(nil), empty),
                               .player(from + 160, .item(item), playing)]
        let result = rule("screen-lit", gap, settings, until: from + 200)
        XCTAssertEqual(result.failureCount, 1, "\(result.failures)")
        XCTAssertTrue(result.failures.first?.message.contains("(60 s)") == true, "\(result.failures)")

        // The display off (operating hours): dark is right.
        let closed: [Happened] = [.player(from + 1, .item(item), playing), .event(from + 99, ControlEvent(.playerDisplay, ["on": false])),
                                  .player(from + 100, .item(nil), empty), .event(from + 3000, ControlEvent(.playerDisplay, ["on": true])),
                                  .player(from + 3001, .item(item), playing)]
        XCTAssertTrue(rule("screen-lit", closed, settings, until: from + 3100).passed, "\(rule("screen-lit", closed, settings, until: from + 3100).failures)")

        // A person's stop on a scheduled box: dark for its override, not longer.
        settings.scheduled = true
        settings.personDark = 600
        let stopped: [Happened] = [.player(from + 1, .item(item), playing), .viewer(from + 100, .stop), .player(from + 100, .item(nil), empty),
                                   .player(from + 1000, .item(item), playing)]
        let held = rule("screen-lit", stopped, settings, until: from + 1100)
        XCTAssertEqual(held.failureCount, 1, "\(held.failures)")
        XCTAssertTrue(held.failures.first?.message.contains("(300 s)") == true && held.failures.first?.message.contains("a person's stop") == true,
                      "\(held.failures)")
    }

    /// `vmap-breaks` counts each viewing (issue 46): a document asked for a second viewing
    /// whose pre-roll did not play fails, though the first viewing's did.
    func testEveryViewingsVMAPBreaksAreChecked() throws {
        var vmap = RecordedExchange(kind: .request, started: from, url: "http://ads/vmap?v=1")
        vmap.status = 200
        vmap.body = Data("""
            <vmap:VMAP xmlns:vmap="http://www.iab.net/videosuite/vmap" version="1.0">
              <vmap:AdBreak timeOffset="start" breakType="linear" breakId="pre">
                <vmap:AdSource id="s"><vmap:AdTagURI templateType="vast3"><![CDATA[http://ads/vast]]></vmap:AdTagURI></vmap:AdSource>
              </vmap:AdBreak>
            </vmap:VMAP>
            """.utf8)
        var second = vmap
        second.started = from + 30
        second.url = "http://ads/vmap?v=2"
        // Each viewing a pass of one looping file: its item in, played to its end.
        func pass(_ entry: Int64, at: Double) -> [Happened] {
            let item = PlayerItem(entry: entry, path: "/m/ep.mp4")
            return [.player(at + 2, .item(item), PlayerSnapshot(item: item, position: 0, playing: true, rate: 1)),
                    .player(at + 20, .ended(item), PlayerSnapshot(item: item, position: 18, playing: false, rate: 1)),
                    .player(at + 20, .item(nil), PlayerSnapshot(item: nil, position: 0, playing: false, rate: 1))]
        }
        let pre = AdInfo(id: 1, kind: .preroll, creativeID: "p", contentID: "ep", contentPosition: 0)
        let first: [Happened] = [.exchange(vmap), .ad(from + 1, .started(pre))] + pass(1, at: from)
        let result = rule("vmap-breaks", first + [.exchange(second)] + pass(2, at: from + 30))
        XCTAssertEqual(result.failureCount, 1, "\(result.failures)")
        XCTAssertTrue(result.failures.first?.message.contains("http://ads/vmap?v=2") == true, "\(result.failures)")
        let pre2 = AdInfo(id: 2, kind: .preroll, creativeID: "p", contentID: "ep", contentPosition: 0)
        let both = rule("vmap-breaks", first + [.exchange(second), .ad(from + 31, .started(pre2))] + pass(2, at: from + 30))
        XCTAssertTrue(both.passed, "\(both.failures)")
        XCTAssertTrue(rule("vmap-breaks", first).passed, "one viewing, its pre-roll played")

        // A document asked once its item was in (no pre-roll: its overlay asked) is that item's
        // viewing: a boundary cuts the item at 8 s and another resumes at 889 s — the breaks at
        // 180 s were never reached (they were charged to the resumed item before).
        var mid = vmap
        mid.body = Data("""
            <vmap:VMAP xmlns:vmap="http://www.iab.net/videosuite/vmap" version="1.0">
              <vmap:AdBreak timeOffset="00:03:00" breakType="linear" breakId="mid">
                <vmap:AdSource id="s"><vmap:AdTagURI templateType="vast3"><![CDATA[http://ads/vast]]></vmap:AdTagURI></vmap:AdSource>
              </vmap:AdBreak>
            </vmap:VMAP>
            """.utf8)
        let promo = PlayerItem(entry: 5, path: "/m/promo.mp4"), show = PlayerItem(entry: 6, path: "/m/show.mp4")
        let cut: [Happened] = [.player(from, .item(promo), PlayerSnapshot(item: promo, position: 0, playing: true, rate: 1)), .exchange(mid),
                               .player(from + 8, .item(nil), PlayerSnapshot(item: nil, position: 0, playing: false, rate: 1)),
                               .player(from + 8, .item(show), PlayerSnapshot(item: show, position: 889, playing: true, rate: 1))]
        let resumed = rule("vmap-breaks", cut)
        XCTAssertTrue(resumed.passed, "\(resumed.failures)")
        // The resumed item's own viewing (asked once it was in at 889 s): its break at 180 s is
        // behind where it started, never reached; one at 900 s it passed is due.
        var late = mid
        late.body = Data(String(decoding: mid.body, as: UTF8.self).replacingOccurrences(of: "00:03:00", with: "00:15:00").utf8)
        let again = rule("vmap-breaks", cut + [.exchange(mid), .player(from + 30, .paused, PlayerSnapshot(item: show, position: 911, playing: false, rate: 1)),
                                               .player(from + 31, .item(nil), PlayerSnapshot(item: nil, position: 0, playing: false, rate: 1))])
        XCTAssertTrue(again.passed, "\(again.failures)")
        let passed = rule("vmap-breaks", cut + [.exchange(late), .player(from + 30, .paused, PlayerSnapshot(item: show, position: 911, playing: false, rate: 1)),
                                                .player(from + 31, .item(nil), PlayerSnapshot(item: nil, position: 0, playing: false, rate: 1))])
        XCTAssertEqual(passed.failureCount, 1, "the break at 900 s was reached: \(passed.failures)")
        // A board shown 20 s just before a boundary (no pre-roll phase: its document asked once
        // it was in) owes no pre-roll, though it played to its end.
        let board = PlayerItem(entry: 7, path: "/m/board.png")
        let shown = rule("vmap-breaks", [.player(from, .item(board), PlayerSnapshot(item: board, position: 0, playing: true, rate: 1)), .exchange(vmap),
                                         .player(from + 20, .ended(board), PlayerSnapshot(item: board, position: 20, playing: false, rate: 1)),
                                         .player(from + 20, .item(nil), PlayerSnapshot(item: nil, position: 0, playing: false, rate: 1))])
        XCTAssertTrue(shown.passed, "\(shown.failures)")
    }
}
