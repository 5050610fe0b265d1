import AdRuntime
import Foundation
import MpvPlayerAdapter
import Synchronization

/// The daemon's ad policy for one episode (SPEC §6): the catalog's overlay slots, a pause ad
/// once the content has stayed paused for `pauseAdDelay` (R7), a post-roll after the end,
/// then `onFinished` (the next episode, R8).
///
/// Threading: reacts on the thread that delivers the player's changes; every request is
/// asynchronous, so nothing here blocks mpv's event thread.
final class EpisodeAds: PlayerObserver {
    let ads: VideoAds
    private let entry: Int64
    private let pauseAdDelay: Double
    private let onFinished: @Sendable () -> Void
    private let state = Mutex(State())

    private struct State {
        var tracked = false
        var finished = false
        var observation: PlayerObservation?
    }

    init(content: ContentInfo, entry: Int64, source: any AdSource, surface: any AdSurface, pauseAdDelay: Double,
         onEvent: @escaping @Sendable (AdEvent) -> Void, onFinished: @escaping @Sendable () -> Void) {
        self.entry = entry
        self.pauseAdDelay = pauseAdDelay
        self.onFinished = onFinished
        let box = Mutex<EpisodeAdsRef>(EpisodeAdsRef())
        ads = VideoAds(content: content, source: source, surface: surface) { event in
            onEvent(event)
            if case .contentEnded = event { box.withLock { $0.value }?.contentEnded() }
        }
        box.withLock { $0.value = self }
    }

    /// Starts following `player`; the episode is tracked once its item is in (R10).
    func follow(_ player: MpvPlayer) {
        let observation = player.addObserver(self)
        state.withLock { $0.observation = observation }
        if player.snapshot().item?.entry == entry { trackOnce(player) }
    }

    func stop() {
        state.withLock { state in
            state.finished = true
            state.observation?.cancel()
        }
        ads.destroy()
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
        let first = state.withLock { state -> Bool in
            defer { state.tracked = true }
            return !state.tracked
        }
        guard first else { return }
        ads.track(player)
        scheduleNextOverlay()
    }

    /// The next slot of the catalog, shown when playback plays across its start (R12);
    /// when it ends, the one after.
    private func scheduleNextOverlay() {
        let ads = self.ads
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
            guard case .success(let postroll) = result else { return self.finish() }
            do {
                try postroll.show { [weak self] _ in self?.finish() }
            } catch {
                self.finish()
            }
        }
    }

    private func finish() {
        let first = state.withLock { state -> Bool in
            defer { state.finished = true }
            return !state.finished
        }
        if first { onFinished() }
    }
}

private struct EpisodeAdsRef {
    weak var value: EpisodeAds?
}
