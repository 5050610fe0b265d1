/// An overlay: a non-linear creative over playing content (R6, R12, R13).
///
/// ```
/// ready ──show()──────────────▶ showing ──duration of playing time──▶ ended(completed)
///   ├──show(atContentTime:)──▶ waiting ──plays across start──▶ showing
///   └──showWhenPlaying()──▶ waitingToPlay ──the content plays──▶ showing
/// showing ──pause──▶ ended(paused)          showing ──seek──▶ ended(seeked)
/// showing ──background──▶ frozen ──foreground──▶ returning ──plays within 1 s──▶ showing
///                                                   └──1 s, still not playing──▶ ended(interrupted)
/// showing ──held for a linear break──▶ suspended (down, its clock stopped) ──the content plays again──▶ showing (up again)
/// waiting ──held──▶ waiting (its timer off until the content plays again)
/// any ──another item / the end of the item──▶ ended(contentChanged)
/// ```
final class OverlayLifecycle: AdLifecycle {
    enum State: Equatable {
        case ready
        /// Shown for a slot: waits for playback to play across `start` (a seek past it does not count).
        case waiting(start: Double)
        /// Shown before the content plays (an episode's first frames): on screen once it plays.
        case waitingToPlay
        /// On screen; `remaining` seconds of playing time were left at `since`.
        case showing(remaining: Double, since: UInt64)
        /// On screen while the output is hidden: the clock is stopped (R13).
        case frozen(remaining: Double)
        /// The output is back; the content has 1 s to play again.
        case returning(remaining: Double)
        /// Taken down while a linear break holds the content (not a pause: it does not end);
        /// up again when the content plays again.
        case suspended(remaining: Double)
        case ended(AdEndReason)
    }

    /// The grace after the output's return in which the content must play again (R13).
    static let returnGrace = 1.0

    private(set) var state = State.ready
    let duration: Double
    /// Set by `show(atContentTime:)` before `show`.
    var slotStart: Double?
    /// Set by `showWhenPlaying` before `show`: content not playing yet is waited for.
    var waitsForPlay = false

    init(duration: Double) {
        self.duration = duration
    }

    var isEnded: Bool { if case .ended = state { true } else { false } }
    /// Shown, and not on screen yet: waiting for its slot or for the content to play.
    var isWaiting: Bool {
        switch state {
        case .waiting, .waitingToPlay: true
        default: false
        }
    }
    var isShown: Bool { state != .ready }
    var isVisible: Bool {
        switch state {
        case .showing, .frozen, .returning: true
        default: false
        }
    }

    func show(_ context: LifecycleContext) throws(AdError) -> [AdEffect] {
        guard state == .ready else { throw .alreadyShown }
        if let start = slotStart {
            state = .waiting(start: start)
            return armCrossing(context)
        }
        if waitsForPlay, !context.playing || context.background {
            state = .waitingToPlay
            return []
        }
        guard context.playing else { throw .notPlaying }
        guard !context.background else { throw .notPlaying }
        return startShowing(remaining: duration, context)
    }

    func playerChanged(_ event: PlayerEvent, _ context: LifecycleContext) -> [AdEffect] {
        let cause = event.observedAt
        guard isShown, !isEnded else { return [] }
        if event.change.endsTheItem { return end(.contentChanged, cause: cause) }
        switch (state, event.change) {
        case (.waiting(let start), .seeked(_, let to)):
            // A seek that lands past the start does not start it (R12); one before re-arms.
            return to < start ? armCrossing(context) : [.cancelTimer]
        case (.waiting, .playing), (.waiting, .rate):
            return armCrossing(context)
        case (.waiting, .paused), (.waiting, .held):
            return [.cancelTimer]
        case (.waiting, _):
            return []
        case (.waitingToPlay, .playing):
            return context.background ? [] : startShowing(remaining: duration, context)
        case (.waitingToPlay, _):
            return []

        case (.showing(let remaining, let since), .held):
            state = .suspended(remaining: left(remaining, since, context))
            return [.dismiss, .cancelTimer]
        case (.frozen(let remaining), .held), (.returning(let remaining), .held):
            state = .suspended(remaining: remaining)
            return [.dismiss, .cancelTimer]
        case (.suspended(let remaining), .playing):
            guard !context.background else {
                state = .frozen(remaining: remaining)
                return [.restore]
            }
            state = .showing(remaining: remaining, since: context.now)
            return [.restore, .setTimer(remaining)]
        case (.suspended, .seeked):
            return end(.seeked, cause: cause)
        case (.suspended, _):
            return []
        case (.showing, .paused):
            return end(.paused, cause: cause)
        case (.showing, .seeked), (.frozen, .seeked), (.returning, .seeked):
            return end(.seeked, cause: cause)
        case (.showing, _):
            return []   // a rate change: the duration is wall-clock time while playing

        case (.frozen, _):
            return []   // frozen through the content's pause (R13)
        case (.returning(let remaining), .playing):
            return startShowing(remaining: remaining, context)
        case (.returning, _), (.ready, _), (.ended, _):
            return []
        }
    }

    func timerFired(_ context: LifecycleContext) -> [AdEffect] {
        switch state {
        case .waiting(let start):
            guard context.playing, !context.background else { return [] }
            // Position is read on demand: if the rate changed under the timer, re-arm.
            return context.position() >= start - 0.001 ? startShowing(remaining: duration, context)
                                                       : armCrossing(context)
        case .showing:
            return end(.completed, cause: nil)
        case .returning:
            return end(.interrupted, cause: nil)
        default:
            return []
        }
    }

    func backgroundChanged(_ context: LifecycleContext) -> [AdEffect] {
        switch state {
        case .showing(let remaining, let since) where context.background:
            state = .frozen(remaining: left(remaining, since, context))
            return [.cancelTimer]
        case .frozen(let remaining) where !context.background:
            if context.playing { return startShowing(remaining: remaining, context) }
            state = .returning(remaining: remaining)
            return [.setTimer(Self.returnGrace)]
        case .returning(let remaining) where context.background:
            state = .frozen(remaining: remaining)
            return [.cancelTimer]
        case .waiting:
            return context.background ? [.cancelTimer] : armCrossing(context)
        case .waitingToPlay where !context.background && context.playing:
            return startShowing(remaining: duration, context)
        default:
            return []
        }
    }

    func stop(_ reason: AdEndReason, cause: UInt64?) -> [AdEffect] {
        isEnded ? [] : end(reason, cause: cause)
    }

    // MARK: Transitions

    private func startShowing(remaining: Double, _ context: LifecycleContext) -> [AdEffect] {
        let wasVisible = isVisible
        state = .showing(remaining: remaining, since: context.now)
        return (wasVisible ? [] : [.present]) + [.setTimer(remaining)]
    }

    /// While waiting and playing before the start: a timer for when playback reaches it.
    private func armCrossing(_ context: LifecycleContext) -> [AdEffect] {
        guard case .waiting(let start) = state, context.playing, !context.background, context.rate > 0 else {
            return [.cancelTimer]
        }
        let position = context.position()
        // Playing from the start itself (a slot at an episode's 0:00) is playing across it.
        if abs(position - start) <= 0.001 { return startShowing(remaining: duration, context) }
        guard position < start else { return [.cancelTimer] }   // already past: not by playing across
        return [.setTimer((start - position) / context.rate)]
    }

    private func end(_ reason: AdEndReason, cause: UInt64?) -> [AdEffect] {
        let wasVisible = isVisible
        state = .ended(reason)
        return Self.ending(reason, cause: cause, wasVisible: wasVisible)
    }

    private func left(_ remaining: Double, _ since: UInt64, _ context: LifecycleContext) -> Double {
        max(0, remaining - Double(context.now &- since) / 1e9)
    }
}
