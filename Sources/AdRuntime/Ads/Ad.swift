/// An ad that a source delivered: shown once, then ended exactly once (R15).
///
/// Threading: any thread. `show` runs on the player's loop (inline there, handed over and
/// waited for elsewhere) and decides on the facts the loop holds; `didEnd` runs once, later,
/// on the loop, in order with the `VideoAds`' other callbacks and events, with no lock held.
public final class Ad: Sendable {
    /// Unique within the process; the surface knows the ad by it.
    public let id: UInt64
    public let kind: AdKind
    public let creative: AdCreative
    private weak let session: AdSession?

    init(kind: AdKind, creative: AdCreative, session: AdSession) {
        // Random rather than counted: no process-wide counter, and a collision of two
        // live ads in 2^64 is not a concern.
        self.id = session.configuration.environment.uint64(in: 1...UInt64.max)
        self.kind = kind
        self.creative = creative
        self.session = session
    }

    deinit {
        guard let session else { return }
        let id = self.id
        session.loop.run { [weak session] in session?.forget(id) }
    }

    /// Shows it now. An overlay needs playing content, a pause ad paused content, a
    /// post-roll an episode that played to its end, a pre-roll an episode not in yet; a mid-roll
    /// holds the content where it is (a snapback after a seek). Throws `invalidated(.contentChanged)`
    /// when the player holds another item than this ad's (R10, R14).
    public func show(didEnd: @escaping @Sendable (AdEndReason) -> Void) throws(AdError) {
        try show(.now, didEnd)
    }

    /// Overlays and mid-rolls: shows it when playback plays across `seconds` of content time —
    /// not when a seek lands past it (R12). It waits while the content is paused. A mid-roll then
    /// holds the content at `seconds` (`.held`) and plays; the content resumes there at `endBreak`.
    public func show(atContentTime seconds: Double, didEnd: @escaping @Sendable (AdEndReason) -> Void) throws(AdError) {
        try show(.atContentTime(seconds), didEnd)
    }

    /// Overlays: shows it now if the content plays, else as soon as it does — an overlay that
    /// loads in the moment between an episode coming in and its first frame waits for it
    /// instead of failing `notPlaying`. It ends `contentChanged` if another item comes first.
    public func showWhenPlaying(didEnd: @escaping @Sendable (AdEndReason) -> Void) throws(AdError) {
        try show(.whenPlaying, didEnd)
    }

    /// Pause ads: shows it once the content has stayed paused for `seconds`; a seek in that
    /// time starts the wait again (R7). Ends as `played`, unseen, if the content plays first.
    public func show(afterPausedFor seconds: Double, didEnd: @escaping @Sendable (AdEndReason) -> Void) throws(AdError) {
        try show(.afterPausedFor(seconds), didEnd)
    }

    /// A mid-roll still waiting for its time, which a seek has just jumped past — the last
    /// break the seek passed (R19's snapback): it plays at the landing instead, holding the
    /// content there, now if playback plays, else when it does. The ad already loaded for the
    /// break is the one that plays (its server is not asked again, nothing is withdrawn). Any
    /// other ad is left alone. Any thread.
    public func playAtLanding() {
        guard let session else { return }
        let id = self.id
        session.loop.run { [weak session] in session?.playAtLanding(id) }
    }

    /// An overlay still waiting for its slot — playback has not played across its start —
    /// that the application no longer wants, because the playhead moved past that start (R12
    /// keeps it waiting in case playback comes back before it): it ends as `seeked`, never
    /// having been on screen, so no beacon is sent for it. An overlay on screen, an ended one
    /// and any other kind of ad are left alone. Any thread.
    public func withdraw() {
        guard let session else { return }
        let id = self.id
        session.loop.run { [weak session] in session?.withdraw(id) }
    }

    /// A linear ad the viewer skips, past its creative's skip offset: it ends `skipped`. Throws
    /// `notSkippable` before then, or when it has none. On the loop, or waits for it.
    public func skip() throws(AdError) {
        guard let session else { throw .destroyed }
        let id = self.id
        let outcome: Result<Void, AdError>
        do {
            outcome = try session.loop.sync { session.skip(id) }
        } catch {
            throw .destroyed
        }
        try outcome.get()
    }

    /// The viewer closed it (or skipped a post-roll): it ends as `closed`. Any thread.
    public func close() {
        guard let session else { return }
        let id = self.id
        session.loop.run { [weak session] in session?.close(id) }
    }

    private func show(_ options: ShowOptions, _ didEnd: @escaping @Sendable (AdEndReason) -> Void) throws(AdError) {
        guard let session else { throw .destroyed }
        let id = self.id
        let outcome: Result<Void, AdError>
        do {
            outcome = try session.loop.sync { session.show(id, options: options, didEnd: didEnd) }
        } catch {
            throw .destroyed   // the loop has stopped: the player is gone
        }
        try outcome.get()
    }
}

/// How a surface reports on a post-roll's video. Any thread, any time after
/// `playPostroll` returned; reports about an ad that ended already are dropped.
public final class PostrollReporter: Sendable {
    enum Report: Equatable {
        case began
        case progress(Double, Double)
        case paused(Bool)
        case ended(LinearLifecycle.VideoEnd, failure: String?)
    }

    private weak let session: AdSession?
    public let id: UInt64

    init(session: AdSession, id: UInt64) {
        self.session = session
        self.id = id
    }

    /// Its first frame is on the output: the ad starts now (`started`, its impression) — not
    /// when its file was asked for (a file that never shows a frame is never billed). Told on
    /// the loop's next turn, never inside the call that asked for the video. A first progress
    /// report stands for it, for a surface that does not say it.
    public func began() {
        guard let session else { return }
        let id = self.id
        _ = session.loop.execute { [weak session] in session?.postrollReport(id, .began) }
    }

    /// The video is at `position` of `duration` seconds (quartile events follow).
    public func progress(_ position: Double, of duration: Double) { report(.progress(position, duration)) }
    /// The video was paused (true) or resumed (false) by the viewer.
    public func paused(_ paused: Bool) { report(.paused(paused)) }
    /// The video played to its end.
    public func finished() { report(.ended(.finished, failure: nil)) }
    /// The video could not be played.
    public func failed(_ message: String) { report(.ended(.failed, failure: message)) }
    /// Something other than the runtime stopped the video (another file loaded, a `stop`
    /// from another client): it did not complete; it ends as `contentChanged`.
    public func stopped() { report(.ended(.stopped, failure: nil)) }

    private func report(_ report: Report) {
        guard let session else { return }
        let id = self.id
        session.loop.run { [weak session] in session?.postrollReport(id, report) }
    }
}

/// How `show` was asked for.
enum ShowOptions: Equatable {
    case now
    case atContentTime(Double)
    case whenPlaying
    case afterPausedFor(Double)
}
