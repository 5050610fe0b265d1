/// The facts a lifecycle decides on, gathered by `VideoAds` at the moment of a decision.
struct LifecycleContext {
    /// The runtime clock's now (ns).
    var now: UInt64
    /// The content plays (as last delivered by the player).
    var playing: Bool
    /// The content's rate while playing.
    var rate: Double
    /// The output is hidden (R13).
    var background: Bool
    /// The bound item played to its end and nothing else is in yet (post-roll time).
    var contentEnded: Bool
    /// The content position, read from the player on demand (R4).
    var position: () -> Double
}

/// What a lifecycle asks `VideoAds` to do. Executed in order, under the runtime's lock.
enum AdEffect: Equatable {
    /// Put the overlay or pause ad up.
    case present
    /// Take it down.
    case dismiss
    /// Start the post-roll's video.
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
protocol AdLifecycle: Sendable {
    var isEnded: Bool { get }
    /// The creative is on screen (or its video is playing).
    var isVisible: Bool { get }
    /// `show` was called on it.
    var isShown: Bool { get }
    mutating func show(_ context: LifecycleContext) throws(AdError) -> [AdEffect]
    mutating func playerChanged(_ event: PlayerEvent, _ context: LifecycleContext) -> [AdEffect]
    mutating func timerFired(_ context: LifecycleContext) -> [AdEffect]
    mutating func backgroundChanged(_ context: LifecycleContext) -> [AdEffect]
    /// Ends it from outside (closed, destroyed, failed): whatever its state, once.
    mutating func stop(_ reason: AdEndReason, cause: UInt64?) -> [AdEffect]
}

extension AdLifecycle {
    /// The effects of ending, for every kind: no more timer, down if it was up, the end.
    static func ending(_ reason: AdEndReason, cause: UInt64?, wasVisible: Bool, takeDown: AdEffect = .dismiss) -> [AdEffect] {
        [.cancelTimer] + (wasVisible ? [takeDown] : []) + [.end(reason, cause: cause)]
    }
}
