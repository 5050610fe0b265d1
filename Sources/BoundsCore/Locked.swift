#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value behind a pthread mutex, with a condition to wait on: the one lock type of the
/// project (hand-over queues, mailboxes and one-time hand-overs are built on it).
///
/// Why not `Synchronization.Mutex`: on Linux it is a raw futex that ThreadSanitizer does not
/// see, so every value it guards shows up as a race in `make tsan`. A pthread mutex and
/// condition are intercepted, so TSan sees the order they make. Locks are few here (SPEC
/// R18): the loop owns the state; these guard the hand-over queues into it and a few off-loop
/// caches.
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only read or written with `mutex` held.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var value: Value

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        condition = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        pthread_cond_init(condition, &attributes)
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        pthread_mutex_destroy(mutex)
        condition.deallocate()
        mutex.deallocate()
    }

    package func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// `withLock`, then wakes every thread waiting in `wait`.
    package func signal<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer {
            pthread_cond_broadcast(condition)
            pthread_mutex_unlock(mutex)
        }
        return try body(&value)
    }

    /// Waits until `body` (run with the lock held, now and after each `signal`) returns a
    /// value, and returns it; nil when `timeout` seconds pass first (nil timeout: for ever).
    package func wait<R>(timeout: Double? = nil, until body: (inout Value) throws -> R?) rethrows -> R? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        let deadline = timeout.map { MonotonicTime.now() &+ LoopTime.nanoseconds($0) }
        while true {
            if let result = try body(&value) { return result }
            if let deadline {
                let now = MonotonicTime.now()
                if now >= deadline { return nil }
                var spec = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
                pthread_cond_timedwait(condition, mutex, &spec)
            } else {
                pthread_cond_wait(condition, mutex)
            }
        }
    }
}

/// A one-time hand-over of a value between threads: one `fulfil`, any number of `wait`s.
package final class Handover<Value>: Sendable {
    private let slot = Locked<Value?>(nil)

    package init() {}

    /// Hands `value` over; later calls are ignored.
    package func fulfil(_ value: Value) {
        slot.signal { slot in if slot == nil { slot = value } }
    }

    /// The value if it has been handed over.
    package var current: Value? { slot.withLock { $0 } }

    /// Waits for the value, at most `timeout` seconds (nil: for ever).
    package func wait(timeout: Double? = nil) -> Value? {
        slot.wait(timeout: timeout) { $0 }
    }
}

/// A queue that threads hand items to and one or more threads take from, waiting while it is
/// empty (the `Workers`' inbox, the daemon's mailbox).
package final class BlockingQueue<Item>: Sendable {
    private struct State {
        var items: [Item] = []
        var head = 0
        var closed = false
    }

    private let state = Locked(State())

    package init() {}

    package func put(_ item: Item) {
        state.signal { $0.items.append(item) }
    }

    /// The next item, waiting for one; nil once closed and empty.
    package func take() -> Item? {
        state.wait { state -> Item?? in
            if state.head < state.items.count {
                let item = state.items[state.head]
                state.head += 1
                if state.head == state.items.count || state.head > 1024 {
                    state.items.removeFirst(state.head)   // compacted once drained (or now and then): linear overall
                    state.head = 0
                }
                return .some(item)
            }
            return state.closed ? .some(nil) : nil
        } ?? nil
    }

    /// Items waiting to be taken.
    package var count: Int { state.withLock { $0.items.count - $0.head } }

    /// No more items will come: waiting takers get nil once the rest is taken.
    package func close() {
        state.signal { $0.closed = true }
    }
}

/// Starts a detached thread of our own named `name` (Linux keeps 15 bytes) running `body`: the
/// one place the project makes threads (`Workers`, the mpv loop, the control socket, D-Bus,
/// signals, the web's connections, the bridge's calls). Returns it, for `pthread_join` where
/// its owner waits for it. `stackSize`: bytes (nil: the system's default, 8 MiB of address
/// space, touched only as used).
@discardableResult
package func startThread(named name: String, detached: Bool = true, stackSize: Int? = nil,
                         _ body: @escaping @Sendable () -> Void) -> pthread_t {
    let context = Unmanaged.passRetained(ThreadBody(name: name, body: body)).toOpaque()
    var thread = pthread_t()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    if let stackSize { pthread_attr_setstacksize(&attributes, max(stackSize, Int(PTHREAD_STACK_MIN))) }
    let rc = pthread_create(&thread, &attributes, threadMain, context)
    guard rc == 0 else {
        Unmanaged<ThreadBody>.fromOpaque(context).release()
        threadStartFailed(name, rc)
    }
    if detached { pthread_detach(thread) }
    return thread
}

/// A thread that cannot be started is a clear error, not a trap: the process says which and
/// why on stderr (the journal) and exits 2, as for a configuration it cannot run with — the
/// limit on threads (`ulimit -u`, systemd's `TasksMax=`, a container's pid limit) is one.
/// Under systemd the unit's restart policy then tries again.
private func threadStartFailed(_ name: String, _ rc: Int32) -> Never {
    let reason = String(cString: strerror(rc))
    let hint = rc == EAGAIN ? " — the process may start no more threads (ulimit -u, systemd's TasksMax=, a container's pid limit)" : ""
    StandardError.write(priority: 2, "cannot start the thread \(name): \(reason)\(hint)")
    exit(2)
}

private final class ThreadBody: Sendable {
    let name: String
    let body: @Sendable () -> Void
    init(name: String, body: @escaping @Sendable () -> Void) {
        self.name = name
        self.body = body
    }
}

/// A free function, not a closure formed in an isolated context, so that Swift inserts no
/// executor check into it (notes/libmpv.md §6.2.1).
private func threadMain(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let context else { return nil }
    let thread = Unmanaged<ThreadBody>.fromOpaque(context).takeRetainedValue()
    setThreadName(thread.name)
    thread.body()
    return nil
}

/// A value handed across threads where the hand-over itself orders the accesses (a caller
/// that blocks until the loop has run its closure). Name the reason where it is used.
package struct Unchecked<Value>: @unchecked Sendable {
    package var value: Value
    package init(_ value: Value) { self.value = value }
}

/// Names the calling thread, as `ps` and `/proc` show it (Linux keeps 15 bytes).
package func setThreadName(_ name: String) {
    let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
    guard fd >= 0 else { return }
    defer { close(fd) }
    let bytes = Array(name.utf8.prefix(15))
    _ = bytes.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
}

/// Whether `count` more threads can run at once now (`ulimit -u`, systemd's `TasksMax=` and a
/// container's pid limit count threads): starts them — 64 KiB stacks, each waiting until all
/// have started — then lets them end. nil: they could; else the errno of the one that could
/// not. libmpv 0.35 crashes (SIGSEGV in its own thread) or fails in silence when it cannot
/// start the threads a file needs: a load is refused with a reason before that (`MpvPlayer`).
/// Costs 0.11 ms (fastest) to 0.26 ms (mean) for 8 threads on the 2-core machine, from the
/// first `pthread_create` to the last `sem_post` (docs/reliability.md).
package func threadHeadroom(_ count: Int) -> Int32? {
    let gate = ThreadGate()
    var attributes = pthread_attr_t()
    pthread_attr_init(&attributes)
    defer { pthread_attr_destroy(&attributes) }
    pthread_attr_setstacksize(&attributes, 64 * 1024)
    pthread_attr_setdetachstate(&attributes, Int32(PTHREAD_CREATE_DETACHED))
    var started = 0
    var refused: Int32?
    for _ in 0..<count {
        var thread = pthread_t()
        let context = Unmanaged.passRetained(gate).toOpaque()
        let rc = pthread_create(&thread, &attributes, gateMain, context)
        guard rc == 0 else {
            Unmanaged<ThreadGate>.fromOpaque(context).release()
            refused = rc
            break
        }
        started += 1
    }
    for _ in 0..<started { sem_post(gate.semaphore) }
    return refused
}

private final class ThreadGate: @unchecked Sendable {
    // @unchecked: a POSIX semaphore, made for sharing between threads.
    let semaphore = UnsafeMutablePointer<sem_t>.allocate(capacity: 1)
    init() { sem_init(semaphore, 0, 0) }
    deinit {
        sem_destroy(semaphore)
        semaphore.deallocate()
    }
}

private func gateMain(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let context else { return nil }
    let gate = Unmanaged<ThreadGate>.fromOpaque(context).takeRetainedValue()
    while sem_wait(gate.semaphore) != 0 && errno == EINTR {}
    return nil
}

/// A callback set once (or now and then) and called from other threads: what `Locked<(F)?>`
/// looks like it would be, without its trap. A closure kept as the whole value of a generic
/// holder is stored at the generic's abstraction, so every `withLock { $0 }` wraps it in two
/// more reabstraction thunks on the way out and back through the `inout` — a closure called
/// once per beacon was 100,000 thunks deep after a busy box's month and overflowed the stack
/// (issue 45; the courier's wake-up and the simulation's listeners). Here the closure lives in
/// a struct field, whose abstraction is its own: calling it costs the same on the millionth day.
package final class Hook<Argument>: @unchecked Sendable {
    // @unchecked: `action` behind the lock.
    private struct Action { let call: @Sendable (Argument) -> Void }
    private let action = Locked<Action?>(nil)

    package init() {}

    /// Sets the callback (nil: none).
    package func set(_ call: (@Sendable (Argument) -> Void)?) {
        action.withLock { $0 = call.map(Action.init) }
    }

    /// Calls it, outside the lock; nothing when none is set.
    package func callAsFunction(_ argument: Argument) {
        action.withLock { $0 }?.call(argument)
    }
}
