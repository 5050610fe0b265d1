#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The loop of a simulation (`adplayerd simulate`, `schedule-check`): virtual time, as
/// `VirtualLoop`'s — it stands still until `advance(to:)` — but its work runs on the
/// simulation's one thread, the thread every `Workers` of the simulation's environment shares
/// (`AdEnvironment.simulated`). The loop, the ad requests' tasks, tracking's writer and the state
/// store's writer take their turns in the order work was handed over, on one thread, whatever
/// the machine's load: a run repeats byte for byte. Its work is counted with the environment's
/// (`AdEnvironment.settled`): the simulation moves time only when nothing is under way.
///
/// Threading: `execute`, `now`, `advance`, `nextDeadline` from any thread (`advance` and
/// `nextDeadline` wait for the loop); `schedule` on the loop.
public final class SimulationLoop: PlayerLoop, @unchecked Sendable {
    // @unchecked: `timers` is touched only on the simulation's thread (the loop's); the rest is
    // immutable or atomic.
    private let thread: Workers
    private let clock: Atomic<UInt64>
    private var timers = TimerQueue()
    private let stopped = Atomic<Bool>(false)

    /// On `environment`'s one thread (a simulation's environment), starting at `start`
    /// nanoseconds — an arbitrary, non-zero instant, like a real monotonic clock.
    public init(environment: AdEnvironment, startingAt start: UInt64 = 1_000_000_000_000) {
        precondition(environment.isSimulated, "SimulationLoop: a simulation's environment runs its work on one thread")
        thread = Workers(name: "adplayerd-sim", environment: environment)
        clock = Atomic(start)
    }

    public var inLoop: Bool { thread.isCurrentThread }

    @discardableResult
    public func execute(_ work: @escaping @Sendable () -> Void) -> Bool {
        guard !stopped.load(ordering: .acquiring) else { return false }
        thread.execute(work)
        return true
    }

    public func now() -> UInt64 { clock.load(ordering: .acquiring) }

    public func schedule(after seconds: Double, _ action: @escaping () -> Void) -> LoopTimer {
        assertInLoop()
        return timers.add(deadline: now() &+ LoopTime.nanoseconds(seconds), on: self, action)
    }

    /// Moves time to `target` (loop time), running on the loop every timer that falls due on the
    /// way, each at its deadline. What those timers hand over runs after, at `target`.
    public func advance(to target: UInt64) {
        try? sync { advanceHere(to: target) }
    }

    private func advanceHere(to target: UInt64) {
        while let due = timers.popDue(target) {
            clock.store(max(clock.load(ordering: .relaxed), due.deadline), ordering: .releasing)
            due.action()
        }
        clock.store(max(clock.load(ordering: .relaxed), target), ordering: .releasing)
    }

    /// What a run's step says once everything at an instant is done: run it again (it handed
    /// work over: when that is done), or move time on — to the next timer, or sooner to
    /// `wanted` seconds from now.
    public enum Step: Sendable {
        case again
        case moveOn(wanted: Double?)
    }

    /// Runs the simulation to `end` (loop time) on its own thread, and returns then (the caller
    /// waits, blocked). Whenever nothing else is under way there, `step` runs; once it says so,
    /// time moves to the next deadline and its timers run, each at its own. No thread hands
    /// over anything meanwhile — a day's hundreds of thousands of instants cost no switch
    /// between threads (issue 46: handing work between threads was most of a run's time).
    public func run(until end: UInt64, step: @escaping () -> Step) {
        let run = Run(loop: self, end: end, step: step)
        thread.execute { run.idle() }
        _ = run.done.wait()
    }

    /// One `run`: its turns on the thread.
    private final class Run: @unchecked Sendable {
        // @unchecked: touched on the simulation's thread only (and `done`, a hand-over).
        let loop: SimulationLoop
        let end: UInt64
        let step: () -> Step
        let done = Handover<Bool>()

        init(loop: SimulationLoop, end: UInt64, step: @escaping () -> Step) {
            self.loop = loop
            self.end = end
            self.step = step
        }

        func idle() {
            let thread = loop.thread
            if loop.stopped.load(ordering: .acquiring) { return done.fulfil(false) }
            // Others first: what was handed over runs before time moves (this job is one of
            // those under way).
            if thread.waiting > 0 { return thread.execute { self.idle() } }
            if thread.environment.underWay > 1 {
                // A task waits on another thread (a live exchange in a task's own wait): let it.
                var pause = timespec(tv_sec: 0, tv_nsec: 100_000)
                nanosleep(&pause, nil)
                return thread.execute { self.idle() }
            }
            switch step() {
            case .again:
                thread.execute { self.idle() }
            case .moveOn(let wanted):
                let now = loop.now()
                let timer = loop.timers.nextDeadline()
                let soon = wanted.map { now &+ LoopTime.nanoseconds(max(0.001, $0)) }
                guard let next = [timer, soon].compactMap({ $0 }).min(), next <= end else {
                    loop.advanceHere(to: max(end, now))
                    return done.fulfil(true)
                }
                loop.advanceHere(to: max(next, now))
                thread.execute { self.idle() }
            }
        }
    }

    /// When the earliest timer falls due (loop time), nil with none. A cancelled timer may still
    /// stand first (it runs nothing when reached).
    public var nextDeadline: UInt64? { (try? sync { timers.nextDeadline() }) ?? nil }

    /// From now on the loop takes no work (`execute` is false, `sync` throws).
    public func stop() { stopped.store(true, ordering: .releasing) }
}
