

/// The linear break (SPEC R8, R21): a pre-, mid- or post-roll's video reports (quartiles,
/// progress offsets, pauses, its end), the viewer's skip, and the break's end that gives the
/// content back.
extension AdSession {
    /// `Ad.skip()`: a linear ad playing past its skip offset ends `skipped`.
    func skip(_ id: UInt64) -> Result<Void, AdError> {
        loop.requireInLoop()
        defer { flush() }
        guard let record = ads[id], let linear = record.lifecycle as? LinearLifecycle else { return .failure(.notSkippable(after: nil)) }
        do throws(AdError) {
            let effects = try linear.skip(skipOffset: record.presentation.creative.skipOffset)
            perform(effects, for: id)
            return .success(())
        } catch {
            return .failure(error)
        }
    }

    /// The break is over (the app ended it after the last ad of its pod, or it was left open):
    /// a mid-roll's held content plays again at the time it stopped at — the same item.
    /// `resume: false`: its item is gone; only the end is told.
    func endBreak(resume: Bool = true) {
        loop.assertInLoop()
        defer { flush() }
        breakTimer?.cancel()
        breakTimer = nil
        guard let open = openBreak else { return }
        openBreak = nil
        if resume, let held = open.held, view.item == held, let breakable = player as? any BreakablePlayer {
            breakable.resumeAfterBreak(at: open.at)
        }
        emit(.breakEnded(kind: open.kind, contentID: content.id, position: open.at))
    }

    func postrollReport(_ id: UInt64, _ report: PostrollReporter.Report) {
        loop.requireInLoop()
        defer { flush() }
        guard var record = ads[id], let linear = record.lifecycle as? LinearLifecycle else { return }
        let kind = record.presentation.kind
        let info = info(id, kind, record.presentation.creative.id)
        if case .progress = report, !record.exposure.started {
            announceStarted(id)   // a surface that does not say `began`: its first progress does
            guard let updated = ads[id] else { return }
            record = updated
        }
        switch report {
        case .began:
            announceStarted(id)
        case .progress(let position, let duration):
            guard position.isFinite, position >= 0 else { return }
            perform(linear.videoProgressed(position, context()), for: id)
            guard duration > 0, duration.isFinite, ads[id] != nil else { return }
            let quartile = max(0, min(3, Int((position / duration) * 4)))
            while record.quartile < quartile {
                record.quartile += 1
                emit(.quartile(info, record.quartile))
            }
            for (offset, seconds) in Self.progressOffsets(record.presentation.creative, duration: duration)
            where seconds <= position && !record.progressed.contains(offset) {
                record.progressed.insert(offset)
                emit(.progress(info, offset: offset, adPlayhead: position))
            }
            // Its icons (R27): each up from its offset for its duration; its view told once.
            for (index, icon) in record.presentation.creative.icons.enumerated() {
                let up = icon.isUp(at: position)
                guard up != record.iconsUp.contains(index) else { continue }
                surface.icon(id, index, shown: up)
                if up {
                    record.iconsUp.insert(index)
                    if record.iconsSeen.insert(index).inserted { emit(.iconShown(info, index: index)) }
                } else {
                    record.iconsUp.remove(index)
                }
            }
            ads[id] = record
        case .paused(let paused):
            emit(.postrollPaused(info, paused))
            ads[id]?.exposure.videoPaused = paused
            updateExposure(id)
            run(id) { lifecycle, context in (lifecycle as? LinearLifecycle)?.videoPaused(paused, context) ?? [] }
        case .ended(let how, let failure):
            if let failure {
                emit(.error(kind: kind, creativeID: info.creativeID, error: .renderFailed(failure)))
            }
            run(id) { lifecycle, _ in (lifecycle as? LinearLifecycle)?.videoEnded(how) ?? [] }
        }
    }

    /// The creative's `progress:OFFSET` tracking events with their offsets in seconds of a
    /// `duration`-second video (`00:00:05`, or `25%` of it); offsets that are no time are left out.
    private static func progressOffsets(_ creative: AdCreative, duration: Double) -> [(String, Double)] {
        creative.tracking.keys.compactMap { key -> (String, Double)? in
            guard key.hasPrefix("progress:") else { return nil }
            let offset = String(key.dropFirst("progress:".count))
            if offset.hasSuffix("%"), let percent = Double(offset.dropLast()), percent >= 0, percent <= 100 {
                return (offset, duration * percent / 100)
            }
            return (try? Seconds.parse(offset, .position, field: "progress offset")).map { (offset, $0) }
        }
    }
}
