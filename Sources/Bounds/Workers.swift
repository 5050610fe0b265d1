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
    /// The simulation's one thread this shares, nil for threads of its own.
    private let pool: Workers?
    /// The environment whose work this is: its jobs are counted there (`AdEnvironment.settled`).
    package let environment: AdEnvironment
    /// The threads that run its jobs (a shared pool's: the pool's), for `isCurrentThread`.
    private let threads = Locked<[pthread_t]>([])

    /// Whether the calling thread is one of those that run this one's jobs.
    package var isCurrentThread: Bool {
        if let pool { return pool.isCurrentThread }
        let me = pthread_self()
        return threads.withLock { $0.contains { pthread_equal($0, me) != 0 } }
    }

    /// `threads` threads named `name` (Linux keeps 15 bytes of a thread's name) — or, in a
    /// simulation's environment, its one shared thread.
    package init(name: String, threads: Int = 1, environment: AdEnvironment = .system) {
        self.name = name
        self.environment = environment
        if let pool = environment.sharedWorkers({ Workers(ownThreadNamed: "adplayerd-sim", environment: environment) }) {
            inbox = pool.inbox
            self.pool = pool
            return
        }
        inbox = BlockingQueue<Job>()
        pool = nil
        for _ in 0..<max(1, threads) {
            let runner = Runner(inbox: inbox, environment: environment)
            runner.executor = self   // before the thread starts: it reads it for tasks only
            let ids = self.threads
            startThread(named: name) {
                ids.withLock { $0.append(pthread_self()) }
                runner.run()
            }
        }
    }

    /// The simulation's shared thread itself.
    private init(ownThreadNamed name: String, environment: AdEnvironment) {
        self.name = name
        self.environment = environment
        inbox = BlockingQueue<Job>()
        pool = nil
        let runner = Runner(inbox: inbox, environment: environment)
        runner.executor = self
        let ids = threads
        startThread(named: name) {
            ids.withLock { $0.append(pthread_self()) }
            runner.run()
        }
    }

    deinit { if pool == nil { inbox.close() } }

    /// Jobs handed over and not yet taken.
    package var waiting: Int { inbox.count }

    /// Runs `work` on the thread, after what was handed over before.
    package func execute(_ work: @escaping @Sendable () -> Void) {
        environment.began()
        inbox.put(.work(work))
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        environment.began()
        inbox.put(.task(UnownedJob(job)))
    }

    /// Runs the jobs; holds the executor weakly, so that releasing it ends the thread.
    fileprivate final class Runner: @unchecked Sendable {
        // @unchecked: `executor` is set before the thread starts, then only read by it.
        let inbox: BlockingQueue<Job>
        let environment: AdEnvironment
        weak var executor: Workers?

        init(inbox: BlockingQueue<Job>, environment: AdEnvironment) {
            self.inbox = inbox
            self.environment = environment
        }

        func run() {
            while let job = inbox.take() {
                switch job {
                case .work(let work): work()
                case .task(let task):
                    // A task preferring this executor keeps a reference to it while it runs.
                    if let executor { task.runSynchronously(on: executor.asUnownedTaskExecutor()) }
                }
                environment.finished()
            }
        }
    }
}

extension Task where Failure == any Error {
    /// `Task { body }`, counted in `environment`'s work in flight from now until `body` returns:
    /// an unstructured task runs on the global executor (or a simulation's one thread), not on
    /// a `Workers`, and a simulation must still see it under way.
    @discardableResult
    package static func counted(in environment: AdEnvironment,
                                _ body: sending @escaping @isolated(any) () async throws -> Success) -> Task<Success, any Error> {
        environment.began()
        return Task(executorPreference: environment.taskExecutor) {
            defer { environment.finished() }
            return try await body()
        }
    }
}

extension Task where Failure == Never {
    /// `Task { body }`, counted in `environment`'s work in flight until `body` returns (as above).
    @discardableResult
    package static func counted(in environment: AdEnvironment, _ body: sending @escaping @isolated(any) () async -> Success) -> Task<Success, Never> {
        environment.began()
        return Task(executorPreference: environment.taskExecutor) {
            defer { environment.finished() }
            return await body()
        }
    }
}
