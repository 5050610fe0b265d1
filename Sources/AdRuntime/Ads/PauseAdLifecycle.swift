/// A pause ad: a creative shown while the content is paused (R7).
///
/// ```
/// ready ──show()──────────────────▶ showing ──content plays──▶ ended(played)
///   └──show(afterPausedFor: d)──▶ activating ──paused for d──▶ showing
/// activating ──seek──▶ activating (the delay starts again)
/// activating ──content plays──▶ ended(played), never seen
/// activating ──background──▶ suspended ──foreground──▶ activating (the delay starts again)
/// showing ──seek──▶ ended(seeked)
/// showing ──on screen for maxShowing──▶ ended(limitReached)   (pause-ad-max: burn-in care)
/// any ──another item / the end of the item──▶ ended(contentChanged)
/// ```
/// A screensaver (R27) is one with `endsWhenHidden`: the output hidden while it shows ends it
/// `interrupted` (a screen that idles is no screen hidden), and its `maxShowing` is the
/// rotation's (the next creative takes its place).
final class PauseAdLifecycle: AdLifecycle {
    enum State: Equatable {
        case ready
        /// Waiting for the content to stay paused for the activation delay.
        case activating(delay: Double)
        /// The output is hidden while activating: the delay waits for its return.
        case suspended(delay: Double)
        case showing
        case ended(AdEndReason)
    }

    private(set) var state = State.ready
    /// Set by `show(afterPausedFor:)` before `show`.
    var activationDelay = 0.0
    /// The longest it stays on screen; nil: as long as the pause lasts.
    var maxShowing: Double?
    /// A screensaver: the output hidden while it shows ends it `interrupted`.
    var endsWhenHidden = false

    /// On screen now: the effects, with the limit's timer when there is one.
    private func present() -> [AdEffect] {
        state = .showing
        return [.present] + (maxShowing.map { [.setTimer($0)] } ?? [])
    }

    var isEnded: Bool { if case .ended = state { true } else { false } }
    var isShown: Bool { state != .ready }
    var isVisible: Bool { state == .showing }

    func show(_ context: LifecycleContext) throws(AdError) -> [AdEffect] {
        guard state == .ready else { throw .alreadyShown }
        guard !context.playing else { throw .notPaused }
        if activationDelay > 0 {
            state = context.background ? .suspended(delay: activationDelay) : .activating(delay: activationDelay)
            return context.background ? [] : [.setTimer(activationDelay)]
        }
        return present()
    }

    func playerChanged(_ event: PlayerEvent, _ context: LifecycleContext) -> [AdEffect] {
        let cause = event.observedAt
        guard isShown, !isEnded else { return [] }
        if event.change.endsTheItem { return end(.contentChanged, cause: cause) }
        switch (state, event.change) {
        case (_, .playing):
            return end(.played, cause: cause)
        case (.activating(let delay), .seeked):
            return [.setTimer(delay)]   // a seek during the delay starts it again (R7)
        case (.showing, .seeked):
            return end(.seeked, cause: cause)
        default:
            return []
        }
    }

    func timerFired(_ context: LifecycleContext) -> [AdEffect] {
        if state == .showing, maxShowing != nil { return end(.limitReached, cause: nil) }
        guard case .activating = state, !context.playing, !context.background else { return [] }
        return present()
    }

    func backgroundChanged(_ context: LifecycleContext) -> [AdEffect] {
        switch state {
        case .activating(let delay) where context.background:
            state = .suspended(delay: delay)
            return [.cancelTimer]
        case .suspended(let delay) where !context.background:
            state = .activating(delay: delay)
            return [.setTimer(delay)]
        case .showing where context.background && endsWhenHidden:
            return end(.interrupted, cause: nil)
        default:
            return []
        }
    }

    func stop(_ reason: AdEndReason, cause: UInt64?) -> [AdEffect] {
        isEnded ? [] : end(reason, cause: cause)
    }

    private func end(_ reason: AdEndReason, cause: UInt64?) -> [AdEffect] {
        let wasVisible = isVisible
        state = .ended(reason)
        return Self.ending(reason, cause: cause, wasVisible: wasVisible)
    }
}
