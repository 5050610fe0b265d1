import AdRuntime
import AdSources
import Foundation

/// The pause ad (SPEC R7): asked for once the content has stayed paused for `pauseAdDelay`, one a
/// pause (or the next at `pause-ad-max` with `pause-ad-rotate`).
extension EpisodePolicy {
    /// The pause ad of this pause, unless the content played again before this turn.
    func requestPauseAd(delay: Double? = nil) {
        guard !finished, !dark, pauseAdRequested, player?.snapshot().playing == false else { return }
        ads.request(.pauseAd) { [weak self, pauseAdDelay] result in
            guard let self else { return }
            prefetch(.pauseAd)   // the next pause's, while this one shows
            guard case .success(let pauseAd) = result else { return }
            let id = pauseAd.id
            do {
                shown[id] = pauseAd   // before: its start may be told within `show`
                try pauseAd.show(afterPausedFor: delay ?? pauseAdDelay) { [weak self] reason in self?.pauseAdEnded(id, reason) }
            } catch {
                shown[id] = nil
                // The content played again meanwhile: nothing to show.
            }
        }
    }

    private func pauseAdEnded(_ id: UInt64, _ reason: AdEndReason) {
        shown[id] = nil
        // `pause-ad-rotate`: the next pause ad in its place, at once, for the same pause.
        if reason == .limitReached, pauseAdRotate {
            _ = ads.loop.execute { [weak self] in self?.requestPauseAd(delay: 0) }
        }
    }

    // MARK: Screensaver ads (R27)

    /// The content paused: in `screensaverAfter`, if it is still paused, the screen idles and
    /// the screensaver's rotation takes the pause ad's place.
    func armScreensaver() {
        disarmScreensaver()
        guard let after = screensaverAfter, source.mayFill(.screensaver, content: ads.requestContent, at: 0) else { return }
        screensaverTimer = ads.loop.schedule(after: after) { [weak self] in
            self?.screensaverTimer = nil
            self?.requestScreensaver()
        }
    }

    func disarmScreensaver() {
        screensaverTimer?.cancel()
        screensaverTimer = nil
    }

    /// The next creative of the rotation, shown at once over the paused content (each its own
    /// play: its impression, its caps); none while the content plays or the box is dark.
    func requestScreensaver() {
        guard !finished, !dark, player?.snapshot().playing == false else { return }
        ads.request(.screensaver) { [weak self] result in
            guard let self, !finished, !dark, case .success(let screensaver) = result else { return }
            let id = screensaver.id
            do {
                shown[id] = screensaver
                try screensaver.show { [weak self] reason in
                    guard let self else { return }
                    shown[id] = nil
                    // Its time over (`screensaver-rotate`): the next, moved a little, for the same idle screen.
                    if reason == .limitReached { _ = ads.loop.execute { [weak self] in self?.requestScreensaver() } }
                }
            } catch {
                shown[id] = nil   // the content played meanwhile, or the item changed
            }
        }
    }
}
