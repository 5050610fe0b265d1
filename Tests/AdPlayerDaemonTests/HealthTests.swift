@testable import AdPlayerDaemon
import AdRuntime
import AdSources
import AdTestSupport
import AdTracking
import ControlProtocol
import Foundation
import XCTest

/// The health verdict on a virtual player: each check's ok, degraded and failing, and the
/// worst of them as the verdict.
final class HealthTests: XCTestCase {
    private func monitor(_ harness: ControllerHarness, loop: (any PlayerLoop)? = nil, folders: [(name: String, path: String)] = [],
                         problems: [String] = [], outbox: BeaconOutbox? = nil) -> HealthMonitor {
        HealthMonitor(HealthMonitor.Sources(loop: loop ?? harness.loop, controller: harness.controller, metrics: harness.metrics, outbox: outbox,
                                            folders: folders, configurationProblems: { problems }, clockSynchronized: { false }),
                      loopTimeout: 0.2)
    }

    private func check(_ verdict: (status: HealthMonitor.Status, checks: [HealthMonitor.Check]), _ name: String) throws -> HealthMonitor.Check {
        try XCTUnwrap(verdict.checks.first { $0.name == name }, "\(verdict.checks)")
    }

    func testIdlePlayingAndPausedAreAllHealthy() throws {
        let harness = try ControllerHarness(source: nil)
        harness.start()
        let folder = FileManager.default.temporaryDirectory.path
        var verdict = monitor(harness, folders: [("state", folder)]).verdict()
        XCTAssertEqual(verdict.status, .ok, "\(verdict.checks)")
        XCTAssertTrue(try check(verdict, "playback").reason.hasPrefix("idle"))
        XCTAssertEqual(try check(verdict, "ads").reason, "no ad source is configured")
        XCTAssertEqual(try check(verdict, "storage:state").status, .ok)
        XCTAssertTrue(try check(verdict, "clock").reason.contains("no evidence"), "unsynchronised without evidence is fine (issue 23)")

        _ = try harness.onLoop { try harness.controller.open(QueueEntry(path: "/media/a.mp4"), start: nil) }
        harness.advance(1)
        verdict = monitor(harness).verdict()
        XCTAssertEqual(verdict.status, .ok)
        let playing = try check(verdict, "playback").reason
        XCTAssertTrue(playing.hasPrefix("playing"), playing)
        _ = try harness.onLoop { try harness.controller.pause() }
        verdict = monitor(harness).verdict()
        XCTAssertEqual(verdict.status, .ok, "deliberately paused is healthy")
        XCTAssertTrue(try check(verdict, "playback").reason.hasPrefix("paused"))
    }

    func testAnAdPipelineThatMostlyFailsIsDegradedAndNamesTheLastError() throws {
        let harness = try ControllerHarness(source: TestAdSource())
        harness.start()
        let health = monitor(harness)
        health.sample()   // the daemon's start: the window's first sample
        harness.metrics.increment("adplayerd_ads_requested_total", ["kind": "overlay"], by: 4)
        harness.metrics.count(.error(kind: .overlay, creativeID: nil, error: .loadFailed("the server refused the connection", vastCode: 301)))
        harness.metrics.increment("adplayerd_ad_errors_total", ["kind": "overlay", "code": "load_failed", "vast_error": "301"], by: 1)
        var verdict = health.verdict()
        var ads = try check(verdict, "ads")
        XCTAssertEqual(ads.status, .degraded, ads.reason)
        XCTAssertTrue(ads.reason.contains("VAST 301") && ads.reason.contains("2 errors"), ads.reason)
        XCTAssertEqual(verdict.status, .degraded)
        // Errors the rules make (an overlay asked for while paused) are not the pipeline's.
        let calm = try ControllerHarness(source: TestAdSource())
        calm.start()
        let calmHealth = monitor(calm)
        calmHealth.sample()
        calm.metrics.increment("adplayerd_ads_requested_total", ["kind": "overlay"], by: 4)
        calm.metrics.increment("adplayerd_ad_errors_total", ["kind": "overlay", "code": "not_playing", "vast_error": ""], by: 4)
        verdict = calmHealth.verdict()
        ads = try check(verdict, "ads")
        XCTAssertEqual(ads.status, .ok, ads.reason)
    }

    func testAFolderThatCannotBeWrittenAndALoopThatDoesNotAnswerAreFailing() throws {
        let harness = try ControllerHarness(source: nil)
        harness.start()
        var verdict = monitor(harness, folders: [("state", "/proc/adplayerd-health-test/state")]).verdict()
        let storage = try check(verdict, "storage:state")
        XCTAssertEqual(storage.status, .failing, storage.reason)
        XCTAssertTrue(storage.reason.contains("cannot be written"), storage.reason)
        XCTAssertEqual(verdict.status, .failing)

        verdict = monitor(harness, loop: StalledLoop()).verdict()
        let playback = try check(verdict, "playback")
        XCTAssertEqual(playback.status, .failing)
        XCTAssertTrue(playback.reason.contains("did not answer"), playback.reason)

        verdict = monitor(harness, problems: ["library: /srv/media does not exist"]).verdict()
        XCTAssertEqual(try check(verdict, "configuration").status, .degraded)
        XCTAssertEqual(verdict.status, .degraded)
    }

    /// The dropped-frame counts (per item in mpv) become totals in the metrics.
    func testDroppedFramesBecomeTotals() throws {
        let harness = try ControllerHarness(source: nil)
        harness.start()
        let health = monitor(harness)
        health.sample()
        health.sample()
        let dropped = harness.metrics.samples().filter { $0.name == "adplayerd_video_frames_dropped_total" }
        XCTAssertEqual(Set(dropped.map { $0.labels["stage"] ?? "" }), ["decoder", "output"], "\(dropped)")
        XCTAssertEqual(dropped.map(\.value).reduce(0, +), 0)
    }
}

/// A loop that takes work and never runs it (a stalled player).
private final class StalledLoop: PlayerLoop, @unchecked Sendable {
    var inLoop: Bool { false }
    func execute(_ work: @escaping @Sendable () -> Void) -> Bool { true }
    func now() -> UInt64 { 0 }
    func schedule(after seconds: Double, _ action: @escaping () -> Void) -> LoopTimer { fatalError("not on this loop") }
    func reportOffLoop(_ function: String, file: StaticString, line: UInt) {}
}
