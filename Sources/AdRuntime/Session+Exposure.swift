

/// Exposure (SPEC R20): an ad's time on a visible output, and its viewability decided once.
extension AdSession {
    /// Whether ad `id`'s time on screen can be measured: the output's visibility is known and
    /// the player draws it itself (an HTML creative is a UI shell's).
    func exposureMeasurable(_ presentation: AdPresentation) -> Bool {
        if case .html = presentation.creative.content { return false }
        return configuration.viewabilityMeasurable
    }

    /// Starts or stops counting ad `id`'s time on a visible output — it is on the output, the
    /// output is not hidden (R13), and a post-roll is not paused — and arms the viewability
    /// timer for the MRC's continuous time while it counts.
    func updateExposure(_ id: UInt64) {
        guard var exposure = ads[id]?.exposure, let kind = ads[id]?.presentation.kind else { return }
        let now = loop.now()
        let visible = exposure.onOutput && !background && !exposure.videoPaused
        if visible, exposure.visibleSince == nil {
            exposure.visibleSince = now
            if !exposure.decided {
                exposure.viewTimer = loop.schedule(after: kind.isLinear ? 2 : 1) { [weak self] in
                    self?.decideViewability(id, .viewable)
                    self?.flush()
                }
            }
        } else if !visible, let since = exposure.visibleSince {
            exposure.seconds += Double(now &- since) / 1e9
            exposure.visibleSince = nil
            exposure.viewTimer?.cancel()
            exposure.viewTimer = nil
        }
        ads[id]?.exposure = exposure
    }

    /// Says once whether ad `id` was viewable.
    func decideViewability(_ id: UInt64, _ viewability: AdViewability) {
        guard let record = ads[id], !record.exposure.decided else { return }
        ads[id]?.exposure.decided = true
        ads[id]?.exposure.viewTimer?.cancel()
        ads[id]?.exposure.viewTimer = nil
        emit(.viewability(info(id, record.presentation.kind, record.presentation.creative.id), viewability))
    }
}
