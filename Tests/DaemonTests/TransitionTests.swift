import AdRuntime
import AdTestSupport
import Foundation
import XCTest

/// No black frame between items (issue 27): under Xvfb with Mesa's software OpenGL
/// (`vo=gpu`), clips of solid colours — a red episode, a blue post-roll, a green episode —
/// and the screen's centre grabbed 60 times a second across every transition. Each frame
/// from the first red to the end is one of the clips' colours: none darker than the colours
/// around it. (Before: the post-roll's end left the window black for about 7 frames, 117 ms,
/// before the next episode's first frame.)
final class TransitionTests: XCTestCase {
    func testEpisodePostrollEpisodeShowNoBlackFrameBetween() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("transitions-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: scratch.appendingPathComponent("catalog"), withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        func clip(_ colour: String, seconds: Int, _ path: String) throws {
            let (status, output) = try runToEnd("/usr/bin/ffmpeg", ["-v", "error", "-y", "-f", "lavfi", "-i", "color=c=\(colour):s=320x240:r=25:d=\(seconds)",
                                                                     "-f", "lavfi", "-i", "anullsrc=r=48000:cl=stereo", "-t", String(seconds),
                                                                     "-c:v", "libx264", "-pix_fmt", "yuv420p", "-c:a", "aac", "-shortest", path])
            XCTAssertEqual(status, 0, output)
        }
        let red = scratch.appendingPathComponent("red.mp4").path, green = scratch.appendingPathComponent("green.mp4").path
        try clip("red", seconds: 2, red)
        try clip("green", seconds: 2, green)
        try clip("blue", seconds: 1, scratch.appendingPathComponent("catalog/postroll.mp4").path)
        try Data(#"{"version": 1, "postrolls": [{"id": "pr-1", "video": "postroll.mp4"}]}"#.utf8)
            .write(to: scratch.appendingPathComponent("catalog/catalog.json"))

        let display = try XDisplay(width: 320, height: 240)
        defer { display.stop() }
        var environment = ["DISPLAY": display.name]
        // Mesa's software driver leaves what LeakSanitizer cannot name at unload (BoxTests).
        if let asan = ProcessInfo.processInfo.environment["ASAN_OPTIONS"] { environment["ASAN_OPTIONS"] = asan + ":detect_leaks=0" }
        let daemon = try DaemonProcess(catalog: scratch.appendingPathComponent("catalog"), library: scratch.path,
                                       extra: ["--vo", "gpu", "--mpv-option", "gpu-sw=yes"], environment: environment)
        let events = try daemon.connect()
        _ = try events.call("subscribe", ["events": ["player.ended", "ad.ended"]])
        let recording = try display.record(x: 156, y: 116, width: 8, height: 8, seconds: 10, into: scratch.appendingPathComponent("grab.rgb").path)
        Thread.sleep(forTimeInterval: 0.5)   // the grabber running before the first frame (not an assertion)
        _ = try daemon.connect().call("queue", ["paths": [red, green]])
        _ = try events.event(named("player.ended"))
        _ = try events.event(named("ad.ended", "kind", "postroll"))
        _ = try events.event(named("player.ended"))
        let frames = try recording.wait()
        XCTAssertEqual(daemon.stop(), 0, daemon.log)

        func name(_ f: (r: Int, g: Int, b: Int)) -> Character {
            if f.r > 150, f.g < 90, f.b < 90 { return "R" }
            if f.g > 90, f.r < 90, f.b < 90 { return "G" }
            if f.b > 150, f.r < 90, f.g < 90 { return "B" }
            return max(f.r, f.g, f.b) < 90 ? "K" : "?"
        }
        let names = String(frames.map(name))
        var runs: [(Character, Int)] = []
        for c in names { if runs.last?.0 == c { runs[runs.count - 1].1 += 1 } else { runs.append((c, 1)) } }
        let summary = runs.map { "\($0.0)×\($0.1)" }.joined(separator: " ")
        let first = try XCTUnwrap(names.firstIndex(of: "R"), "no red frame: \(summary)")
        let last = try XCTUnwrap(names.lastIndex { "RGB".contains($0) })
        let shown = names[first...last]   // (after the last post-roll nothing plays: its frame goes)
        XCTAssertEqual(shown.filter { $0 == "K" }.count, 0, "a black frame between items: \(summary)")
        XCTAssertEqual(shown.filter { $0 == "?" }.count, 0, "a frame of no clip's colour: \(summary)")
        // Every transition seen, in order: red, the post-roll, green, its post-roll.
        let order = runs.map(\.0).filter { $0 != "K" }
        XCTAssertEqual(String(order), "RBGB", summary)
    }
}
