import AdRuntime
import Foundation
import Synchronization

/// How the content player's mpv is set up.
public struct MpvPlayerConfiguration: Sendable {
    /// Video output: `null` headless, `x11`/`gpu` to see it.
    public var vo = "null"
    /// Audio output. With a real device, `audio-fallback-to-null` keeps a box without a
    /// sound card playing (a failed AO would otherwise end every file with an error).
    public var ao = "null"
    /// `keep-open`: keep the last frame after the end. mpv's own pause at the end is turned
    /// off unless `keepOpenPause` (R2); either way the end is the end, never a pause.
    public var keepOpen = true
    public var keepOpenPause = false
    /// Tests: play as fast as possible (`untimed`, `ao-null-untimed`). Disables the
    /// position backstop, whose premise is real time.
    public var untimed = false
    /// mpv's own JSON IPC socket (`input-ipc-server`). Unsafe: anyone who can open it can
    /// drive the player and run programs. Off by default; for tests and debugging.
    public var ipcSocket: String?
    /// mpv's default key bindings in its own window (space pauses, …).
    public var inputBindings = false
    /// More options, applied before the locked ones (`MpvHandle.lockedOptions`).
    public var extraOptions: [(String, String)] = []
    /// mpv log messages at this level and above reach `onLog`.
    public var logLevel = "warn"

    public init() {}

    var mpvOptions: [(String, String)] {
        var options: [(String, String)] = [
            ("vo", vo), ("ao", ao), ("audio-fallback-to-null", "yes"), ("audio-display", "no"),
            ("keep-open", keepOpen ? "yes" : "no"), ("keep-open-pause", keepOpenPause ? "yes" : "no"),
            ("input-default-bindings", inputBindings ? "yes" : "no"),
            ("input-vo-keyboard", inputBindings ? "yes" : "no"),
            ("force-window", "no"),
        ]
        if untimed { options += [("untimed", "yes"), ("ao-null-untimed", "yes")] }
        if let ipcSocket { options.append(("input-ipc-server", ipcSocket)) }
        return options + extraOptions
    }
}

/// What an ad surface drawing into an `MpvPlayer` hears from it, on the event thread.
protocol MpvOutputListener: AnyObject, Sendable {
    func adPlayback(_ event: MpvPlayerMapping.AdPlayback)
    func outputResized(width: Int, height: Int)
}

struct WeakListener {
    weak var value: (any MpvOutputListener)?
}

/// The content player: one mpv core, seen through the player model.
///
/// Threading: every method may be called from any thread. Player changes are derived on
/// mpv's event thread (`MpvHandle`) and delivered there to observers, in order; the effect
/// of our own `pause()`/`play()` is derived and delivered on the calling thread before the
/// call returns (or handed to the thread delivering at that moment), so that an overlay
/// ends in the same step as the pause that the daemon issued. `shutdown()` must not be
/// called from an observer.
public final class MpvPlayer: TrackablePlayer {
    public let handle: MpvHandle
    private let feed = PlayerChangeFeed()
    /// The ad surface drawing into this mpv, told about its ads' videos and the output size.
    private let listener = Mutex<WeakListener>(WeakListener())
    private let mapping: Mutex<MpvPlayerMapping>
    private let onLog: @Sendable (MpvLogMessage) -> Void

    public init(configuration: MpvPlayerConfiguration = MpvPlayerConfiguration(),
                onLog: @escaping @Sendable (MpvLogMessage) -> Void = { _ in }) throws {
        handle = try MpvHandle(options: configuration.mpvOptions, logLevel: configuration.logLevel)
        var mapping = MpvPlayerMapping()
        mapping.backstopEnabled = !configuration.untimed
        self.mapping = Mutex(mapping)
        self.onLog = onLog
        for property in MpvPlayerMapping.Observed.allCases {
            try handle.observe(property.name, format: property.format, id: property.rawValue)
        }
        handle.start { [weak self] event in self?.handle(event) }
    }

    public func snapshot() -> PlayerSnapshot { mapping.withLock { $0.snapshot() } }

    public func addObserver(_ observer: any PlayerObserver) -> PlayerObservation { feed.add(observer) }

    public func shutdown() { handle.shutdown() }

    // MARK: Commands

    public enum LoadMode: String, Sendable {
        case replace, append, appendPlay = "append-play"
    }

    /// Loads `path` and returns its playlist entry id. A local file that is missing, not a
    /// regular file, unreadable or empty is refused here with a `PlayerFailure`; a file mpv
    /// cannot play is reported later as `.failed`.
    @discardableResult
    public func load(_ path: String, mode: LoadMode = .replace, options: [String: String] = [:]) throws -> Int64 {
        try Self.checkLocalFile(path)
        var args = ["loadfile", path, mode.rawValue]
        if !options.isEmpty {
            args.append(options.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ","))
        }
        // Hold the mapping's lock across the call so that START_FILE cannot be mapped
        // before we know the entry's path.
        return try mapping.withLock { mapping in
            let result = try handle.commandReturning(args)
            guard let entry = result["playlist_entry_id"]?.int else {
                throw MpvError(code: -12, operation: "loadfile (no playlist_entry_id)")
            }
            mapping.noteLoad(entry: entry, path: path)
            return entry
        }
    }

    public func play() throws { try setPaused(false) }
    public func pause() throws { try setPaused(true) }

    public func setPaused(_ paused: Bool) throws {
        let now = MonotonicTime.now()
        let adEvents = try mapping.withLock { mapping in
            try handle.set("pause", paused)
            publish(mapping.applyOwnPause(paused), mapping, now)
            return mapping.takeAdEvents()
        }
        feed.drain()
        tellSurface(adEvents, resizedTo: nil)
    }

    public func togglePause() throws {
        try setPaused(snapshot().playing)
    }

    /// Seeks to `seconds` into the item (`absolute`) or by `seconds` (`relative`).
    public func seek(_ seconds: Double, relative: Bool = false) throws {
        try mapping.withLock { mapping in
            mapping.noteOwnSeek()
            do {
                try handle.command(["seek", String(seconds), relative ? "relative" : "absolute", "exact"])
            } catch {
                mapping.ownSeekFailed()
                throw error
            }
        }
    }

    public func setSpeed(_ speed: Double) throws {
        guard speed.isFinite, speed >= 0.01, speed <= 100 else {
            throw MpvError(code: -4, operation: "speed \(speed) (allowed: 0.01…100)")
        }
        try handle.set("speed", speed)
    }

    /// Loops the current file (`loop-file=inf`) or stops looping.
    public func setLoop(_ loop: Bool) throws { try handle.set("loop-file", loop ? "inf" : "no") }

    public func stop() throws { try handle.command(["stop"]) }

    // MARK: Ads' videos and the output (for MpvAdSurface)

    /// Plays an ad's video in this mpv's output, replacing what is there, at 1× and unpaused
    /// whatever the content's speed and pause flag are (per-file options: mpv restores them
    /// after the file). It is never reported as an item (R8); its progress and end go to the
    /// attached surface. Returns its playlist entry id.
    func playAd(_ path: String) throws -> Int64 {
        try Self.checkLocalFile(path)
        return try mapping.withLock { mapping in
            let result = try handle.commandReturning(["loadfile", path, "replace",
                                                      "speed=1,pause=no,keep-open=no,loop-file=no"])
            guard let entry = result["playlist_entry_id"]?.int else {
                throw MpvError(code: -12, operation: "loadfile (no playlist_entry_id)")
            }
            mapping.noteAdLoad(entry: entry)
            return entry
        }
    }

    /// Stops an ad's video if it has not ended yet (it replaced everything, so it is what plays).
    func stopAd(_ entry: Int64) throws {
        try mapping.withLock { mapping in
            if mapping.isAdPending(entry) { try handle.command(["stop"]) }
        }
    }

    var outputSize: (width: Int, height: Int) { mapping.withLock { $0.outputSize } }

    func attach(_ surface: any MpvOutputListener) {
        listener.withLock { $0.value = surface }
    }
    public func next() throws { try handle.command(["playlist-next", "force"]) }

    // MARK: Events

    private func handle(_ event: MpvEvent) {
        if case .log(let message) = event {
            onLog(message)
            return
        }
        let now = MonotonicTime.now()
        let query = MpvPlayerMapping.Query(
            pause: { [handle] in (try? handle.get("pause", as: .flag))?.flag },
            eofReached: { [handle] in (try? handle.get("eof-reached", as: .flag))?.flag },
            timePos: { [handle] in (try? handle.get("time-pos", as: .double))?.double },
            path: { [handle] in (try? handle.get("path", as: .string))?.string })
        let (adEvents, resized, size) = mapping.withLock { mapping in
            publish(mapping.apply(event, now: now, query: query), mapping, now)
            return (mapping.takeAdEvents(), mapping.takeOutputSizeChange(), mapping.outputSize)
        }
        feed.drain()
        tellSurface(adEvents, resizedTo: resized ? size : nil)
    }

    /// Hands ads' playback events and a new output size to the attached surface, with no lock held.
    private func tellSurface(_ adEvents: [MpvPlayerMapping.AdPlayback], resizedTo size: (width: Int, height: Int)?) {
        guard !adEvents.isEmpty || size != nil, let surface = listener.withLock({ $0.value }) else { return }
        adEvents.forEach { surface.adPlayback($0) }
        if let size { surface.outputResized(width: size.width, height: size.height) }
    }

    /// Enqueues `changes` in the feed; called with the mapping's lock held, so that the
    /// feed's order is the mapping's.
    private func publish(_ changes: [PlayerChange], _ mapping: MpvPlayerMapping, _ now: UInt64) {
        guard !changes.isEmpty else { return }
        let snapshot = mapping.snapshot()
        feed.enqueue(changes.map { PlayerEvent(change: $0, snapshot: snapshot, observedAt: now) }, from: self)
    }

    static func checkLocalFile(_ path: String) throws {
        if path.contains("://") { return }
        var info = stat()
        let entry: Int64 = -1
        guard stat(path, &info) == 0 else {
            throw PlayerFailure(entry: entry, path: path, code: "not-found", message: "no such file: \(path)")
        }
        guard (info.st_mode & S_IFMT) == S_IFREG else {
            throw PlayerFailure(entry: entry, path: path, code: "not-a-file", message: "not a regular file: \(path)")
        }
        guard access(path, R_OK) == 0 else {
            throw PlayerFailure(entry: entry, path: path, code: "not-readable", message: "not readable: \(path)")
        }
        guard info.st_size > 0 else {
            throw PlayerFailure(entry: entry, path: path, code: "empty", message: "empty file: \(path)")
        }
    }
}
