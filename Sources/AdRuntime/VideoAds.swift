import Foundation
import Synchronization

/// Settings of a `VideoAds`.
public struct VideoAdsConfiguration: Sendable {
    /// A source that has not answered by then has failed (`AdError.timeout`, R16). Longer
    /// than a VAST chain's own limits (8 s, then 4 s per wrapper) would be pointless.
    public var requestTimeout = 10.0
    /// How long an overlay whose creative names no duration stays up (playing time).
    public var defaultOverlayDuration = 10.0

    public init() {}
}

/// The video-ads SDK for one episode: follows a content player and runs its overlays, pause
/// ads and post-roll by the rules of SPEC §3 (R6–R16).
///
/// ```swift
/// let ads = VideoAds(content: ContentInfo(id: "episode-1"), source: catalog, surface: surface)
/// try player.load(episode)
/// ads.track(player)                           // once this episode is in the player
/// ads.request(.overlay) { result in
///     guard case .success(let overlay) = result else { return }   // no fill: content plays on
///     try? overlay.show { reason in print("overlay ended:", reason) }
/// }
/// ```
///
/// Concurrency model: all of a `VideoAds`' state sits behind one lock, owned by nobody in
/// particular — whichever thread acts holds it for a few microseconds:
/// - a player change is handled **on the thread that delivers it** (for mpv: the mpv event
///   thread; for our own `pause()`: the thread that paused), and the decision to end an ad
///   and the surface call that takes it down happen there, in that step — no hop through
///   an executor;
/// - timers run on the clock's thread, requests complete on the source's task, `show`,
///   `close`, `track`, `destroy` on the caller's; each takes the same lock;
/// - the surface is called with the lock held; `didEnd`, request completions and events
///   are handed out afterwards, in order, one at a time, with no lock held (a `didEnd` may
///   request and show the next ad).
/// The player is held weakly (R9); a `VideoAds` released without `destroy()` destroys itself.
public final class VideoAds: Sendable {
    public let content: ContentInfo
    let source: any AdSource
    let surface: any AdSurface
    let clock: any RuntimeClock
    let configuration: VideoAdsConfiguration
    let onEvent: @Sendable (AdEvent) -> Void
    let state = Mutex(Session())
    let delivery = SerialDelivery()
    private let follower = Follower()

    public init(content: ContentInfo, source: any AdSource, surface: any AdSurface,
                clock: any RuntimeClock = SystemClock(), configuration: VideoAdsConfiguration = VideoAdsConfiguration(),
                onEvent: @escaping @Sendable (AdEvent) -> Void = { _ in }) {
        self.content = content
        self.source = source
        self.surface = surface
        self.clock = clock
        self.configuration = configuration
        self.onEvent = onEvent
        follower.owner = self
    }

    deinit {
        destroy()
    }

    // MARK: Following the player

    /// Follows `player` (held weakly) and binds this episode to the item in it now (R10).
    /// Lets go of a player tracked before (R9). Ads on screen for another item end with
    /// `contentChanged`.
    public func track(_ player: any TrackablePlayer) {
        locked { session in
            guard !session.destroyed else { return }
            let snapshot = player.snapshot()
            // Ads of another item go first, then the old observation: a change delivered
            // meanwhile never finds one of them still up.
            for id in session.shownAds where session.ads[id]?.item != snapshot.item {
                session.run(id, self) { lifecycle, _ in lifecycle.stop(.contentChanged, cause: nil) }
            }
            session.observation?.cancel()
            session.player = player
            session.tracking = true
            session.bound = snapshot.item
            session.view = snapshot
            session.contentEnded = false
            session.observation = player.addObserver(follower)
        }
    }

    /// Ends whatever is on screen (`destroyed`), stops following the player, cancels
    /// requests in flight (their completions get `AdError.destroyed`). Idempotent.
    public func destroy() {
        locked { session in
            guard !session.destroyed else { return }
            // What is on screen goes first, then the observation (see `track`).
            for id in session.shownAds {
                session.run(id, self) { lifecycle, _ in lifecycle.stop(.destroyed, cause: nil) }
            }
            session.destroyed = true
            session.observation?.cancel()
            session.observation = nil
            session.player = nil
            session.tracking = false
            for (_, pending) in session.requests.sorted(by: { $0.key < $1.key }) {
                pending.timer?.cancel()
                pending.task?.cancel()
                let completion = pending.completion
                delivery.enqueue { completion(.failure(.destroyed)) }
            }
            session.requests = [:]
            session.ads = [:]
        }
    }

    /// The daemon's output is hidden (minimized window, host going to sleep, a client said
    /// so) or shown again: overlays freeze and pause ads' activation waits (R13).
    public func setBackground(_ hidden: Bool) {
        locked { session in
            guard !session.destroyed, session.background != hidden else { return }
            session.background = hidden
            for id in session.shownAds {
                session.run(id, self) { lifecycle, context in lifecycle.backgroundChanged(context) }
            }
        }
    }

    /// Blocks until every callback and event queued so far has been handed out, or until
    /// `timeout`; false on timeout. Callbacks run on whichever thread is delivering (see the
    /// type), so one may still be running when the call that caused it returns: tests and
    /// tools use this to see them. Never call it from a callback (it would wait for itself).
    @discardableResult
    public func waitForCallbacks(timeout: Double = 10) -> Bool {
        let done = DispatchSemaphore(value: 0)
        delivery.enqueue { done.signal() }
        delivery.drain()
        return done.wait(timeout: .now() + timeout) == .success
    }

    /// Whether a player is followed (it may since have been released).
    public var isTracking: Bool { state.withLock { $0.tracking && $0.player != nil } }

    // MARK: Requests

    /// Asks the source for an ad of `kind`. The request carries this episode's content id
    /// and the position (0 before `track` and after the tracked item is gone: R11). The
    /// completion runs once: with the ad, or with `noFill`, `timeout`, `loadFailed`,
    /// `destroyed` — and the content plays on whatever happens (R16).
    public func request(_ kind: AdKind, completion: @escaping @Sendable (Result<Ad, AdError>) -> Void) {
        locked { session in
            guard !session.destroyed else {
                delivery.enqueue { completion(.failure(.destroyed)) }
                return
            }
            let position = session.requestPosition()
            let request = AdRequest(content: content, kind: kind, position: position)
            let id = session.nextRequest
            session.nextRequest += 1
            session.requests[id] = PendingRequest(kind: kind, item: session.boundItemIfCurrent, completion: completion)
            emit(.requested(kind: kind, contentID: content.id, position: position))
            let timeout = configuration.requestTimeout
            session.requests[id]?.timer = clock.schedule(after: timeout) { [weak self] in
                self?.finishRequest(id, .failure(.timeout(seconds: timeout)))
            }
            let source = self.source
            session.requests[id]?.task = Task { [weak self] in
                let result: Result<AdCreative?, AdError>
                do {
                    result = .success(try await source.ad(for: request))
                } catch {
                    result = .failure(.loadFailed(String(describing: error)))
                }
                self?.finishRequest(id, result)
            }
        }
    }

    /// `request(_:completion:)` for async code.
    public func request(_ kind: AdKind) async -> Result<Ad, AdError> {
        await withCheckedContinuation { continuation in
            request(kind) { continuation.resume(returning: $0) }
        }
    }

    private func finishRequest(_ id: UInt64, _ result: Result<AdCreative?, AdError>) {
        locked { session in
            guard let pending = session.requests.removeValue(forKey: id) else { return }   // timed out, destroyed
            pending.timer?.cancel()
            pending.task?.cancel()
            let outcome: Result<Ad, AdError> = result.flatMap { creative in
                guard let creative else { return .failure(.noFill) }
                guard creative.kind == pending.kind, creative.content.fits.contains(pending.kind) else {
                    return .failure(.loadFailed("the source answered a \(pending.kind.rawValue) request with a \(creative.kind.rawValue) creative"))
                }
                let ad = Ad(kind: pending.kind, creative: creative, owner: self)
                session.ads[ad.id] = AdRecord(presentation: AdPresentation(id: ad.id, kind: pending.kind, creative: creative),
                                              item: pending.item)
                return .success(ad)
            }
            switch outcome {
            case .success(let ad): emit(.loaded(info(ad.id, ad.kind, ad.creative.id), ad.creative))
            case .failure(let error): emit(.error(kind: pending.kind, creativeID: nil, error: error))
            }
            let completion = pending.completion
            delivery.enqueue { completion(outcome) }
        }
    }

    func info(_ id: UInt64, _ kind: AdKind, _ creativeID: String) -> AdInfo {
        AdInfo(id: id, kind: kind, creativeID: creativeID, contentID: content.id)
    }

    // MARK: Ads

    func show(_ id: UInt64, options: ShowOptions, didEnd: @escaping @Sendable (AdEndReason) -> Void) throws(AdError) {
        var failure: AdError?
        locked { session in
            do throws(AdError) {
                guard !session.destroyed else { throw .destroyed }
                guard var record = session.ads[id] else { throw .alreadyShown }
                guard record.lifecycle == nil else { throw .alreadyShown }
                guard session.tracking, session.player != nil else { throw .notTracking }
                try session.checkBinding(of: record)
                var lifecycle = try makeLifecycle(record.presentation, options)
                let shownEffects = try lifecycle.show(session.context(clock))
                record.item = session.bound
                record.lifecycle = lifecycle
                record.didEnd = didEnd
                session.ads[id] = record
                session.perform(shownEffects, for: id, self)
            } catch {
                failure = error
                if let record = session.ads[id] {
                    emit(.error(kind: record.presentation.kind, creativeID: record.presentation.creative.id, error: error))
                }
            }
        }
        if let failure { throw failure }
    }

    private func makeLifecycle(_ presentation: AdPresentation, _ options: ShowOptions) throws(AdError) -> any AdLifecycle {
        switch (presentation.kind, options) {
        case (.overlay, .now), (.overlay, .atContentTime):
            var overlay = OverlayLifecycle(duration: presentation.creative.duration ?? configuration.defaultOverlayDuration)
            if case .atContentTime(let start) = options { overlay.slotStart = start }
            return overlay
        case (.pauseAd, .now), (.pauseAd, .afterPausedFor):
            var pauseAd = PauseAdLifecycle()
            if case .afterPausedFor(let delay) = options { pauseAd.activationDelay = delay }
            return pauseAd
        case (.postroll, .now):
            return PostrollLifecycle()
        case (let kind, _):
            throw .wrongKind(kind)
        }
    }

    func close(_ id: UInt64) {
        locked { session in
            session.run(id, self) { lifecycle, _ in lifecycle.stop(.closed, cause: nil) }
        }
    }

    /// An ad object was released: if it was never shown, nothing will ever refer to it.
    func forget(_ id: UInt64) {
        state.withLock { session in
            if session.ads[id]?.lifecycle == nil { session.ads[id] = nil }
        }
    }

    func postrollReport(_ id: UInt64, _ report: PostrollReporter.Report) {
        locked { session in
            guard var record = session.ads[id], record.lifecycle is PostrollLifecycle else { return }
            let info = info(id, .postroll, record.presentation.creative.id)
            switch report {
            case .progress(let position, let duration):
                guard duration > 0 else { return }
                let quartile = min(3, Int((position / duration) * 4))
                while record.quartile < quartile {
                    record.quartile += 1
                    emit(.quartile(info, record.quartile))
                }
                session.ads[id] = record
            case .paused(let paused):
                emit(.postrollPaused(info, paused))
            case .finished, .failed:
                if case .failed(let why) = report {
                    emit(.error(kind: .postroll, creativeID: info.creativeID, error: .renderFailed(why)))
                }
                session.run(id, self) { lifecycle, _ in
                    guard var postroll = lifecycle as? PostrollLifecycle else { return [] }
                    let result = postroll.videoEnded(failed: report != .finished)
                    lifecycle = postroll
                    return result
                }
            }
        }
    }

    // MARK: Player changes

    fileprivate func playerChanged(_ player: any TrackablePlayer, _ event: PlayerEvent) {
        locked { session in
            // A change already on its way from a player we let go of is dropped.
            guard !session.destroyed, let tracked = session.player, tracked === player else { return }
            session.view = event.snapshot
            switch event.change {
            case .item(let item?):
                if let bound = session.bound, item.entry == bound.entry, item.loop > bound.loop {
                    session.bound = item   // our own episode's next loop (R14)
                }
                session.contentEnded = false
            case .ended(let item):
                if item == session.bound {
                    session.contentEnded = true
                    emit(.contentEnded(contentID: content.id))
                }
            default:
                break
            }
            for id in session.shownAds {
                session.run(id, self) { lifecycle, context in lifecycle.playerChanged(event, context) }
            }
        }
    }

    /// Runs `body` with the lock held, then hands out the callbacks and events it queued.
    func locked(_ body: (inout Session) -> Void) {
        state.withLock { body(&$0) }
        delivery.drain()
    }

    /// Queues an event; called with the lock held, so events keep the state's order.
    func emit(_ event: AdEvent) {
        let onEvent = self.onEvent
        delivery.enqueue { onEvent(event) }
    }
}

/// Observes the player on behalf of a `VideoAds`, which it does not keep alive.
private final class Follower: PlayerObserver {
    private let ownerBox = Mutex<WeakVideoAds>(WeakVideoAds())

    var owner: VideoAds? {
        get { ownerBox.withLock { $0.value } }
        set { ownerBox.withLock { $0.value = newValue } }
    }

    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) {
        owner?.playerChanged(player, event)
    }
}

private struct WeakVideoAds {
    weak var value: VideoAds?
}

/// How `show` was asked for.
enum ShowOptions {
    case now
    case atContentTime(Double)
    case afterPausedFor(Double)
}
