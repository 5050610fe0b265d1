import AdRuntime
import AdSources
import Foundation

/// The daemon's ad policy for one episode (SPEC §6): a pre-roll before it (`playPreroll`), the
/// source's overlay slots, its mid-roll breaks (each played when playback crosses its time; a
/// seek past unplayed breaks plays the last of them at the landing — "snapback"; a break played
/// is not played again), a pause ad once the content has stayed paused for `pauseAdDelay`
/// (R7), a post-roll after the end, then `onFinished` (the next episode, R8). A break's pod
/// plays in sequence (VAST `sequence`), then the break ends and the content resumes. One `VideoAds` per episode, tracked once the
/// episode's item is in the player (the seed's "One player across episodes").
///
/// It asks only for what the source can have (`AdSource.mayFill`): no request that can only
/// come back empty (a pause with no pause ad in the catalog, the time after the last slot).
///
/// Threading: loop-only — every entry point checks it is on the player's loop; it observes
/// the player there, every request is asynchronous, and nothing here blocks the loop.
public final class EpisodePolicy: PlayerObserver, @unchecked Sendable {
    // @unchecked: the vars are touched only on the player's loop (checked at the entry points).
    public let ads: VideoAds
    public let content: ContentInfo
    private let source: any AdSource
    private let pauseAdDelay: Double
    private let onFinished: @Sendable () -> Void
    private var entry: Int64?
    private weak var player: (any TrackablePlayer)?
    private var tracked = false
    private var finished = false
    private var observation: PlayerObservation?
    /// Ads shown and not ended; those on screen (`visible`) the viewer may close (`close-ad`).
    private var shown: [UInt64: Ad] = [:]
    private var visible: Set<UInt64> = []
    private var pauseAdRequested = false
    /// The pass of the episode that plays (`repeat one`: each wrap is the next, R14).
    private var pass = 0
    /// An overlay request is out (its answer not yet in).
    private var overlayRequestOut = false
    /// The slot overlay waiting for playback to play across its start.
    private var waiting: (id: UInt64, start: Double)?
    /// Where the next slot is looked for: past the last slot whose overlay ended, so the
    /// same slot is not served again when the position has not moved past its start yet
    /// (time-pos moves a frame at a time); back to the playhead after a seek.
    private let cursor: SlotCursor

    /// At `pause-ad-max` (`VideoAdsConfiguration.pauseAdMaxShowing`) the next pause ad is asked
    /// for at once, for the same pause.
    private let pauseAdRotate: Bool
    /// Competitive separation across every source: each ad on screen is recorded here.
    private let separation: AdSeparation?

    // Mid-rolls.
    /// Breaks played (or passed over by a snapback), by content time in milliseconds.
    private var playedBreaks: Set<Int64> = []
    /// A break's request is out, or its first ad waits for playback to cross its time.
    private var breakRequestOut = false
    private var breakWaiting: (id: UInt64, at: Double)?
    /// A break is on (its first ad started): the content is held until `endBreak`.
    private var breakOn = false
    /// Where the last break held the content: the resume after it may land past breaks a
    /// frame later, which then play at the landing (never skipped in silence).
    private var breakHeldAt: Double?
    /// The episode's length was handed to the ads (once a viewing).
    private var durationPlaced = false
    /// The item's cue points were read (once the file is loaded).
    private var cuePointsKnown = false
    /// A snapback's ad, loaded while the content was paused: shown when it plays.
    private var snapbackAd: Ad?
    /// Re-checks the next break when playback nears it.
    private var breakTimer: LoopTimer?
    /// How long before a break its ad is asked for: the request and the creative's
    /// preparation are done by the time playback crosses it.
    static let breakLead = 8.0

    public init(content: ContentInfo, source: any AdSource, surface: any AdSurface, loop: any PlayerLoop, pauseAdDelay: Double,
                pauseAdRotate: Bool = false, separation: AdSeparation? = nil, configuration: VideoAdsConfiguration,
                onEvent: @escaping @Sendable (AdEvent) -> Void, onFinished: @escaping @Sendable () -> Void) {
        self.separation = separation
        self.content = content
        self.pauseAdDelay = pauseAdDelay
        self.pauseAdRotate = pauseAdRotate
        self.onFinished = onFinished
        let cursor = SlotCursor(source)
        self.cursor = cursor
        self.source = cursor
        let box = WeakPolicy()
        ads = VideoAds(content: content, source: cursor, surface: surface, loop: loop, configuration: configuration) { event in
            box.value?.saw(event)
            onEvent(event)
        }
        box.value = self
    }

    /// The item shows a video (an audio-only episode has nothing to show an ad over); nil until
    /// the player knows (another kind of player: yes).
    private var videoShown: Bool? {
        guard let content = player as? any ContentPlayer else { return true }
        return content.videoShown
    }
    /// An overlay was not asked for because whether the item shows a video was not known yet:
    /// asked for when it plays (by then it is).
    private var overlayDeferred = false

    /// Starts following `player` for playlist entry `entry`; tracked once its item is in (R10).
    public func follow(_ player: any TrackablePlayer, entry: Int64) {
        ads.loop.requireInLoop()
        self.entry = entry
        self.player = player
        // After the ads' lifecycles: an overlay a pause ends is down before the policy calls
        // its source (`mayFill`) or schedules anything (ObserverPhase).
        observation = player.addObserver(self, phase: .policy)
        if player.snapshot().item?.entry == entry { trackOnce(player) }
    }

    public func stop() {
        ads.loop.requireInLoop()
        finished = true
        breakTimer?.cancel()
        observation?.cancel()
        observation = nil
        ads.destroy()
        shown = [:]
        visible = []
    }

    /// The display is off (operating hours): nothing is asked for, shown or counted — no
    /// overlay, pause ad or post-roll. On again, the overlays' chain picks up at the playhead.
    private var dark = false

    public func setDark(_ dark: Bool) {
        ads.loop.requireInLoop()
        guard dark != self.dark else { return }
        self.dark = dark
        if !dark, tracked, !finished {
            scheduleNextOverlay()
            scheduleNextBreak()
        }
    }

    /// The viewer skips the linear ad `id` (past its skip offset).
    public func skip(_ id: UInt64) throws(AdError) {
        ads.loop.requireInLoop()
        guard let ad = shown[id] else { throw .notSkippable(after: nil) }
        try ad.skip()
    }

    // MARK: Pre-roll

    /// Whether this episode is to start with a pre-roll (the source may have one; not while the
    /// display is off).
    public var wantsPreroll: Bool {
        ads.loop.requireInLoop()
        return !dark && !finished && source.mayFill(.preroll, content: content, at: 0)
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

    // MARK: Mid-rolls

    /// The next break after the playhead that was not played: its ad asked for when playback
    /// is within `breakLead` of it, shown when playback crosses its time (held there).
    private func scheduleNextBreak() {
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
    private func snapback(from: Double, to: Double) {
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

    private func showSnapback(_ midroll: Ad) {
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

    private static func key(_ time: Double) -> Int64 { Int64((time * 1000).rounded()) }

    public func setBackground(_ hidden: Bool) {
        ads.loop.requireInLoop()
        ads.setBackground(hidden)
    }

    /// The viewer dismisses the overlay or pause ad on screen (it ends `closed`). False if none
    /// (an overlay waiting for its slot is not on screen: nothing to close).
    public func closeAd() -> Bool {
        ads.loop.requireInLoop()
        let closable = shown.filter { visible.contains($0.key) && $0.value.kind != .postroll }.values
        closable.forEach { $0.close() }
        return !closable.isEmpty
    }

    public func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) {
        ads.loop.requireInLoop()
        guard !finished else { return }
        switch event.change {
        case .item(let item?) where item.entry == entry:
            if tracked, item.loop > pass {
                // `repeat one`: the next pass is a new item (R14) and a new viewing: its slots
                // from the start again (the ads have moved on to it: this is the policy's phase).
                pass = item.loop
                cursor.seeked(to: 0)
                waiting = nil
                playedBreaks = []   // a new viewing: its breaks again
                // After this turn: the controller (told last) starts the pass's frequency
                // caps anew first, and clients hear of the new item before any request.
                _ = ads.loop.execute { [weak self] in
                    guard let self, !finished else { return }
                    scheduleNextOverlay()
                    scheduleNextBreak()
                }
            }
            trackOnce(player)
        case .paused where tracked && !pauseAdRequested && videoShown != false && !dark:
            pauseAdRequested = true
            guard source.mayFill(.pauseAd, content: content, at: event.snapshot.position) else { break }
            // After this turn: the overlay this pause ended is already down (the ads' phase
            // comes first); the request (a task, a timer, a worker) waits until clients have
            // heard of the pause and the overlay's end, told in this turn (docs/benchmarks.md).
            _ = ads.loop.execute { [weak self] in self?.requestPauseAd() }
        case .playing:
            pauseAdRequested = false   // the next pause may have its pause ad
            let heldAt = breakOn ? nil : breakHeldAt
            if !breakOn { breakHeldAt = nil }
            if let snapback = snapbackAd {
                showSnapback(snapback)
            } else if let waiting = breakWaiting, event.snapshot.position > waiting.at + 0.001 {
                // Playback came back past a break that waits (a break's resume lands on the
                // next frame, past a break a frame later): it plays at the landing, as a
                // snapback does — never waits for ever, blocking every later break.
                snapback(from: waiting.at - 0.002, to: event.snapshot.position)
            } else if let heldAt, ads.midrollTimes().contains(where: { $0 > heldAt + 0.001 && $0 <= event.snapshot.position + 0.001
                                                                       && !playedBreaks.contains(Self.key($0)) }) {
                // The same, for a break not asked for yet: the resume landed past it.
                snapback(from: heldAt, to: event.snapshot.position)
            } else {
                scheduleNextBreak()
            }
            withdrawSkippedSlot(at: event.snapshot.position)
            // Playing, the item is loaded: whether it shows a video is known now.
            if overlayDeferred, tracked {
                overlayDeferred = false
                _ = ads.loop.execute { [weak self] in
                    guard let self, !finished else { return }
                    scheduleNextOverlay()
                }
            }
        case .seeked(let from, let to) where tracked:
            cursor.seeked(to: to)
            withdrawSkippedSlot(at: to)
            snapback(from: from, to: to)
        case .rate where tracked:
            scheduleNextBreak()
        case .failed(let failure) where failure.entry == entry:
            finish()
        default:
            break
        }
    }

    /// The pause ad of this pause, unless the content played again before this turn.
    private func requestPauseAd(delay: Double? = nil) {
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

    /// R12 keeps a slot's overlay waiting when the playhead lands past its start (a seek, a
    /// start or resume at a saved position, a seek mpv merged into the file's start), in case
    /// playback comes back before it. The policy moves on to the slot after the playhead
    /// instead: otherwise no later slot would ever be requested.
    private func withdrawSkippedSlot(at position: Double) {
        guard tracked, let waiting, position > waiting.start + 0.001 else { return }
        shown[waiting.id]?.withdraw()
    }

    private func pauseAdEnded(_ id: UInt64, _ reason: AdEndReason) {
        shown[id] = nil
        // `pause-ad-rotate`: the next pause ad in its place, at once, for the same pause.
        if reason == .limitReached, pauseAdRotate {
            _ = ads.loop.execute { [weak self] in self?.requestPauseAd(delay: 0) }
        }
    }

    private func saw(_ event: AdEvent) {
        switch event {
        case .contentEnded: contentEnded()
        case .breakStarted(.midroll, _, let at):
            // The content is held (whether or not the ad's video then plays): the break is on
            // until it is ended, and the break waited for counts as played.
            breakOn = true
            breakHeldAt = at
            if let waiting = breakWaiting { playedBreaks.insert(Self.key(waiting.at)) }
        case .breakEnded(.midroll, _, _) where breakOn:
            // Ended by the runtime itself (left open): the next break is looked for.
            breakOn = false
            _ = ads.loop.execute { [weak self] in self?.scheduleNextBreak() }
        case .started(let info):
            visible.insert(info.id)
            if waiting?.id == info.id { waiting = nil }
            if info.kind == .midroll, breakWaiting?.id == info.id { breakWaiting = nil }
            // On screen: caps are counted, and competitive separation starts, now.
            if let creative = shown[info.id]?.creative {
                source.didShow(creative, content: content)
                separation?.record(advertiser: creative.advertiser, categories: creative.categories)
            }
        case .ended(let info, _, _): visible.remove(info.id)
        default: break
        }
    }

    private func trackOnce(_ player: any TrackablePlayer) {
        guard !tracked, !finished else { return }
        tracked = true
        ads.track(player)
        scheduleNextOverlay()
        scheduleNextBreak()
        // The pause ad and the post-roll this episode may need, fetched while it plays.
        prefetch(.pauseAd)
        prefetch(.postroll, at: content.duration)
    }

    /// Lets the source fetch what a request of `kind` will need (SPEC §4: showing an ad never
    /// waits for the network), when it can have one.
    private func prefetch(_ kind: AdKind, at position: Double? = nil) {
        guard !finished, source.mayFill(kind, content: content, at: position ?? player?.snapshot().position ?? 0) else { return }
        ads.prefetch(kind, at: position)
    }

    /// The next slot of the source, shown when playback plays across its start (R12); when
    /// it ends, the one after.
    private func scheduleNextOverlay() {
        // One overlay chain at a time: not while a request is out or a slot's overlay waits
        // (a pass's start and the previous overlay's end may both ask).
        guard !overlayRequestOut, waiting == nil, !dark else { return }
        // An audio-only episode: an overlay would be on no screen, so none is asked for (issue 23).
        switch videoShown {
        case false?: return
        case nil:
            overlayDeferred = true
            return
        case true?: overlayDeferred = false
        }
        guard source.mayFill(.overlay, content: content, at: player?.snapshot().position ?? 0) else { return }
        overlayRequestOut = true
        ads.request(.overlay) { [weak self] result in
            self?.overlayRequestOut = false
            guard let self, !finished, !dark, case .success(let overlay) = result else { return }
            let id = overlay.id
            let then: @Sendable (AdEndReason) -> Void = { [weak self] reason in
                guard let self else { return }
                shown[id] = nil
                if waiting?.id == id { waiting = nil }
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
                    waiting = (id, start)
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

    private func contentEnded() {
        guard !dark else { return finish() }
        guard source.mayFill(.postroll, content: content, at: player?.snapshot().position ?? 0) else { return finish() }
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

    private func finish() {
        guard !finished else { return }
        finished = true
        onFinished()
    }
}

/// A continuation that runs once, however many paths reach it. Loop-only.
private final class RunOnce: @unchecked Sendable {
    // @unchecked: touched on the loop only.
    private var body: (@Sendable () -> Void)?
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    func run() {
        let body = self.body
        self.body = nil
        body?()
    }
}

/// A weak reference handed to a callback that runs on the loop.
private final class WeakPolicy: @unchecked Sendable {
    // @unchecked: set once before the first callback, read on the loop.
    weak var value: EpisodePolicy?
}

