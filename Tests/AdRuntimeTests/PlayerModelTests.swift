import AdRuntime
import Foundation
import XCTest

/// Records changes on the loop that delivers them.
final class Changes: PlayerObserver {
    let list = Locked<[PlayerEvent]>([])
    let onChange: (@Sendable (any TrackablePlayer, PlayerEvent) -> Void)?

    init(onChange: (@Sendable (any TrackablePlayer, PlayerEvent) -> Void)? = nil) { self.onChange = onChange }

    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) {
        list.withLock { $0.append(event) }
        onChange?(player, event)
    }

    var changes: [PlayerChange] { list.withLock { $0.map(\.change) } }
    var events: [PlayerEvent] { list.withLock { $0 } }
}

final class VirtualLoopTests: XCTestCase {
    /// The timer queue: earliest first, ties in scheduling order, cancelled timers never run,
    /// and a loop that schedules and cancels long timers holds at most about twice the live
    /// ones (they are swept, not kept until their deadline).
    func testTheTimerQueueOrdersAndSweepsCancelledTimers() {
        let loop = VirtualLoop()
        var queue = TimerQueue()
        var ran: [Int] = []
        let deadlines: [UInt64] = [50, 10, 30, 10, 40, 20, 10]
        var timers: [LoopTimer] = []
        // Not run on the loop (the queue is a value; cancel is what checks the loop).
        for (index, deadline) in deadlines.enumerated() { timers.append(queue.add(deadline: deadline, on: loop) { ran.append(index) }) }
        try? loop.sync { timers[4].cancel() }
        while let (_, action) = queue.popDue(100) { action() }
        XCTAssertEqual(ran, [1, 3, 6, 5, 2, 0], "by deadline, ties in order, the cancelled one never")
        var live: [LoopTimer] = []
        for round in 0..<100_000 {
            let timer = queue.add(deadline: 1_000_000_000 + UInt64(round), on: loop) {}
            if round % 1000 == 0 { live.append(timer) } else { try? loop.sync { timer.cancel() } }
        }
        XCTAssertEqual(queue.pendingCount, live.count)
        XCTAssertLessThanOrEqual(queue.storedCount, max(64, 2 * live.count) + 1, "cancelled long timers are swept")
    }

    func testTimersRunInDeadlineOrderWithNowAtTheirDeadline() {
        let loop = VirtualLoop()
        let start = loop.now()
        let fired = Locked<[(String, UInt64)]>([])
        try? loop.sync {
            _ = loop.schedule(after: 2) { fired.withLock { $0.append(("b", loop.now() - start)) } }
            _ = loop.schedule(after: 1) {
                fired.withLock { $0.append(("a", loop.now() - start)) }
                _ = loop.schedule(after: 0.5) { fired.withLock { $0.append(("a+", loop.now() - start)) } }
            }
            let cancelled = loop.schedule(after: 1.2) { fired.withLock { $0.append(("x", 0)) } }
            cancelled.cancel()
        }
        loop.advance(by: 1.9)
        XCTAssertEqual(fired.withLock { $0.map(\.0) }, ["a", "a+"])
        loop.advance(by: 0.1)
        XCTAssertEqual(fired.withLock { $0.map(\.0) }, ["a", "a+", "b"])
        XCTAssertEqual(fired.withLock { $0.map(\.1) }, [1_000_000_000, 1_500_000_000, 2_000_000_000])
        XCTAssertEqual(loop.now() - start, 2_000_000_000)
        XCTAssertEqual(loop.pendingTimerCount, 0)
    }

    /// Absurd times never trap (issue: `Double.nanoseconds` trapped at ≥ 1.8e10 s, inf, NaN).
    func testAbsurdTimesAreBoundedNotTraps() {
        let loop = VirtualLoop()
        let fired = Locked(0)
        try? loop.sync {
            for seconds in [Double.infinity, .nan, -1, 1e300, 2e10] {
                _ = loop.schedule(after: seconds) { fired.withLock { $0 += 1 } }
            }
        }
        loop.advance(by: 0)
        XCTAssertEqual(fired.withLock { $0 }, 2, "NaN and -1 are due now; the rest at the 100-year bound")
        XCTAssertEqual(LoopTime.nanoseconds(.infinity), LoopTime.nanoseconds(LoopTime.maxSeconds))
        XCTAssertEqual(LoopTime.nanoseconds(.nan), 0)
    }

    /// Work handed over by a thread while another runs the loop waits its turn, in order, and
    /// `inLoop` is true only on the thread running it.
    func testWorkFromManyThreadsRunsOneAtATimeInOrderPerThread() {
        let loop = VirtualLoop()
        let log = Locked<[Int: [Int]]>([:])
        let running = Locked(0)
        let overlaps = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 4) { lane in
            for i in 0..<500 {
                try? loop.sync {
                    XCTAssertTrue(loop.inLoop)
                    if running.withLock({ $0 += 1; return $0 }) > 1 { overlaps.withLock { $0 += 1 } }
                    log.withLock { $0[lane, default: []].append(i) }
                    running.withLock { $0 -= 1 }
                }
            }
        }
        XCTAssertFalse(loop.inLoop)
        XCTAssertEqual(overlaps.withLock { $0 }, 0, "two threads ran the loop at once")
        for lane in 0..<4 { XCTAssertEqual(log.withLock { $0[lane] }, Array(0..<500)) }
    }
}

final class PlayerChangeFeedTests: XCTestCase {
    /// Observers are held weakly (R9's other half: a player never keeps its observers alive).
    func testObserversAreHeldWeakly() {
        let player = VirtualPlayer(loop: VirtualLoop())
        var changes: Changes? = Changes()
        let observation = player.addObserver(changes!)
        weak let weakChanges = changes
        changes = nil
        XCTAssertNil(weakChanges)
        XCTAssertEqual(player.observerCount, 0)
        player.load("ep", duration: 1)   // delivers to nobody, does not crash
        observation.cancel()
    }

    func testReleasingTheObservationEndsIt() {
        let player = VirtualPlayer(loop: VirtualLoop())
        let changes = Changes()
        var observation: PlayerObservation? = player.addObserver(changes)
        player.load("a", duration: 1)
        observation = nil
        _ = observation
        player.load("b", duration: 1)
        XCTAssertEqual(changes.changes.count, 2, "only a's item and playing")
    }

    /// A command issued from inside an observer is delivered after the current change, to
    /// every observer, in order — never nested inside it.
    func testChangesCausedByAnObserverComeAfterTheCurrentOne() {
        let player = VirtualPlayer(loop: VirtualLoop())
        let first = Changes { player, event in
            if event.change.isPlayingChange { (player as? VirtualPlayer)?.pause() }
        }
        let second = Changes()
        let o1 = player.addObserver(first)
        let o2 = player.addObserver(second)
        defer { o1.cancel(); o2.cancel() }
        let item = player.load("ep", duration: 5)
        XCTAssertEqual(first.changes, [.item(item), .playing(rate: 1), .paused])
        XCTAssertEqual(second.changes, first.changes)
    }

    /// Many threads drive one player: every observer sees one total order.
    func testConcurrentProducersYieldOneOrderForAllObservers() {
        let player = VirtualPlayer(loop: VirtualLoop())
        let a = Changes(), b = Changes()
        let o1 = player.addObserver(a), o2 = player.addObserver(b)
        defer { o1.cancel(); o2.cancel() }
        player.load("ep", duration: 1000)
        DispatchQueue.concurrentPerform(iterations: 4) { lane in
            for i in 0..<500 { i % 2 == 0 ? player.pause() : player.play(); if lane == 0 { player.seek(to: Double(i)) } }
        }
        XCTAssertEqual(a.changes, b.changes)
        XCTAssertGreaterThan(a.changes.count, 250)
        // Pauses and plays alternate: the order of delivery is the order of the state.
        let toggles = a.changes.filter { $0 == .paused || $0.isPlayingChange }
        for (x, y) in zip(toggles, toggles.dropFirst()) { XCTAssertNotEqual(x == .paused, y == .paused) }
    }
}

extension PlayerChange {
    var isPlayingChange: Bool { if case .playing = self { true } else { false } }
}
