import AdRuntime
import AdSources
import Foundation

/// The overlay chain (SPEC R12): the source's slots one after the other, each shown when playback
/// plays across its start; a slot the playhead lands past is withdrawn and the chain moves on.
extension EpisodePolicy {
    /// What the policy knows of the overlay chain, on the loop.
    struct Overlays {
        /// An overlay request is out (its answer not yet in).
        var requestOut = false
        /// The slot overlay waiting for playback to play across its start.
        var waiting: (id: UInt64, start: Double)?
        /// An overlay was not asked for because whether the item shows a video was not known
        /// yet: asked for when it plays (by then it is).
        var deferred = false
    }

    /// R12 keeps a slot's overlay waiting when the playhead lands past its start (a seek, a
    /// start or resume at a saved position, a seek mpv merged into the file's start), in case
    /// playback comes back before it. The policy moves on to the slot after the playhead
    /// instead: otherwise no later slot would ever be requested.
    func withdrawSkippedSlot(at position: Double) {
        guard tracked, let waiting = overlays.waiting, position > waiting.start + 0.001 else { return }
        shown[waiting.id]?.withdraw()
    }

    /// The next slot of the source, shown when playback plays across its start (R12); when
    /// it ends, the one after.
    func scheduleNextOverlay() {
        // One overlay chain at a time: not while a request is out or a slot's overlay waits
        // (a pass's start and the previous overlay's end may both ask).
        guard !overlays.requestOut, overlays.waiting == nil, !dark else { return }
        // An audio-only episode: an overlay would be on no screen, so none is asked for (issue 23).
        switch videoShown {
        case false?: return
        case nil:
            overlays.deferred = true
            return
        case true?: overlays.deferred = false
        }
        guard source.mayFill(.overlay, content: ads.requestContent, at: player?.snapshot().position ?? 0) else { return }
        overlays.requestOut = true
        ads.request(.overlay) { [weak self] result in
            self?.overlays.requestOut = false
            guard let self, !finished, !dark, case .success(let overlay) = result else { return }
            let id = overlay.id
            let then: @Sendable (AdEndReason) -> Void = { [weak self] reason in
                guard let self else { return }
                shown[id] = nil
                if overlays.waiting?.id == id { overlays.waiting = nil }
                if let start = overlay.creative.slotStart { cursor.passed(start) }
                // A slot's overlay is followed by the next slot's; one without a slot (VAST) by
                // nothing. Asked for after this turn: the end (a pause, a seek) is told first.
                if overlay.creative.slotStart != nil, reason != .destroyed, reason != .contentChanged {
                    _ = ads.loop.execute { [weak self] in
                        guard let self, !finished else { return }
                        scheduleNextOverlay()
                    }
                }
            }
            do {
                shown[id] = overlay   // before: its start may be told within `show`
                if let start = overlay.creative.slotStart {
                    try overlay.show(atContentTime: start, didEnd: then)
                    overlays.waiting = (id, start)
                    withdrawSkippedSlot(at: player?.snapshot().position ?? 0)   // the playhead may be past it already
                } else {
                    // No slot (VAST): now, over playing content — or, loaded in the moment
                    // between the episode coming in and its first frame, as soon as it plays.
                    try overlay.showWhenPlaying(didEnd: then)
                }
            } catch {
                shown[id] = nil
                // Refused (another item is in, or the content is paused): the next request
                // comes with the next change that allows one.
            }
        }
    }
}
