import Synchronization

/// A player driven by a test script on a `RuntimeClock` (usually a `VirtualClock`): the
/// player model with nothing behind it, so that lifecycles run in microseconds and
/// deterministically. It follows the same rules as the mpv adapter: the pause flag
/// persists across items, an item that plays to its end sends `.ended` then `.item(nil)`,
/// and with `loop` on each wrap is another item (R14).
///
/// Threading: any thread may drive it; changes are delivered in order through its feed.
/// Timers (the end of an item) run on the clock's thread (for a `VirtualClock`, inside
/// `advance(by:)`).
public final class ScriptedPlayer: TrackablePlayer {
    private struct State {
        var item: PlayerItem?
        var duration: Double = 0
        var paused = false
        var rate = 1.0
        var loop = false
        var anchorPosition = 0.0
        var anchorTime: UInt64 = 0
        var nextEntry: Int64 = 1
        var endTimer: ScheduledTimer?

        var playing: Bool { item != nil && !paused }

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

    public let clock: any RuntimeClock
    private let feed = PlayerChangeFeed()
    private let state = Mutex(State())

    public init(clock: any RuntimeClock) {
        self.clock = clock
    }

    public func snapshot() -> PlayerSnapshot {
        let now = clock.now()
        return state.withLock { $0.snapshot(at: now) }
    }

    public func addObserver(_ observer: any PlayerObserver) -> PlayerObservation { feed.add(observer) }

    public var observerCount: Int { feed.observerCount }

    // MARK: Script

    /// Puts another item in, `duration` seconds long; it plays unless the player is paused.
    @discardableResult
    public func load(_ path: String, duration: Double) -> PlayerItem {
        mutate { state, now, emit in
            let item = PlayerItem(entry: state.nextEntry, path: path)
            state.nextEntry += 1
            state.item = item
            state.duration = duration
            state.anchorPosition = 0
            state.anchorTime = now
            emit(.item(item), state)
            if state.playing { emit(.playing(rate: state.rate), state) }
            return item
        }
    }

    /// An entry that cannot be played: the item goes, a failure is reported.
    public func loadFailing(_ path: String, code: String = "loading-failed", message: String = "loading failed") {
        mutate { state, _, emit in
            let entry = state.nextEntry
            state.nextEntry += 1
            if state.item != nil {
                state.item = nil
                emit(.item(nil), state)
            }
            emit(.failed(PlayerFailure(entry: entry, path: path, code: code, message: message)), state)
        }
    }

    public func play() { setPaused(false) }
    public func pause() { setPaused(true) }

    public func setPaused(_ paused: Bool) {
        mutate { state, now, emit in
            guard state.paused != paused else { return }
            let wasPlaying = state.playing
            state.anchorPosition = state.position(at: now)
            state.anchorTime = now
            state.paused = paused
            if wasPlaying && !state.playing { emit(.paused, state) }
            if !wasPlaying && state.playing { emit(.playing(rate: state.rate), state) }
        }
    }

    public func setRate(_ rate: Double) {
        precondition(rate > 0, "a rate is positive; pause to stop")
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
            state.anchorPosition = min(state.duration, max(0, position))
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
            guard state.item != nil else { return }
            state.item = nil
            emit(.item(nil), state)
        }
    }

    // MARK: Machinery

    /// Applies `body` to the state; each change it emits carries the state as it was then.
    private func mutate<R>(_ body: (inout State, UInt64, (PlayerChange, State) -> Void) -> R) -> R {
        let now = clock.now()
        let result = state.withLock { state -> R in
            var events: [PlayerEvent] = []
            let result = body(&state, now) { change, current in
                events.append(PlayerEvent(change: change, snapshot: current.snapshot(at: now), observedAt: now))
            }
            feed.enqueue(events, from: self)
            rearmEndTimer(&state, now: now)
            return result
        }
        feed.drain()
        return result
    }

    /// Keeps one timer pending for the moment the playing item reaches its end.
    private func rearmEndTimer(_ state: inout State, now: UInt64) {
        state.endTimer?.cancel()
        state.endTimer = nil
        guard state.playing, let item = state.item else { return }
        let remaining = (state.duration - state.position(at: now)) / state.rate
        state.endTimer = clock.schedule(after: max(0, remaining)) { [weak self] in
            self?.reachEnd(of: item)
        }
    }

    private func reachEnd(of expected: PlayerItem) {
        mutate { state, now, emit in
            guard let item = state.item, item == expected, state.playing,
                  state.position(at: now) >= state.duration - 1e-9 else { return }
            if state.loop {
                let next = item.nextLoop()
                state.item = next
                state.anchorPosition = 0
                state.anchorTime = now
                emit(.item(next), state)
                emit(.playing(rate: state.rate), state)
            } else {
                state.anchorPosition = state.duration
                state.anchorTime = now
                emit(.ended(item), state)
                state.item = nil
                emit(.item(nil), state)
            }
        }
    }
}
