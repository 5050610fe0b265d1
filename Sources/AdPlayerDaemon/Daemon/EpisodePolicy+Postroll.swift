import AdRuntime
import AdSources
import Foundation

/// The post-roll (SPEC R8): after the episode's end, its pod in order, then the next episode.
extension EpisodePolicy {
    func contentEnded() {
        guard !dark else { return finish() }
        guard source.mayFill(.postroll, content: ads.requestContent, at: player?.snapshot().position ?? 0) else { return finish() }
        requestPostroll(podPosition: 0)
    }

    /// The post-roll at `podPosition` of its break; after it, the next of its pod while the
    /// source says more follow (VAST `sequence`), then the next episode.
    private func requestPostroll(podPosition: Int) {
        ads.request(.postroll, podPosition: podPosition) { [weak self] result in
            guard let self, !finished else { return }
            guard case .success(let postroll) = result else { return finish() }
            let more = postroll.creative.podRemaining > 0
            do {
                shown[postroll.id] = postroll   // before: its start may be told within `show`
                try postroll.show { [weak self] reason in
                    guard let self, !finished else { return }
                    if more, reason != .destroyed, reason != .contentChanged {
                        requestPostroll(podPosition: podPosition + 1)
                    } else {
                        finish()
                    }
                }
            } catch {
                shown[postroll.id] = nil
                finish()
            }
        }
    }
}
