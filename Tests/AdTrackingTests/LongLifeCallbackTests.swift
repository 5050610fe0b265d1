import AdTestSupport
@testable import AdTracking
import Bounds
import Foundation
import XCTest

/// A callback called for every beacon costs the same on a box's thousandth day as on its first
/// (issue 45): a closure kept as the whole value of `Locked<(F)?>` grew two reabstraction thunks
/// at every `withLock { $0 }` — the outbox's wake-up of the courier, called at every enqueue and
/// every play, was 100,000 thunks deep after a busy month and overflowed the stack (found by a
/// simulated day: the simulation's listeners had the same shape).
final class LongLifeCallbackTests: XCTestCase {
    /// The outbox's wake-up, a million times: each call one call deep (the old shape died near
    /// 130,000 on the main thread's 8 MiB stack, far sooner on a worker's).
    func testTheCourierWakeUpIsCalledAMillionTimesAtTheSameDepth() throws {
        let outbox = try BeaconOutbox(path: ":memory:")
        let calls = Locked(0)
        outbox.onEnqueued { calls.withLock { $0 += 1 } }
        for _ in 0..<1_000_000 { outbox.enqueued(()) }
        XCTAssertEqual(calls.withLock { $0 }, 1_000_000)
        // From a worker thread (a 512 KiB stack), as the courier and the ad tasks call it.
        let done = Handover<Int>()
        let thread = Thread {
            for _ in 0..<200_000 { outbox.enqueued(()) }
            done.fulfil(calls.withLock { $0 })
        }
        thread.stackSize = 512 << 10
        thread.start()
        XCTAssertEqual(done.wait(timeout: 600), 1_200_000)
    }

    /// No other holder keeps a bare closure as its value: the sources are read for the shape.
    func testNoLockHoldsABareClosure() throws {
        let sources = repositoryRoot.appendingPathComponent("Sources")
        let files = FileManager.default.enumerator(atPath: sources.path)?.compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") } ?? []
        XCTAssertGreaterThan(files.count, 50)
        let shape = try NSRegularExpression(pattern: #"Locked<\(*(@Sendable\s*)?\([^)]*\)\s*(async\s*)?(throws\s*)?->"#)
        var found: [String] = []
        for file in files {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            for (index, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
                let line = String(line)
                if shape.firstMatch(in: line, range: NSRange(line.startIndex..., in: line)) != nil { found.append("\(file):\(index + 1): \(line)") }
            }
        }
        XCTAssertEqual(found, [], "a closure behind Locked: use Hook (Bounds/Locked.swift)")
    }
}
