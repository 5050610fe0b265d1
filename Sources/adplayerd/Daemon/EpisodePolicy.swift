import AdRuntime
import Foundation

/// The daemon's ad policy for one episode (SPEC §6): the source's overlay slots, a pause ad
/// once the content has stayed paused for `pauseAdDelay` (R7), a post-roll after the end,
/// then `onFinished` (the next episode, R8). One `VideoAds` per episode, tracked once the
/// episode's item is in the player (the seed's "One player across episodes").
///
/// Threading: loop-only — it observes the player on its loop, every request there is
/// asynchronous, and nothing here blocks the loop.
final class EpisodePolicy: PlayerObserver, @unchecked Sendable {
    // @unchecked: the vars are touched only on the player's loop.
    let ads: VideoAds
    let content: ContentInfo
    private let pauseAdDelay: Double
    private let onFinished: @Sendable () -> Void
    private var entry: Int64?
    private var tracked = false
    private var finished = false
    private var observation: PlayerObservation?
    /// Ads shown and not ended: the viewer may close them (`close-ad`).
    private var shown: [UInt64: Ad] = [:]
    private var pauseAdRequested = false

    init(content: ContentInfo, source: any AdSource, surface: any AdSurface, loop: any PlayerLoop, pauseAdDelay: Double,
         configuration: VideoAdsConfiguration, onEvent: @escaping @Sendable (AdEvent) -> Void,
         onFinished: @escaping @Sendable () -> Void) {
        self.content = content
        self.pauseAdDelay = pauseAdDelay
        self.onFinished = onFinished
        let box = WeakPolicy()
        ads = VideoAds(content: content, source: source, surface: surface, loop: loop, configuration: configuration) { event in
            box.value?.saw(event)
            onEvent(event)
        }
        box.value = self
    }

    /// Starts following `player` for playlist entry `entry`; tracked once its item is in (R10).
    func follow(_ player: any TrackablePlayer, entry: Int64) {
        self.entry = entry
        observation = player.addObserver(self)
        if player.snapshot().item?.entry == entry { trackOnce(player) }
    }

    func stop() {
        finished = true
        observation?.cancel()
        observation = nil
        ads.destroy()
        shown = [:]
    }

    func setBackground(_ hidden: Bool) { ads.setBackground(hidden) }

    /// The viewer dismisses the overlay or pause ad on screen (it ends `closed`). False if none.
    func closeAd() -> Bool {
        let closable = shown.values.filter { $0.kind != .postroll }
        closable.forEach { $0.close() }
        return !closable.isEmpty
    }

    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) {
        guard !finished else { return }
        switch event.change {
        case .item(let item?) where item.entry == entry:
            trackOnce(player)
        case .paused where tracked && !pauseAdRequested:
            pauseAdRequested = true
            ads.request(.pauseAd) { [weak self, pauseAdDelay] result in
                guard let self, case .success(let pauseAd) = result else { return }
                let id = pauseAd.id
                do {
                    try pauseAd.show(afterPausedFor: pauseAdDelay) { [weak self] _ in self?.pauseAdEnded(id) }
                    shown[id] = pauseAd
                } catch {
                    // The content played again meanwhile: nothing to show.
                }
            }
        case .playing:
            pauseAdRequested = false   // the next pause may have its pause ad
        case .failed(let failure) where failure.entry == entry:
            finish()
        default:
            break
        }
    }

    private func pauseAdEnded(_ id: UInt64) {
        shown[id] = nil
    }

    private func saw(_ event: AdEvent) {
        if case .contentEnded = event { contentEnded() }
    }

    private func trackOnce(_ player: any TrackablePlayer) {
        guard !tracked, !finished else { return }
        tracked = true
        ads.track(player)
        scheduleNextOverlay()
    }

    /// The next slot of the source, shown when playback plays across its start (R12); when
    /// it ends, the one after.
    private func scheduleNextOverlay() {
        ads.request(.overlay) { [weak self] result in
            guard let self, !finished, case .success(let overlay) = result else { return }
            let id = overlay.id
            let then: @Sendable (AdEndReason) -> Void = { [weak self] reason in
                guard let self else { return }
                shown[id] = nil
                // A slot's overlay is followed by the next slot's; one without a slot (VAST) by nothing.
                if overlay.creative.slotStart != nil, reason != .destroyed, reason != .contentChanged { scheduleNextOverlay() }
            }
            do {
                if let start = overlay.creative.slotStart {
                    try overlay.show(atContentTime: start, didEnd: then)
                } else {
                    try overlay.show(didEnd: then)   // no slot: now, over playing content
                }
                shown[id] = overlay
            } catch {
                // Refused (another item is in, or the content is paused): the next request
                // comes with the next change that allows one.
            }
        }
    }

    private func contentEnded() {
        ads.request(.postroll) { [weak self] result in
            guard let self, !finished else { return }
            guard case .success(let postroll) = result else { return finish() }
            do {
                try postroll.show { [weak self] _ in self?.finish() }
                shown[postroll.id] = postroll
            } catch {
                finish()
            }
        }
    }

    private func finish() {
        guard !finished else { return }
        finished = true
        onFinished()
    }
}

/// A weak reference handed to a callback that runs on the loop.
private final class WeakPolicy: @unchecked Sendable {
    // @unchecked: set once before the first callback, read on the loop.
    weak var value: EpisodePolicy?
}
