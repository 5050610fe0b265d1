#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A `PlayerLoop` on virtual time, for tests (in the manner of SwiftNIO's `EmbeddedEventLoop`):
/// time stands still until `advance(by:)`, which runs the timers that fall due, in deadline
/// order, each with `now()` at its deadline.
///
/// There is no thread of its own: the thread that hands work to an idle loop runs it, and
/// everything handed over meanwhile, before `execute` returns — so a test that drives a
/// player from one thread sees each step's effects as soon as the call returns. Work handed
/// over while another thread is running the loop is run by that thread, in order; `sync`
/// waits for it. Any number of threads may drive it at once (the R15 races do).
public final class VirtualLoop: PlayerLoop, @unchecked Sendable {
    // @unchecked: `shared` is behind its lock; `timers` is touched only by the thread that
    // runs the loop at that moment, which the lock hands from one to the next.
    private struct Shared {
        var queue: [@Sendable () -> Void] = []
        var runner: pthread_t?
        var now: UInt64
    }

    private let shared: Locked<Shared>
    private var timers = TimerQueue()
    private let offLoop: OffLoopCalls?

    /// Starts at an arbitrary, non-zero instant, like a real monotonic clock. With `offLoop`,
    /// a loop-only entry point called off the loop is recorded there instead of trapping.
    public init(startingAt start: UInt64 = 1_000_000_000_000, recordingOffLoopCallsIn offLoop: OffLoopCalls? = nil) {
        shared = Locked(Shared(now: start))
        self.offLoop = offLoop
    }

    public func reportOffLoop(_ function: String, file: StaticString, line: UInt) {
        guard let offLoop else {
            offLoopTrap(function, file: file, line: line)
        }
        offLoop.record("\(file):\(line) \(function)")
    }

    public var inLoop: Bool {
        shared.withLock { shared in shared.runner.map { pthread_equal($0, pthread_self()) != 0 } ?? false }
    }

    @discardableResult
    public func execute(_ work: @escaping @Sendable () -> Void) -> Bool {
        let becameRunner = shared.withLock { shared -> Bool in
            shared.queue.append(work)
            guard shared.runner == nil else { return false }
            shared.runner = pthread_self()
            return true
        }
        if becameRunner { runQueued() }
        return true
    }

    public func now() -> UInt64 { shared.withLock { $0.now } }

    public func schedule(after seconds: Double, _ action: @escaping () -> Void) -> LoopTimer {
        assertInLoop()
        return timers.add(deadline: now() &+ LoopTime.nanoseconds(seconds), on: self, action)
    }

    /// Moves time forward by `seconds`, running every timer that falls due on the way (also
    /// timers those timers schedule), on the loop.
    public func advance(by seconds: Double) {
        try? sync {
            let target = now() &+ LoopTime.nanoseconds(seconds)
            while let due = timers.popDue(target) {
                shared.withLock { $0.now = max($0.now, due.deadline) }
                due.action()
            }
            shared.withLock { $0.now = max($0.now, target) }
        }
    }

    /// When the earliest timer falls due (loop time), nil with none: a simulation steps from one
    /// to the next. A cancelled timer may still stand first (it runs nothing when reached).
    public var nextDeadline: UInt64? { (try? sync { timers.nextDeadline() }) ?? nil }

    /// Timers scheduled and neither run nor cancelled.
    public var pendingTimerCount: Int { (try? sync { timers.pendingCount }) ?? 0 }

    private func runQueued() {
        while let work = shared.withLock({ shared -> (@Sendable () -> Void)? in
            guard !shared.queue.isEmpty else {
                shared.runner = nil
                return nil
            }
            return shared.queue.removeFirst()
        }) {
            work()
        }
    }
}

/// Where a `VirtualLoop` records loop-only entry points called off the loop (tests of the
/// loop-affinity checks). Any thread.
public final class OffLoopCalls: Sendable {
    private let calls = Locked<[String]>([])

    public init() {}

    package func record(_ call: String) { calls.withLock { $0.append(call) } }

    /// The calls recorded so far (`File.swift:12 function(_:)`), and forgets them.
    public func take() -> [String] { calls.withLock { calls in defer { calls = [] }; return calls } }
}
