import AdRuntime
import AdTracking
import ControlProtocol
import Foundation

/// What the daemon does with the player: the queue, the episode that plays and its ad
/// policy, loop mode, the output's visibility; every control command lands here; every
/// player change and ad event goes out from here to the control socket's subscribers.
///
/// Threading: loop-only — every entry point checks it is on the player's loop (SPEC R18).
/// Control commands are handed to the loop; file checks, disk writes (`StateStore`'s writer),
/// HTTP and socket I/O happen elsewhere. What the loop needs of the saved state (the queue,
/// the positions) it holds in memory.
public final class Controller: PlayerObserver, @unchecked Sendable {
    // @unchecked: every var is touched only on the player's loop (checked at the entry points).
    private let player: any ContentPlayer
    private let surface: any AdSurface
    private let store: StateStore
    private let log: Logger
    private let emit: @Sendable (ControlEvent) -> Void
    private let reporting: AdReporting
    private let metrics: Metrics?
    /// The last episode of the queue is done (`play` exits then; the daemon waits).
    public var onQueueDone: @Sendable () -> Void = {}
    /// What desktop media controls (MPRIS) show, after every change that may alter it, with the
    /// new position after a real seek. Set before `start`; called on the loop.
    public var onDesktopChange: (@Sendable (DesktopState, _ seekedTo: Double?) -> Void)?
    private var source: (any AdSource)?
    private var pauseAdDelay: Double
    private let adsConfiguration: VideoAdsConfiguration
    private var observation: PlayerObservation?

    private(set) var queue: [QueueEntry] = []
    private var current: Int?
    private var episode: Episode?
    private var loopOn = false
    /// Why the output is hidden (R13); background while any reason holds.
    private var backgroundReasons: Set<BackgroundReason> = []
    private var background: Bool { !backgroundReasons.isEmpty }
    /// The host went to sleep while the content played: it plays again on waking.
    private var playAfterSleep = false
    /// A post-roll plays (it cannot be skipped or seeked), and whether the viewer paused it.
    private var postroll: (id: UInt64, paused: Bool)?
    /// The content's speed (the snapshot's rate is 0 while paused).
    private var speedSetting = 1.0
    private var positionTimer: LoopTimer?
    /// The ad on screen, for `status`.
    private var adOnScreen: AdInfo?
    /// Where each episode was left, by path (what `StateStore` saves, kept here for the loop).
    private var positions: [String: Double] = [:]
    private var publishedPlaying: Bool?
    private var publishedItem: [String]?
    /// Ads whose `ad.started` waits for proof of play to hold them, with their later events.
    private var unannounced: [UInt64: [AdEvent]] = [:]

    private struct Episode {
        let entry: QueueEntry
        /// mpv's playlist entry id, once mpv has answered the load.
        var playlistEntry: Int64?
        let policy: EpisodePolicy?
        let serial: UInt64
        /// What desktops show of it (made once: it builds a URL).
        let track: DesktopState.Track
    }
    /// The cost of telling desktops, on the loop (logged at `debug` when the daemon stops).
    private var desktopPublishes = (count: 0, nanoseconds: UInt64(0))
    private var serial: UInt64 = 0

    public init(player: any ContentPlayer, surface: any AdSurface, store: StateStore, log: Logger, source: (any AdSource)?,
                pauseAdDelay: Double, adsConfiguration: VideoAdsConfiguration, emit: @escaping @Sendable (ControlEvent) -> Void,
                reporting: AdReporting = AdReporting(), metrics: Metrics? = nil) {
        self.player = player
        self.surface = surface
        self.store = store
        self.log = log
        self.source = source
        self.pauseAdDelay = pauseAdDelay
        self.adsConfiguration = adsConfiguration
        self.emit = emit
        self.reporting = reporting
        self.metrics = metrics
    }

    /// On the loop: starts observing, and resumes what was saved (the same episode, where it was).
    public func start(resuming saved: StateStore.Saved) {
        player.loop.assertInLoop()
        observation = player.addObserver(self)
        queue = saved.queue
        positions = saved.positions
        loopOn = saved.loop
        try? player.setLoop(loopOn)
        if let index = saved.current {
            log.notice("resuming \(queue[index].path) at \(String(format: "%.1f", saved.position)) s")
            play(index, start: saved.position, fresh: false)
        }
        player.onDetailChange { [weak self] change in
            guard let self else { return }
            switch change {
            case .windowMinimized(let minimized):
                log.info(minimized ? "the window is minimized: background" : "the window is restored: foreground")
                setBackground(minimized, for: .minimized)
            case .duration:
                publishDesktop()   // MPRIS's mpris:length
            case .outputSize(let width, let height):
                reporting.playerSize?(width, height)
            }
        }
        publishDesktop()
    }

    /// On the loop: a new ad source (SIGHUP) for the episodes that come next; a new delay.
    public func reload(source: (any AdSource)?, pauseAdDelay: Double) {
        player.loop.assertInLoop()
        self.source = source
        self.pauseAdDelay = pauseAdDelay
    }

    /// On the loop, before shutdown: the position of what plays is saved, the ads end.
    public func stop() {
        player.loop.assertInLoop()
        if desktopPublishes.count > 0 {
            log.debug("desktop state handed over \(desktopPublishes.count) times on the loop, "
                      + String(format: "%.1f µs each on average", Double(desktopPublishes.nanoseconds) / Double(desktopPublishes.count) / 1000))
        }
        savePosition()
        positionTimer?.cancel()
        episode?.policy?.stop()
        observation?.cancel()
    }

    // MARK: Commands (on the loop)

    /// What plays, where, the ad on screen, the queue. Only what is true: with no episode
    /// there is no item and nothing plays, whatever mpv has not reported yet.
    public func status() -> JSONValue {
        player.loop.assertInLoop()
        let snapshot = player.snapshot()
        var item: JSONValue = .null
        var playing = false, position = 0.0, rate = 0.0
        if let episode, snapshot.item != nil || episode.playlistEntry == nil {
            item = ["path": .string(episode.entry.path), "content_id": .string(episode.entry.contentID),
                    "pass": .int(snapshot.item?.loop ?? 0)]
            playing = postroll.map { !$0.paused } ?? snapshot.playing
            position = postroll == nil ? snapshot.position : 0
            rate = playing ? (postroll == nil ? snapshot.rate : 1) : 0
        }
        let ad: JSONValue = adOnScreen.map { ["kind": .string($0.kind.protocolName), "ad_id": .string($0.creativeID)] } ?? .null
        return ["item": item, "position": .number(position), "playing": .bool(playing),
                "rate": .number(rate), "ad": ad, "queue": .array(queue.map { .string($0.path) }),
                "current": current.map { .int($0) } ?? .null, "loop": .bool(loopOn), "background": .bool(background),
                "background_reasons": .array(backgroundReasons.map(\.rawValue).sorted().map { .string($0) })]
    }

    /// Plays `entry` now, after the current one in the queue; from `start`, or where it was left.
    public func open(_ entry: QueueEntry, start: Double?) throws(ControlError) -> JSONValue {
        player.loop.assertInLoop()
        try checkRoom(for: [entry])
        let index = (current ?? -1) + 1
        queue.insert(entry, at: min(index, queue.count))
        let saved = start ?? positions[entry.path] ?? 0
        play(index, start: saved, fresh: saved == 0)
        return ["path": .string(entry.path), "content_id": .string(entry.contentID), "index": .int(index)]
    }

    public func enqueue(_ entries: [QueueEntry]) throws(ControlError) -> JSONValue {
        player.loop.assertInLoop()
        try checkRoom(for: entries)
        let first = queue.count
        queue += entries
        store.saveQueue(queue, current: current)
        if episode == nil, !entries.isEmpty { play(first, start: nil, fresh: true) }
        return ["queued": .int(entries.count), "queue": .array(queue.map { .string($0.path) })]
    }

    /// Refuses, adding nothing, what would take the queue past its bounds.
    private func checkRoom(for entries: [QueueEntry]) throws(ControlError) {
        guard !QueueEntry.fits(queue, entries) else { return }
        throw ControlError(.queueFull, "the queue holds \(queue.count) entries; with \(entries.count) more it would pass "
                           + "its bounds (\(QueueEntry.maxEntries) entries, \(QueueEntry.maxPathBytes >> 20) MiB of paths)"
                           + (queue.isEmpty ? "" : "; `clear` empties it"))
    }

    /// Stops playing and empties the queue.
    public func clear() -> JSONValue {
        player.loop.assertInLoop()
        stopPlaying()
        queue = []
        current = nil
        store.saveQueue(queue, current: nil)
        publishDesktop()
        return status()
    }

    public func play() throws(ControlError) -> JSONValue {
        player.loop.assertInLoop()
        if episode == nil {
            guard !queue.isEmpty else { throw ControlError(.emptyQueue, "nothing to play: the queue is empty") }
            let index = current.map { min($0, queue.count - 1) } ?? 0
            play(index, start: positions[queue[index].path] ?? 0, fresh: false)
        } else {
            try onPlayer { try player.play() }
        }
        return status()
    }

    public func pause() throws(ControlError) -> JSONValue {
        player.loop.assertInLoop()
        guard episode != nil else { throw ControlError(.notPlaying, "nothing plays") }
        playAfterSleep = false   // paused on purpose while the host sleeps: it stays paused on waking
        try onPlayer { try player.pause() }
        return status()
    }

    public func toggle() throws(ControlError) -> JSONValue {
        player.loop.assertInLoop()
        if episode == nil { return try play() }
        try onPlayer { try player.togglePause() }
        return status()
    }

    public func seek(_ seek: SeekTarget) throws(ControlError) -> JSONValue {
        player.loop.assertInLoop()
        try refuseDuringPostroll("seeked")
        guard episode != nil, player.snapshot().item != nil else { throw ControlError(.notPlaying, "no episode is in the player") }
        switch seek {
        case .to(let seconds): try onPlayer { try player.seek(seconds, relative: false) }
        case .by(let seconds): try onPlayer { try player.seek(seconds, relative: true) }
        }
        return status()
    }

    public func speed(_ value: Double) throws(ControlError) -> JSONValue {
        player.loop.assertInLoop()
        try onPlayer { try player.setSpeed(value) }
        speedSetting = value
        publishDesktop()
        return status()
    }

    public func next() throws(ControlError) -> JSONValue {
        player.loop.assertInLoop()
        try refuseDuringPostroll("skipped")
        guard let current, current + 1 < queue.count else {
            stopPlaying()
            self.current = nil
            store.saveQueue(queue, current: nil)
            return status()
        }
        play(current + 1, start: nil, fresh: true)
        return status()
    }

    /// The episode before this one in the queue, from its start.
    public func previous() throws(ControlError) -> JSONValue {
        player.loop.assertInLoop()
        try refuseDuringPostroll("skipped")
        guard let current, current > 0 else { throw ControlError(.noPrevious, "this is the first episode of the queue") }
        play(current - 1, start: 0, fresh: true)
        return status()
    }

    /// The post-roll is the episode's last word (SPEC §6): the viewer can pause it, not skip
    /// or seek it (`stop` still ends everything). MPRIS's `CanSeek`/`CanGoNext` say so.
    private func refuseDuringPostroll(_ what: String) throws(ControlError) {
        if postroll != nil { throw ControlError(.adPlaying, "a post-roll plays: it cannot be \(what)") }
    }

    public func stopCommand() -> JSONValue {
        player.loop.assertInLoop()
        stopPlaying()
        return status()
    }

    public func setLoop(_ on: Bool) throws(ControlError) -> JSONValue {
        player.loop.assertInLoop()
        loopOn = on
        try onPlayer { try player.setLoop(on) }
        store.saveLoop(on)
        publishDesktop()
        return status()
    }

    public enum BackgroundReason: String, Sendable {
        /// A control client said `background`.
        case control
        /// logind's PrepareForSleep(true): the host is going to sleep.
        case sleep
        /// mpv's window is minimized.
        case minimized
    }

    /// The control protocol's `background`/`foreground`.
    public func setBackground(_ hidden: Bool) -> JSONValue {
        player.loop.assertInLoop()
        setBackground(hidden, for: .control)
        return status()
    }

    /// The output is hidden (or shown again) for `reason`. The ads hear of it (R13) when the
    /// union of the reasons changes, and before any pause that follows from it.
    public func setBackground(_ hidden: Bool, for reason: BackgroundReason) {
        player.loop.assertInLoop()
        let before = background
        if hidden { backgroundReasons.insert(reason) } else { backgroundReasons.remove(reason) }
        guard background != before else { return }
        episode?.policy?.setBackground(background)
        emit(.playerBackground(background, reasons: backgroundReasons.map(\.rawValue)))
    }

    /// logind's PrepareForSleep: going to sleep is background, then a pause (an overlay
    /// freezes, R13); waking is foreground, then play again in the same turn if it played
    /// before — well within R13's second, so a frozen overlay goes on.
    public func hostSleep(_ sleeping: Bool) {
        player.loop.assertInLoop()
        if sleeping {
            let playing = player.snapshot().playing || (postroll.map { !$0.paused } ?? false)
            playAfterSleep = playing || playAfterSleep
            log.notice("the host is going to sleep: background\(playing ? ", paused" : "")")
            setBackground(true, for: .sleep)
            if playing { try? player.pause() }
        } else {
            log.notice("the host woke up: foreground\(playAfterSleep ? ", playing again" : "")")
            setBackground(false, for: .sleep)
            if playAfterSleep, episode != nil { try? player.play() }
            playAfterSleep = false
        }
    }

    public func closeAd() throws(ControlError) -> JSONValue {
        player.loop.assertInLoop()
        guard episode?.policy?.closeAd() == true else { throw ControlError(.noAd, "no overlay or pause ad is on screen") }
        return status()
    }

    private func onPlayer(_ body: () throws -> Void) throws(ControlError) {
        do {
            try body()
        } catch {
            throw ControlError(.player, "\(error)")
        }
    }

    // MARK: Episodes

    private func play(_ index: Int, start: Double?, fresh: Bool) {
        guard queue.indices.contains(index) else { return }
        savePosition()
        episode?.policy?.stop()
        adOnScreen = nil
        let entry = queue[index]
        current = index
        store.saveQueue(queue, current: index)
        if fresh { store.resetCounters(content: entry.contentID) }
        serial += 1
        let serial = self.serial
        let policy = source.map { source in
            EpisodePolicy(content: ContentInfo(id: entry.contentID), source: source, surface: surface, loop: player.loop,
                          pauseAdDelay: pauseAdDelay, configuration: adsConfiguration,
                          onEvent: { [weak self, loop = player.loop] event in
                              // After the ads' own turn, as player changes are.
                              _ = loop.execute { [weak self] in self?.adEvent(event) }
                          },
                          onFinished: { [weak self] in self?.episodeFinished(serial) })
        }
        policy?.setBackground(background)
        postroll = nil
        episode = Episode(entry: entry, playlistEntry: nil, policy: policy, serial: serial,
                          track: DesktopState.Track(serial: serial, path: entry.path))
        // A new episode plays (mpv's pause flag outlives files), from `start` when given.
        try? player.play()
        player.load(entry.path, start: start) { [weak self] result in
            guard let self, let episode, episode.serial == serial else { return }
            switch result {
            case .success(let playlistEntry):
                self.episode?.playlistEntry = playlistEntry
                policy?.follow(player, entry: playlistEntry)
            case .failure(let error):
                log.error("\(entry.path): cannot be played: \(error)")
                emit(.playerFailed(path: entry.path, code: (error as? PlayerFailure)?.code ?? "loading-failed", message: "\(error)"))
                episodeFinished(serial)
            }
        }
    }

    /// The episode's post-roll is done (or there was none, or it could not play): the next.
    private func episodeFinished(_ serial: UInt64) {
        guard let episode, episode.serial == serial else { return }
        self.episode = nil
        postroll = nil
        guard let current, current + 1 < queue.count else {
            log.info("the queue is done")
            self.current = nil
            store.saveQueue(queue, current: nil)
            publishDesktop()
            onQueueDone()
            return
        }
        play(current + 1, start: nil, fresh: true)
    }

    private func stopPlaying() {
        savePosition()
        episode?.policy?.stop()
        episode = nil
        adOnScreen = nil
        postroll = nil
        positionTimer?.cancel()
        try? player.stop()
        publishDesktop()
    }

    private func savePosition() {
        guard let episode else { return }
        let snapshot = player.snapshot()
        guard snapshot.item != nil else { return }
        remember(episode.entry.path, snapshot.position)
    }

    /// `path` is at `seconds` (nil: played to its end): kept here for the loop, saved by the store.
    private func remember(_ path: String, _ seconds: Double?) {
        if let seconds, seconds.isFinite, seconds > 0 {
            if positions[path] == nil, positions.count >= StateStore.maxPositions, let any = positions.keys.first { positions[any] = nil }
            positions[path] = seconds
        } else {
            positions[path] = nil
        }
        store.savePosition(path, seconds)
    }

    /// While playing, the position is saved every second: a `kill -9` resumes within a second
    /// or two of where it was. Nothing is scheduled while paused.
    private func armPositionTimer() {
        guard positionTimer == nil || positionTimer!.isCancelled else { return }
        positionTimer = player.loop.schedule(after: 1) { [weak self] in
            guard let self else { return }
            positionTimer = nil
            guard player.snapshot().playing else { return }
            savePosition()
            armPositionTimer()
        }
    }

    // MARK: Desktop media controls

    /// What MPRIS shows: built on the loop from the model, the queue and the post-roll.
    public func desktopState() -> DesktopState {
        player.loop.assertInLoop()
        let snapshot = player.snapshot()
        var state = DesktopState()
        state.rate = speedSetting
        state.position = snapshot.position
        state.at = MonotonicTime.now()
        state.loop = loopOn
        state.canPlay = episode != nil || !queue.isEmpty
        guard let episode else { return state }
        state.track = episode.track
        state.length = snapshot.item != nil ? player.duration() : nil
        if let postroll {
            state.status = postroll.paused ? .paused : .playing
            state.position = 0
        } else if snapshot.item != nil {
            state.status = snapshot.playing ? .playing : .paused
            state.moving = snapshot.playing
        } else {
            state.status = .playing   // loading, or between the end and the post-roll
        }
        state.canPause = true
        state.canSeek = postroll == nil && snapshot.item != nil
        state.canGoNext = postroll == nil && (current.map { $0 + 1 < queue.count } ?? false)
        state.canGoPrevious = postroll == nil && (current.map { $0 > 0 } ?? false)
        return state
    }

    private func publishDesktop(seekedTo: Double? = nil) {
        publishMetrics()
        guard let onDesktopChange else { return }
        let start = MonotonicTime.now()
        let state = desktopState()
        onDesktopChange(state, seekedTo)
        desktopPublishes.count += 1
        desktopPublishes.nanoseconds &+= MonotonicTime.now() &- start
    }

    /// Whether something plays, and which episode is in, for the metrics (a lock and two
    /// dictionary writes; only when it changed).
    private func publishMetrics() {
        guard let metrics else { return }
        let playing = postroll.map { !$0.paused } ?? (episode != nil && player.snapshot().playing)
        let item = episode.map { [$0.entry.path, $0.entry.contentID] }
        guard playing != publishedPlaying || item != publishedItem else { return }
        publishedPlaying = playing
        publishedItem = item
        metrics.set("adplayerd_playing", [:], playing ? 1 : 0)
        metrics.clear("adplayerd_item_info")
        if let item { metrics.set("adplayerd_item_info", ["path": item[0], "content_id": item[1]], 1) }
    }

    // MARK: What the player and the ads say (on the loop)

    /// Telling clients and desktops of a change is work for the loop's next turn, in order:
    /// every other observer of the change reacts first — the ads above all, whose reaction
    /// (an overlay taken down) is what `latency_us` measures and what a viewer sees. Waking
    /// the socket's and the bus's threads costs the loop tens of µs (docs/benchmarks.md).
    public func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) {
        self.player.loop.assertInLoop()
        _ = self.player.loop.execute { [weak self] in self?.handle(event) }
    }

    private func handle(_ event: PlayerEvent) {
        let s = event.snapshot
        switch event.change {
        case .item(let item?):
            emit(.playerItem(path: item.path, entry: item.entry, pass: item.loop, contentID: episode?.entry.contentID))
        case .item(nil):
            emit(.playerEmpty)
        case .playing(let rate):
            emit(.playerPlaying(rate: rate, position: s.position))
            speedSetting = rate
            armPositionTimer()
        case .paused:
            emit(.playerPaused(position: s.position))
            positionTimer?.cancel()
            savePosition()
        case .rate(let rate):
            emit(.playerRate(rate))
            speedSetting = rate
        case .seeked(let from, let to):
            emit(.playerSeeked(from: from, to: to))
            savePosition()
        case .ended(let item):
            emit(.playerEnded(path: item.path, position: s.position))
            positionTimer?.cancel()
            if let episode, item.entry == episode.playlistEntry { remember(episode.entry.path, nil) }
            if episode?.policy == nil, let serial = episode?.serial, !loopOn { episodeFinished(serial) }   // no ads: next
        case .failed(let failure):
            emit(.playerFailed(path: failure.path, code: failure.code, message: failure.message))
            if let episode, failure.entry == episode.playlistEntry, episode.policy == nil { episodeFinished(episode.serial) }
        }
        if case .seeked(_, let to) = event.change { publishDesktop(seekedTo: to) } else { publishDesktop() }
    }

    /// An ad event: the controller's own state at once (status, MPRIS), tracking in order,
    /// and clients — `ad.started` once proof of play holds the ad (`AdReporting.recordStart`),
    /// that ad's later events after it.
    private func adEvent(_ event: AdEvent) {
        switch event {
        case .started(let info):
            if info.kind != .postroll || adOnScreen == nil { adOnScreen = info }
            if info.kind == .postroll {
                postroll = (info.id, false)
                publishDesktop()
            }
            if let recordStart = reporting.recordStart {
                unannounced[info.id] = []
                recordStart(event) { [weak self, loop = player.loop] in
                    _ = loop.execute { [weak self] in self?.announceStart(info) }
                }
                return
            }
        case .postrollPaused(let info, let paused):
            if postroll?.id == info.id {
                postroll?.paused = paused
                publishDesktop()
            }
        case .ended(let info, _, _):
            if adOnScreen?.id == info.id { adOnScreen = nil }
            if postroll?.id == info.id {
                postroll = nil
                publishDesktop()
            }
        default:
            break
        }
        reporting.record(event)
        if let id = event.adID, unannounced[id] != nil {
            unannounced[id]?.append(event)
        } else {
            announce(event)
        }
    }

    /// Proof of play holds the ad: clients hear of its start, then of what followed.
    private func announceStart(_ info: AdInfo) {
        let later = unannounced.removeValue(forKey: info.id) ?? []
        announce(.started(info))
        later.forEach(announce)
    }

    private func announce(_ event: AdEvent) {
        switch event {
        case .requested(let kind, let content, let position): emit(.adRequested(kind, contentID: content, position: position))
        case .noFill(let kind, let content, let position): emit(.adNoFill(kind, contentID: content, position: position))
        case .loaded(let info, _): emit(.adLoaded(info))
        case .started(let info):
            emit(.adStarted(info))
            log.event(.info, "ad shown: \(info.kind.protocolName) \(info.creativeID) over \(info.contentID)", id: .adShown,
                      fields: ["AD_ID": info.creativeID, "AD_KIND": info.kind.protocolName, "CONTENT_ID": info.contentID,
                               "AD_INSTANCE": String(info.id, radix: 16)])
        case .quartile(let info, let quartile): emit(.adQuartile(info, quartile))
        case .viewability(let info, let viewability): emit(.adViewability(info, viewability))
        case .postrollPaused(let info, let paused): emit(.adPaused(info, paused))
        case .ended(let info, let reason, let latency): emit(.adEnded(info, reason: reason, latencyMicroseconds: latency))
        case .error(let kind, let creativeID, let error):
            emit(.adError(kind, adID: creativeID, error: error))
            var fields = ["AD_KIND": kind.protocolName, "AD_ERROR": error.code, "CONTENT_ID": episode?.entry.contentID ?? ""]
            if let creativeID { fields["AD_ID"] = creativeID }
            if let vast = error.vastCode { fields["VAST_ERROR"] = String(vast) }
            log.event(.notice, "ad error: \(kind.protocolName)\(creativeID.map { " " + $0 } ?? ""): \(error)", id: .adError, fields: fields)
        case .progress, .contentEnded: break
        }
    }
}

/// Where the controller hands the ads' events for tracking (`TrackingReporter`): every event
/// in order, and an ad's start with a continuation for once proof of play holds it.
public struct AdReporting: Sendable {
    public var record: @Sendable (AdEvent) -> Void
    /// Records `.started` durably, then runs the continuation (any thread). Nil: clients hear
    /// of a start at once.
    public var recordStart: (@Sendable (AdEvent, @escaping @Sendable () -> Void) -> Void)?
    /// The output's size changed (pixels): for `[PLAYERSIZE]` in tracking and ad requests.
    public var playerSize: (@Sendable (Int, Int) -> Void)?

    public init(record: @escaping @Sendable (AdEvent) -> Void = { _ in },
                recordStart: (@Sendable (AdEvent, @escaping @Sendable () -> Void) -> Void)? = nil) {
        self.record = record
        self.recordStart = recordStart
    }
}

extension AdEvent {
    /// The shown ad an event is about, if any.
    var adID: UInt64? {
        switch self {
        case .started(let info), .quartile(let info, _), .viewability(let info, _), .postrollPaused(let info, _), .ended(let info, _, _),
             .progress(let info, _, _):
            info.id
        default:
            nil
        }
    }
}

/// The player as desktop media controls see it (MPRIS2): built by `Controller` on the loop,
/// read by the bus thread from a copy.
public struct DesktopState: Sendable, Equatable {
    public enum Status: Sendable { case stopped, playing, paused }
    public struct Track: Sendable, Equatable {
        /// A D-Bus object path, new for each episode played (an episode played again is a new track).
        public var id: String
        public var title: String
        public var url: String

        /// Text only: nothing here touches the disk (it runs on the loop, R18).
        public init(serial: UInt64, path: String) {
            id = "/org/mpris/MediaPlayer2/adplayerd/episode/\(serial)"
            title = FilePath.stem(path)
            url = FilePath.fileURL(path)
        }
    }

    public var status = Status.stopped
    public var rate = 1.0
    /// Seconds into the episode at `at` (`MonotonicTime`, ns); it advances at `rate` while `moving`.
    public var position = 0.0
    public var at: UInt64 = 0
    public var moving = false
    public var track: Track?
    public var length: Double?
    public var loop = false
    public var canPlay = false, canPause = false, canSeek = false, canGoNext = false, canGoPrevious = false

    public init() {}

    /// The position now, extrapolated from the last change (never past the length).
    public func position(now: UInt64) -> Double {
        guard moving, now > at else { return position }
        let moved = position + Double(now - at) / 1e9 * rate
        return length.map { min(moved, $0) } ?? moved
    }
}
