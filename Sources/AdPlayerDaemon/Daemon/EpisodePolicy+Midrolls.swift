import AdRuntime
import AdSources
import Foundation

/// Mid-roll breaks (SPEC R21): each played when playback crosses its time, asked for `breakLead`
/// ahead; a seek past unplayed breaks plays the last of them at the landing (snapback); a break
/// played is not played again; the content is held while it is on.
extension EpisodePolicy {
    /// The next break after the playhead that was not played: its ad asked for when playback
    /// is within `breakLead` of it, shown when playback crosses its time (held there).
    func scheduleNextBreak() {
        breakTimer?.cancel()
        breakTimer = nil
        guard tracked, !finished, !dark, !breakRequestOut, breakWaiting == nil, !breakOn, snapbackAd == nil,
              let snapshot = player?.snapshot() else { return }
        // Its length and cue points, once the player knows them: breaks at a percentage of the
        // episode, and VMAP's `#n` breaks, need them.
        if let content = player as? any ContentPlayer {
            // The first length the player knows places the percentage breaks for the whole
            // viewing: a length refined later (a VBR or TS file) does not move a played 50 %
            // break ahead to play again.
            if self.content.duration == nil, !durationPlaced, let length = content.duration() {
                durationPlaced = true
                ads.setContentDuration(length)
            }
            if self.content.cuePoints == nil, !cuePointsKnown, let cues = content.cuePoints() {
                cuePointsKnown = true
                ads.setContentCuePoints(cues)
            }
        }
        guard let time = ads.midrollTimes().first(where: { $0 >= snapshot.position - 0.001 && !playedBreaks.contains(Self.key($0)) }) else { return }
        let ahead = time - snapshot.position
        if ahead > Self.breakLead {
            // Asked for later: re-checked then (and at every play, seek and rate change).
            guard snapshot.playing, snapshot.rate > 0 else { return }
            breakTimer = ads.loop.schedule(after: (ahead - Self.breakLead) / snapshot.rate) { [weak self] in self?.scheduleNextBreak() }
            return
        }
        breakRequestOut = true
        ads.request(.midroll, breakTime: time) { [weak self] result in
            guard let self else { return }
            breakRequestOut = false
            guard !finished else { return }
            guard case .success(let midroll) = result else {
                playedBreaks.insert(Self.key(time))   // nothing for it: the content plays through it
                return scheduleNextBreak()
            }
            let at = midroll.creative.slotStart ?? time
            let id = midroll.id
            if let position = player?.snapshot().position, position > at + 0.001 {
                // Playback passed it (a seek) while the ad was asked for: played at the landing.
                playedBreaks.insert(Self.key(time))
                shown[id] = midroll
                if player?.snapshot().playing == true { showSnapback(midroll) } else { snapbackAd = midroll }
                return
            }
            do {
                shown[id] = midroll
                try midroll.show(atContentTime: at) { [weak self] reason in self?.midrollEnded(midroll, reason: reason, podPosition: 0) }
                breakWaiting = (id, at)
            } catch {
                shown[id] = nil
                playedBreaks.insert(Self.key(time))
            }
        }
    }

    /// A seek landed past unplayed breaks: the last of them plays at the landing (IMA's
    /// snapback), the others count as passed; a seek back over played breaks plays nothing.
    func snapback(from: Double, to: Double) {
        // A waiting break ahead of the landing waits on (its lifecycle re-arms itself).
        let passed = ads.midrollTimes().filter { $0 > from + 0.001 && $0 <= to + 0.001 && !playedBreaks.contains(Self.key($0)) }
        guard let last = passed.last, !breakOn, !breakRequestOut else { return scheduleNextBreak() }
        passed.forEach { playedBreaks.insert(Self.key($0)) }
        breakRequestOut = true   // before the withdrawal below: its end looks for no other break meanwhile
        if let waiting = breakWaiting {   // the first of those passed
            breakWaiting = nil
            shown[waiting.id]?.withdraw()   // ends `seeked`, never shown: its break is played at the landing instead
        }
        ads.request(.midroll, breakTime: last) { [weak self] result in
            guard let self else { return }
            breakRequestOut = false
            guard !finished else { return }
            guard case .success(let midroll) = result else { return scheduleNextBreak() }
            shown[midroll.id] = midroll
            if player?.snapshot().playing == true {
                showSnapback(midroll)
            } else {
                snapbackAd = midroll   // paused at the landing: when it plays
            }
        }
    }

    func showSnapback(_ midroll: Ad) {
        snapbackAd = nil
        do {
            // Now, where the content is: held there, resumed there after the break.
            try midroll.show { [weak self] reason in self?.midrollEnded(midroll, reason: reason, podPosition: 0) }
        } catch {
            shown[midroll.id] = nil
            scheduleNextBreak()
        }
    }

    /// A break's ad ended: the next of its pod, or the end of the break (the content resumes).
    private func midrollEnded(_ midroll: Ad, reason: AdEndReason, podPosition: Int) {
        shown[midroll.id] = nil
        if breakWaiting?.id == midroll.id { breakWaiting = nil }
        guard !finished else { return }
        let started = breakOn
        if started, midroll.creative.podRemaining > 0, reason != .destroyed, reason != .contentChanged {
            ads.request(.midroll, podPosition: podPosition + 1) { [weak self] result in
                guard let self, !finished else { return }
                guard case .success(let next) = result else { return endBreak() }
                shown[next.id] = next
                do {
                    try next.show { [weak self] reason in self?.midrollEnded(next, reason: reason, podPosition: podPosition + 1) }
                } catch {
                    shown[next.id] = nil
                    endBreak()
                }
            }
            return
        }
        if started { return endBreak() }
        scheduleNextBreak()   // withdrawn or refused before it started: the next one
    }

    /// After this turn (clients hear of the ad's end first): the break ends, the content resumes.
    private func endBreak() {
        _ = ads.loop.execute { [weak self] in
            guard let self, !finished else { return }
            breakOn = false
            ads.endBreak()
            scheduleNextBreak()
        }
    }

    static func key(_ time: Double) -> Int64 { Int64((time * 1000).rounded()) }
}
