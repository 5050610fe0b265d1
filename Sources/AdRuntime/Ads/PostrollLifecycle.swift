/// A post-roll: a video after the episode played to its end (R8).
///
/// ```
/// ready ──show() after the end──▶ playing ──video to its end──▶ ended(completed)
/// playing ──the video fails──▶ ended(failed)
/// playing ──another item comes in──▶ ended(contentChanged)
/// ```
/// The app moves to the next episode after `didEnd`.
struct PostrollLifecycle: AdLifecycle {
    enum State: Equatable {
        case ready
        case playing
        case ended(AdEndReason)
    }

    private(set) var state = State.ready

    var isEnded: Bool { if case .ended = state { true } else { false } }
    var isShown: Bool { state != .ready }
    var isVisible: Bool { state == .playing }

    mutating func show(_ context: LifecycleContext) throws(AdError) -> [AdEffect] {
        guard state == .ready else { throw .alreadyShown }
        guard context.contentEnded else { throw .notEnded }
        state = .playing
        return [.playVideo]
    }

    mutating func playerChanged(_ event: PlayerEvent, _ context: LifecycleContext) -> [AdEffect] {
        guard state == .playing else { return [] }
        if case .item(let item) = event.change, item != nil {
            return end(.contentChanged, cause: event.observedAt)
        }
        return []
    }

    mutating func timerFired(_ context: LifecycleContext) -> [AdEffect] { [] }
    mutating func backgroundChanged(_ context: LifecycleContext) -> [AdEffect] { [] }

    /// The surface reports the video's end.
    mutating func videoEnded(failed: Bool) -> [AdEffect] {
        guard state == .playing else { return [] }
        return end(failed ? .failed : .completed, cause: nil)
    }

    mutating func stop(_ reason: AdEndReason, cause: UInt64?) -> [AdEffect] {
        isEnded ? [] : end(reason, cause: cause)
    }

    private mutating func end(_ reason: AdEndReason, cause: UInt64?) -> [AdEffect] {
        let wasPlaying = isVisible
        state = .ended(reason)
        return Self.ending(reason, cause: cause, wasVisible: wasPlaying, takeDown: .stopVideo)
    }
}
