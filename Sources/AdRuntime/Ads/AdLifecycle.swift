/// The facts a lifecycle decides on, gathered on the loop at the moment of a decision.
struct LifecycleContext {
    /// The loop's now (ns).
    var now: UInt64
    /// The content plays (as last delivered by the player).
    var playing: Bool
    /// The content's rate while playing.
    var rate: Double
    /// The output is hidden (R13).
    var background: Bool
    /// The bound item played to its end and nothing else is in yet (post-roll time).
    var contentEnded: Bool
    /// The episode's content has come in: it is tracked (pre-roll time is over).
    var contentStarted: Bool = false
    /// The item a linear break holds, while one does.
    var heldItem: PlayerItem? = nil
    /// Where the content position is read from, on demand (R4).
    unowned let session: AdSession

    /// The content position, read from the player on demand (R4).
    func position() -> Double { session.currentPosition() }
}

/// What a lifecycle asks its session to do. Performed in order, on the loop, in the same turn.
enum AdEffect: Equatable {
    /// Put the overlay or pause ad up.
    case present
    /// Put an overlay up again after a linear break took it down (no new start: it was seen).
    case restore
    /// A squeezeback: the content starts into its window (`present`, its start not told yet).
    case enter
    /// A squeezeback's content is in its window: the creative fills the space, its start is
    /// told (once) and its time on screen counted from now.
    case out
    /// A squeezeback's time is served: the creative goes, the content starts back.
    case leave
    /// A quartile (1–3) of its time on screen was reached.
    case quartile(Int)
    /// Take it down.
    case dismiss
    /// Stop the content where it is for a linear break, to resume at this content time
    /// (nothing if the break holds it already).
    case holdContent(Double)
    /// Start the linear ad's video.
    case playVideo
    /// Stop it.
    case stopVideo
    /// Fire `timerFired` in this many seconds, replacing any timer of this ad.
    case setTimer(Double)
    /// Cancel this ad's timer.
    case cancelTimer
    /// The ad ended; `cause` is when the player learned of the change that ended it.
    case end(AdEndReason, cause: UInt64?)
}

/// One ad kind's state machine. Each kind is a small type whose states are an enum; its
/// methods say which player changes it reacts to and return effects, never perform them.
/// Loop-only: a class, changed in place (no copy of its state on the pause path).
protocol AdLifecycle: AnyObject {
    var isEnded: Bool { get }
    /// The creative is on screen (or its video is playing).
    var isVisible: Bool { get }
    /// `show` was called on it.
    var isShown: Bool { get }
    func show(_ context: LifecycleContext) throws(AdError) -> [AdEffect]
    func playerChanged(_ event: PlayerEvent, _ context: LifecycleContext) -> [AdEffect]
    func timerFired(_ context: LifecycleContext) -> [AdEffect]
    func backgroundChanged(_ context: LifecycleContext) -> [AdEffect]
    /// Ends it from outside (closed, destroyed, failed): whatever its state, once.
    func stop(_ reason: AdEndReason, cause: UInt64?) -> [AdEffect]
}

extension PlayerChange {
    /// The item an ad belongs to is gone from the player: another item, its end, a failure.
    var endsTheItem: Bool {
        switch self {
        case .item, .ended, .failed: true
        default: false
        }
    }
}

extension AdLifecycle {
    /// The effects of ending, for every kind: down first if it was up (the removal is what
    /// latency is measured to), then no more timer, then the end.
    static func ending(_ reason: AdEndReason, cause: UInt64?, wasVisible: Bool, takeDown: AdEffect = .dismiss) -> [AdEffect] {
        wasVisible ? [takeDown, .cancelTimer, .end(reason, cause: cause)] : [.cancelTimer, .end(reason, cause: cause)]
    }
}
