/// A post-roll: a video after the episode played to its end (R8).
///
/// ```
/// ready ──show() after the end──▶ playing ──video to its end──▶ ended(completed)
/// playing ──the video fails──▶ ended(failed)
/// playing ──another item comes in, or the video is stopped from outside──▶ ended(contentChanged)
/// playing ──it plays past its budget (not counting paused time)──▶ ended(failed)
/// ```
/// The budget is the creative's declared duration and a margin (`budget(declared:)`), or a
/// bound of its own when it declares none: an endless stream served as a 5-second ad is stopped,
/// never played for ever.
/// The app moves to the next episode after `didEnd`.
final class PostrollLifecycle: AdLifecycle {
    enum State: Equatable {
        case ready
        case playing
        case ended(AdEndReason)
    }

    private(set) var state = State.ready
    /// Seconds it may still play (paused time does not count).
    private var remaining: Double
    /// When it started playing again (loop ns), while it plays and is not paused.
    private var runningSince: UInt64?
    /// It was stopped for playing past its budget.
    private(set) var overran = false
    let budget: Double

    /// The most a post-roll that declares no duration may play.
    static let undeclaredLimit = 300.0

    /// Its declared duration, a quarter more and 5 s (mpv's start and a stream's buffering).
    static func budget(declared: Double?) -> Double {
        guard let declared, declared.isFinite, declared > 0 else { return undeclaredLimit + 5 }
        return min(declared, Seconds.Bounds.duration.maximum) * 1.25 + 5
    }

    init(declaredDuration: Double? = nil) {
        budget = Self.budget(declared: declaredDuration)
        remaining = budget
    }

    var isEnded: Bool { if case .ended = state { true } else { false } }
    var isShown: Bool { state != .ready }
    var isVisible: Bool { state == .playing }

    func show(_ context: LifecycleContext) throws(AdError) -> [AdEffect] {
        guard state == .ready else { throw .alreadyShown }
        guard context.contentEnded else { throw .notEnded }
        state = .playing
        runningSince = context.now
        return [.playVideo, .setTimer(remaining)]
    }

    /// The viewer paused (true) or resumed the video: its budget stops and goes on.
    func videoPaused(_ paused: Bool, _ context: LifecycleContext) -> [AdEffect] {
        guard state == .playing else { return [] }
        if paused {
            guard let since = runningSince else { return [] }
            remaining = max(0, remaining - Double(context.now &- since) / 1e9)
            runningSince = nil
            return [.cancelTimer]
        }
        guard runningSince == nil else { return [] }
        runningSince = context.now
        return [.setTimer(remaining)]
    }

    func playerChanged(_ event: PlayerEvent, _ context: LifecycleContext) -> [AdEffect] {
        guard state == .playing else { return [] }
        if case .item(let item) = event.change, item != nil {
            return end(.contentChanged, cause: event.observedAt)
        }
        return []
    }

    func timerFired(_ context: LifecycleContext) -> [AdEffect] {
        guard state == .playing, runningSince != nil else { return [] }
        overran = true
        return end(.failed, cause: nil)
    }
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
        runningSince = nil
        return [.cancelTimer] + Self.ending(reason, cause: cause, wasVisible: wasPlaying, takeDown: .stopVideo)
    }
}
