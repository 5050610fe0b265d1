import Synchronization

/// Delivers one player's changes to its observers, in order, one at a time.
///
/// Threading contract:
/// - `enqueue(_:)` may be called from any thread. A producer that derives changes from its
///   own state calls it while still holding that state's lock, so that the feed's order
///   is the order in which the state changed.
/// - `drain()` is called by the producer after releasing its lock. The thread that finds
///   nobody delivering becomes the deliverer and hands out every queued change, including
///   those enqueued meanwhile by observers (re-entrant commands) or by other threads; a
///   thread that finds a delivery under way returns at once and its changes are handed out
///   by the deliverer, with no hop through an executor.
/// - Observers are called with no lock of the feed held; they are held weakly.
public final class PlayerChangeFeed: Sendable {
    private struct Registration {
        let id: UInt64
        weak var observer: (any PlayerObserver)?
    }

    private struct State {
        var registrations: [Registration] = []
        var nextID: UInt64 = 1
        var queue: [PlayerEvent] = []
        var delivering = false
    }

    private let state = Mutex(State())

    public init() {}

    /// Starts delivering to `observer` (held weakly).
    public func add(_ observer: any PlayerObserver) -> PlayerObservation {
        let id = state.withLock { state in
            let id = state.nextID
            state.nextID += 1
            state.registrations.append(Registration(id: id, observer: observer))
            return id
        }
        return PlayerObservation(feed: self, id: id)
    }

    func remove(_ id: UInt64) {
        state.withLock { $0.registrations.removeAll { $0.id == id } }
    }

    /// The number of observers that are still alive.
    public var observerCount: Int {
        state.withLock { state in state.registrations.filter { $0.observer != nil }.count }
    }

    public func enqueue(_ events: [PlayerEvent]) {
        guard !events.isEmpty else { return }
        state.withLock { $0.queue.append(contentsOf: events) }
    }

    /// Hands out queued changes unless another thread is already doing so; see the type.
    public func drain(from player: any TrackablePlayer) {
        let becameDeliverer = state.withLock { state -> Bool in
            if state.delivering || state.queue.isEmpty { return false }
            state.delivering = true
            return true
        }
        guard becameDeliverer else { return }
        while true {
            let next = state.withLock { state -> (PlayerEvent, [any PlayerObserver])? in
                state.registrations.removeAll { $0.observer == nil }
                guard !state.queue.isEmpty else {
                    state.delivering = false
                    return nil
                }
                let event = state.queue.removeFirst()
                return (event, state.registrations.compactMap { $0.observer })
            }
            guard let (event, observers) = next else { return }
            for observer in observers {
                observer.player(player, didChange: event)
            }
        }
    }
}

/// A running observation of a player; cancelling (or releasing) it ends it.
public final class PlayerObservation: Sendable {
    private weak let feed: PlayerChangeFeed?
    private let id: UInt64

    init(feed: PlayerChangeFeed, id: UInt64) {
        self.feed = feed
        self.id = id
    }

    public func cancel() { feed?.remove(id) }

    deinit { cancel() }
}
