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
    let source: any AdSource
    let pauseAdDelay: Double
    private let onFinished: @Sendable () -> Void
    private var entry: Int64?
    weak var player: (any TrackablePlayer)?
    var tracked = false
    var finished = false
    private var observation: PlayerObservation?
    /// Ads shown and not ended; those on screen (`visible`) the viewer may close (`close-ad`).
    var shown: [UInt64: Ad] = [:]
    private var visible: Set<UInt64> = []
    var pauseAdRequested = false
    /// The pass of the episode that plays (`repeat one`: each wrap is the next, R14).
    private var pass = 0
    /// The overlay chain's state (EpisodePolicy+Overlays.swift).
    var overlays = Overlays()
    /// Where the next slot is looked for: past the last slot whose overlay ended, so the
    /// same slot is not served again when the position has not moved past its start yet
    /// (time-pos moves a frame at a time); back to the playhead after a seek.
    let cursor: SlotCursor

    /// At `pause-ad-max` (`VideoAdsConfiguration.pauseAdMaxShowing`) the next pause ad is asked
    /// for at once, for the same pause.
    let pauseAdRotate: Bool
    /// A pause this long brings the screensaver ads (R27; EpisodePolicy+PauseAd.swift); nil: never.
    let screensaverAfter: Double?
    /// The screensaver's wait, while the content is paused.
    var screensaverTimer: LoopTimer?
    /// Competitive separation across every source: each ad on screen is recorded here.
    private let separation: AdSeparation?

    /// The mid-roll breaks' state (EpisodePolicy+Midrolls.swift).
    var midrolls = Midrolls()
    /// How long before a break its ad is asked for: the request and the creative's
    /// preparation are done by the time playback crosses it.
    static let breakLead = 8.0

    public init(content: ContentInfo, source: any AdSource, surface: any AdSurface, loop: any PlayerLoop, pauseAdDelay: Double,
                pauseAdRotate: Bool = false, screensaverAfter: Double? = nil, separation: AdSeparation? = nil,
                configuration: VideoAdsConfiguration,
                onEvent: @escaping @Sendable (AdEvent) -> Void, onFinished: @escaping @Sendable () -> Void) {
        self.separation = separation
        self.screensaverAfter = screensaverAfter
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
    var videoShown: Bool? {
        guard let content = player as? any ContentPlayer else { return true }
        return content.videoShown
    }

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

    public func stop(endingShownAs reason: AdEndReason = .destroyed) {
        ads.loop.requireInLoop()
        finished = true
        midrolls.timer?.cancel()
        observation?.cancel()
        observation = nil
        ads.destroy(endingShownAs: reason)
        shown = [:]
        visible = []
    }

    /// The display is off (operating hours): nothing is asked for, shown or counted — no
    /// overlay, pause ad or post-roll. On again, the overlays' chain picks up at the playhead.
    var dark = false

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
                overlays.waiting = nil
                midrolls.played = []   // a new viewing: its breaks again
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
            armScreensaver()
            guard source.mayFill(.pauseAd, content: ads.requestContent, at: event.snapshot.position) else { break }
            // After this turn: the overlay this pause ended is already down (the ads' phase
            // comes first); the request (a task, a timer, a worker) waits until clients have
            // heard of the pause and the overlay's end, told in this turn (docs/benchmarks.md).
            _ = ads.loop.execute { [weak self] in self?.requestPauseAd() }
        case .playing:
            pauseAdRequested = false   // the next pause may have its pause ad
            disarmScreensaver()
            let heldAt = midrolls.on ? nil : midrolls.heldAt
            if !midrolls.on { midrolls.heldAt = nil }
            if let snapback = midrolls.snapbackAd {
                showSnapback(snapback)
            } else if let waiting = midrolls.waiting, event.snapshot.position > waiting.at + 0.001 {
                // Playback came back past a break that waits (a break's resume lands on the
                // next frame, past a break a frame later): it plays at the landing, as a
                // snapback does — never waits for ever, blocking every later break.
                snapback(from: waiting.at - 0.002, to: event.snapshot.position)
            } else if let heldAt, ads.midrollTimes().contains(where: { $0 > heldAt + 0.001 && $0 <= event.snapshot.position + 0.001
                                                                       && !midrolls.played.contains(Self.key($0)) }) {
                // The same, for a break not asked for yet: the resume landed past it.
                snapback(from: heldAt, to: event.snapshot.position)
            } else {
                scheduleNextBreak()
            }
            withdrawSkippedSlot(at: event.snapshot.position)
            // Playing, the item is loaded: whether it shows a video is known now.
            if overlays.deferred, tracked {
                overlays.deferred = false
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

    private func saw(_ event: AdEvent) {
        switch event {
        case .contentEnded: contentEnded()
        case .breakStarted(.midroll, _, let at):
            // The content is held (whether or not the ad's video then plays): the break is on
            // until it is ended, and the break waited for counts as played.
            midrolls.on = true
            midrolls.heldAt = at
            if let waiting = midrolls.waiting { midrolls.played.insert(Self.key(waiting.at)) }
        case .breakEnded(.midroll, _, _) where midrolls.on:
            // Ended by the runtime itself (left open): the next break is looked for.
            midrolls.on = false
            _ = ads.loop.execute { [weak self] in self?.scheduleNextBreak() }
        case .started(let info):
            visible.insert(info.id)
            if overlays.waiting?.id == info.id { overlays.waiting = nil }
            if info.kind == .midroll, midrolls.waiting?.id == info.id { midrolls.waiting = nil }
            // On screen: caps are counted, and competitive separation starts, now.
            if let creative = shown[info.id]?.creative {
                source.didShow(creative, content: ads.requestContent)
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
    func prefetch(_ kind: AdKind, at position: Double? = nil) {
        guard !finished, source.mayFill(kind, content: ads.requestContent, at: position ?? player?.snapshot().position ?? 0) else { return }
        ads.prefetch(kind, at: position)
    }

    func finish() {
        guard !finished else { return }
        finished = true
        onFinished()
    }
}

/// A continuation that runs once, however many paths reach it. Loop-only.
final class RunOnce: @unchecked Sendable {
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

