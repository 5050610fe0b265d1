/// Settings of a `VideoAds`.
public struct VideoAdsConfiguration: Sendable {
    /// A source that has not answered by then has failed (`AdError.timeout`, R16). Longer
    /// than a VAST chain's own limits (8 s, then 4 s per wrapper) would be pointless.
    public var requestTimeout = 10.0
    /// How long an overlay whose creative names no duration stays up (playing time).
    public var defaultOverlayDuration = 10.0
    /// Where the source's request and the surface's preparation run (off the loop). Nil: the
    /// global concurrent executor. The daemon gives a thread of its own (`Workers`), so
    /// that libdispatch's worker pool, which wakes the process every second, never starts.
    public var executor: (any TaskExecutor)?
    /// Whether the output's visibility is known (a window or a screen whose hiding the app
    /// reports, R13): viewability is then measured; otherwise every ad's is `undetermined`
    /// (the daemon with `vo=null` has no output to see).
    public var viewabilityMeasurable = true
    /// The longest a pause ad stays on screen (`pause-ad-max`): then it ends `limitReached`, so
    /// a paused panel never holds one image for hours (OLED burn-in). Nil: as long as the pause.
    public var pauseAdMaxShowing: Double?
    /// How long each screensaver creative stays before the next takes its place (R27:
    /// `screensaver-rotate`): it ends `limitReached`, moved a little on the next (burn-in care).
    public var screensaverRotation = 30.0
    /// A pre- or mid-roll whose video has not started playing by then fails, and the content
    /// plays (R16): the viewer never waits longer for a stalled ad.
    public var linearStartTimeout = 8.0
    /// The box's clocks and randomness (ads' instance ids): the system's, or a simulation's.
    public var environment = AdEnvironment.system
    /// How loud an ad with sound plays (SPEC R28): matched to its content by a static gain,
    /// at a fixed target, or as mastered. `loudnessSource` measures the files; without one
    /// nothing is measured and an ad under `match`/`target` is normalised dynamically.
    public var loudness = AdLoudnessPolicy.off
    public var loudnessSource: (any LoudnessSource)?

    public init() {}
}

/// The video-ads SDK for one episode: follows a content player and runs its overlays, pause
/// ads and post-roll by the rules of SPEC §3 (R6–R16).
///
/// ```swift
/// let ads = VideoAds(content: ContentInfo(id: "episode-1"), source: catalog, surface: surface,
///                    loop: player.loop)
/// try player.load(episode)
/// ads.track(player)                           // once this episode is in the player
/// ads.request(.overlay) { result in
///     guard case .success(let overlay) = result else { return }   // no fill: content plays on
///     try? overlay.show { reason in print("overlay ended:", reason) }
/// }
/// ```
///
/// Concurrency (SPEC R18): a `VideoAds` belongs to the loop of the player it follows (`loop`),
/// which owns all of its state — no lock. A player change, the lifecycle's decision and the
/// surface's removal of the ad happen in one turn of that loop. Calls from other threads are
/// handed to the loop in order (`track`, `request`, `close`, `destroy`, `setBackground`
/// return at once; `show` waits for its answer); on the loop they run inline. Callbacks
/// (`didEnd`, request completions, `onEvent`) run on the loop after the state has changed,
/// one at a time, in order, with no lock held: they may call back in, and must return
/// promptly — hand anything slow (disk, network) to a queue of your own.
///
/// The player is held weakly (R9); a `VideoAds` released without `destroy()` destroys itself.
public final class VideoAds: Sendable {
    public let content: ContentInfo
    /// The loop that owns this `VideoAds`: the loop of the players it tracks.
    public let loop: any PlayerLoop
    let session: AdSession

    public init(content: ContentInfo, source: any AdSource, surface: any AdSurface, loop: any PlayerLoop,
                configuration: VideoAdsConfiguration = VideoAdsConfiguration(),
                onEvent: @escaping @Sendable (AdEvent) -> Void = { _ in }) {
        self.content = content
        self.loop = loop
        session = AdSession(content: content, source: source, surface: surface, loop: loop,
                            configuration: configuration, onEvent: onEvent)
    }

    deinit {
        let session = self.session
        loop.run { session.destroy() }
    }

    // MARK: Following the player

    /// Follows `player` (held weakly) and binds this episode to the item in it now (R10).
    /// Lets go of a player tracked before (R9). Ads on screen for another item end with
    /// `contentChanged`. `player.loop` must be this `VideoAds`' loop.
    public func track(_ player: any TrackablePlayer) {
        precondition(player.loop === loop, "VideoAds.track: the player runs on another loop than this VideoAds")
        loop.run { [session] in session.track(player) }
    }

    /// Ends whatever is on screen (`destroyed`), stops following the player, cancels
    /// requests in flight (their completions get `AdError.destroyed`). Idempotent. A break
    /// that holds the content ends without resuming it: load another item, stop, or
    /// `BreakablePlayer.resumeAfterBreak` it.
    public func destroy() {
        loop.run { [session] in session.destroy() }
    }

    /// As `destroy`, the ads on screen ending with `reason` (`interrupted`: a takeover cut them).
    public func destroy(endingShownAs reason: AdEndReason) {
        loop.run { [session] in session.destroy(endingShownAs: reason) }
    }

    /// The daemon's output is hidden (minimized window, host going to sleep, a client said
    /// so) or shown again: overlays freeze and pause ads' activation waits (R13).
    public func setBackground(_ hidden: Bool) {
        loop.run { [session] in session.setBackground(hidden) }
    }

    /// Waits until everything handed to the loop so far has run, with its callbacks; false
    /// if the loop has stopped. For tests and tools; never call it on the loop.
    @discardableResult
    public func waitForCallbacks() -> Bool {
        precondition(!loop.inLoop, "VideoAds.waitForCallbacks() on the loop would wait for itself")
        return (try? loop.sync {}) != nil
    }

    /// Whether a player is followed (it may since have been released).
    public var isTracking: Bool { (try? loop.sync { session.isTracking }) ?? false }

    // MARK: Requests

    /// Asks the source for an ad of `kind`. The request carries this episode's content id
    /// and the position (0 before `track`; after the tracked item played to its end, the
    /// position where it ended; R11). The completion runs once, on the loop: with the ad, or
    /// with `noFill`, `timeout`, `loadFailed`, `destroyed` — and the content plays on
    /// whatever happens (R16). The source and the surface's preparation run off the loop.
    public func request(_ kind: AdKind, podPosition: Int = 0, breakTime: Double? = nil,
                        completion: @escaping @Sendable (Result<Ad, AdError>) -> Void) {
        loop.run { [session] in session.request(kind, podPosition: podPosition, breakTime: breakTime, completion: completion) }
    }

    /// Ends the linear break that is open: a mid-roll's content plays again, the same item, at
    /// the time it stopped at; a pre-roll's episode may start. Call it after the last ad of the
    /// break's pod (or when a request for the break failed). A break left open ends by itself a
    /// request's timeout after its last ad. Nothing if none is open.
    public func endBreak() {
        loop.run { [session] in session.endBreak() }
    }

    /// The content times of the source's mid-roll breaks for this episode, as far as it knows
    /// now (`AdSource.midrollTimes`). On the loop: cheap.
    public func midrollTimes() -> [Double] {
        loop.requireInLoop()
        return session.source.midrollTimes(for: session.requestContent)
    }

    /// The episode as this viewing's requests carry it (its length and cue points once known,
    /// the viewing's number): what a policy asks a source's `mayFill` about. On the loop.
    public var requestContent: ContentInfo {
        loop.requireInLoop()
        return session.requestContent
    }

    /// The episode's length became known (the player read it from the file): requests carry it
    /// from now on when `content` did not (a percentage break, `n%`, is placed by it). Finite,
    /// positive, within the position bound; anything else is ignored.
    public func setContentDuration(_ seconds: Double?) {
        loop.run { [session] in session.setDuration(seconds) }
    }

    /// The episode's cue points became known (a file's chapters; empty: none): requests carry
    /// them from now on when `content` did not (VMAP's `#n` breaks are placed by them). At most
    /// 1,000, finite, in the position bound.
    public func setContentCuePoints(_ times: [Double]) {
        loop.run { [session] in session.setCuePoints(times) }
    }

    /// Lets the source get ready for a request of `kind` ahead of time (`AdSource.prefetch`):
    /// its creatives downloaded while the content plays. Nothing is requested from the runtime's
    /// point of view — no event, no ad — until `request`.
    public func prefetch(_ kind: AdKind, at position: Double? = nil) {
        loop.run { [session] in session.prefetch(kind, at: position) }
    }

    /// `request(_:completion:)` for async code.
    public func request(_ kind: AdKind) async -> Result<Ad, AdError> {
        await withCheckedContinuation { continuation in
            request(kind) { continuation.resume(returning: $0) }
        }
    }
}
