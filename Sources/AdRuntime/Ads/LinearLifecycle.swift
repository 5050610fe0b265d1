/// A linear ad: a video in the content's place — a post-roll after the episode played to its
/// end (R8), a pre-roll before its first frame, a mid-roll at a content time.
///
/// ```
/// ready ──show(), post-roll: after the end──────────────▶ playing ──video to its end──▶ ended(completed)
/// ready ──show(), pre-roll: before the content started──▶ playing
/// ready ──show(), mid-roll: the content held where it is──▶ playing
/// ready ──show(atContentTime: T), mid-roll──▶ waiting(T) ──playback plays across T──▶ playing (the content held at T)
/// waiting ──a seek that lands past T──▶ waiting (R12: landing is no crossing; the policy's snapback shows one at the landing)
/// waiting ──moveToLanding (the snapback: T was the last break passed)──▶ waiting(L), L the landing ──plays there──▶ playing (held at L)
/// playing ──paused by the viewer──▶ playing (its budget stops) ──resumed──▶ playing
/// playing ──skip(), past its skip offset──▶ ended(skipped)
/// playing ──the video fails, or (pre/mid-roll) does not start within the start timeout──▶ ended(failed)
/// playing ──another item comes in, or the video is stopped from outside──▶ ended(contentChanged)
/// playing ──it plays past its budget (not counting paused time)──▶ ended(failed)
/// waiting ──another item, the item's end──▶ ended(contentChanged)
/// ```
/// The budget is the creative's declared duration and a margin (`budget(declared:)`), or a
/// bound of its own when it declares none: an endless stream served as a 5-second ad is stopped,
/// never played for ever. The break the content was held for is the session's: the content
/// resumes when the app ends the break (`VideoAds.endBreak`), after the last ad of its pod.
final class LinearLifecycle: AdLifecycle {
    enum State: Equatable {
        case ready
        /// A mid-roll waiting for playback to play across its time.
        case waiting(at: Double)
        /// The video was asked to play; `started` once it plays (its first progress).
        case playing(started: Bool)
        case ended(AdEndReason)
    }

    let kind: AdKind
    private(set) var state = State.ready
    /// Seconds it may still play (paused time does not count).
    private var remaining: Double
    /// When it started playing again (loop ns), while it plays and is not paused.
    private var runningSince: UInt64?
    /// It was stopped for playing past its budget.
    private(set) var overran = false
    /// It did not start within `startTimeout` (pre-, mid-roll).
    private(set) var neverStarted = false
    let budget: Double
    /// Pre- and mid-rolls: the content waits for it, so a video that does not start within this
    /// many seconds fails and the content plays (R16). Nil: no such bound (post-rolls).
    var startTimeout: Double?
    /// Set by `show(atContentTime:)` before `show` (mid-rolls).
    var breakTime: Double?
    /// The video's playhead as last reported (for the skip offset).
    private(set) var playhead = 0.0

    /// The most a linear ad that declares no duration may play.
    static let undeclaredLimit = 300.0

    /// Its declared duration, a quarter more and 5 s (mpv's start and a stream's buffering).
    static func budget(declared: Double?) -> Double {
        guard let declared, declared.isFinite, declared > 0 else { return undeclaredLimit + 5 }
        return min(declared, Seconds.Bounds.duration.maximum) * 1.25 + 5
    }

    init(kind: AdKind = .postroll, declaredDuration: Double? = nil) {
        self.kind = kind
        budget = Self.budget(declared: declaredDuration)
        remaining = budget
    }

    var isEnded: Bool { if case .ended = state { true } else { false } }
    var isShown: Bool { state != .ready }
    var isVisible: Bool { if case .playing = state { true } else { false } }
    var isWaiting: Bool { if case .waiting = state { true } else { false } }

    func show(_ context: LifecycleContext) throws(AdError) -> [AdEffect] {
        guard state == .ready else { throw .alreadyShown }
        switch kind {
        case .postroll:
            guard context.contentEnded else { throw .notEnded }
        case .preroll:
            guard !context.contentStarted else { throw .contentStarted }
        case .midroll:
            if let at = breakTime {
                state = .waiting(at: at)
                return armCrossing(context)
            }
            guard !context.contentEnded else { throw .notEnded }
            return startPlaying(holdAt: context.position(), context)
        default:
            throw .wrongKind(kind)
        }
        return startPlaying(holdAt: nil, context)
    }

    private func startPlaying(holdAt: Double?, _ context: LifecycleContext) -> [AdEffect] {
        state = .playing(started: false)
        runningSince = context.now
        let timer = startTimeout.map { min($0, remaining) } ?? remaining
        return (holdAt.map { [.holdContent($0)] } ?? []) + [.playVideo, .setTimer(timer)]
    }

    /// While waiting and playing before its time: a timer for when playback reaches it.
    private func armCrossing(_ context: LifecycleContext) -> [AdEffect] {
        guard case .waiting(let at) = state, context.playing, context.rate > 0 else { return [.cancelTimer] }
        let position = context.position()
        // Playing from the time itself (a break at a landing, a snapback) is playing across it.
        if abs(position - at) <= 0.001 { return startPlaying(holdAt: at, context) }
        guard position < at else { return [.cancelTimer] }   // already past: not by playing across
        return [.setTimer((at - position) / context.rate)]
    }

    /// A seek landed past its time and it is the last break passed (the snapback): it waits for
    /// the landing instead, and plays at once if playback plays there.
    func moveToLanding(_ context: LifecycleContext) -> [AdEffect] {
        guard case .waiting = state else { return [] }
        let landing = context.position()
        state = .waiting(at: landing)
        breakTime = landing
        return armCrossing(context)
    }

    /// The viewer paused (true) or resumed the video: its budget stops and goes on.
    func videoPaused(_ paused: Bool, _ context: LifecycleContext) -> [AdEffect] {
        guard case .playing(let started) = state else { return [] }
        if paused {
            guard let since = runningSince else { return [] }
            remaining = max(0, remaining - Double(context.now &- since) / 1e9)
            runningSince = nil
            return [.cancelTimer]
        }
        guard runningSince == nil else { return [] }
        runningSince = context.now
        return [.setTimer(started ? remaining : startTimeout.map { min($0, remaining) } ?? remaining)]
    }

    /// The video reported its playhead: it plays (the start timeout gives way to the budget).
    func videoProgressed(_ position: Double, _ context: LifecycleContext) -> [AdEffect] {
        guard case .playing(let started) = state else { return [] }
        playhead = max(playhead, position)
        guard !started else { return [] }
        state = .playing(started: true)
        guard startTimeout != nil, let since = runningSince else { return [] }
        // The time spent starting counts against the budget too.
        remaining = max(0, remaining - Double(context.now &- since) / 1e9)
        runningSince = context.now
        return [.setTimer(remaining)]
    }

    /// The viewer skips it: only past its skip offset.
    func skip(skipOffset: Double?) throws(AdError) -> [AdEffect] {
        guard case .playing = state else { throw .notSkippable(after: skipOffset) }
        guard let skipOffset, playhead >= skipOffset else { throw .notSkippable(after: skipOffset) }
        return end(.skipped, cause: nil)
    }

    func playerChanged(_ event: PlayerEvent, _ context: LifecycleContext) -> [AdEffect] {
        switch state {
        case .playing:
            if case .item(let item) = event.change, item != nil, kind != .midroll || !isHeldItem(item, context) {
                return end(.contentChanged, cause: event.observedAt)
            }
            return []
        case .waiting(let at):
            if event.change.endsTheItem { return end(.contentChanged, cause: event.observedAt) }
            switch event.change {
            case .seeked(_, let to): return to < at ? armCrossing(context) : [.cancelTimer]
            case .playing, .rate: return armCrossing(context)
            case .paused, .held: return [.cancelTimer]
            default: return []
            }
        default:
            return []
        }
    }

    /// A mid-roll's own content coming back in is not another item (a player that reloads it).
    private func isHeldItem(_ item: PlayerItem?, _ context: LifecycleContext) -> Bool {
        item != nil && item == context.heldItem
    }

    func timerFired(_ context: LifecycleContext) -> [AdEffect] {
        switch state {
        case .waiting(let at):
            guard context.playing else { return [] }
            // Position is read on demand: if the rate changed under the timer, re-arm.
            return context.position() >= at - 0.001 ? startPlaying(holdAt: at, context) : armCrossing(context)
        case .playing(let started):
            guard runningSince != nil else { return [] }
            if started || startTimeout == nil { overran = true } else { neverStarted = true }
            return end(.failed, cause: nil)
        default:
            return []
        }
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
        guard case .playing = state else { return [] }
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
