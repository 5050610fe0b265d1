#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

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
    // @unchecked: `state` is behind its lock; the thread reads nothing else.
    fileprivate struct State {
        var queue: [Job] = []
        var stopping = false
    }

    fileprivate enum Job {
        case work(@Sendable () -> Void)
        case task(UnownedJob)
    }

    fileprivate final class Inbox: @unchecked Sendable {
        // @unchecked: used only with `mutex` held, or through the condition.
        let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
        let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
        var state = State()

        init() {
            pthread_mutex_init(mutex, nil)
            pthread_cond_init(condition, nil)
        }

        deinit {
            pthread_cond_destroy(condition)
            pthread_mutex_destroy(mutex)
            condition.deallocate()
            mutex.deallocate()
        }

        func put(_ job: Job) {
            pthread_mutex_lock(mutex)
            state.queue.append(job)
            pthread_cond_signal(condition)
            pthread_mutex_unlock(mutex)
        }

        /// The next job, waiting for one; nil once stopping and empty.
        func take() -> Job? {
            pthread_mutex_lock(mutex)
            defer { pthread_mutex_unlock(mutex) }
            while state.queue.isEmpty && !state.stopping { pthread_cond_wait(condition, mutex) }
            return state.queue.isEmpty ? nil : state.queue.removeFirst()
        }

        func stop() {
            pthread_mutex_lock(mutex)
            state.stopping = true
            pthread_cond_broadcast(condition)
            pthread_mutex_unlock(mutex)
        }
    }

    private let inbox = Inbox()
    package let name: String

    /// `threads` threads named `name` (Linux keeps 15 bytes of a thread's name).
    package init(name: String, threads: Int = 1) {
        self.name = name
        for _ in 0..<max(1, threads) {
            let runner = Runner(inbox: inbox, name: name)
            runner.executor = self   // before the thread starts: it reads it for tasks only
            let context = Unmanaged.passRetained(runner).toOpaque()
            var thread = pthread_t()
            let rc = pthread_create(&thread, nil, workerThreadMain, context)
            precondition(rc == 0, "pthread_create failed: \(rc)")
            pthread_detach(thread)
        }
    }

    deinit { inbox.stop() }

    /// Runs `work` on the thread, after what was handed over before.
    package func execute(_ work: @escaping @Sendable () -> Void) {
        inbox.put(.work(work))
    }

    package func enqueue(_ job: consuming ExecutorJob) {
        inbox.put(.task(UnownedJob(job)))
    }

    /// Runs the jobs; holds the executor weakly, so that releasing it ends the thread.
    fileprivate final class Runner {
        let inbox: Inbox
        let name: String
        weak var executor: Workers?

        init(inbox: Inbox, name: String) {
            self.inbox = inbox
            self.name = name
        }

        func run() {
            setThreadName(name)
            while let job = inbox.take() {
                switch job {
                case .work(let work): work()
                case .task(let task):
                    // A task preferring this executor keeps a reference to it while it runs.
                    guard let executor else { continue }
                    task.runSynchronously(on: executor.asUnownedTaskExecutor())
                }
            }
        }
    }
}

private func workerThreadMain(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let context else { return nil }
    Unmanaged<Workers.Runner>.fromOpaque(context).takeRetainedValue().run()
    return nil
}

/// Names the calling thread, as `ps` and `/proc` show it (Linux keeps 15 bytes).
package func setThreadName(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}
