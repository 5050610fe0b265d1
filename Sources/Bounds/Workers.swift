#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import Synchronization

/// Threads of our own for work that must stay off the player's loop (decoding a creative,
/// writing the outbox, an ad source's request, an HTTP exchange). With one thread, work runs
/// in order, one item at a time; with more, items are taken in order by whichever thread is
/// free. It is also a `TaskExecutor`, so async code given it as its preference
/// (`Task(executorPreference:)`) runs here too.
///
/// Why not Dispatch's queues or the global concurrent executor: on Linux, their first use
/// starts libdispatch's worker pool, whose monitor then wakes the process once a second for
/// good (`_dispatch_workq_init_once`), and the daemon is meant to sleep while paused with
/// nothing due (R18). A thread of ours waits on a condition and wakes only for work.
///
/// Threading: `execute` and `enqueue` from any thread. The threads live as long as the
/// object; the last release lets them finish what they have and end.
package final class Workers: TaskExecutor, @unchecked Sendable {
    // @unchecked: the threads share nothing but `inbox`, a `BlockingQueue`.
    fileprivate enum Job {
        case work(@Sendable () -> Void)
        case task(UnownedJob)
    }

    fileprivate let inbox: BlockingQueue<Job>
    package let name: String
    /// The simulation's one thread this shares (`simulationPool`), nil for threads of its own.
    private let pool: Workers?
    /// While set, every `Workers` made runs its work on this one's thread (`adplayerd
    /// simulate`: tracking's writer, the state store's writer and the ad tasks take their turns
    /// in the order they were handed over, whatever the threads' timing, so that a run repeats).
    package static let simulationPool = Locked<Workers?>(nil)
    /// Jobs handed to any `Workers` and not finished yet, process-wide: a simulation moves its
    /// clock only when nothing is in flight (docs/simulate.md), so that what a request answers
    /// lands at the simulated instant it was asked, whatever the network's real time.
    package static let inFlight = Atomic<Int>(0)

    /// `threads` threads named `name` (Linux keeps 15 bytes of a thread's name).
    package init(name: String, threads: Int = 1) {
        self.name = name
        if let pool = Self.simulationPool.withLock({ $0 }) {
            inbox = pool.inbox
            self.pool = pool
            return
        }
        inbox = BlockingQueue<Job>()
        pool = nil
        for _ in 0..<max(1, threads) {
            let runner = Runner(inbox: inbox)
            runner.executor = self   // before the thread starts: it reads it for tasks only
            startThread(named: name) { runner.run() }
        }
    }

    deinit { if pool == nil { inbox.close() } }

    /// Runs `work` on the thread, after what was handed over before.
    package func execute(_ work: @escaping @Sendable () -> Void) {
        Self.inFlight.add(1, ordering: .relaxed)
        inbox.put(.work(work))
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        Self.inFlight.add(1, ordering: .relaxed)
        inbox.put(.task(UnownedJob(job)))
    }

    /// Runs the jobs; holds the executor weakly, so that releasing it ends the thread.
    fileprivate final class Runner: @unchecked Sendable {
        // @unchecked: `executor` is set before the thread starts, then only read by it.
        let inbox: BlockingQueue<Job>
        weak var executor: Workers?

        init(inbox: BlockingQueue<Job>) { self.inbox = inbox }

        func run() {
            while let job = inbox.take() {
                switch job {
                case .work(let work): work()
                case .task(let task):
                    // A task preferring this executor keeps a reference to it while it runs.
                    if let executor { task.runSynchronously(on: executor.asUnownedTaskExecutor()) }
                }
                Workers.inFlight.subtract(1, ordering: .releasing)
            }
        }
    }
}

extension Workers {
    /// Where `Task.counted` runs its tasks: nil (the global executor), or, in a simulation, its
    /// one thread — so that answers arriving together are taken in the order they were asked.
    package static let tasksPreference = Locked<Workers?>(nil)
}

extension Task where Failure == any Error {
    /// `Task { body }`, counted in `Workers.inFlight` from now until `body` returns: an
    /// unstructured task runs on the global executor, not on a `Workers`, and a simulation
    /// must still see it under way.
    @discardableResult
    package static func counted(_ body: sending @escaping @isolated(any) () async throws -> Success) -> Task<Success, any Error> {
        Workers.inFlight.add(1, ordering: .relaxed)
        return Task(executorPreference: Workers.tasksPreference.withLock { $0 }) {
            defer { Workers.inFlight.subtract(1, ordering: .releasing) }
            return try await body()
        }
    }
}

extension Task where Failure == Never {
    /// `Task { body }`, counted in `Workers.inFlight` until `body` returns (as above).
    @discardableResult
    package static func counted(_ body: sending @escaping @isolated(any) () async -> Success) -> Task<Success, Never> {
        Workers.inFlight.add(1, ordering: .relaxed)
        return Task(executorPreference: Workers.tasksPreference.withLock { $0 }) {
            defer { Workers.inFlight.subtract(1, ordering: .releasing) }
            return await body()
        }
    }
}
