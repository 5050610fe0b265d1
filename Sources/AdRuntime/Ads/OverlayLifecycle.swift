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
///
/// A squeezeback (R26) is an overlay with a `transition`: it comes out through `entering` (the
/// content on its way into its window; its start — the impression — told when the L is fully
/// out) and goes through `leaving` (the content on its way back) to `ended(completed)`. While
/// entering, a pause, a seek or another item end it as they end an overlay; while leaving its
/// time is served, and anything that would end it ends it `completed` — in both cases with the
/// content restored at once (`dismiss`), never animated while paused. Its quartiles are told
/// over its time on screen.
/// ```
/// ready ──show()──▶ entering ──transition──▶ showing ──duration──▶ leaving ──transition──▶ ended(completed)
/// entering ──pause/seek/item──▶ ended(paused/seeked/contentChanged)    leaving ──pause/seek/item/held/hidden──▶ ended(completed)
/// ```
final class OverlayLifecycle: AdLifecycle {
    enum State: Equatable {
        case ready
        /// Shown for a slot: waits for playback to play across `start` (a seek past it does not count).
        case waiting(start: Double)
        /// Shown before the content plays (an episode's first frames): on screen once it plays.
        case waitingToPlay
        /// A squeezeback's content on its way into its window; `remaining` seconds of playing
        /// time to show once it is in.
        case entering(remaining: Double)
        /// On screen; `remaining` seconds of playing time were left at `since`.
        case showing(remaining: Double, since: UInt64)
        /// A squeezeback's time served: the content on its way back.
        case leaving
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

    /// A squeezeback's way in and out, seconds; 0 for an overlay (up and down at once).
    let transition: Double
    /// Quartiles are told over its time on screen (a squeezeback's billing).
    let tellsQuartiles: Bool
    /// Its start was told (the L fully out, once).
    private var announced = false
    /// Quartiles told so far (0–3; `complete` is its end).
    private var quartilesTold = 0

    init(duration: Double, transition: Double = 0, tellsQuartiles: Bool = false) {
        self.duration = duration
        self.transition = transition > 0 && transition.isFinite ? transition : 0
        self.tellsQuartiles = tellsQuartiles
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
        case .showing, .frozen, .returning, .entering, .leaving: true
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
        if state == .leaving {
            // Its time is served: whatever would end it ends it completed, restored at once.
            switch event.change {
            case .paused, .seeked, .held: return end(.completed, cause: cause)
            default: if event.change.endsTheItem { return end(.completed, cause: cause) }
            }
            return []
        }
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
        case (.entering(let remaining), .held):
            state = .suspended(remaining: remaining)
            return [.dismiss, .cancelTimer]
        case (.entering, .paused):
            return end(.paused, cause: cause)
        case (.entering, .seeked):
            return end(.seeked, cause: cause)
        case (.entering, _):
            return []
        case (.frozen(let remaining), .held), (.returning(let remaining), .held):
            state = .suspended(remaining: remaining)
            return [.dismiss, .cancelTimer]
        case (.suspended(let remaining), .playing):
            guard !context.background else {
                state = .frozen(remaining: remaining)
                return [.restore]
            }
            if transition > 0 {
                state = .entering(remaining: remaining)   // the content goes into its window again
                return [.enter, .setTimer(transition)]
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
        case (.returning, _), (.ready, _), (.ended, _), (.leaving, _):
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
        case .entering(let remaining):
            announced = true
            state = .showing(remaining: remaining, since: context.now)
            return [.out, .setTimer(nextTimer(remaining))]
        case .showing(let remaining, let since):
            let left = left(remaining, since, context)
            if tellsQuartiles, left > 0.001 {
                // A quartile's time: told, and the timer set for the next (or the end).
                state = .showing(remaining: left, since: context.now)
                return tellQuartiles(left) + [.setTimer(nextTimer(left))]
            }
            let told = tellsQuartiles ? tellQuartiles(0) : []
            guard transition > 0 else { return told + end(.completed, cause: nil) }
            state = .leaving
            return told + [.leave, .setTimer(transition)]
        case .leaving:
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
        case .entering(let remaining) where context.background:
            state = .frozen(remaining: remaining)
            return [.cancelTimer]
        case .leaving where context.background:
            return end(.completed, cause: nil)
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
        if transition > 0, !announced {
            // A squeezeback: the content goes into its window first; its start is told when it is in.
            state = .entering(remaining: remaining)
            return (wasVisible ? [] : [.enter]) + [.setTimer(transition)]
        }
        state = .showing(remaining: remaining, since: context.now)
        return (wasVisible ? [] : [.present]) + [.setTimer(nextTimer(remaining))]
    }

    /// The timer while showing with `left` seconds to go: its end, or its next quartile's time.
    private func nextTimer(_ left: Double) -> Double {
        guard tellsQuartiles, quartilesTold < 3 else { return left }
        let played = duration - left
        let next = Double(quartilesTold + 1) * duration / 4
        return max(0, min(left, next - played))
    }

    /// The quartiles reached with `left` seconds to go, each told once.
    private func tellQuartiles(_ left: Double) -> [AdEffect] {
        var effects: [AdEffect] = []
        while quartilesTold < 3, duration - left >= Double(quartilesTold + 1) * duration / 4 - 0.001 {
            quartilesTold += 1
            effects.append(.quartile(quartilesTold))
        }
        return effects
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
