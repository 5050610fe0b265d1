import Synchronization

/// Delivers one player's changes to its observers, in order, one at a time.
///
/// Threading contract:
/// - `enqueue(_:)` may be called from any thread. A producer that derives changes from its
///   own state calls it while still holding that state's lock, so that the feed's order
///   is the order in which the state changed.
/// - `drain(from:)` is called by the producer after releasing its lock. Delivery is a
///   `SerialDelivery`: the thread that finds nobody delivering hands out every queued
///   change, including those enqueued meanwhile by observers (re-entrant commands) or by
///   other threads; a thread that finds a delivery under way returns at once.
/// - Observers are called with no lock of the feed held; they are held weakly, and the
///   list is read when each change is handed out.
public final class PlayerChangeFeed: Sendable {
    private struct Registration {
        let id: UInt64
        weak var observer: (any PlayerObserver)?
    }

    private struct State {
        var registrations: [Registration] = []
        var nextID: UInt64 = 1
    }

    private let state = Mutex(State())
    private let delivery = SerialDelivery()

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

    /// Queues `events` for delivery by `player`; see the type.
    public func enqueue(_ events: [PlayerEvent], from player: any TrackablePlayer) {
        for event in events {
            delivery.enqueue { [weak self, weak player] in
                guard let self, let player else { return }
                let observers = self.state.withLock { state in
                    state.registrations.removeAll { $0.observer == nil }
                    return state.registrations.compactMap(\.observer)
                }
                for observer in observers { observer.player(player, didChange: event) }
            }
        }
    }

    /// Hands out queued changes unless another thread is already doing so.
    public func drain() { delivery.drain() }
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
