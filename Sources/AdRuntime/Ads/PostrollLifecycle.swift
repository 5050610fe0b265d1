/// A post-roll: a video after the episode played to its end (R8).
///
/// ```
/// ready ──show() after the end──▶ playing ──video to its end──▶ ended(completed)
/// playing ──the video fails──▶ ended(failed)
/// playing ──another item comes in, or the video is stopped from outside──▶ ended(contentChanged)
/// ```
/// The app moves to the next episode after `didEnd`.
final class PostrollLifecycle: AdLifecycle {
    enum State: Equatable {
        case ready
        case playing
        case ended(AdEndReason)
    }

    private(set) var state = State.ready

    var isEnded: Bool { if case .ended = state { true } else { false } }
    var isShown: Bool { state != .ready }
    var isVisible: Bool { state == .playing }

    func show(_ context: LifecycleContext) throws(AdError) -> [AdEffect] {
        guard state == .ready else { throw .alreadyShown }
        guard context.contentEnded else { throw .notEnded }
        state = .playing
        return [.playVideo]
    }

    func playerChanged(_ event: PlayerEvent, _ context: LifecycleContext) -> [AdEffect] {
        guard state == .playing else { return [] }
        if case .item(let item) = event.change, item != nil {
            return end(.contentChanged, cause: event.observedAt)
        }
        return []
    }

    func timerFired(_ context: LifecycleContext) -> [AdEffect] { [] }
    func backgroundChanged(_ context: LifecycleContext) -> [AdEffect] { [] }

    /// How the surface says the video ended.
    enum VideoEnd {
        /// It played to its end.
        case finished
        /// It could not be played.
        case failed
        /// Something else stopped it (another file loaded, `stop` from another client): it
        /// did not complete, and the player no longer holds it.
        case stopped
    }

    /// The surface reports the video's end.
    func videoEnded(_ how: VideoEnd) -> [AdEffect] {
        guard state == .playing else { return [] }
        switch how {
        case .finished: return end(.completed, cause: nil)
        case .failed: return end(.failed, cause: nil)
        case .stopped: return end(.contentChanged, cause: nil)
        }
    }

    func stop(_ reason: AdEndReason, cause: UInt64?) -> [AdEffect] {
        isEnded ? [] : end(reason, cause: cause)
    }

    private func end(_ reason: AdEndReason, cause: UInt64?) -> [AdEffect] {
        let wasPlaying = isVisible
        state = .ended(reason)
        return Self.ending(reason, cause: cause, wasVisible: wasPlaying, takeDown: .stopVideo)
    }
}
