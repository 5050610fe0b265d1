import Foundation
import Synchronization

/// The monotonic clock every latency in the product is measured on (CLOCK_MONOTONIC, ns).
public enum MonotonicTime {
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}

/// Time as the runtime sees it: a monotonic "now" and one-shot timers. Injected, so that
/// lifecycle tests run on virtual time (`VirtualClock`) and the product on `SystemClock`.
public protocol RuntimeClock: Sendable {
    /// Monotonic nanoseconds.
    func now() -> UInt64
    /// Runs `action` once, `seconds` from now. The thread it runs on is the clock's: a
    /// `SystemClock` queue, or the thread that advances a `VirtualClock`. A timer cancelled
    /// on another thread at the moment it fires may still run: actions re-check their state.
    func schedule(after seconds: Double, _ action: @escaping @Sendable () -> Void) -> ScheduledTimer
}

/// A timer that has been scheduled; `cancel()` stops it if it has not run yet.
public final class ScheduledTimer: Sendable {
    private let cancelled = Atomic<Bool>(false)
    private let onCancel: @Sendable () -> Void

    public init(onCancel: @escaping @Sendable () -> Void = {}) {
        self.onCancel = onCancel
    }

    public var isCancelled: Bool { cancelled.load(ordering: .acquiring) }

    public func cancel() {
        if cancelled.exchange(true, ordering: .acquiringAndReleasing) == false {
            onCancel()
        }
    }
}

extension Double {
    /// Seconds to whole nanoseconds, never negative.
    var nanoseconds: UInt64 { self <= 0 ? 0 : UInt64((self * 1e9).rounded()) }
}

/// Real time: `CLOCK_MONOTONIC` and Dispatch timers on one serial queue of its own.
public final class SystemClock: RuntimeClock {
    private let queue: DispatchQueue

    public init(label: String = "adplayerd.clock") {
        queue = DispatchQueue(label: label)
    }

    public func now() -> UInt64 { MonotonicTime.now() }

    public func schedule(after seconds: Double, _ action: @escaping @Sendable () -> Void) -> ScheduledTimer {
        let box = TimerBox()
        let timer = ScheduledTimer(onCancel: { box.item?.cancel() })
        let item = DispatchWorkItem {
            if !timer.isCancelled { action() }
        }
        box.item = item
        queue.asyncAfter(deadline: .now() + .nanoseconds(Int(clamping: seconds.nanoseconds)), execute: item)
        return timer
    }
}

/// Holds a work item for its cancel closure.
private final class TimerBox: @unchecked Sendable {
    // @unchecked: `item` is written once, before the timer can be cancelled or run, and
    // DispatchWorkItem.cancel() is thread-safe.
    var item: DispatchWorkItem?
}

/// Virtual time for tests: it stands still until `advance(by:)`, which runs the timers that
/// fall due, in deadline order (then in scheduling order), on the calling thread, each with
/// `now()` set to its deadline.
public final class VirtualClock: RuntimeClock {
    private struct Pending {
        let deadline: UInt64
        let sequence: UInt64
        let timer: ScheduledTimer
        let action: @Sendable () -> Void
    }

    private struct State {
        var now: UInt64
        var sequence: UInt64 = 0
        var pending: [Pending] = []
    }

    private let state: Mutex<State>

    /// Starts at an arbitrary, non-zero instant, like a real monotonic clock.
    public init(startingAt start: UInt64 = 1_000_000_000_000) {
        state = Mutex(State(now: start))
    }

    public func now() -> UInt64 { state.withLock { $0.now } }

    public func schedule(after seconds: Double, _ action: @escaping @Sendable () -> Void) -> ScheduledTimer {
        let timer = ScheduledTimer()
        state.withLock { state in
            state.sequence += 1
            state.pending.append(Pending(deadline: state.now + seconds.nanoseconds, sequence: state.sequence,
                                         timer: timer, action: action))
        }
        return timer
    }

    /// Moves time forward by `seconds`, running every timer that falls due on the way,
    /// including timers those timers schedule.
    public func advance(by seconds: Double) {
        let target = state.withLock { $0.now + seconds.nanoseconds }
        while true {
            let due = state.withLock { state -> Pending? in
                state.pending.removeAll { $0.timer.isCancelled }
                guard let next = state.pending.min(by: { ($0.deadline, $0.sequence) < ($1.deadline, $1.sequence) }),
                      next.deadline <= target else {
                    state.now = max(state.now, target)
                    return nil
                }
                state.pending.removeAll { $0.sequence == next.sequence }
                state.now = max(state.now, next.deadline)
                return next
            }
            guard let due else { return }
            if !due.timer.isCancelled { due.action() }
        }
    }

    /// Timers scheduled and neither run nor cancelled.
    public var pendingCount: Int {
        state.withLock { state in state.pending.filter { !$0.timer.isCancelled }.count }
    }
}
