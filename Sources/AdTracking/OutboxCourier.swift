import AdRuntime
import Foundation

/// Delivers a `BeaconOutbox` in the background, on a thread of its own: it sends what is due,
/// then sleeps until the next beacon is due or a new one is queued (`wake()`) — with nothing
/// pending it sleeps without a timeout (no wakeups while the daemon idles). While an ad is on
/// screen it also writes the ledger's heartbeat (`BeaconOutbox.keepAlive`) every few seconds.
///
/// Threading: `start`, `wake`, `stop` from any thread.
public final class OutboxCourier: Sendable {
    private let outbox: BeaconOutbox
    private let thread = Workers(name: "adplayerd-courier")
    private let bell = Locked(Handover<Bool>())
    private let stopping = Locked<Double?>(nil)
    private let finished = Handover<Bool>()
    private let onError: @Sendable (String) -> Void

    public init(outbox: BeaconOutbox, onError: @escaping @Sendable (String) -> Void = { _ in }) {
        self.outbox = outbox
        self.onError = onError
    }

    public func start() {
        Task(executorPreference: thread) { [self] in
            while true {
                let deadline = stopping.withLock { $0 }
                _ = await outbox.deliverDue()
                if let deadline, MonotonicTime.now() >= UInt64(deadline) { break }
                // The ledger's heartbeat while an ad is on screen (`keepAlive`) wakes it too.
                let alive = outbox.keepAlive()
                // A database locked at open is tried again every few seconds (`openIfWaiting`).
                let reopen = outbox.openIfWaiting()
                let next = [outbox.nextDue(), alive, reopen].compactMap { $0 }.min()
                // Blocking this thread is fine: it is the courier's own.
                let current = bell.withLock { $0 }
                if let deadline {
                    let left = Double(UInt64(deadline) &- min(UInt64(deadline), MonotonicTime.now())) / 1e9
                    guard let next, next < left else { break }
                    _ = current.wait(timeout: max(0.01, next))
                } else if let next {
                    _ = current.wait(timeout: max(0.01, next))
                } else {
                    _ = current.wait()
                }
                bell.withLock { if $0 === current { $0 = Handover() } }
            }
            finished.fulfil(true)
        }
    }

    /// A beacon was queued: deliver it now.
    public func wake() {
        bell.withLock { $0 }.fulfil(true)
    }

    /// Delivers what is due for at most `seconds` more, then stops; blocks until then.
    public func stop(flushingFor seconds: Double) {
        stopping.withLock { $0 = Double(MonotonicTime.now() + LoopTime.nanoseconds(seconds)) }
        wake()
        _ = finished.wait(timeout: seconds + 2)
    }
}
