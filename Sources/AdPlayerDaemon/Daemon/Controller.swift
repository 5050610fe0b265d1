import AdRuntime
import AdSchedule
import AdTracking
import ControlProtocol
import Foundation

/// What the daemon does with the player: the queue, the episode that plays and its ad
/// policy, loop mode, the output's visibility; every command the table runs on the loop lands
/// here (`perform`); every player change and ad event goes out from here to the control
/// socket's subscribers.
///
/// Threading: loop-only — every entry point checks it is on the player's loop (SPEC R18).
/// Control commands are handed to the loop; file checks, disk writes (`StateStore`'s writer),
/// HTTP and socket I/O happen elsewhere. What the loop needs of the saved state (the queue,
/// the positions) it holds in memory.
public final class Controller: PlayerObserver, @unchecked Sendable {
    // @unchecked: every var is touched only on the player's loop (checked at the entry points).
    // By concern, as MPD's handlers: commands and episodes here; the queue's rules in
    // PlayQueue.swift; what clients hear in Controller+ClientEvents.swift; desktop media
    // controls in Controller+Desktop.swift; tracks, outputs and the screen in Controller+Media.swift.
    // Its state is module-visible for those files alone: nothing else touches it.
    let player: any ContentPlayer
    let surface: any AdSurface
    let store: StateStore
    let log: Logger
    let emitNow: @Sendable (ControlEvent) -> Void
    let emitMany: @Sendable ([ControlEvent]) -> Void
    /// Events told in one go (one write a client): a player change and the ad events it caused.
    var batch: [ControlEvent]?
    let reporting: AdReporting
    let metrics: Metrics?
    /// The last episode of the queue is done (`play` exits then; the daemon waits). Given at construction.
    let onQueueDone: @Sendable () -> Void
    /// What desktop media controls (MPRIS) show, after every change that may alter it, with the
    /// new position after a real seek. Set on the loop; called on the loop.
    public var onDesktopChange: (@Sendable (DesktopState, _ seekedTo: Double?) -> Void)? { didSet { player.loop.requireInLoop() } }
    var source: (any AdSource)?
    var pauseAdDelay: Double
    let adsConfiguration: VideoAdsConfiguration
    var observation: PlayerObservation?

    /// The queue, the entry that plays, the order and the modes: a value with rules of its own.
    var queue = PlayQueue() { didSet { if queue.entries != oldValue.entries { queueJSON = nil } } }
    var queueJSON: JSONValue?
    var current: Int? { queue.current }
    var episode: Episode?
    /// `repeat one`: the episode plays again after its post-roll, each pass a new viewing with
    /// its own pre-roll, breaks and post-roll (R14) — the controller replays it; mpv's own
    /// `loop-file` (a wrap with no end, so no post-roll and no pre-roll) is never used.
    var loopOn: Bool { queue.loopsEpisode }
    var volume = 100.0
    var muted = false
    /// Why the output is hidden (R13); background while any reason holds.
    var backgroundReasons: Set<BackgroundReason> = []
    var background: Bool { !backgroundReasons.isEmpty }
    /// The host went to sleep while the content played: it plays again on waking.
    var playAfterSleep = false
    /// The display's power: operating hours and overrides (Controller+Display.swift).
    var display = DisplayPower()
    /// The output is black (display off, or resting), and resting after a pause ad's `pause-ad-max`.
    var blanked = false
    var resting = false
    /// At `pause-ad-max` the next pause ad takes the place of the last (else the output rests).
    /// Set on the loop before `start`.
    public var pauseAdRotate = false
    /// A pause this long brings the screensaver ads (R27); nil: never.
    public var screensaverAfter: Double?
    /// Competitive separation (`ad-separation`): every ad on screen is recorded there. Set before `start`.
    public var separation: AdSeparation?
    /// Gathers each ad's display evidence (issue 36): told of every ad's start and end, the
    /// end before tracking records it.
    public var displayWitness: (any ScreenWitness)?
    /// What plays when (`schedule = FILE`), nil without one (Controller+Schedule.swift).
    var scheduler: Scheduler?
    /// The configured schedule does not load (at start, or at a reload): why, and what plays
    /// instead (the health verdict and `schedule` say it).
    var scheduleLoadProblem: String?
    /// A linear ad plays (pre-, mid-, post-roll: no seek, no next; `skip` past its skip offset),
    /// and whether the viewer paused it.
    var linearAd: (id: UInt64, kind: AdKind, paused: Bool)?
    /// A linear break is open (a mid-roll's content held, a pre-roll's episode waiting), between
    /// its ads too.
    var adBreak: AdKind?
    /// The content's speed (the snapshot's rate is 0 while paused).
    var speedSetting = 1.0
    var positionTimer: LoopTimer?
    /// The last load was refused for want of threads (said once until one loads again).
    var threadsRefused = false
    var retryTimer: LoopTimer?
    static let threadRetry = 10.0
    /// The ad on screen, for `status`.
    var adOnScreen: AdInfo?
    /// The overlay a mid-roll took down, shown again after the break.
    var adUnderBreak: AdInfo?
    /// The last item that could not be played, until one plays again (the health verdict).
    var lastFailure: (path: String, message: String)?
    /// Where each episode was left, by path (what `StateStore` saves, kept here for the loop).
    var positions = RecentPositions()
    var publishedPlaying: Bool?
    var publishedItem: [String]?
    /// Ads whose `ad.started` waits for proof of play to hold them, with their later events.
    var unannounced: [UInt64: [AdEvent]] = [:]

    /// Ad events waiting for the end of this turn's work (Controller+ClientEvents.swift).
    var pendingAdEvents: [AdEvent] = []
    var adFlushScheduled = false
    /// Ad events to hand to tracking once the batch they were told in is out.
    var recordAfterBatch: [AdEvent] = []

    struct Episode {
        let entry: QueueEntry
        /// mpv's playlist entry id, once mpv has answered the load.
        var playlistEntry: Int64?
        let policy: EpisodePolicy?
        let serial: UInt64
        /// What desktops show of it (made once: it builds a URL).
        let track: DesktopState.Track
        /// How many times it played before in a row (`repeat one`): 0 for the first viewing.
        var pass = 0
        /// Why it could not be played, once the player said so.
        var failure: String?
    }
    /// The cost of telling desktops, on the loop (logged at `debug` when the daemon stops).
    var desktopPublishes = (count: 0, nanoseconds: UInt64(0))
    /// Pauses told to clients, and the time from the pause reaching the loop to the batch
    /// written (logged at stop, debug: docs/benchmarks.md §5).
    var pausesTold: [UInt64] = []
    /// Ads' starts told to clients: from the ad on screen to `ad.started` handed to them, once
    /// proof of play holds it (logged at stop, debug: docs/benchmarks.md §5).
    var startsTold: [UInt64] = []
    var serial: UInt64 = 0

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
        observation = player.addObserver(self, phase: .report)
        queue = PlayQueue(entries: saved.queue, current: saved.current, repeatMode: saved.repeatMode, shuffle: saved.shuffle,
                          environment: adsConfiguration.environment)
        positions = RecentPositions(saved.positions)
        try? player.setLoop(false)
        volume = saved.volume
        muted = saved.mute
        try? player.setVolume(volume)
        try? player.setMute(muted)
        if let index = queue.current {
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
        if !startsTold.isEmpty {
            let sorted = startsTold.sorted()
            log.debug("ad starts told to clients \(sorted.count) times, from the ad on screen to ad.started written: "
                      + "p50 \(sorted[sorted.count / 2] / 1000) µs, max \(sorted.last! / 1000) µs")
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
                    "pass": .int(Int64(episode.pass + (snapshot.item?.loop ?? 0)))]
            playing = linearAd.map { !$0.paused } ?? snapshot.playing
            // During a mid-roll break: the content's held position (it resumes there).
            position = linearAd == nil || adBreak == .midroll ? snapshot.position : 0
            rate = playing ? (linearAd == nil ? snapshot.rate : 1) : 0
        }
        let ad: JSONValue = adOnScreen.map { ["kind": .string($0.kind.protocolName), "ad_id": .string($0.creativeID)] } ?? .null
        var status: [String: JSONValue] = ["item": item, "position": .number(position), "playing": .bool(playing),
                "rate": .number(rate), "ad": ad, "queue_length": .int(Int64(queue.count)),
                "current": current.map { .int($0) } ?? .null, "loop": .bool(loopOn), "repeat": .string(queue.repeatMode.rawValue),
                "shuffle": .bool(queue.shuffle), "volume": .number(volume), "mute": .bool(muted), "background": .bool(background),
                "background_reasons": .array(backgroundReasons.map(\.rawValue).sorted().map { .string($0) })]
        status["output"] = Self.describe(player.output())
        status["display"] = displayJSON
        status["break"] = adBreak.map { ["kind": .string($0.protocolName)] } ?? .null
        if scheduler != nil { status["schedule"] = scheduleJSON }
        if withQueue { status["queue"] = queuePaths }
        return .object(status)
    }

    /// The output as `status` reports it (docs/protocol.md).
    static func describe(_ output: PlayerOutput) -> JSONValue {
        func text(_ value: String?) -> JSONValue { value.map { .string($0) } ?? .null }
        func int(_ value: Int?) -> JSONValue { value.map { .int(Int64($0)) } ?? .null }
        return ["vo": text(output.vo), "width": int(output.width), "height": int(output.height),
                "hwdec": text(output.hwdecRequested), "hwdec_current": text(output.hwdecCurrent),
                "frames_dropped": ["decoder": int(output.droppedByDecoder), "output": int(output.droppedByOutput)],
                "fps": output.fps.map { .number($0) } ?? .null]
    }

    /// What the health verdict asks of the loop (`HealthMonitor`): a few fields and the output.
    public func healthSnapshot() -> HealthSnapshot {
        player.loop.requireInLoop()
        let snapshot = player.snapshot()
        let inPlayer = episode != nil
        return HealthSnapshot(itemInPlayer: inPlayer, playing: inPlayer && (linearAd.map { !$0.paused } ?? snapshot.playing),
                              position: snapshot.position, rate: snapshot.rate, postroll: linearAd != nil || adBreak != nil, queueLength: queue.count,
                              contentID: episode?.entry.contentID, lastFailure: lastFailure.map { "\($0.path): \($0.message)" },
                              adsConfigured: source != nil, output: player.output(), displayOff: display.on ? nil : display.reason ?? "schedule",
                              scheduleProblem: scheduleFailing ?? scheduleLoadProblem)
    }

    /// `identify`: `label` on the screen for `seconds`.
    public func identify(label: String, seconds: Double) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        do {
            try player.showLabel(label, seconds: seconds)
        } catch {
            throw ControlError(.player, "identify: \(error)")
        }
        return ["label": .string(label), "seconds": .number(seconds)]
    }

    /// The queue's paths as the protocol sends them, built once per edit of the queue (a status
    /// asked with its queue, 10,000 entries, costs the loop a reference; it is encoded on the
    /// socket's thread).
    var queuePaths: JSONValue {
        if let queueJSON { return queueJSON }
        let paths = JSONValue.array(queue.entries.map { .string($0.path) })
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
        let index = try queue.insertAfterCurrent(entries)
        store.saveQueue(queue.entries, current: index)
        let saved = start ?? positions[entry.path] ?? 0
        play(index, start: saved, fresh: saved == 0)
        if entries.count > 1 { queueChanged() }
        return ["path": .string(entry.path), "content_id": .string(entry.contentID), "index": .int(index), "queued": .int(entries.count)]
    }

    public func enqueue(_ entries: [QueueEntry]) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        let first = try queue.append(entries)
        store.saveQueue(queue.entries, current: current)
        if episode == nil, !entries.isEmpty { play(first, start: nil, fresh: true) }
        queueChanged()
        return ["queued": .int(entries.count), "queue_length": .int(Int64(queue.count))]
    }

    /// Stops playing and empties the queue.
    public func clear() -> JSONValue {
        player.loop.requireInLoop()
        stopPlaying()
        queue.removeAll()
        store.saveQueue([], current: nil)
        publishDesktop()
        return status()
    }

    /// Nothing plays while the display is off (operating hours): `display on` first.
    func refuseWhileDark() throws(ControlError) {
        guard !display.on else { return }
        throw ControlError(.unavailable, "the display is off (\(display.reason ?? "schedule")): nothing plays until it is on (display on)")
    }

    public func play() throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        try refuseWhileDark()
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
        if !player.snapshot().playing { try refuseWhileDark() }
        try onPlayer { try player.togglePause() }
        return status()
    }

    public func seek(_ seek: SeekTarget) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
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
        // On a schedule: its next item (a Next never darkens a scheduled screen).
        if scheduleRules { return scheduleSkip() }
        guard let current, let next = queue.next(after: current) else {
            if scheduler != nil, personQueueDone() { return status() }
            stopPlaying()
            queue.current = nil
            store.saveQueue(queue.entries, current: nil)
            return status()
        }
        play(next, start: nil, fresh: true)
        return status()
    }

    /// The episode before this one in the queue, from its start.
    public func previous() throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        if scheduleRules { return try scheduleBack() }
        guard let current, let previous = queue.previous(before: current) else {
            throw ControlError(.noPrevious, "this is the first episode of the queue")
        }
        play(previous, start: 0, fresh: true)
        return status()
    }

    /// A linear ad has the screen (SPEC §6): the viewer can pause it, skip it past its skip
    /// offset (`skip`), not seek it, change its speed or go to another episode (`stop` still
    /// ends everything) — nor between a break's ads. Which commands is their rows' column
    /// (`admit`); MPRIS's `CanSeek`/`CanGoNext` say so and its `Rate` reads 1.
    func refuseDuringLinearAd(_ what: String) throws(ControlError) {
        if let linearAd {
            throw ControlError(.adPlaying, "a \(linearAd.kind.protocolName) plays: it cannot be \(what)\(linearAd.kind == .postroll ? "" : " (skip, once it allows)")")
        }
        if let adBreak { throw ControlError(.adPlaying, "a \(adBreak.protocolName) break is on: it cannot be \(what)") }
    }

    /// `skip`: the linear ad that plays ends `skipped`, once past its skip offset.
    public func skipAd() throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        guard let linearAd, let policy = episode?.policy else { throw ControlError(.noAd, "no linear ad plays") }
        do {
            try policy.skip(linearAd.id)
        } catch {
            throw ControlError(.notSkippable, error.message)
        }
        return status()
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
        queue.repeatMode = mode
        store.saveSetting("repeat", mode.rawValue)
        emit(.playerMode(repeatMode: mode.rawValue, shuffle: queue.shuffle))
        publishDesktop()
        return status()
    }

    /// A new order each pass of the queue, never the same episode twice in a row.
    public func setShuffle(_ on: Bool) -> JSONValue {
        player.loop.requireInLoop()
        queue.setShuffle(on)
        store.saveSetting("shuffle", on ? "yes" : "no")
        emit(.playerMode(repeatMode: queue.repeatMode.rawValue, shuffle: on))
        publishDesktop()
        return status()
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

    // MARK: Editing the queue

    /// Takes entry `index` out; if it plays, the next plays (or playback stops at the end).
    public func remove(_ index: Int) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        try queue.checkIndex(index, "remove")
        if index == current {
                stopPlaying()
            try queue.remove(at: index)
            store.saveQueue(queue.entries, current: queue.contains(index) ? index : nil)
            if queue.contains(index) { play(index, start: nil, fresh: true) }
        } else {
            try queue.remove(at: index)
            store.saveQueue(queue.entries, current: current)
        }
        queueChanged()
        return status()
    }

    /// Moves entry `from` to position `to` (the entries between shift); what plays goes on.
    public func move(from: Int, to: Int) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        try queue.move(from: from, to: to)
        store.saveQueue(queue.entries, current: current)
        queueChanged()
        return status()
    }

    /// Plays entry `index` now, from its start.
    public func jump(_ index: Int) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        try queue.checkIndex(index, "jump")
        try queue.jump(to: index)
        play(index, start: 0, fresh: true)
        queueChanged()
        return status()
    }

    func queueChanged() {
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
        /// The display is off: outside its operating hours, or `display off`.
        case schedule
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
            let playing = player.snapshot().playing || (linearAd.map { !$0.paused } ?? false)
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

    func onPlayer(_ body: () throws -> Void) throws(ControlError) {
        do {
            try body()
        } catch {
            throw ControlError(.player, "\(error)")
        }
    }

    // MARK: Episodes

    func play(_ index: Int, start: Double?, fresh: Bool, pass: Int = 0, preroll: Bool = true) {
        guard queue.contains(index) else { return }
        retryTimer?.cancel()
        savePosition()
        episode?.policy?.stop(endingShownAs: .contentChanged)   // another item: what was on screen ends as docs/reporting.md says
        adOnScreen = nil
        adUnderBreak = nil
        let entry = queue[index]
        queue.current = index
        store.saveCurrent(index)
        if fresh { store.resetCounters(content: entry.contentID) }
        serial += 1
        let serial = self.serial
        // Its loudness (R28): known from the book, or measured now in the background (paced, a
        // lock and a queue here: microseconds) — its ads match it once it is; and the next
        // episode's, so that its pre-roll matches it at its first viewing.
        let mediaPath = entry.path.contains("://") ? nil : entry.path
        if let mediaPath { adsConfiguration.loudnessSource?.refresh(mediaPath) }
        if let next = queue.upcoming(after: index), next != index, !queue[next].path.contains("://") {
            adsConfiguration.loudnessSource?.refresh(queue[next].path)
        }
        let policy = source.map { source in
            EpisodePolicy(content: ContentInfo(id: entry.contentID, mediaPath: mediaPath), source: source, surface: surface, loop: player.loop,
                          pauseAdDelay: pauseAdDelay, pauseAdRotate: pauseAdRotate, screensaverAfter: screensaverAfter, separation: separation,
                          configuration: adsConfiguration,
                          onEvent: { [weak self] event in self?.queueAdEvent(event) },
                          onFinished: { [weak self] in self?.episodeFinished(serial) })
        }
        policy?.setBackground(background)
        policy?.setDark(!display.on)
        linearAd = nil
        episode = Episode(entry: entry, playlistEntry: nil, policy: policy, serial: serial,
                          track: DesktopState.Track(serial: serial, path: entry.path), pass: pass)
        // A new episode plays (mpv's pause flag outlives files), from `start` when given, with
        // the tracks the language preferences pick (a track chosen for the last one was its own).
        // While the display is off it waits, paused at its start, for the display to come on.
        if display.on {
            try? player.play()
        } else {
            try? player.pause()
            display.playAfter = true
        }
        try? player.selectTrack(audio: true, .auto)
        try? player.selectTrack(audio: false, .auto)
        // A fresh viewing (from its start) begins with the episode's pre-roll, if it has one:
        // the episode is loaded after it (not shown, started or counted before). What the player
        // held (the last episode, stopped mid-way) goes first.
        if let policy, preroll, (start ?? 0) <= 0.5, policy.wantsPreroll {
            if player.snapshot().playing { try? player.stop() }
            policy.playPreroll { [weak self] in
                guard let self, let episode, episode.serial == serial else { return }
                flushAdEvents()   // the break's end is told before the episode comes in
                // A boundary of the schedule came while the pre-roll played (it waited for the
                // ad's end): the item it was for no longer rules — it is not loaded to be cut.
                if scheduleCutsBeforeStart() { return }
                loadEpisode(entry, index: index, start: start, serial: serial, policy: policy)
            }
        } else {
            loadEpisode(entry, index: index, start: start, serial: serial, policy: policy)
        }
    }

    private func loadEpisode(_ entry: QueueEntry, index: Int, start: Double?, serial: UInt64, policy: EpisodePolicy?) {
        player.load(entry.path, start: start, length: entry.length) { [weak self] result in
            guard let self, let episode, episode.serial == serial else { return }
            switch result {
            case .success(let playlistEntry):
                if threadsRefused {
                    threadsRefused = false
                    log.notice("threads can be started again: \(entry.path) plays")
                }
                self.episode?.playlistEntry = playlistEntry
                policy?.follow(player, entry: playlistEntry)
            case .failure(let error as PlayerFailure) where error.code == "no-threads":
                // The box lets the process start no more threads: the item is not the problem,
                // so the queue does not run on through it (every entry would fail the same way).
                // Said once; the same item is tried again every `threadRetry` seconds.
                if !threadsRefused {
                    threadsRefused = true
                    log.error("\(error); tried again every \(Int(Self.threadRetry)) s")
                    lastFailure = (entry.path, "\(error)")
                    emit(.playerFailed(path: entry.path, code: error.code, message: "\(error)"))
                }
                retryTimer?.cancel()
                retryTimer = player.loop.schedule(after: Self.threadRetry) { [weak self] in
                    guard let self, let episode = self.episode, episode.serial == serial else { return }
                    play(index, start: start, fresh: false)
                }
            case .failure(let error):
                log.error("\(entry.path): cannot be played: \(error)")
                lastFailure = (entry.path, "\(error)")
                self.episode?.failure = "\(error)"
                emit(.playerFailed(path: entry.path, code: (error as? PlayerFailure)?.code ?? "loading-failed", message: "\(error)"))
                episodeFinished(serial)
            }
        }
    }

    /// The episode's post-roll is done (or there was none, or it could not play): the next.
    func episodeFinished(_ serial: UInt64) {
        guard let episode, episode.serial == serial else { return }
        self.episode = nil
        linearAd = nil
        if scheduleRules {
            if let failure = episode.failure { return scheduleItemFailed(episode.entry.path, failure) }
            return scheduleNext()
        }
        if queue.repeatMode == .one, let current, queue.contains(current), queue[current] == episode.entry, lastFailure?.path != episode.entry.path {
            // `repeat one`: the same episode again, from its start — a new viewing (R14).
            return play(current, start: 0, fresh: true, pass: episode.pass + 1)
        }
        guard let current, let next = queue.next(after: current) else {
            // A person's own queue ran out on a schedule: the schedule plays again at once.
            if scheduler != nil, personQueueDone() { return }
            log.info("the queue is done")
            queue.current = nil
            store.saveQueue(queue.entries, current: nil)
            publishDesktop()
            onQueueDone()
            return
        }
        if next <= current, queue.repeatMode == .all { log.info("the queue starts over (repeat all)") }
        play(next, start: nil, fresh: true)
    }

    func stopPlaying() {
        retryTimer?.cancel()
        savePosition()
        episode?.policy?.stop()
        episode = nil
        adOnScreen = nil
        adUnderBreak = nil
        linearAd = nil
        positionTimer?.cancel()
        try? player.stop()
        publishDesktop()
    }

    func savePosition() {
        guard let episode else { return }
        let snapshot = player.snapshot()
        guard snapshot.item != nil else { return }
        remember(episode.entry.path, snapshot.position)
    }

    /// `path` is at `seconds` (nil: played to its end): kept here for the loop, saved by the store.
    func remember(_ path: String, _ seconds: Double?) {
        if let seconds, seconds.isFinite, seconds > 0 {
            positions.set(path, seconds)
        } else {
            positions.remove(path)
        }
        store.savePosition(path, seconds)
    }

    /// While playing, the position is saved every second: a `kill -9` resumes within a second
    /// or two of where it was. Nothing is scheduled while paused, nor for a state that survives
    /// no kill (`.runOnly`, a simulation's): its positions are those saved at a pause, a seek,
    /// a change of item and a stop, the same the run reads back.
    func armPositionTimer() {
        guard store.durability == .crashSafe, positionTimer == nil || positionTimer!.isCancelled else { return }
        positionTimer = player.loop.schedule(after: 1) { [weak self] in
            guard let self else { return }
            positionTimer = nil
            guard player.snapshot().playing else { return }
            savePosition()
            armPositionTimer()
        }
    }
}

/// The loop's part of the health verdict.
public struct HealthSnapshot: Sendable {
    public var itemInPlayer: Bool
    public var playing: Bool
    public var position: Double
    public var rate: Double
    public var postroll: Bool
    public var queueLength: Int
    public var contentID: String?
    public var lastFailure: String?
    public var adsConfigured: Bool
    public var output: PlayerOutput
    /// The display is off, and why (`schedule`, `override`); nil: on.
    public var displayOff: String? = nil
    /// The schedule's trouble: items failing in a row, or a schedule file that does not load.
    public var scheduleProblem: String? = nil
}
