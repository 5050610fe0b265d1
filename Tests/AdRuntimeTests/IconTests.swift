import AdRuntime
import AdTestSupport
import XCTest

/// R27 on virtual time: a linear ad's VAST icons over its video, at their time, each view told once.
final class IconTests: XCTestCase {
    func testR27EachIconIsUpFromItsOffsetForItsDurationAndItsViewIsToldOnce() throws {
        var creative = AdCreative(id: "pr", kind: .postroll, content: .video(location: "/ads/pr.mp4"))
        creative.icons = [AdIcon(program: "AdChoices", image: "/ads/ac.png", offset: 0, duration: 5),
                          AdIcon(program: "Sponsor", image: "/ads/sp.png", offset: 2)]
        let h = Harness(source: TestAdSource([.postroll: .creative(creative)]))
        h.start(duration: 10)
        let postroll = try h.ad(.postroll)
        h.loop.advance(by: 10)
        try h.show(postroll)
        let reporter = try XCTUnwrap(h.surface.reporter(postroll.id))
        func iconCalls() -> [RecordingAdSurface.Call] {
            h.loop.advance(by: 0)   // the reports' turns ran (another thread may be the loop's runner)
            return h.surface.calls.filter { if case .icon = $0 { true } else { false } }
        }
        func views() -> [Int] { h.settled.all.compactMap { if case .iconShown(let info, let index) = $0, info.id == postroll.id { index } else { nil } } }
        reporter.progress(0.04, of: 15)
        XCTAssertEqual(iconCalls(), [.icon(postroll.id, 0, true)], "AdChoices from the start")
        XCTAssertEqual(views(), [0])
        reporter.progress(2.5, of: 15)
        XCTAssertEqual(iconCalls().last, .icon(postroll.id, 1, true))
        reporter.progress(5.5, of: 15)
        XCTAssertEqual(iconCalls().last, .icon(postroll.id, 0, false), "its duration over")
        reporter.progress(1, of: 15)   // a seek back in the ad's video: up again, not viewed again
        XCTAssertEqual(iconCalls().suffix(2), [.icon(postroll.id, 0, true), .icon(postroll.id, 1, false)])
        for second in stride(from: 2.0, through: 15, by: 1) { reporter.progress(second, of: 15) }
        reporter.finished()
        XCTAssertEqual(h.ends(postroll), [.completed])
        XCTAssertEqual(views(), [0, 1], "each view told once")
    }
}
