import AdRuntime
import AdSources
import Foundation

/// Mid-roll breaks (SPEC R21): each played when playback crosses its time, asked for `breakLead`
/// ahead; a seek past unplayed breaks plays the last of them at the landing (snapback); a break
/// played is not played again; the content is held while it is on.
extension EpisodePolicy {
    /// What the policy knows of an episode's breaks, on the loop.
    struct Midrolls {
        /// Breaks played (or passed over by a snapback), by content time in milliseconds.
        var played: Set<Int64> = []
        /// A break's request is out, or its first ad waits for playback to cross its time.
        var requestOut = false
        var waiting: (id: UInt64, at: Double)?
        /// A break is on (its first ad started): the content is held until `endBreak`.
        var on = false
        /// Where the last break held the content: the resume after it may land past breaks a
        /// frame later, which then play at the landing (never skipped in silence).
        var heldAt: Double?
        /// The episode's length was handed to the ads (once a viewing).
        var durationPlaced = false
        /// The item's cue points were read (once the file is loaded).
        var cuePointsKnown = false
        /// A snapback's ad, loaded while the content was paused: shown when it plays.
        var snapbackAd: Ad?
        /// Re-checks the next break when playback nears it.
        var timer: LoopTimer?
    }

    /// The next break after the playhead that was not played: its ad asked for when playback
    /// is within `breakLead` of it, shown when playback crosses its time (held there).
    func scheduleNextBreak() {
        midrolls.timer?.cancel()
        midrolls.timer = nil
        guard tracked, !finished, !dark, !midrolls.requestOut, midrolls.waiting == nil, !midrolls.on, midrolls.snapbackAd == nil,
              let snapshot = player?.snapshot() else { return }
        // Its length and cue points, once the player knows them: breaks at a percentage of the
        // episode, and VMAP's `#n` breaks, need them.
        if let content = player as? any ContentPlayer {
            // The first length the player knows places the percentage breaks for the whole
            // viewing: a length refined later (a VBR or TS file) does not move a played 50 %
            // break ahead to play again.
            if self.content.duration == nil, !midrolls.durationPlaced, let length = content.duration() {
                midrolls.durationPlaced = true
                ads.setContentDuration(length)
            }
            if self.content.cuePoints == nil, !midrolls.cuePointsKnown, let cues = content.cuePoints() {
                midrolls.cuePointsKnown = true
                ads.setContentCuePoints(cues)
            }
        }
        guard let time = ads.midrollTimes().first(where: { $0 >= snapshot.position - 0.001 && !midrolls.played.contains(Self.key($0)) }) else { return }
        let ahead = time - snapshot.position
        if ahead > Self.breakLead {
            // Asked for later: re-checked then (and at every play, seek and rate change).
            guard snapshot.playing, snapshot.rate > 0 else { return }
            midrolls.timer = ads.loop.schedule(after: (ahead - Self.breakLead) / snapshot.rate) { [weak self] in self?.scheduleNextBreak() }
            return
        }
        midrolls.requestOut = true
        ads.request(.midroll, breakTime: time) { [weak self] result in
            guard let self else { return }
            midrolls.requestOut = false
            guard !finished else { return }
            guard case .success(let midroll) = result else {
                midrolls.played.insert(Self.key(time))   // nothing for it: the content plays through it
                return scheduleNextBreak()
            }
            let at = midroll.creative.slotStart ?? time
            let id = midroll.id
            if let position = player?.snapshot().position, position > at + 0.001 {
                // Playback passed it (a seek) while the ad was asked for: played at the landing.
                midrolls.played.insert(Self.key(time))
                shown[id] = midroll
                if player?.snapshot().playing == true { showSnapback(midroll) } else { midrolls.snapbackAd = midroll }
                return
            }
            do {
                shown[id] = midroll
                try midroll.show(atContentTime: at) { [weak self] reason in self?.midrollEnded(midroll, reason: reason, podPosition: 0) }
                midrolls.waiting = (id, at)
            } catch {
                shown[id] = nil
                midrolls.played.insert(Self.key(time))
            }
        }
    }

    /// A seek landed past unplayed breaks: the last of them plays at the landing (IMA's
    /// snapback), the others count as passed; a seek back over played breaks plays nothing.
    func snapback(from: Double, to: Double) {
        // A waiting break ahead of the landing waits on (its lifecycle re-arms itself).
        let passed = ads.midrollTimes().filter { $0 > from + 0.001 && $0 <= to + 0.001 && !midrolls.played.contains(Self.key($0)) }
        guard let last = passed.last, !midrolls.on, !midrolls.requestOut else { return scheduleNextBreak() }
        passed.forEach { midrolls.played.insert(Self.key($0)) }
        if let waiting = midrolls.waiting, Self.key(waiting.at) == Self.key(last), let ad = shown[waiting.id] {
            // The ad loaded for that very break plays at the landing: not asked for again (a
            // VMAP break is served once a viewing), nothing withdrawn.
            midrolls.waiting = (waiting.id, to)
            ad.playAtLanding()
            return
        }
        midrolls.requestOut = true   // before the withdrawal below: its end looks for no other break meanwhile
        if let waiting = midrolls.waiting {   // the first of those passed
            midrolls.waiting = nil
            shown[waiting.id]?.withdraw()   // ends `seeked`, never shown: its break is played at the landing instead
        }
        ads.request(.midroll, breakTime: last) { [weak self] result in
            guard let self else { return }
            midrolls.requestOut = false
            guard !finished else { return }
            guard case .success(let midroll) = result else { return scheduleNextBreak() }
            shown[midroll.id] = midroll
            if player?.snapshot().playing == true {
                showSnapback(midroll)
            } else {
                midrolls.snapbackAd = midroll   // paused at the landing: when it plays
            }
        }
    }

    func showSnapback(_ midroll: Ad) {
        midrolls.snapbackAd = nil
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
        if midrolls.waiting?.id == midroll.id { midrolls.waiting = nil }
        guard !finished else { return }
        let started = midrolls.on
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
            midrolls.on = false
            ads.endBreak()
            scheduleNextBreak()
        }
    }

    static func key(_ time: Double) -> Int64 { Int64((time * 1000).rounded()) }
}
