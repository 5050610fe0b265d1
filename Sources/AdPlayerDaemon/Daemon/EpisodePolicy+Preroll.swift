import AdRuntime
import AdSources
import Foundation

/// The pre-roll (SPEC R8): its pod before the episode's first frame, then the episode.
extension EpisodePolicy {
    /// Whether this episode is to start with a pre-roll (the source may have one; not while the
    /// display is off).
    public var wantsPreroll: Bool {
        ads.loop.requireInLoop()
        return !dark && !finished && source.mayFill(.preroll, content: ads.requestContent, at: 0)
    }

    /// Plays the pre-roll break (its pod in sequence), then `start` — the episode loads after
    /// it: it is not shown, started or counted before. A pre-roll that fails, has no fill or does
    /// not start in time lets the episode start (R16). `start` runs once, on the loop.
    public func playPreroll(then start: @escaping @Sendable () -> Void) {
        ads.loop.requireInLoop()
        let once = RunOnce(start)
        prerollNext(podPosition: 0, then: once)
    }

    private func prerollNext(podPosition: Int, then start: RunOnce) {
        guard !finished else { return }
        ads.request(.preroll, podPosition: podPosition) { [weak self] result in
            guard let self, !finished else { return }
            guard case .success(let preroll) = result else { return prerollDone(start) }
            let more = preroll.creative.podRemaining > 0
            let id = preroll.id
            do {
                shown[id] = preroll   // before: its start may be told within `show`
                try preroll.show { [weak self] reason in
                    guard let self else { return }
                    shown[id] = nil
                    guard !finished else { return }
                    if more, reason != .destroyed, reason != .contentChanged {
                        prerollNext(podPosition: podPosition + 1, then: start)
                    } else {
                        prerollDone(start)
                    }
                }
            } catch {
                shown[id] = nil
                prerollDone(start)
            }
        }
    }

    /// After this turn (clients hear of the ad's end first): the break ends, the episode loads.
    private func prerollDone(_ start: RunOnce) {
        _ = ads.loop.execute { [weak self] in
            guard let self, !finished else { return }
            ads.endBreak()
            start.run()
        }
    }
}
