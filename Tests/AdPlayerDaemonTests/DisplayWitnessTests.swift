import AdPlayerDaemon
import AdRuntime
import AdTestSupport
import AdTracking
import Foundation
import XCTest

/// The witness on virtual time with a scripted output (issue 36): a still's one grab and a
/// video's two, judged off the loop and handed on; an ad gone before its grab, an output that
/// cannot be grabbed, no output at all — each `unverified` with its reason.
final class DisplayWitnessTests: XCTestCase {
    private static func grab(_ width: Int, _ height: Int, _ color: (Int, Int) -> (UInt8, UInt8, UInt8)) -> OutputGrab {
        var pixels: [UInt8] = []
        for y in 0..<height {
            for x in 0..<width {
                let (r, g, b) = color(x, y)
                pixels += [b, g, r, 255]
            }
        }
        return OutputGrab(width: width, height: height, pixels: pixels)!
    }

    func testEachAdsGrabsAreJudgedAndWhatCannotBeSeenIsNotVerified() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("witness-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let loop = VirtualLoop()
        // The screen: grey, the magenta creative at (20, 10) while `adShown`; a video's frames change per grab.
        let creative = Self.grab(8, 4) { _, _ in (255, 0, 255) }
        let state = Locked((adShown: true, frame: 0, grabFails: false, grabs: 0))
        let verdicts = Locked<[UInt64: DisplayEvidence]>([:])
        let output = DisplayWitness.Output(
            ungrabbable: nil,
            grab: { path, done in
                let fails = state.withLock { $0.grabs += 1; return $0.grabFails }
                if fails { return done(.failure(NSError(domain: "vo", code: 1, userInfo: [NSLocalizedDescriptionKey: "x11 has no window grab"]))) }
                FileManager.default.createFile(atPath: path, contents: Data([1]))
                done(.success(()))
            },
            drawn: { id in
                switch id {
                case 1, 2: .image(bitmap: creative, origin: .init(x: 20, y: 10, width: 8, height: 4), part: .init(x: 20, y: 10, width: 8, height: 4),
                                  canvas: (32, 18))
                case 5: .elsewhere("an HTML creative is drawn by the page's browser")
                default: nil
                }
            },
            decode: { path, _ in
                XCTAssertTrue(FileManager.default.fileExists(atPath: path), "read while it exists")
                let (shown, frame) = state.withLock { state in defer { state.frame += 1 }; return (state.adShown, state.frame) }
                return Self.grab(32, 18) { x, y in
                    if shown && (20..<28).contains(x) && (10..<14).contains(y) { return (250, 5, 250) }
                    return (UInt8(60 + frame * 40 % 120), 60, 60)
                }
            })
        let witness = DisplayWitness(loop: loop, output: output, monitor: nil, folder: folder.path, wall: { 1_800_000_000 }) { info, evidence in
            verdicts.withLock { $0[info.id] = evidence }
        }
        defer { witness.close() }
        func start(_ id: UInt64, _ kind: AdKind) throws {
            try loop.sync { witness.observe(.started(AdInfo(id: id, kind: kind, creativeID: "c\(id)", contentID: "e"))) }
        }
        func verdict(_ id: UInt64) -> DisplayEvidence? {
            _ = waitUntil { verdicts.withLock { $0[id] } != nil }
            return verdicts.withLock { $0[id] }
        }

        // An image overlay on screen: one grab, its region matches and stands out.
        try start(1, .overlay)
        loop.advance(by: DisplayWitness.firstGrab + 0.01)
        XCTAssertEqual(verdict(1)?.verdict, .verified)
        XCTAssertEqual(verdict(1)?.checks.map(\.what), ["pixels"])
        XCTAssertEqual(verdict(1)?.checks.first?.at, 1_800_000_000)

        // Gone before its grab (a pause at 0.2 s): judged at its end, before tracking records it.
        try start(2, .overlay)
        loop.advance(by: 0.2)
        try loop.sync { witness.observe(.ended(AdInfo(id: 2, kind: .overlay, creativeID: "c2", contentID: "e"), reason: .paused, latencyMicroseconds: nil)) }
        XCTAssertEqual(verdicts.withLock { $0[2] }?.reason, "the ad left the screen before it could be grabbed", "at once, on the loop")
        loop.advance(by: 1)

        // A video: two grabs, the pictures differ — shown; the same picture twice — frozen.
        try start(3, .postroll)
        loop.advance(by: DisplayWitness.secondGrab + 0.01)
        XCTAssertEqual(verdict(3)?.verdict, .verified, "\(String(describing: verdict(3)))")
        state.withLock { $0.frame = 0 }
        let still = DisplayWitness.Output(ungrabbable: nil, grab: output.grab, drawn: output.drawn, decode: { _, _ in Self.grab(32, 18) { _, _ in (90, 90, 90) } })
        let stuck = DisplayWitness(loop: loop, output: still, monitor: nil, folder: folder.path) { info, evidence in verdicts.withLock { $0[info.id] = evidence } }
        defer { stuck.close() }
        try loop.sync { stuck.observe(.started(AdInfo(id: 4, kind: .postroll, creativeID: "c4", contentID: "e"))) }
        loop.advance(by: DisplayWitness.secondGrab + 0.01)
        XCTAssertEqual(verdict(4)?.verdict, .unverified)
        XCTAssertTrue(verdict(4)?.reason?.contains("frozen") == true, "\(String(describing: verdict(4)?.reason))")

        // Drawn elsewhere (HTML), and an output that cannot be grabbed with the ads.
        try start(5, .overlay)
        XCTAssertEqual(verdicts.withLock { $0[5] }?.reason, "an HTML creative is drawn by the page's browser")
        state.withLock { $0.grabFails = true }
        try start(1, .overlay)
        verdicts.withLock { $0[1] = nil }
        loop.advance(by: DisplayWitness.firstGrab + 0.01)
        XCTAssertTrue(verdict(1)?.reason?.hasPrefix("the output cannot be grabbed with the ads") == true, "\(String(describing: verdict(1)))")
        XCTAssertEqual(verdict(1)?.code, "no_grab")

        // Headless: `no output`, at once, nothing grabbed.
        let grabsBefore = state.withLock { $0.grabs }
        let headless = DisplayWitness(loop: loop, output: DisplayWitness.Output(ungrabbable: "no output", grab: output.grab, drawn: output.drawn, decode: output.decode),
                                      monitor: nil) { info, evidence in verdicts.withLock { $0[info.id] = evidence } }
        try loop.sync { headless.observe(.started(AdInfo(id: 6, kind: .overlay, creativeID: "c6", contentID: "e"))) }
        XCTAssertEqual(verdicts.withLock { $0[6] }?.reason, "no output")
        XCTAssertEqual(verdicts.withLock { $0[6] }?.code, "no_output")
        loop.advance(by: 2)
        XCTAssertEqual(state.withLock { $0.grabs }, grabsBefore)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder.path).flatMap {
            try FileManager.default.contentsOfDirectory(atPath: folder.appendingPathComponent($0).path)
        }, [], "every grab removed once read")
    }
}
