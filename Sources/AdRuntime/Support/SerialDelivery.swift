import Synchronization

/// Runs work items one at a time, in the order they were enqueued, on whichever thread
/// finds nobody running them — with no hop through an executor and no lock held.
///
/// Producers enqueue while still holding the lock of the state the work describes (so the
/// order of delivery is the order of the state), release it, then call `drain()`. A thread
/// that finds a drain under way returns at once: the draining thread runs its work too.
/// Work that enqueues more work (an observer issuing a command, a `didEnd` showing the next
/// ad) is run after the current item, never nested inside it.
public final class SerialDelivery: Sendable {
    private struct State {
        var queue: [@Sendable () -> Void] = []
        var draining = false
    }

    private let state = Mutex(State())

    public init() {}

    public func enqueue(_ work: @escaping @Sendable () -> Void) {
        state.withLock { $0.queue.append(work) }
    }

    public func drain() {
        let becameDrainer = state.withLock { state -> Bool in
            if state.draining || state.queue.isEmpty { return false }
            state.draining = true
            return true
        }
        guard becameDrainer else { return }
        while let work = state.withLock({ state -> (@Sendable () -> Void)? in
            guard !state.queue.isEmpty else {
                state.draining = false
                return nil
            }
            return state.queue.removeFirst()
        }) {
            work()
        }
    }
}
