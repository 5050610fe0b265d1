import AdRuntime
import Foundation
import MpvPlayerAdapter

/// What the daemon does with the player: the queue, the episode that plays and its ad
/// policy, loop mode, the output's visibility; every control command lands here; every
/// player change and ad event goes out from here to the control socket's subscribers.
///
/// Threading: loop-only. Control commands are handed to the player's loop (SPEC R18); file
/// checks, disk writes (`StateStore`), HTTP and socket I/O happen elsewhere.
final class Controller: PlayerObserver, @unchecked Sendable {
    // @unchecked: every var is touched only on the player's loop.
    private let player: MpvPlayer
    private let surface: MpvAdSurface
    private let store: StateStore
    private let log: Logger
    private let emit: @Sendable (String, JSONValue) -> Void
    private let onAdEvent: @Sendable (AdEvent) -> Void
    /// The last episode of the queue is done (`play` exits then; the daemon waits).
    var onQueueDone: @Sendable () -> Void = {}
    /// What desktop media controls (MPRIS) show, after every change that may alter it, with the
    /// new position after a real seek. Set before `start`; called on the loop.
    var onDesktopChange: (@Sendable (DesktopState, _ seekedTo: Double?) -> Void)?
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

    init(player: MpvPlayer, surface: MpvAdSurface, store: StateStore, log: Logger, source: (any AdSource)?, pauseAdDelay: Double,
         adsConfiguration: VideoAdsConfiguration, emit: @escaping @Sendable (String, JSONValue) -> Void,
         onAdEvent: @escaping @Sendable (AdEvent) -> Void) {
        self.player = player
        self.surface = surface
        self.store = store
        self.log = log
        self.source = source
        self.pauseAdDelay = pauseAdDelay
        self.adsConfiguration = adsConfiguration
        self.emit = emit
        self.onAdEvent = onAdEvent
    }

    /// On the loop: starts observing, and resumes what was saved (the same episode, where it was).
    func start(resuming saved: StateStore.Saved) {
        observation = player.addObserver(self)
        queue = saved.queue
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
            }
        }
        publishDesktop()
    }

    /// On the loop: a new ad source (SIGHUP) for the episodes that come next; a new delay.
    func reload(source: (any AdSource)?, pauseAdDelay: Double) {
        self.source = source
        self.pauseAdDelay = pauseAdDelay
    }

    /// On the loop, before shutdown: the position of what plays is saved, the ads end.
    func stop() {
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

    enum Seek {
        case to(Double)
        case by(Double)
    }

    func status() -> JSONValue {
        let snapshot = player.snapshot()
        var item: JSONValue = .null
        if let episode, snapshot.item != nil || episode.playlistEntry == nil {
            item = ["path": .string(episode.entry.path), "content_id": .string(episode.entry.contentID),
                    "pass": .int(snapshot.item?.loop ?? 0)]
        }
        let ad: JSONValue = adOnScreen.map { ["kind": .string($0.kind.protocolName), "ad_id": .string($0.creativeID)] } ?? .null
        return ["item": item, "position": .number(snapshot.position), "playing": .bool(snapshot.playing),
                "rate": .number(snapshot.rate), "ad": ad, "queue": .array(queue.map { .string($0.path) }),
                "current": current.map { .int($0) } ?? .null, "loop": .bool(loopOn), "background": .bool(background),
                "background_reasons": .array(backgroundReasons.map(\.rawValue).sorted().map { .string($0) })]
    }

    /// Plays `entry` now, after the current one in the queue.
    func open(_ entry: QueueEntry, start: Double?) throws(ControlError) -> JSONValue {
        try checkRoom(for: [entry])
        let index = (current ?? -1) + 1
        queue.insert(entry, at: min(index, queue.count))
        let saved = start ?? store.position(of: entry.path)
        play(index, start: saved, fresh: saved == 0)
        return ["path": .string(entry.path), "content_id": .string(entry.contentID), "index": .int(index)]
    }

    func enqueue(_ entries: [QueueEntry]) throws(ControlError) -> JSONValue {
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
        throw ControlError(code: "queue_full", message: "the queue holds \(queue.count) entries; with \(entries.count) more it would pass "
                           + "its bounds (\(QueueEntry.maxEntries) entries, \(QueueEntry.maxPathBytes >> 20) MiB of paths)"
                           + (queue.isEmpty ? "" : "; `clear` empties it"))
    }

    /// Stops playing and empties the queue.
    func clear() -> JSONValue {
        stopPlaying()
        queue = []
        current = nil
        store.saveQueue(queue, current: nil)
        publishDesktop()
        return status()
    }

    func play() throws(ControlError) -> JSONValue {
        if episode == nil {
            guard !queue.isEmpty else { throw ControlError(code: "empty_queue", message: "nothing to play: the queue is empty") }
            let index = current.map { min($0, queue.count - 1) } ?? 0
            play(index, start: store.position(of: queue[index].path), fresh: false)
        } else {
            try onPlayer { try player.play() }
        }
        return status()
    }

    func pause() throws(ControlError) -> JSONValue {
        guard episode != nil else { throw ControlError(code: "not_playing", message: "nothing plays") }
        playAfterSleep = false   // paused on purpose while the host sleeps: it stays paused on waking
        try onPlayer { try player.pause() }
        return status()
    }

    func toggle() throws(ControlError) -> JSONValue {
        if episode == nil { return try play() }
        try onPlayer { try player.togglePause() }
        return status()
    }

    func seek(_ seek: Seek) throws(ControlError) -> JSONValue {
        try refuseDuringPostroll("seeked")
        guard episode != nil, player.snapshot().item != nil else { throw ControlError(code: "not_playing", message: "no episode is in the player") }
        switch seek {
        case .to(let seconds): try onPlayer { try player.seek(seconds) }
        case .by(let seconds): try onPlayer { try player.seek(seconds, relative: true) }
        }
        return status()
    }

    func speed(_ value: Double) throws(ControlError) -> JSONValue {
        try onPlayer { try player.setSpeed(value) }
        speedSetting = value
        publishDesktop()
        return status()
    }

    func next() throws(ControlError) -> JSONValue {
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
    func previous() throws(ControlError) -> JSONValue {
        try refuseDuringPostroll("skipped")
        guard let current, current > 0 else { throw ControlError(code: "no_previous", message: "this is the first episode of the queue") }
        play(current - 1, start: 0, fresh: true)
        return status()
    }

    /// The post-roll is the episode's last word (SPEC §6): the viewer can pause it, not skip
    /// or seek it (`stop` still ends everything). MPRIS's `CanSeek`/`CanGoNext` say so.
    private func refuseDuringPostroll(_ what: String) throws(ControlError) {
        if postroll != nil { throw ControlError(code: "ad_playing", message: "a post-roll plays: it cannot be \(what)") }
    }

    func stopCommand() -> JSONValue {
        stopPlaying()
        return status()
    }

    func setLoop(_ on: Bool) throws(ControlError) -> JSONValue {
        loopOn = on
        try onPlayer { try player.setLoop(on) }
        store.saveLoop(on)
        publishDesktop()
        return status()
    }

    enum BackgroundReason: String, Sendable {
        /// A control client said `background`.
        case control
        /// logind's PrepareForSleep(true): the host is going to sleep.
        case sleep
        /// mpv's window is minimized.
        case minimized
    }

    /// The control protocol's `background`/`foreground`.
    func setBackground(_ hidden: Bool) -> JSONValue {
        setBackground(hidden, for: .control)
        return status()
    }

    /// The output is hidden (or shown again) for `reason`. The ads hear of it (R13) when the
    /// union of the reasons changes, and before any pause that follows from it.
    func setBackground(_ hidden: Bool, for reason: BackgroundReason) {
        let before = background
        if hidden { backgroundReasons.insert(reason) } else { backgroundReasons.remove(reason) }
        guard background != before else { return }
        episode?.policy?.setBackground(background)
        emit("player.background", ["event": "player.background", "background": .bool(background),
                                   "reasons": .array(backgroundReasons.map(\.rawValue).sorted().map { .string($0) })])
    }

    /// logind's PrepareForSleep: going to sleep is background, then a pause (an overlay
    /// freezes, R13); waking is foreground, then play again in the same turn if it played
    /// before — well within R13's second, so a frozen overlay goes on.
    func hostSleep(_ sleeping: Bool) {
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

    func closeAd() throws(ControlError) -> JSONValue {
        guard episode?.policy?.closeAd() == true else { throw ControlError(code: "no_ad", message: "no overlay or pause ad is on screen") }
        return status()
    }

    private func onPlayer(_ body: () throws -> Void) throws(ControlError) {
        do {
            try body()
        } catch {
            throw ControlError(code: "player", message: "\(error)")
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
        var options: [String: String] = [:]
        if let start, start > 0.5 { options["start"] = String(format: "%.3f", start) }
        player.load(entry.path, options: options) { [weak self] result in
            guard let self, let episode, episode.serial == serial else { return }
            switch result {
            case .success(let playlistEntry):
                self.episode?.playlistEntry = playlistEntry
                policy?.follow(player, entry: playlistEntry)
            case .failure(let error):
                log.error("\(entry.path): cannot be played: \(error)")
                emit("player.failed", ["event": "player.failed", "path": .string(entry.path), "message": .string("\(error)")])
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
        store.savePosition(episode.entry.path, snapshot.position)
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
    func desktopState() -> DesktopState {
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
        guard let onDesktopChange else { return }
        let start = MonotonicTime.now()
        let state = desktopState()
        onDesktopChange(state, seekedTo)
        desktopPublishes.count += 1
        desktopPublishes.nanoseconds &+= MonotonicTime.now() &- start
    }

    // MARK: What the player and the ads say (on the loop)

    /// Telling clients and desktops of a change is work for the loop's next turn, in order:
    /// every other observer of the change reacts first — the ads above all, whose reaction
    /// (an overlay taken down) is what `latency_us` measures and what a viewer sees. Waking
    /// the socket's and the bus's threads costs the loop tens of µs (docs/benchmarks.md).
    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) {
        _ = self.player.loop.execute { [weak self] in self?.handle(event) }
    }

    private func handle(_ event: PlayerEvent) {
        let s = event.snapshot
        switch event.change {
        case .item(let item?):
            let entry = episode.map { e in ["path": JSONValue.string(e.entry.path), "content_id": .string(e.entry.contentID)] }
            emit("player.item", ["event": "player.item", "path": .string(item.path), "entry": .int(item.entry),
                                 "pass": .int(item.loop), "content_id": entry?["content_id"] ?? .null])
        case .item(nil):
            emit("player.item", ["event": "player.item", "path": .null])
        case .playing(let rate):
            emit("player.playing", ["event": "player.playing", "rate": .number(rate), "position": .number(s.position)])
            speedSetting = rate
            armPositionTimer()
        case .paused:
            emit("player.paused", ["event": "player.paused", "position": .number(s.position)])
            positionTimer?.cancel()
            savePosition()
        case .rate(let rate):
            emit("player.rate", ["event": "player.rate", "rate": .number(rate)])
            speedSetting = rate
        case .seeked(let from, let to):
            emit("player.seeked", ["event": "player.seeked", "from": .number(from), "to": .number(to)])
            savePosition()
        case .ended(let item):
            emit("player.ended", ["event": "player.ended", "path": .string(item.path), "position": .number(s.position)])
            positionTimer?.cancel()
            if let episode, item.entry == episode.playlistEntry { store.savePosition(episode.entry.path, nil) }
            if episode?.policy == nil, let serial = episode?.serial, !loopOn { episodeFinished(serial) }   // no ads: next
        case .failed(let failure):
            emit("player.failed", ["event": "player.failed", "path": .string(failure.path), "code": .string(failure.code),
                                   "message": .string(failure.message)])
            if let episode, failure.entry == episode.playlistEntry, episode.policy == nil { episodeFinished(episode.serial) }
        }
        if case .seeked(_, let to) = event.change { publishDesktop(seekedTo: to) } else { publishDesktop() }
    }

    private func adEvent(_ event: AdEvent) {
        onAdEvent(event)
        switch event {
        case .requested(let kind, let content, let position):
            emit("ad.requested", ["event": "ad.requested", "kind": .string(kind.protocolName), "ad_id": .null,
                                  "content_id": .string(content), "position": .number(position)])
        case .loaded(let info, _):
            emit("ad.loaded", ["event": "ad.loaded", "kind": .string(info.kind.protocolName), "ad_id": .string(info.creativeID),
                               "instance": .string(String(info.id, radix: 16))])
        case .started(let info):
            if info.kind != .postroll || adOnScreen == nil { adOnScreen = info }
            if info.kind == .postroll {
                postroll = (info.id, false)
                publishDesktop()
            }
            emit("ad.started", ["event": "ad.started", "kind": .string(info.kind.protocolName), "ad_id": .string(info.creativeID),
                                "instance": .string(String(info.id, radix: 16)), "content_id": .string(info.contentID)])
        case .quartile(let info, let quartile):
            emit("ad.quartile", ["event": "ad.quartile", "kind": .string(info.kind.protocolName), "ad_id": .string(info.creativeID),
                                 "quartile": .int(quartile)])
        case .postrollPaused(let info, let paused):
            if postroll?.id == info.id {
                postroll?.paused = paused
                publishDesktop()
            }
            emit(paused ? "ad.paused" : "ad.resumed", ["event": .string(paused ? "ad.paused" : "ad.resumed"),
                                                       "kind": .string(info.kind.protocolName), "ad_id": .string(info.creativeID)])
        case .ended(let info, let reason, let latency):
            if adOnScreen?.id == info.id { adOnScreen = nil }
            if postroll?.id == info.id {
                postroll = nil
                publishDesktop()
            }
            emit("ad.ended", ["event": "ad.ended", "kind": .string(info.kind.protocolName), "ad_id": .string(info.creativeID),
                              "instance": .string(String(info.id, radix: 16)), "reason": .string(reason.rawValue),
                              "latency_us": latency.map { .int(Int64($0)) } ?? .null])
        case .contentEnded:
            break
        case .error(let kind, let creativeID, let error):
            emit("ad.error", ["event": "ad.error", "kind": .string(kind.protocolName), "ad_id": creativeID.map { .string($0) } ?? .null,
                              "code": .string(error.code), "message": .string(error.message)])
        }
    }
}

extension AdKind {
    /// The kind's name in the control protocol.
    var protocolName: String {
        switch self {
        case .overlay: "overlay"
        case .pauseAd: "pause"
        case .postroll: "postroll"
        }
    }
}

/// The player as desktop media controls see it (MPRIS2): built by `Controller` on the loop,
/// read by the bus thread from a copy.
struct DesktopState: Sendable, Equatable {
    enum Status: Sendable { case stopped, playing, paused }
    struct Track: Sendable, Equatable {
        /// A D-Bus object path, new for each episode played (an episode played again is a new track).
        var id: String
        var title: String
        var url: String

        init(serial: UInt64, path: String) {
            id = "/org/mpris/MediaPlayer2/adplayerd/episode/\(serial)"
            title = ((path as NSString).lastPathComponent as NSString).deletingPathExtension
            url = URL(fileURLWithPath: path).absoluteString
        }
    }

    var status = Status.stopped
    var rate = 1.0
    /// Seconds into the episode at `at` (`MonotonicTime`, ns); it advances at `rate` while `moving`.
    var position = 0.0
    var at: UInt64 = 0
    var moving = false
    var track: Track?
    var length: Double?
    var loop = false
    var canPlay = false, canPause = false, canSeek = false, canGoNext = false, canGoPrevious = false

    /// The position now, extrapolated from the last change (never past the length).
    func position(now: UInt64) -> Double {
        guard moving, now > at else { return position }
        let moved = position + Double(now - at) / 1e9 * rate
        return length.map { min(moved, $0) } ?? moved
    }
}
