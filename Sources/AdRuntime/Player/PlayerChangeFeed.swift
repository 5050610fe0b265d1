/// Delivers one player's changes to its observers, on the player's loop.
///
/// Threading contract: loop-only. `publish` delivers at once, in the caller's turn; a change
/// published while a delivery is under way (an observer's command caused it) is delivered
/// after the current change has reached every observer, never nested inside it. Observers
/// are held weakly; a change goes to those registered when its delivery began that are still
/// registered at their turn.
public final class PlayerChangeFeed: @unchecked Sendable {
    // @unchecked: every stored property is touched only on `loop`.
    private struct Registration {
        let id: UInt64
        weak var observer: (any PlayerObserver)?
        let phase: ObserverPhase
    }

    public let loop: any PlayerLoop
    private var registrations: [Registration] = []
    private var nextID: UInt64 = 1
    private var pending: [PlayerEvent] = []
    private var delivering = false

    public init(loop: any PlayerLoop) {
        self.loop = loop
    }

    /// On the loop: starts delivering to `observer` (held weakly), in its `phase`: every change
    /// reaches the observers phase by phase (`ObserverPhase`), and within a phase in the order
    /// they were added. The order is the design's, not an accident of who registered first.
    public func add(_ observer: any PlayerObserver, phase: ObserverPhase = .ads) -> PlayerObservation {
        loop.requireInLoop()
        let id = nextID
        nextID += 1
        let registration = Registration(id: id, observer: observer, phase: phase)
        if let later = registrations.firstIndex(where: { $0.phase > phase }) {
            registrations.insert(registration, at: later)
        } else {
            registrations.append(registration)
        }
        return PlayerObservation(feed: self, id: id)
    }

    func remove(_ id: UInt64) {
        loop.requireInLoop()
        registrations.removeAll { $0.id == id }
    }

    /// On the loop: the number of observers that are still alive.
    public var observerCount: Int {
        loop.requireInLoop()
        return registrations.filter { $0.observer != nil }.count
    }

    /// On the loop: hands `events` of `player` to every observer, in order; see the type.
    public func publish(_ events: [PlayerEvent], from player: any TrackablePlayer) {
        loop.requireInLoop()
        pending += events
        guard !delivering else { return }
        delivering = true
        defer { delivering = false }
        var next = 0
        while next < pending.count {
            let event = pending[next]
            next += 1
            // An observer may add or remove observers while being called (an episode's policy
            // loads the next item and lets go of its ads): the change goes to those registered
            // when its delivery began, in phase order, each if it is still registered at its
            // turn — never one skipped because the list moved under an index. One added
            // meanwhile starts with the next change (it saw this one's effects when it looked).
            let audience = registrations.map(\.id)
            var released = false
            for id in audience {
                guard let registration = registrations.first(where: { $0.id == id }) else { continue }   // removed meanwhile
                if let observer = registration.observer {
                    observer.player(player, didChange: event)
                } else {
                    released = true
                }
            }
            if released { registrations.removeAll { $0.observer == nil } }
        }
        pending.removeAll(keepingCapacity: true)
    }
}

/// When an observer hears of a player's change, relative to the others.
public enum ObserverPhase: Int, Sendable, Comparable {
    /// The ads' lifecycles (and any observer that does not say): an overlay a pause ends comes
    /// down here, before anything else runs.
    case ads
    /// Policies that decide what to ask for next (a pause ad, the next slot): they see the
    /// ads' reaction done, so no source is called while the overlay is still on screen.
    case policy
    /// Whoever reports the change (a daemon's clients): after the ads reacted and the policy
    /// decided, in the same turn.
    case report

    public static func < (a: ObserverPhase, b: ObserverPhase) -> Bool { a.rawValue < b.rawValue }
}

/// A running observation of a player; cancelling (or releasing) it ends it. Any thread: off
/// the loop the removal is handed to the loop.
public final class PlayerObservation: Sendable {
    private weak let feed: PlayerChangeFeed?
    private let id: UInt64

    init(feed: PlayerChangeFeed, id: UInt64) {
        self.feed = feed
        self.id = id
    }

    /// An observation of a player whose loop has stopped: there is nothing to end.
    public static func ended() -> PlayerObservation { PlayerObservation() }

    private init() {
        feed = nil
        id = 0
    }

    public func cancel() {
        guard let feed else { return }
        let id = self.id
        feed.loop.run { [weak feed] in feed?.remove(id) }
    }

    deinit { cancel() }
}
