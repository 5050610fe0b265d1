import AdRuntime
import Foundation
import MpvPlayerAdapter

/// The daemon's ad policy for one episode (SPEC §6): the source's overlay slots, a pause ad
/// once the content has stayed paused for `pauseAdDelay` (R7), a post-roll after the end,
/// then `onFinished` (the next episode, R8).
///
/// Threading: loop-only — it observes the player on its loop, and every request there is
/// asynchronous, so nothing here blocks the loop.
final class EpisodeAds: PlayerObserver, @unchecked Sendable {
    // @unchecked: the vars are touched only on the player's loop.
    let ads: VideoAds
    private let entry: Int64
    private let pauseAdDelay: Double
    private let onFinished: @Sendable () -> Void
    private var tracked = false
    private var finished = false
    private var observation: PlayerObservation?

    init(content: ContentInfo, entry: Int64, source: any AdSource, surface: any AdSurface, loop: any PlayerLoop,
         pauseAdDelay: Double, onEvent: @escaping @Sendable (AdEvent) -> Void, onFinished: @escaping @Sendable () -> Void) {
        self.entry = entry
        self.pauseAdDelay = pauseAdDelay
        self.onFinished = onFinished
        let box = WeakEpisode()
        ads = VideoAds(content: content, source: source, surface: surface, loop: loop) { event in
            onEvent(event)
            if case .contentEnded = event { box.value?.contentEnded() }
        }
        box.value = self
    }

    /// Starts following `player`; the episode is tracked once its item is in (R10).
    func follow(_ player: MpvPlayer) {
        player.loop.run { [self] in
            observation = player.addObserver(self)
            if player.snapshot().item?.entry == entry { trackOnce(player) }
        }
    }

    func stop() {
        ads.loop.run { [self] in
            finished = true
            observation?.cancel()
            ads.destroy()
        }
    }

    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) {
        switch event.change {
        case .item(let item?) where item.entry == entry && item.loop == 0:
            trackOnce(player)
        case .paused:
            ads.request(.pauseAd) { [pauseAdDelay] result in
                try? result.get().show(afterPausedFor: pauseAdDelay) { _ in }
            }
        case .failed(let failure) where failure.entry == entry:
            finish()
        default:
            break
        }
    }

    private func trackOnce(_ player: any TrackablePlayer) {
        guard !tracked else { return }
        tracked = true
        ads.track(player)
        scheduleNextOverlay()
    }

    /// The next slot of the source, shown when playback plays across its start (R12);
    /// when it ends, the one after.
    private func scheduleNextOverlay() {
        ads.request(.overlay) { [weak self] result in
            guard let self, case .success(let overlay) = result else { return }
            do {
                let then: @Sendable (AdEndReason) -> Void = { [weak self] reason in
                    // A slot's overlay is followed by the next slot's; one without a slot (VAST) by nothing.
                    if overlay.creative.slotStart != nil, reason != .destroyed, reason != .contentChanged { self?.scheduleNextOverlay() }
                }
                if let start = overlay.creative.slotStart {
                    try overlay.show(atContentTime: start, didEnd: then)
                } else {
                    try overlay.show(didEnd: then)   // no slot: now, over playing content
                }
            } catch {
                // Refused (another item is in): the episode's overlays are done.
            }
        }
    }

    fileprivate func contentEnded() {
        ads.request(.postroll) { [weak self] result in
            guard let self else { return }
            guard case .success(let postroll) = result else { return finish() }
            do {
                try postroll.show { [weak self] _ in self?.finish() }
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
private final class WeakEpisode: @unchecked Sendable {
    // @unchecked: set once before the first callback, read on the loop.
    weak var value: EpisodeAds?
}
