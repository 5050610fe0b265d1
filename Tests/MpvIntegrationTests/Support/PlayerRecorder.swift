import AdRuntime
import Foundation

/// Records a player's changes and lets a test wait for one. Waits have generous deadlines
/// that only bound a failing test; no assertion here depends on timing.
final class PlayerRecorder: PlayerObserver, @unchecked Sendable {
    // @unchecked: `events` is only touched under `condition`.
    private let condition = NSCondition()
    private var events: [PlayerEvent] = []

    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) {
        condition.lock()
        events.append(event)
        condition.broadcast()
        condition.unlock()
    }

    var all: [PlayerEvent] {
        condition.lock()
        defer { condition.unlock() }
        return events
    }

    var changes: [PlayerChange] { all.map(\.change) }

    /// Waits until `predicate` holds for the recorded events; false at the deadline.
    @discardableResult
    func wait(timeout: TimeInterval = 20, until predicate: ([PlayerEvent]) -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        condition.lock()
        defer { condition.unlock() }
        while !predicate(events) {
            if !condition.wait(until: deadline) { return predicate(events) }
        }
        return true
    }

    /// Waits for a change matching `match` after the first `after` events; returns it.
    func next(after count: Int = 0, timeout: TimeInterval = 20, _ match: @escaping (PlayerChange) -> Bool) -> PlayerEvent? {
        var found: PlayerEvent?
        wait(timeout: timeout) { events in
            found = events.dropFirst(count).first { match($0.change) }
            return found != nil
        }
        return found
    }

    var count: Int { all.count }
}

extension PlayerChange {
    var isPlaying: Bool { if case .playing = self { true } else { false } }
    var isPaused: Bool { self == .paused }
    var isSeek: Bool { if case .seeked = self { true } else { false } }
    var isEnded: Bool { if case .ended = self { true } else { false } }
    var isFailed: Bool { if case .failed = self { true } else { false } }
    var isRate: Bool { if case .rate = self { true } else { false } }
    var newItem: PlayerItem?? { if case .item(let item) = self { item } else { nil } }
    var isItemChange: Bool { if case .item = self { true } else { false } }
}
