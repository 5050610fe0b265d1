/// A `VideoAds`' state: everything behind its lock. Effects of the lifecycles are performed
/// here (surface calls, timers) with the lock held; callbacks and events are queued on the
/// owner's delivery.
struct Session {
    var destroyed = false
    /// The tracked player, held weakly (R9).
    weak var player: (any TrackablePlayer)?
    var observation: PlayerObservation?
    var tracking = false
    /// The item bound at `track`; it follows the episode's own loops (R10, R14).
    var bound: PlayerItem?
    /// The player's facts as last delivered.
    var view = PlayerSnapshot.empty
    /// The bound item played to its end and nothing else came in since (post-roll time).
    var contentEnded = false
    /// The output is hidden (R13).
    var background = false
    var ads: [UInt64: AdRecord] = [:]
    var requests: [UInt64: PendingRequest] = [:]
    var nextRequest: UInt64 = 1

    /// Shown ads that have not ended, oldest first.
    var shownAds: [UInt64] {
        ads.filter { $0.value.lifecycle.map { !$0.isEnded } ?? false }.keys.sorted()
    }

    /// The bound item, if it is still the one in the player; nil otherwise.
    var boundItemIfCurrent: PlayerItem? {
        guard tracking, let bound, view.item == bound else { return nil }
        return bound
    }

    /// The position to send with a request: the content's while the bound item is in the
    /// player, 0 before `track` and after the bound item is gone (R11).
    func requestPosition() -> Double {
        guard boundItemIfCurrent != nil else { return 0 }
        return Self.position(of: player, in: bound)
    }

    /// The player's position if it still holds `item`, else 0 (R11). Read on demand (R4).
    static func position(of player: (any TrackablePlayer)?, in item: PlayerItem?) -> Double {
        guard let item, let snapshot = player?.snapshot(), snapshot.item == item else { return 0 }
        return snapshot.position
    }

    /// R10, R14: an ad shows only for the item it belongs to, while that item is in.
    func checkBinding(of record: AdRecord) throws(AdError) {
        switch record.presentation.kind {
        case .overlay, .pauseAd:
            guard let current = view.item, current == bound else { throw .invalidated(.contentChanged) }
            // Requested for another item (another episode, an earlier loop): refused. One
            // requested before `track` (a prefetch, `item == nil`) binds now.
            if let item = record.item, item != current { throw .invalidated(.contentChanged) }
        case .postroll:
            if let current = view.item, current != bound { throw .invalidated(.contentChanged) }
            if let item = record.item, item != bound { throw .invalidated(.contentChanged) }
        }
    }

    func context(_ clock: any RuntimeClock) -> LifecycleContext {
        let player = self.player
        let bound = self.bound
        return LifecycleContext(
            now: clock.now(), playing: view.playing, rate: view.rate, background: background,
            contentEnded: contentEnded,
            position: { Session.position(of: player, in: bound) })
    }

    /// Lets ad `id`'s lifecycle decide, then performs what it decided.
    mutating func run(_ id: UInt64, _ owner: VideoAds,
                      _ body: (inout any AdLifecycle, LifecycleContext) -> [AdEffect]) {
        guard var lifecycle = ads[id]?.lifecycle else { return }
        let effects = body(&lifecycle, context(owner.clock))
        ads[id]?.lifecycle = lifecycle
        perform(effects, for: id, owner)
    }

    /// Performs `effects` for ad `id`, in order. A surface that cannot show the creative
    /// ends the ad as `failed` (R16).
    mutating func perform(_ effects: [AdEffect], for id: UInt64, _ owner: VideoAds) {
        guard let record = ads[id] else { return }
        let presentation = record.presentation
        let info = owner.info(id, presentation.kind, presentation.creative.id)
        for effect in effects {
            switch effect {
            case .present, .playVideo:
                do {
                    if effect == .present {
                        try owner.surface.present(presentation)
                    } else {
                        try owner.surface.playPostroll(presentation, reporter: PostrollReporter(owner: owner, id: id))
                    }
                    owner.emit(.started(info))
                } catch {
                    owner.emit(.error(kind: presentation.kind, creativeID: presentation.creative.id,
                                      error: .renderFailed(String(describing: error))))
                    run(id, owner) { lifecycle, _ in lifecycle.stop(.failed, cause: nil) }
                    return
                }
            case .dismiss:
                ads[id]?.dismissedAt = owner.clock.now()
                owner.surface.dismiss(id)
            case .stopVideo:
                ads[id]?.dismissedAt = owner.clock.now()
                owner.surface.stopPostroll(id)
            case .setTimer(let seconds):
                ads[id]?.timer?.cancel()
                let generation = (ads[id]?.timerGeneration ?? 0) + 1
                ads[id]?.timerGeneration = generation
                ads[id]?.timer = owner.clock.schedule(after: seconds) { [weak owner] in
                    owner?.timerFired(id, generation)
                }
            case .cancelTimer:
                ads[id]?.timer?.cancel()
                ads[id]?.timer = nil
            case .end(let reason, let cause):
                let endedAt = ads[id]?.dismissedAt ?? owner.clock.now()
                let latency = cause.map { (endedAt &- $0) / 1000 }
                owner.emit(.ended(info, reason: reason, latencyMicroseconds: cause == nil ? nil : latency))
                if let didEnd = ads[id]?.didEnd {
                    owner.delivery.enqueue { didEnd(reason) }
                }
                ads[id]?.didEnd = nil   // exactly once (R15)
                ads[id]?.timer?.cancel()
                ads[id] = nil
            }
        }
    }
}

/// An ad the source delivered, and once shown, its lifecycle.
struct AdRecord {
    let presentation: AdPresentation
    /// The item it belongs to; nil until shown when requested with no bound item (a prefetch).
    var item: PlayerItem?
    var lifecycle: (any AdLifecycle)?
    var didEnd: (@Sendable (AdEndReason) -> Void)?
    var timer: ScheduledTimer?
    var timerGeneration: UInt64 = 0
    /// Post-roll quartiles reported so far.
    var quartile = 0
    var dismissedAt: UInt64?
}

struct PendingRequest {
    let kind: AdKind
    let item: PlayerItem?
    let completion: @Sendable (Result<Ad, AdError>) -> Void
    var timer: ScheduledTimer?
    var task: Task<Void, Never>?
}

extension VideoAds {
    func timerFired(_ id: UInt64, _ generation: UInt64) {
        locked { session in
            guard session.ads[id]?.timerGeneration == generation else { return }   // replaced or cancelled
            session.ads[id]?.timer = nil
            session.run(id, self) { lifecycle, context in lifecycle.timerFired(context) }
        }
    }
}
