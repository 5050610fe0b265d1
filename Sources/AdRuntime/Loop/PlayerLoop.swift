#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The loop that owns a player (SPEC R18): one thread that runs the player model, every
/// `VideoAds` following the player, the ad surface's state and the runtime's timers. Other
/// threads hand it work; nothing on it blocks or waits long.
///
/// Threading contract, in the spirit of mpv's `client.h`:
/// - `execute(_:)` and `now()` may be called from any thread;
/// - `schedule(after:_:)` and `LoopTimer.cancel()` only on the loop (`inLoop`), like the
///   state they belong to; timer actions run on the loop;
/// - work runs one item at a time, in the order it was handed over (FIFO per loop);
/// - once the loop has stopped, `execute` refuses work (returns false) and `sync` throws.
///
/// `MpvPlayer` provides one (mpv's event thread, waiting in `mpv_wait_event` with the next
/// timer's deadline as its timeout); `VirtualLoop` provides one on virtual time for tests.
public protocol PlayerLoop: AnyObject, Sendable {
    /// True while the calling thread is the loop's.
    var inLoop: Bool { get }
    /// Hands `work` to the loop. False when the loop has stopped: the work is dropped.
    @discardableResult
    func execute(_ work: @escaping @Sendable () -> Void) -> Bool
    /// The loop's monotonic now, in nanoseconds (virtual for a `VirtualLoop`).
    func now() -> UInt64
    /// On the loop: runs `action` on the loop once, `seconds` from now (bounded by
    /// `LoopTime.nanoseconds`). Cancel it with the returned timer, on the loop.
    func schedule(after seconds: Double, _ action: @escaping () -> Void) -> LoopTimer
    /// A loop-only entry point (`assertInLoop`) was called off the loop. The default traps;
    /// a `VirtualLoop` made with a recorder records the call instead, so that a test can show
    /// that a type's check fires.
    func reportOffLoop(_ function: String, file: StaticString, line: UInt)
}

/// The loop has stopped (its player shut down); the work was not done.
public struct LoopStopped: Error, Sendable, Equatable, CustomStringConvertible {
    public init() {}
    public var description: String { "the player's loop has stopped" }
}

extension PlayerLoop {
    /// Runs `body` on the loop and returns what it returned: inline when called on the loop,
    /// otherwise handed over, with the caller waiting (the loop never waits for the caller,
    /// so this cannot deadlock). Throws `LoopStopped` when the loop no longer runs.
    public func sync<T>(_ body: () throws -> T) throws -> T {
        if inLoop { return try body() }
        return try withoutActuallyEscaping(body) { body in
            // The loop takes the closure out of the box before it answers, and the box is
            // emptied before returning either way: nothing keeps `body` past this call.
            let job = SyncJob(body)
            let handover = Handover<Unchecked<Result<T, any Error>>>()
            let accepted = execute {
                if let outcome = job.run() { handover.fulfil(Unchecked(outcome)) }
            }
            guard accepted, let outcome = handover.wait() else {
                job.discard()
                throw LoopStopped()
            }
            return try outcome.value.get()
        }
    }

    /// Runs `work` now when called on the loop; hands it over otherwise.
    public func run(_ work: @escaping @Sendable () -> Void) {
        if inLoop { work() } else { execute(work) }
    }

    /// The check at every public entry point of a loop-owned type (`Controller`,
    /// `EpisodePolicy`, `PlayerChangeFeed`, `MpvAdSurface`, `VideoAds`, `LoopTimer.cancel` …):
    /// always on, release builds included — a call off the loop is reported
    /// (`reportOffLoop`: a trap, unless a test records it). It costs a thread-specific read
    /// and a compare (a few ns: docs/benchmarks.md).
    @inline(__always)
    public func requireInLoop(function: String = #function, file: StaticString = #fileID, line: UInt = #line) {
        if !inLoop { reportOffLoop(function, file: file, line: line) }
    }

    /// The same check for inner hot paths, reached only through an entry point that made it:
    /// debug builds only, compiled out of release builds.
    @inline(__always)
    public func assertInLoop(function: String = #function, file: StaticString = #fileID, line: UInt = #line) {
        assert({
            if !inLoop { reportOffLoop(function, file: file, line: line) }
            return true
        }())
    }

    public func reportOffLoop(_ function: String, file: StaticString, line: UInt) {
        offLoopTrap(function, file: file, line: line)
    }
}

/// A loop-only entry point was called off the loop: a trap in every build — a second thread
/// in the player's state is a bug that must not run on (SPEC R18).
public func offLoopTrap(_ function: String, file: StaticString, line: UInt) -> Never {
    fatalError("\(function) called off the player's loop", file: file, line: line)
}

/// The closure of one `sync`: run once on the loop, or discarded; either way released before
/// `sync` returns.
private final class SyncJob<T>: Sendable {
    // The closure only ever leaves the lock to be called, in `run`, whose frame releases it.
    private let body: Locked<Unchecked<(() throws -> T)?>>

    init(_ body: @escaping () throws -> T) { self.body = Locked(Unchecked(body)) }

    func run() -> Result<T, any Error>? {
        guard let call = body.withLock({ box in defer { box.value = nil }; return box.value }) else { return nil }
        return Result { try call() }
    }

    func discard() { body.withLock { $0.value = nil } }
}

/// A timer on a loop. Loop-only, like the state it belongs to.
public final class LoopTimer: @unchecked Sendable {
    // @unchecked: `isCancelled` is read and written on the loop only (checked in `cancel`).
    public private(set) var isCancelled = false
    private weak var loop: (any PlayerLoop)?

    package init(loop: any PlayerLoop) { self.loop = loop }

    /// On the loop: the action will not run (if it has not yet).
    public func cancel() {
        loop?.requireInLoop()
        isCancelled = true
    }

    /// The queue's own: it ran, so cancelling it later is a no-op.
    fileprivate func ran() { isCancelled = true }
}

/// The pending timers of one loop, in deadline order (ties: scheduling order). Loop-only: a
/// value held by its loop, reached only through the loop's `schedule` and its own turn.
package struct TimerQueue {
    // A binary min-heap on (deadline, sequence): adding and taking the earliest are O(log n),
    // ties run in scheduling order. Cancelled timers are dropped when they reach the top, and
    // all at once whenever the heap has doubled since the last sweep (amortised O(1) a timer),
    // so a loop that schedules and cancels long timers never holds more than twice the live ones.
    private struct Entry {
        let deadline: UInt64
        let sequence: UInt64
        let timer: LoopTimer
        let action: () -> Void

        func before(_ other: Entry) -> Bool { deadline != other.deadline ? deadline < other.deadline : sequence < other.sequence }
    }

    private var heap: [Entry] = []
    private var sequence: UInt64 = 0
    /// The heap's size at which cancelled timers are swept out.
    private var sweepAt = 64

    package init() {}

    package mutating func add(deadline: UInt64, on loop: any PlayerLoop, _ action: @escaping () -> Void) -> LoopTimer {
        if heap.count >= sweepAt { sweep() }
        sequence += 1
        let entry = Entry(deadline: deadline, sequence: sequence, timer: LoopTimer(loop: loop), action: action)
        heap.append(entry)
        siftUp(heap.count - 1)
        return entry.timer
    }

    /// The earliest deadline of a timer still pending.
    package mutating func nextDeadline() -> UInt64? {
        while let top = heap.first, top.timer.isCancelled { _ = removeTop() }
        return heap.first?.deadline
    }

    /// Removes and returns the earliest pending timer due at `now`, with its deadline.
    package mutating func popDue(_ now: UInt64) -> (deadline: UInt64, action: () -> Void)? {
        guard let deadline = nextDeadline(), deadline <= now else { return nil }
        let entry = removeTop()
        entry.timer.ran()
        return (deadline, entry.action)
    }

    package var pendingCount: Int { heap.filter { !$0.timer.isCancelled }.count }

    /// Timers held, cancelled ones not yet swept included (tests: the bound).
    package var storedCount: Int { heap.count }

    private mutating func sweep() {
        heap.removeAll { $0.timer.isCancelled }
        for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(index) }
        sweepAt = max(64, heap.count * 2)
    }

    private mutating func removeTop() -> Entry {
        let top = heap[0]
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            siftDown(0)
        }
        return top
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].before(heap[parent]) else { return }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1, right = left + 1
            var first = parent
            if left < heap.count, heap[left].before(heap[first]) { first = left }
            if right < heap.count, heap[right].before(heap[first]) { first = right }
            if first == parent { return }
            heap.swapAt(parent, first)
            parent = first
        }
    }
}
