/// The virtual player: the player model on a loop of virtual time (a `SimulationLoop` in
/// `adplayerd simulate` and `schedule-check`, a `VirtualLoop` in the tests), each file as long as
/// its media says (`setMedia`, or the `media` lookup: FFmpeg's reading of the file), with nothing
/// behind it — so that a day of playback runs in seconds and deterministically. It
/// answers to the same conformance suite as `MpvPlayer` (Tests/PlayerConformance): the pause
/// flag persists across items, an item that plays to its end sends `.ended` (at its
/// duration, not playing) then `.item(nil)`, each loop wrap and each replay of an ended
/// entry is another item (R14), and every change carries the facts right after it.
///
/// Threading: any thread may drive it; each call runs on the loop (inline there, handed
/// over and waited for elsewhere). Changes are delivered on the loop.
public final class VirtualPlayer: BreakablePlayer, @unchecked Sendable {
    // @unchecked: `state` and `feed` are touched only on `loop`.
    private struct State {
        var item: PlayerItem?
        var duration: Double = 0
        var paused = false
        /// A linear break holds the item (`holdForBreak`).
        var held = false
        /// The item in has started (mpv: its first playback restart); a new one has not.
        var started = false
        var rate = 1.0
        var loop = false
        /// How far past the break's time the content comes back (mpv: the next frame).
        var breakResumeLanding = 0.0
        var anchorPosition = 0.0
        var anchorTime: UInt64 = 0
        var nextEntry: Int64 = 1
        var endTimer: LoopTimer?
        /// The item that played to its end, which `replay()` plays again.
        var ended: (item: PlayerItem, duration: Double)?
        /// Media the script knows, by path: a duration, or nil for a file that cannot be played.
        var media: [String: Double?] = [:]

        var playing: Bool { item != nil && started && !paused && !held }

        func position(at now: UInt64) -> Double {
            guard item != nil else { return 0 }
            guard playing else { return anchorPosition }
            let elapsed = Double(now &- anchorTime) / 1e9
            return min(duration, max(0, anchorPosition + rate * elapsed))
        }

        func snapshot(at now: UInt64) -> PlayerSnapshot {
            PlayerSnapshot(item: item, position: position(at: now), playing: playing, rate: rate)
        }
    }

    public let loop: any PlayerLoop
    private let feed: PlayerChangeFeed
    private var state = State()
    /// What `media` says of a file the script has not set: its length, nil when it cannot be
    /// played (asked once a file, on the loop: a simulation's loop is its own thread).
    private let media: (@Sendable (String) -> Double?)?
    /// Hears every change of the pause flag (the viewer's pause and play): a linear ad's video
    /// follows it, as mpv's does, also while the content is held for a break.
    private var pauseFlagObserver: (@Sendable (Bool) -> Void)?
    /// What was put on its screen: labels (`identify`) and the output blanked or not (in order).
    public let screenRecord = VirtualScreenRecord()

    public init(loop: any PlayerLoop, media: (@Sendable (String) -> Double?)? = nil) {
        self.loop = loop
        self.media = media
        feed = PlayerChangeFeed(loop: loop)
    }

    /// `observer` hears each change of the pause flag, on the loop.
    public func observePauseFlag(_ observer: @escaping @Sendable (Bool) -> Void) {
        _ = mutate { _, _, _ in pauseFlagObserver = observer }
    }

    public func snapshot() -> PlayerSnapshot {
        (try? loop.sync { state.snapshot(at: loop.now()) }) ?? .empty
    }

    public func addObserver(_ observer: any PlayerObserver, phase: ObserverPhase) -> PlayerObservation {
        (try? loop.sync { feed.add(observer, phase: phase) }) ?? .ended()
    }

    /// Observers still alive.
    public var observerCount: Int { (try? loop.sync { feed.observerCount }) ?? 0 }

    // MARK: Script

    /// Puts another item in, `duration` seconds long, from `start`; it plays unless the player
    /// is paused.
    @discardableResult
    public func load(_ path: String, duration: Double, start: Double = 0) -> PlayerItem {
        mutate { state, now, emit in
            let item = PlayerItem(entry: state.nextEntry, path: path)
            state.nextEntry += 1
            enter(item, duration: duration, start: start, &state, now, emit)
            return item
        } ?? PlayerItem(entry: -1, path: path)
    }

    /// Content held for a break comes back `seconds` past the break's time, as mpv's precise
    /// start lands on the next frame (tests of breaks a frame apart).
    public func setBreakResumeLanding(_ seconds: Double) {
        mutate { state, _, _ in state.breakResumeLanding = seconds }
    }

    /// The item in reports a new length (mpv refining a VBR or TS file's estimate).
    public func refineDuration(_ seconds: Double) {
        mutate { state, _, _ in if state.item != nil { state.duration = max(0, seconds) } }
    }

    /// The script's media: `path` lasts `duration` seconds (nil: it cannot be played).
    public func setMedia(_ path: String, duration: Double?) {
        mutate { state, _, _ in state.media[path] = .some(duration) }
    }

    /// Loads `path` as the script's media says (60 s when it does not know it); a file that
    /// cannot be played fails as `loadFailing` does. The entry id either way.
    @discardableResult
    public func load(_ path: String, start: Double = 0) -> Int64 {
        let known = lookup(path)
        switch known {
        case .some(.none):
            return loadFailing(path)
        case .some(.some(let duration)):
            return load(path, duration: duration, start: start).entry
        case .none:
            return load(path, duration: 60, start: start).entry
        }
    }

    /// Loads `path` as `load(_:start:)` does, in the order mpv reports a load: the entry's id
    /// answered first (`answer`, in a later turn of the loop), then — for a file the script
    /// cannot play — the entry's failure, in the turn after (mpv: `loadfile` answers, then the
    /// file's END_FILE with its error).
    public func load(_ path: String, start: Double, answer: @escaping @Sendable (Int64) -> Void) {
        let known = lookup(path)
        guard case .some(.none) = known else {
            let entry = load(path, start: start)
            loop.run { answer(entry) }
            return
        }
        let entry: Int64 = mutate { state, _, emit -> Int64 in
            let entry = state.nextEntry
            state.nextEntry += 1
            state.ended = nil
            if state.item != nil {
                state.item = nil
                emit(.item(nil), state)
            }
            return entry
        } ?? Int64(-1)
        loop.run { [weak self] in
            answer(entry)
            self?.loop.run { [weak self] in
                self?.mutate { state, _, emit in
                    emit(.failed(PlayerFailure(entry: entry, path: path, code: "loading-failed", message: "loading failed")), state)
                }
            }
        }
    }

    /// What the script's media (or the `media` lookup, once) says of `path`: `.none` unknown,
    /// `.some(nil)` a file that cannot be played, else its length.
    private func lookup(_ path: String) -> Double?? {
        let known: Double?? = (try? loop.sync { () -> Double?? in state.media[path] }) ?? .none
        guard case .none = known, let media else { return known }
        let measured = media(path)
        _ = mutate { state, _, _ in state.media[path] = .some(measured) }
        return .some(measured)
    }

    /// Whether `path` can be played, as far as its media says (unknown: yes).
    public func playable(_ path: String) -> Bool {
        if case .some(.none) = lookup(path) { return false }
        return true
    }

    /// The item's duration, when an item is in.
    public var itemDuration: Double? { (try? loop.sync { state.item == nil ? nil : state.duration }) ?? nil }

    /// Plays the entry that just played to its end again (mpv: `loop-playlist`, or a seek
    /// back into a kept-open file): another pass, so another item (R14). Nothing if none ended.
    public func replay() {
        mutate { state, now, emit in
            guard state.item == nil, let ended = state.ended else { return }
            enter(ended.item.nextLoop(), duration: ended.duration, &state, now, emit)
        }
    }

    /// An entry that cannot be played: the item goes, a failure is reported.
    @discardableResult
    public func loadFailing(_ path: String, code: String = "loading-failed", message: String = "loading failed") -> Int64 {
        mutate { state, _, emit in
            let entry = state.nextEntry
            state.nextEntry += 1
            state.ended = nil
            if state.item != nil {
                state.item = nil
                emit(.item(nil), state)
            }
            emit(.failed(PlayerFailure(entry: entry, path: path, code: code, message: message)), state)
            return entry
        } ?? -1
    }

    public func play() { setPaused(false) }
    public func pause() { setPaused(true) }
    public func togglePause() { mutate { state, _, _ in state.paused }.map { setPaused(!$0) } }

    public func setPaused(_ paused: Bool) {
        mutate { state, now, emit in
            guard state.paused != paused else { return }
            pauseFlagObserver?(paused)
            let wasPlaying = state.playing
            state.anchorPosition = state.position(at: now)
            state.anchorTime = now
            state.paused = paused
            if wasPlaying && !state.playing { emit(.paused, state) }
            if !wasPlaying && state.playing { emit(.playing(rate: state.rate), state) }
        }
    }

    /// A linear break: the item stops at `position`, held (`.held`, not `.paused`). On the loop.
    public func holdForBreak(at position: Double) {
        mutate { state, now, emit in
            guard state.item != nil, !state.held else { return }
            state.held = true
            state.anchorPosition = min(state.duration, max(0, position))
            state.anchorTime = now
            emit(.held, state)
        }
    }

    /// The held item plays again from `position` — the same item (`.playing`); the ad's video
    /// had the viewer's pause, so the content comes back unpaused. On the loop.
    public func resumeAfterBreak(at position: Double) {
        mutate { state, now, emit in
            guard state.held else { return }
            state.held = false
            state.paused = false
            state.anchorPosition = min(state.duration, max(0, position + state.breakResumeLanding))
            state.anchorTime = now
            if state.playing { emit(.playing(rate: state.rate), state) }
        }
    }

    /// The item is held for a linear break.
    public var isHeld: Bool { (try? loop.sync { state.held }) ?? false }

    /// A positive rate; others are ignored (pause to stop).
    public func setRate(_ rate: Double) {
        guard rate > 0, rate.isFinite else { return }
        mutate { state, now, emit in
            guard state.rate != rate else { return }
            state.anchorPosition = state.position(at: now)
            state.anchorTime = now
            state.rate = rate
            if state.playing { emit(.rate(rate), state) }
        }
    }

    /// A time jump of the current item, to `position` (clamped to the item).
    public func seek(to position: Double) {
        mutate { state, now, emit in
            guard state.item != nil else { return }
            let from = state.position(at: now)
            state.anchorPosition = min(state.duration, max(0, position.isFinite ? position : 0))
            state.anchorTime = now
            emit(.seeked(from: from, to: state.anchorPosition), state)
        }
    }

    public func setLoop(_ loop: Bool) {
        mutate { state, _, _ in state.loop = loop }
    }

    /// Takes the item out (like mpv's `stop`).
    public func stop() {
        mutate { state, _, emit in
            state.ended = nil
            state.held = false
            guard state.item != nil else { return }
            state.item = nil
            emit(.item(nil), state)
        }
    }

    // MARK: Machinery

    private func enter(_ item: PlayerItem, duration: Double, start: Double = 0, _ state: inout State, _ now: UInt64,
                       _ emit: (PlayerChange, State) -> Void) {
        if state.item != nil {
            // Replaced: the old item goes first (mpv: END_FILE of the old entry, then START_FILE).
            state.item = nil
            emit(.item(nil), state)
        }
        state.item = item
        state.started = false
        state.held = false
        state.ended = nil
        state.duration = max(0, duration)
        state.anchorPosition = min(state.duration, max(0, start.isFinite ? start : 0))
        state.anchorTime = now
        emit(.item(item), state)   // in, not playing yet
        state.started = true
        if state.playing { emit(.playing(rate: state.rate), state) }
    }

    /// On the loop: applies `body` to the state, then publishes each change it emitted with
    /// the state as it was right after that change. Nil when the loop has stopped.
    @discardableResult
    private func mutate<R>(_ body: (inout State, UInt64, (PlayerChange, State) -> Void) -> R) -> R? {
        try? loop.sync {
            let now = loop.now()
            var events: [PlayerEvent] = []
            let result = body(&state, now) { change, current in
                events.append(PlayerEvent(change: change, snapshot: current.snapshot(at: now), observedAt: now))
            }
            rearmEndTimer(now: now)
            feed.publish(events, from: self)
            return result
        }
    }

    /// Keeps one timer pending for the moment the playing item reaches its end.
    private func rearmEndTimer(now: UInt64) {
        state.endTimer?.cancel()
        state.endTimer = nil
        guard state.playing, let item = state.item else { return }
        let remaining = (state.duration - state.position(at: now)) / state.rate
        state.endTimer = loop.schedule(after: max(0, remaining)) { [weak self] in
            self?.reachEnd(of: item)
        }
    }

    private func reachEnd(of expected: PlayerItem) {
        mutate { state, now, emit in
            guard let item = state.item, item == expected, state.playing,
                  state.position(at: now) >= state.duration - 1e-9 else { return }
            state.anchorPosition = state.duration
            state.anchorTime = now
            if state.loop {
                // A wrap: the next pass comes in directly (mpv seeks back to the start).
                state.item = nil
                enter(item.nextLoop(), duration: state.duration, &state, now, emit)
                return
            }
            // The facts at the end: the ended item, at its duration, no longer playing.
            emit(.ended(item), State(item: item, duration: state.duration, paused: true, anchorPosition: state.duration))
            state.item = nil
            state.ended = (item, state.duration)
            emit(.item(nil), state)
        }
    }
}

/// What a virtual player's screen was asked to show: labels (`identify`) and the output blanked
/// (`true`) or shown again, in order. Any thread.
public final class VirtualScreenRecord: Sendable {
    private let shown = Locked<(labels: [(text: String, seconds: Double)], blanked: [Bool])>(([], []))
    public init() {}

    public var labels: [(text: String, seconds: Double)] { shown.withLock { $0.labels } }
    public var blanked: [Bool] { shown.withLock { $0.blanked } }
    public func label(_ text: String, seconds: Double) { shown.withLock { $0.labels.append((text, seconds)) } }
    public func blank(_ on: Bool) { shown.withLock { $0.blanked.append(on) } }
    public func forget() { shown.withLock { $0 = ([], []) } }
}
