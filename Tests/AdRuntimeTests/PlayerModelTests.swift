import AdRuntime
import Synchronization
import XCTest

/// Records changes on whatever thread delivers them.
final class Changes: PlayerObserver {
    let list = Mutex<[PlayerEvent]>([])
    let onChange: (@Sendable (any TrackablePlayer, PlayerEvent) -> Void)?

    init(onChange: (@Sendable (any TrackablePlayer, PlayerEvent) -> Void)? = nil) { self.onChange = onChange }

    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) {
        list.withLock { $0.append(event) }
        onChange?(player, event)
    }

    var changes: [PlayerChange] { list.withLock { $0.map(\.change) } }
    var events: [PlayerEvent] { list.withLock { $0 } }
}

final class VirtualClockTests: XCTestCase {
    func testTimersRunInDeadlineOrderWithNowAtTheirDeadline() {
        let clock = VirtualClock()
        let start = clock.now()
        let fired = Mutex<[(String, UInt64)]>([])
        _ = clock.schedule(after: 2) { fired.withLock { $0.append(("b", clock.now() - start)) } }
        _ = clock.schedule(after: 1) {
            fired.withLock { $0.append(("a", clock.now() - start)) }
            _ = clock.schedule(after: 0.5) { fired.withLock { $0.append(("a+", clock.now() - start)) } }
        }
        let cancelled = clock.schedule(after: 1.2) { fired.withLock { $0.append(("x", 0)) } }
        cancelled.cancel()
        clock.advance(by: 1.9)
        XCTAssertEqual(fired.withLock { $0.map(\.0) }, ["a", "a+"])
        clock.advance(by: 0.1)
        XCTAssertEqual(fired.withLock { $0.map(\.0) }, ["a", "a+", "b"])
        XCTAssertEqual(fired.withLock { $0.map(\.1) }, [1_000_000_000, 1_500_000_000, 2_000_000_000])
        XCTAssertEqual(clock.now() - start, 2_000_000_000)
        XCTAssertEqual(clock.pendingCount, 0)
    }

    func testSystemClockRunsATimerAndCancelStopsOne() {
        let clock = SystemClock()
        let ran = expectation(description: "timer ran")
        let cancelledRan = Atomic<Bool>(false)
        let cancelled = clock.schedule(after: 0.05) { cancelledRan.store(true, ordering: .relaxed) }
        cancelled.cancel()
        _ = clock.schedule(after: 0.1) { ran.fulfill() }
        wait(for: [ran], timeout: 10)
        XCTAssertFalse(cancelledRan.load(ordering: .relaxed))
    }
}

final class ScriptedPlayerTests: XCTestCase {
    func testAnEpisodePlaysPausesSeeksAndEnds() {
        let clock = VirtualClock()
        let player = ScriptedPlayer(clock: clock)
        let changes = Changes()
        let observation = player.addObserver(changes)
        defer { observation.cancel() }

        let item = player.load("ep1", duration: 10)
        XCTAssertEqual(changes.changes, [.item(item), .playing(rate: 1)])
        clock.advance(by: 3)
        XCTAssertEqual(player.snapshot().position, 3, accuracy: 1e-9)
        player.pause()
        clock.advance(by: 5)
        XCTAssertEqual(player.snapshot(), PlayerSnapshot(item: item, position: 3, playing: false, rate: 0))
        player.play()
        player.setRate(2)
        clock.advance(by: 1)
        XCTAssertEqual(player.snapshot().position, 5, accuracy: 1e-9)
        player.seek(to: 8)
        clock.advance(by: 0.5)
        XCTAssertEqual(player.snapshot().position, 9, accuracy: 1e-9)
        clock.advance(by: 0.5)   // reaches 10 at 2x
        XCTAssertEqual(changes.changes, [
            .item(item), .playing(rate: 1), .paused, .playing(rate: 1), .rate(2),
            .seeked(from: 5, to: 8), .ended(item), .item(nil),
        ])
        XCTAssertEqual(player.snapshot(), .empty)
    }

    func testLoopingMakesEachPassAnotherItem() {
        let clock = VirtualClock()
        let player = ScriptedPlayer(clock: clock)
        let changes = Changes()
        let observation = player.addObserver(changes)
        defer { observation.cancel() }
        player.setLoop(true)
        let first = player.load("clip", duration: 2)
        clock.advance(by: 4.5)
        XCTAssertEqual(changes.changes, [
            .item(first), .playing(rate: 1),
            .item(first.nextLoop()), .playing(rate: 1),
            .item(first.nextLoop().nextLoop()), .playing(rate: 1),
        ])
        XCTAssertEqual(player.snapshot().item?.loop, 2)
        XCTAssertEqual(player.snapshot().position, 0.5, accuracy: 1e-9)
    }

    func testThePauseFlagPersistsAcrossItemsLikeMpvs() {
        let clock = VirtualClock()
        let player = ScriptedPlayer(clock: clock)
        let changes = Changes()
        let observation = player.addObserver(changes)
        defer { observation.cancel() }
        player.pause()
        let item = player.load("ep", duration: 5)
        XCTAssertEqual(changes.changes, [.item(item)])
        clock.advance(by: 10)
        XCTAssertEqual(player.snapshot().position, 0)
    }
}

final class PlayerChangeFeedTests: XCTestCase {
    /// Observers are held weakly (R9's other half: a player never keeps its observers alive).
    func testObserversAreHeldWeakly() {
        let player = ScriptedPlayer(clock: VirtualClock())
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
        let player = ScriptedPlayer(clock: VirtualClock())
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
        let player = ScriptedPlayer(clock: VirtualClock())
        let first = Changes { player, event in
            if event.change.isPlayingChange { (player as? ScriptedPlayer)?.pause() }
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
        let player = ScriptedPlayer(clock: VirtualClock())
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
