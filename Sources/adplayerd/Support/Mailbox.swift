import AdRuntime
import Foundation

/// Messages for one thread that waits for them (the daemon's main thread: signals).
/// pthread mutex and condition (ThreadSanitizer sees them).
final class Mailbox<Message: Sendable>: @unchecked Sendable {
    // @unchecked: `messages` is touched only with `mutex` held.
    private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
    private let condition = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
    private var messages: [Message] = []

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

    func post(_ message: Message) {
        pthread_mutex_lock(mutex)
        messages.append(message)
        pthread_cond_signal(condition)
        pthread_mutex_unlock(mutex)
    }

    /// The next message, waiting for one.
    func next() -> Message {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while messages.isEmpty { pthread_cond_wait(condition, mutex) }
        return messages.removeFirst()
    }
}
