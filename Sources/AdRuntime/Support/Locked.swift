#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A value behind a pthread mutex: the one lock type of the project.
///
/// Why not `Synchronization.Mutex`: on Linux it is a raw futex that ThreadSanitizer does not
/// see, so every value it guards shows up as a race in `make tsan`. A pthread mutex is
/// intercepted, so TSan sees the order it makes. Locks are few here (SPEC R18): the loop owns
/// the state; these guard the hand-over queues into it and a few off-loop caches.
package final class Locked<Value>: @unchecked Sendable {
    // @unchecked: `value` is only read or written with `mutex` held.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private var value: Value

    package init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        pthread_mutex_init(mutex, nil)
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    package func withLock<R>(_ body: (inout Value) throws -> R) rethrows -> R {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}

/// A one-time hand-over of a value between threads: one `fulfil`, any number of `wait`s.
/// pthread mutex and condition, so that ThreadSanitizer sees the hand-over.
package final class Handover<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched with `mutex` held.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var value: Value?

    package init() {
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

    /// Hands `value` over; later calls are ignored.
    package func fulfil(_ value: Value) {
        pthread_mutex_lock(mutex)
        if self.value == nil { self.value = value }
        pthread_cond_broadcast(condition)
        pthread_mutex_unlock(mutex)
    }

    /// The value if it has been handed over.
    package var current: Value? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return value
    }

    /// Waits for the value, at most `timeout` seconds (nil: for ever).
    package func wait(timeout: Double? = nil) -> Value? {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        guard let timeout else {
            while value == nil { pthread_cond_wait(condition, mutex) }
            return value
        }
        let deadline = MonotonicTime.now() &+ LoopTime.nanoseconds(timeout)
        var spec = timespec(tv_sec: Int(deadline / 1_000_000_000), tv_nsec: Int(deadline % 1_000_000_000))
        while value == nil {
            if pthread_cond_timedwait(condition, mutex, &spec) != 0 && MonotonicTime.now() >= deadline { break }
        }
        return value
    }
}

/// A value handed across threads where the hand-over itself orders the accesses (a caller
/// that blocks until the loop has run its closure). Name the reason where it is used.
package struct Unchecked<Value>: @unchecked Sendable {
    package var value: Value
    package init(_ value: Value) { self.value = value }
}
