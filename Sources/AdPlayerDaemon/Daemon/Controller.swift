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
    private let emitNow: @Sendable (ControlEvent) -> Void
    private let emitMany: @Sendable ([ControlEvent]) -> Void
    /// Events told in one go (one write a client): a player change and the ad events it caused.
    private var batch: [ControlEvent]?
    private let reporting: AdReporting
    private let metrics: Metrics?
    /// The last episode of the queue is done (`play` exits then; the daemon waits). Given at construction.
    private let onQueueDone: @Sendable () -> Void
    /// What desktop media controls (MPRIS) show, after every change that may alter it, with the
    /// new position after a real seek. Set on the loop; called on the loop.
    public var onDesktopChange: (@Sendable (DesktopState, _ seekedTo: Double?) -> Void)? { didSet { player.loop.requireInLoop() } }
    private var source: (any AdSource)?
    private var pauseAdDelay: Double
    private let adsConfiguration: VideoAdsConfiguration
    private var observation: PlayerObservation?

    private(set) var queue: [QueueEntry] = [] { didSet { queueJSON = nil } }
    private var queueJSON: JSONValue?
    private var current: Int?
    private var episode: Episode?
    /// At an episode's end: again (`one`, mpv loops the file), the next, or (`all`) the queue
    /// over again; `shuffle` plays the queue in `order`, a new one each pass.
    private var repeatMode = RepeatMode.off
    private var loopOn: Bool { repeatMode == .one }
    private var shuffle = false
    private var order: [Int] = []
    private var volume = 100.0
    private var muted = false
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
    /// Pauses told to clients, and the time from the pause reaching the loop to the batch
    /// written (logged at stop, debug: docs/benchmarks.md §5).
    private var pausesTold: [UInt64] = []
    private var serial: UInt64 = 0

    public init(player: any ContentPlayer, surface: any AdSurface, store: StateStore, log: Logger, source: (any AdSource)?,
                pauseAdDelay: Double, adsConfiguration: VideoAdsConfiguration, emit: @escaping @Sendable (ControlEvent) -> Void,
                emitMany: (@Sendable ([ControlEvent]) -> Void)? = nil,
                reporting: AdReporting = AdReporting(), metrics: Metrics? = nil, onQueueDone: @escaping @Sendable () -> Void = {}) {
        self.onQueueDone = onQueueDone
        self.player = player
        self.surface = surface
        self.store = store
        self.log = log
        self.source = source
        self.pauseAdDelay = pauseAdDelay
        self.adsConfiguration = adsConfiguration
        self.emitNow = emit
        self.emitMany = emitMany ?? { events in events.forEach(emit) }
        self.reporting = reporting
        self.metrics = metrics
    }

    /// On the loop: starts observing, and resumes what was saved (the same episode, where it was).
    public func start(resuming saved: StateStore.Saved) {
        player.loop.requireInLoop()
        // Last: the ads react to a change (an overlay comes down) before clients hear of it.
        observation = player.addLastObserver(self)
        queue = saved.queue
        positions = saved.positions
        repeatMode = saved.repeatMode
        try? player.setLoop(loopOn)
        shuffle = saved.shuffle
        volume = saved.volume
        muted = saved.mute
        try? player.setVolume(volume)
        try? player.setMute(muted)
        if shuffle { reshuffle(first: saved.current) }
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
        player.loop.requireInLoop()
        self.source = source
        self.pauseAdDelay = pauseAdDelay
    }

    /// On the loop, before shutdown: the position of what plays is saved, the ads end.
    public func stop() {
        player.loop.requireInLoop()
        if desktopPublishes.count > 0 {
            log.debug("desktop state handed over \(desktopPublishes.count) times on the loop, "
                      + String(format: "%.1f µs each on average", Double(desktopPublishes.nanoseconds) / Double(desktopPublishes.count) / 1000))
        }
        if !pausesTold.isEmpty {
            let sorted = pausesTold.sorted()
            log.debug("pauses told to clients \(sorted.count) times, from the pause on the loop to the batch written: "
                      + "p50 \(sorted[sorted.count / 2] / 1000) µs, p99 \(sorted[min(sorted.count - 1, sorted.count * 99 / 100)] / 1000) µs")
        }
        savePosition()
        positionTimer?.cancel()
        episode?.policy?.stop()
        observation?.cancel()
    }

    // MARK: Commands (on the loop)

    /// What plays, where, the ad on screen, the queue. Only what is true: with no episode
    /// there is no item and nothing plays, whatever mpv has not reported yet.
    public func status(queue withQueue: Bool = false) -> JSONValue {
        player.loop.requireInLoop()
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
        var status: [String: JSONValue] = ["item": item, "position": .number(position), "playing": .bool(playing),
                "rate": .number(rate), "ad": ad, "queue_length": .int(Int64(queue.count)),
                "current": current.map { .int($0) } ?? .null, "loop": .bool(loopOn), "repeat": .string(repeatMode.rawValue),
                "shuffle": .bool(shuffle), "volume": .number(volume), "mute": .bool(muted), "background": .bool(background),
                "background_reasons": .array(backgroundReasons.map(\.rawValue).sorted().map { .string($0) })]
        if withQueue { status["queue"] = queuePaths }
        return .object(status)
    }

    /// The queue's paths as the protocol sends them, built once per edit of the queue (a status
    /// asked with its queue, 10,000 entries, costs the loop a reference; it is encoded on the
    /// socket's thread).
    private var queuePaths: JSONValue {
        if let queueJSON { return queueJSON }
        let paths = JSONValue.array(queue.map { .string($0.path) })
        queueJSON = paths
        return paths
    }

    /// Plays `entry` now, after the current one in the queue; from `start`, or where it was left.
    public func open(_ entry: QueueEntry, start: Double?) throws(ControlError) -> JSONValue {
        try open([entry], start: start)
    }

    /// Plays the first of `entries` now (a folder's files), the others after it, all after the
    /// current one in the queue.
    public func open(_ entries: [QueueEntry], start: Double?) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        guard let entry = entries.first else { throw ControlError(.badArgs, "open: nothing to play") }
        try checkRoom(for: entries)
        let index = min((current ?? -1) + 1, queue.count)
        queue.insert(contentsOf: entries, at: index)
        store.saveQueue(queue, current: index)
        if shuffle { reshuffle(first: index) }
        let saved = start ?? positions[entry.path] ?? 0
        play(index, start: saved, fresh: saved == 0)
        if entries.count > 1 { queueChanged() }
        return ["path": .string(entry.path), "content_id": .string(entry.contentID), "index": .int(index), "queued": .int(entries.count)]
    }

    public func enqueue(_ entries: [QueueEntry]) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        try checkRoom(for: entries)
        let first = queue.count
        queue += entries
        if shuffle { reshuffle(first: current) }
        store.saveQueue(queue, current: current)
        if episode == nil, !entries.isEmpty { play(shuffle ? (order.first { $0 >= first } ?? first) : first, start: nil, fresh: true) }
        queueChanged()
        return ["queued": .int(entries.count), "queue_length": .int(Int64(queue.count))]
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
        player.loop.requireInLoop()
        stopPlaying()
        queue = []
        current = nil
        store.saveQueue(queue, current: nil)
        publishDesktop()
        return status()
    }

    public func play() throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
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
        player.loop.requireInLoop()
        guard episode != nil else { throw ControlError(.notPlaying, "nothing plays") }
        playAfterSleep = false   // paused on purpose while the host sleeps: it stays paused on waking
        try onPlayer { try player.pause() }
        return status()
    }

    public func toggle() throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        if episode == nil { return try play() }
        try onPlayer { try player.togglePause() }
        return status()
    }

    public func seek(_ seek: SeekTarget) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        try refuseDuringPostroll("seeked")
        guard episode != nil, player.snapshot().item != nil else { throw ControlError(.notPlaying, "no episode is in the player") }
        switch seek {
        case .to(let seconds): try onPlayer { try player.seek(seconds, relative: false) }
        case .by(let seconds): try onPlayer { try player.seek(seconds, relative: true) }
        }
        return status()
    }

    public func speed(_ value: Double) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        try onPlayer { try player.setSpeed(value) }
        speedSetting = value
        publishDesktop()
        return status()
    }

    public func next() throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        try refuseDuringPostroll("skipped")
        guard let current, let next = nextIndex(after: current) else {
            stopPlaying()
            self.current = nil
            store.saveQueue(queue, current: nil)
            return status()
        }
        play(next, start: nil, fresh: true)
        return status()
    }

    /// The episode before this one in the queue, from its start.
    public func previous() throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        try refuseDuringPostroll("skipped")
        guard let current, let previous = previousIndex(before: current) else {
            throw ControlError(.noPrevious, "this is the first episode of the queue")
        }
        play(previous, start: 0, fresh: true)
        return status()
    }

    /// The post-roll is the episode's last word (SPEC §6): the viewer can pause it, not skip
    /// or seek it (`stop` still ends everything). MPRIS's `CanSeek`/`CanGoNext` say so.
    private func refuseDuringPostroll(_ what: String) throws(ControlError) {
        if postroll != nil { throw ControlError(.adPlaying, "a post-roll plays: it cannot be \(what)") }
    }

    public func stopCommand() -> JSONValue {
        player.loop.requireInLoop()
        stopPlaying()
        return status()
    }

    /// `loop on|off`: `repeat one|off`.
    public func setLoop(_ on: Bool) throws(ControlError) -> JSONValue {
        try setRepeat(on ? .one : .off)
    }

    public func setRepeat(_ mode: RepeatMode) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        try onPlayer { try player.setLoop(mode == .one) }
        repeatMode = mode
        store.saveSetting("repeat", mode.rawValue)
        emit(.playerMode(repeatMode: mode.rawValue, shuffle: shuffle))
        publishDesktop()
        return status()
    }

    /// A new order each pass of the queue, never the same episode twice in a row.
    public func setShuffle(_ on: Bool) -> JSONValue {
        player.loop.requireInLoop()
        shuffle = on
        if on { reshuffle(first: current) }
        store.saveSetting("shuffle", on ? "yes" : "no")
        emit(.playerMode(repeatMode: repeatMode.rawValue, shuffle: on))
        publishDesktop()
        return status()
    }

    /// A new play order of the queue: `first` (the episode that plays) first, the others in a
    /// random order; or, for a new pass, not beginning with `notFirst` (just played).
    private func reshuffle(first: Int? = nil, notFirst: Int? = nil) {
        var rest = queue.indices.filter { $0 != first }.shuffled()
        if let notFirst, rest.count > 1, rest.first == notFirst { rest.swapAt(0, Int.random(in: 1..<rest.count)) }
        order = (first.map { [$0] } ?? []) + rest
    }

    /// Where playback goes after `index`: the next in the queue (or in the shuffled order); at
    /// the end, the start again with `repeat all` (a new order when shuffled), else nothing.
    private func nextIndex(after index: Int) -> Int? {
        guard !queue.isEmpty else { return nil }
        if shuffle {
            if order.count != queue.count { reshuffle(first: index) }
            if let position = order.firstIndex(of: index), position + 1 < order.count { return order[position + 1] }
            guard repeatMode == .all else { return nil }
            reshuffle(notFirst: index)
            return order.first
        }
        if index + 1 < queue.count { return index + 1 }
        return repeatMode == .all ? 0 : nil
    }

    /// Whether there is a next episode (for MPRIS's CanGoNext), without drawing a new order.
    private func nextIndexWithoutReshuffling(after index: Int) -> Bool {
        guard !queue.isEmpty else { return false }
        if repeatMode == .all { return true }
        if shuffle, let position = order.firstIndex(of: index) { return position + 1 < order.count }
        return index + 1 < queue.count
    }

    private func previousIndex(before index: Int) -> Int? {
        if shuffle, let position = order.firstIndex(of: index) { return position > 0 ? order[position - 1] : nil }
        return index > 0 ? index - 1 : nil
    }

    /// The content's volume: to a level or by an amount, within 0–100.
    public func setVolume(_ change: VolumeChange) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        let target: Double = switch change {
        case .to(let value): value
        case .by(let by): volume + by
        }
        let value = max(0, min(100, target))
        try onPlayer { try player.setVolume(value) }
        volume = value
        store.saveSetting("volume", String(value))
        emit(.playerVolume(volume: volume, mute: muted))
        publishDesktop()
        return status()
    }

    /// Mutes, unmutes, or (nil) toggles.
    public func setMute(_ on: Bool?) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        let value = on ?? !muted
        try onPlayer { try player.setMute(value) }
        muted = value
        store.saveSetting("mute", value ? "yes" : "no")
        emit(.playerVolume(volume: volume, mute: muted))
        publishDesktop()
        return status()
    }

    // MARK: Tracks, outputs, the screen

    /// The item's audio and subtitle tracks (a property read of mpv's: microseconds).
    public func tracks() throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        guard episode != nil, player.snapshot().item != nil else { throw ControlError(.notPlaying, "no episode is in the player") }
        let tracks = player.tracks().filter { $0.type == "audio" || $0.type == "sub" }
        func describe(_ t: PlayerTrack) -> JSONValue {
            ["id": .int(Int64(t.id)), "language": t.language.map { .string($0) } ?? .null, "title": t.title.map { .string($0) } ?? .null,
             "codec": t.codec.map { .string($0) } ?? .null, "selected": .bool(t.selected), "external": .bool(t.external)]
        }
        return ["audio": .array(tracks.filter { $0.type == "audio" }.map(describe)),
                "subtitle": .array(tracks.filter { $0.type == "sub" }.map(describe))]
    }

    public func selectTrack(audio: Bool, _ choice: TrackChoice) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        guard episode != nil, player.snapshot().item != nil else { throw ControlError(.notPlaying, "no episode is in the player") }
        if case .id(let id) = choice, !player.tracks().contains(where: { $0.id == id && $0.type == (audio ? "audio" : "sub") }) {
            throw ControlError(.badArgs, "the episode has no \(audio ? "audio" : "subtitle") track \(id) (`tracks` lists them)")
        }
        try onPlayer { try player.selectTrack(audio: audio, choice) }
        let id: JSONValue = switch choice {
        case .id(let id): .int(Int64(id))
        case .auto: "auto"
        case .off: .null
        }
        emit(.playerTrack(type: audio ? "audio" : "subtitle", id: id))
        return try tracks()
    }

    public func audioDevices() -> JSONValue {
        player.loop.requireInLoop()
        return ["devices": .array(player.audioDevices().map { ["name": .string($0.name), "description": .string($0.description)] })]
    }

    /// What is on screen, as a PNG at `path` (a folder of the daemon's, made off the loop).
    public func screenshot(to path: String, withAds: Bool, reply: @escaping @Sendable (Result<JSONValue, ControlError>) -> Void) {
        player.loop.requireInLoop()
        guard episode != nil else { return reply(.failure(ControlError(.notPlaying, "nothing plays: nothing on screen"))) }
        player.screenshot(to: path, withOverlays: withAds) { result in
            switch result {
            case .success: reply(.success(["path": .string(path), "with_ads": .bool(withAds)]))
            case .failure(let error) where withAds:
                // mpv grabs its whole window only from the outputs that can (gpu, drm); x11 and
                // null give the video alone, which is no proof that an ad showed.
                reply(.failure(ControlError(.player, "screenshot: this video output cannot be grabbed with the ads "
                                            + "(vo = gpu or drm can; \(error)); with_ads false gives the video alone")))
            case .failure(let error): reply(.failure(ControlError(.player, "screenshot: \(error)")))
            }
        }
    }

    // MARK: Editing the queue

    /// Takes entry `index` out; if it plays, the next plays (or playback stops at the end).
    public func remove(_ index: Int) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        try checkIndex(index, "remove")
        if index == current {
            try refuseDuringPostroll("removed")
            stopPlaying()
            queue.remove(at: index)
            current = nil
            if shuffle { reshuffle() }
            store.saveQueue(queue, current: queue.indices.contains(index) ? index : nil)
            if queue.indices.contains(index) { play(index, start: nil, fresh: true) }
        } else {
            queue.remove(at: index)
            if let playing = current, index < playing { current = playing - 1 }
            if shuffle { reshuffle(first: current) }
            store.saveQueue(queue, current: current)
        }
        queueChanged()
        return status()
    }

    /// Moves entry `from` to position `to` (the entries between shift); what plays goes on.
    public func move(from: Int, to: Int) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        try checkIndex(from, "move")
        try checkIndex(to, "move")
        let entry = queue.remove(at: from)
        queue.insert(entry, at: to)
        if let playing = current {
            if playing == from {
                current = to
            } else if from < playing, to >= playing {
                current = playing - 1
            } else if from > playing, to <= playing {
                current = playing + 1
            }
        }
        if shuffle { reshuffle(first: current) }
        store.saveQueue(queue, current: current)
        queueChanged()
        return status()
    }

    /// Plays entry `index` now, from its start.
    public func jump(_ index: Int) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        try checkIndex(index, "jump")
        try refuseDuringPostroll("skipped")
        if shuffle { reshuffle(first: index) }
        play(index, start: 0, fresh: true)
        queueChanged()
        return status()
    }

    private func checkIndex(_ index: Int, _ command: String) throws(ControlError) {
        guard queue.indices.contains(index) else {
            throw ControlError(.badArgs, "\(command): no entry \(index) (the queue has \(queue.count), numbered from 0)")
        }
    }

    private func queueChanged() {
        emit(.playerQueue(length: queue.count, current: current))
        publishDesktop()
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
        player.loop.requireInLoop()
        setBackground(hidden, for: .control)
        return status()
    }

    /// The output is hidden (or shown again) for `reason`. The ads hear of it (R13) when the
    /// union of the reasons changes, and before any pause that follows from it.
    public func setBackground(_ hidden: Bool, for reason: BackgroundReason) {
        player.loop.requireInLoop()
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
        player.loop.requireInLoop()
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
        player.loop.requireInLoop()
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
        store.saveCurrent(index)
        if fresh { store.resetCounters(content: entry.contentID) }
        serial += 1
        let serial = self.serial
        let policy = source.map { source in
            EpisodePolicy(content: ContentInfo(id: entry.contentID), source: source, surface: surface, loop: player.loop,
                          pauseAdDelay: pauseAdDelay, configuration: adsConfiguration,
                          onEvent: { [weak self] event in self?.queueAdEvent(event) },
                          onFinished: { [weak self] in self?.episodeFinished(serial) })
        }
        policy?.setBackground(background)
        postroll = nil
        episode = Episode(entry: entry, playlistEntry: nil, policy: policy, serial: serial,
                          track: DesktopState.Track(serial: serial, path: entry.path))
        // A new episode plays (mpv's pause flag outlives files), from `start` when given, with
        // the tracks the language preferences pick (a track chosen for the last one was its own).
        try? player.play()
        try? player.selectTrack(audio: true, .auto)
        try? player.selectTrack(audio: false, .auto)
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
        guard let current, let next = nextIndex(after: current) else {
            log.info("the queue is done")
            self.current = nil
            store.saveQueue(queue, current: nil)
            publishDesktop()
            onQueueDone()
            return
        }
        if next <= current, repeatMode == .all { log.info("the queue starts over (repeat all)") }
        play(next, start: nil, fresh: true)
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
        player.loop.requireInLoop()
        let snapshot = player.snapshot()
        var state = DesktopState()
        state.rate = speedSetting
        state.position = snapshot.position
        state.at = MonotonicTime.now()
        state.loop = loopOn
        state.repeatMode = repeatMode
        state.shuffle = shuffle
        state.volume = muted ? 0 : volume / 100
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
        state.canGoNext = postroll == nil && (current.map { nextIndexWithoutReshuffling(after: $0) } ?? false)
        state.canGoPrevious = postroll == nil && (current.map { previousIndex(before: $0) != nil } ?? false)
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

    /// The controller is the player's last observer: every other observer of a change has
    /// reacted — the ads above all, whose reaction (an overlay taken down) is what
    /// `latency_us` measures and what a viewer sees — before clients hear of it, in this same
    /// turn: the change, then the ads' events it caused (docs/benchmarks.md, §5).
    public func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) {
        self.player.loop.requireInLoop()
        handle(event)
    }

    private func emit(_ event: ControlEvent) {
        if batch != nil { batch!.append(event) } else { emitNow(event) }
    }

    private func handle(_ event: PlayerEvent) {
        let s = event.snapshot
        batch = []
        // First what clients hear — the change, then what the ads did about it (they reacted
        // before this last observer) — then the rest, which wakes other threads.
        switch event.change {
        case .item(let item?): emit(.playerItem(path: item.path, entry: item.entry, pass: item.loop, contentID: episode?.entry.contentID))
        case .item(nil): emit(.playerEmpty)
        case .playing(let rate): emit(.playerPlaying(rate: rate, position: s.position))
        case .paused: emit(.playerPaused(position: s.position))
        case .rate(let rate): emit(.playerRate(rate))
        case .seeked(let from, let to): emit(.playerSeeked(from: from, to: to))
        case .ended(let item): emit(.playerEnded(path: item.path, position: s.position))
        case .failed(let failure): emit(.playerFailed(path: failure.path, code: failure.code, message: failure.message))
        }
        flushAdEvents()
        if let events = batch, !events.isEmpty { emitMany(events) }
        batch = nil
        if case .paused = event.change, pausesTold.count < 100_000 { pausesTold.append(MonotonicTime.now() &- event.observedAt) }
        if !recordAfterBatch.isEmpty {
            recordAfterBatch.forEach(reporting.record)
            recordAfterBatch = []
        }
        switch event.change {
        case .item: break
        case .playing(let rate):
            speedSetting = rate
            armPositionTimer()
        case .paused:
            positionTimer?.cancel()
            savePosition()
        case .rate(let rate):
            speedSetting = rate
        case .seeked:
            savePosition()
        case .ended(let item):
            positionTimer?.cancel()
            if let episode, item.entry == episode.playlistEntry { remember(episode.entry.path, nil) }
            if episode?.policy == nil, let serial = episode?.serial, !loopOn { episodeFinished(serial) }   // no ads: next
        case .failed(let failure):
            if let episode, failure.entry == episode.playlistEntry, episode.policy == nil { episodeFinished(episode.serial) }
        }
        if case .seeked(_, let to) = event.change { publishDesktop(seekedTo: to) } else { publishDesktop() }
    }

    /// Ad events from the episode's runtime (on the loop): told in this turn — after the
    /// player change that caused them, when one is being told (`handle`), else right after the
    /// work under way (a timer's end, a request's answer).
    private var pendingAdEvents: [AdEvent] = []
    private var adFlushScheduled = false

    private func queueAdEvent(_ event: AdEvent) {
        pendingAdEvents.append(event)
        guard !adFlushScheduled else { return }
        adFlushScheduled = true
        _ = player.loop.execute { [weak self] in self?.flushAdEvents() }
    }

    private func flushAdEvents() {
        adFlushScheduled = false
        guard !pendingAdEvents.isEmpty else { return }
        let events = pendingAdEvents
        pendingAdEvents = []
        events.forEach(adEvent)
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
        // Clients first (a socket write), then tracking (a writer thread woken): while a
        // batch of events is being told, after it is out.
        if let id = event.adID, unannounced[id] != nil {
            unannounced[id]?.append(event)
        } else {
            announce(event)
        }
        if batch != nil { recordAfterBatch.append(event) } else { reporting.record(event) }
    }

    /// Ad events to hand to tracking once the batch they were told in is out.
    private var recordAfterBatch: [AdEvent] = []

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
    /// MPRIS's LoopStatus (None, Track, Playlist) and Shuffle.
    public var repeatMode = RepeatMode.off
    public var shuffle = false
    /// MPRIS's Volume: 0…1 (0 while muted).
    public var volume = 1.0
    public var canPlay = false, canPause = false, canSeek = false, canGoNext = false, canGoPrevious = false

    public init() {}

    /// The position now, extrapolated from the last change (never past the length).
    public func position(now: UInt64) -> Double {
        guard moving, now > at else { return position }
        let moved = position + Double(now - at) / 1e9 * rate
        return length.map { min(moved, $0) } ?? moved
    }
}
