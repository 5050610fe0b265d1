import AdRuntime
import Foundation

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
    /// mpv's network timeout (seconds): how long a post-roll on a server that stops answering
    /// mid-stream can stall before it fails (mpv's default is 60).
    public var networkTimeout = 5.0
    /// Tests of the loop-affinity checks: a loop-only entry point called off the loop is
    /// recorded here instead of trapping (debug builds; the checks are compiled out of release).
    public var offLoopCalls: OffLoopCalls?
    /// The loop's clock and mpv's speed run this many times faster than real time (1…100):
    /// `adplayerd simulate --speed X`. Positions, timers and ad durations stay in media
    /// seconds; the player model reports speeds divided by it.
    public var timeScale = 1.0

    public init() {}

    /// The demuxer cache's bounds (mpv's size syntax): read ahead, and kept behind for seeking back.
    public static let demuxerMaxBytes = "32MiB"
    public static let demuxerMaxBackBytes = "8MiB"

    var mpvOptions: [(String, String)] {
        var options: [(String, String)] = [
            ("vo", vo), ("ao", ao), ("audio-fallback-to-null", "yes"), ("audio-display", "no"),
            ("keep-open", keepOpen ? "yes" : "no"), ("keep-open-pause", keepOpenPause ? "yes" : "no"),
            ("input-default-bindings", inputBindings ? "yes" : "no"),
            ("input-vo-keyboard", inputBindings ? "yes" : "no"),
            ("force-window", "no"), ("network-timeout", String(format: "%.3f", networkTimeout)),
            // The demuxer's cache, for content and ads alike: bounded far below mpv's defaults
            // (150 MiB ahead, 50 MiB behind), which an endless stream served as an ad fills.
            ("demuxer-max-bytes", Self.demuxerMaxBytes), ("demuxer-max-back-bytes", Self.demuxerMaxBackBytes),
        ]
        if untimed { options += [("untimed", "yes"), ("ao-null-untimed", "yes")] }
        if timeScale != 1 { options.append(("speed", String(format: "%g", timeScale))) }
        if let ipcSocket { options.append(("input-ipc-server", ipcSocket)) }
        return options + extraOptions
    }
}

/// What an ad surface drawing into an `MpvPlayer` hears from it, on the loop.
protocol MpvOutputListener: AnyObject, Sendable {
    func adPlayback(_ event: MpvPlayerMapping.AdPlayback)
    func outputResized(width: Int, height: Int)
}

/// The content player: one mpv core, seen through the player model.
///
/// Threading (SPEC R18): the core's loop (`loop`, mpv's event thread) owns the mapping, the
/// change feed and the ads' surface; every method may be called from any thread and runs on
/// the loop — inline there, handed over elsewhere (`load`, `seek`, … wait for the loop to
/// have handed the command to mpv, not for mpv to have done it). Player changes are derived
/// and delivered on the loop. Our own `pause()`/`play()` take effect in the model in the same
/// turn that sets mpv's flag, because mpv can coalesce a short pause into no notification at
/// all; pauses from anywhere else come from the `pause` observer (R3).
///
/// Releasing the last reference shuts mpv down (R5, R9): nothing else keeps it playing.
public final class MpvPlayer: TrackablePlayer {
    let handle: MpvHandle
    private let core: PlayerCore

    public var loop: any PlayerLoop { handle }

    public init(configuration: MpvPlayerConfiguration = MpvPlayerConfiguration(),
                onLog: @escaping @Sendable (MpvLogMessage) -> Void = { _ in }) throws {
        handle = try MpvHandle(options: configuration.mpvOptions, logLevel: configuration.logLevel, offLoopCalls: configuration.offLoopCalls,
                               timeScale: configuration.timeScale)
        var mapping = MpvPlayerMapping()
        mapping.backstopEnabled = !configuration.untimed
        mapping.timeScale = handle.timeScale
        mapping.keepOpenPause = configuration.keepOpen && configuration.keepOpenPause
        core = PlayerCore(handle: handle, mapping: mapping, onLog: onLog)
        do {
            for property in MpvPlayerMapping.Observed.allCases {
                try handle.observe(property.name, format: property.format, id: property.rawValue)
            }
            // Before the loop runs: the first text overlay makes mpv build its libass renderer
            // (3.2 ms holding its core lock, notes §7b). Do it here, once, not on the loop.
            try MpvAdSurface.warmUpTextRenderer(handle)
        } catch {
            handle.shutdown()
            throw error
        }
        core.player = self
        handle.start { [core] event, receivedAt in core.handle(event, receivedAt: receivedAt) }
    }

    deinit { handle.shutdown() }

    public func snapshot() -> PlayerSnapshot { (try? loop.sync { core.mapping.snapshot() }) ?? .empty }

    public func addObserver(_ observer: any PlayerObserver, phase: ObserverPhase) -> PlayerObservation {
        (try? loop.sync { core.feed.add(observer, phase: phase) }) ?? .ended()
    }

    /// The item's duration in seconds, when an item is in and mpv knows it.
    public func duration() -> Double? { (try? loop.sync { core.mapping.itemDuration }) ?? nil }

    /// The item's cue points: its chapters' starts after 0 — the boundaries between chapters,
    /// where breaks go (`chapter-list`, at most 1,000) — once the item is loaded; nil before.
    /// One property read (what `get track-list` costs, docs/benchmarks.md).
    public func cuePoints() -> [Double]? {
        (try? loop.sync { () -> [Double]? in
            guard core.mapping.isItemLoaded else { return nil }
            guard case .array(let list)? = try? core.handle.get("chapter-list", as: .node) else { return [] }
            return list.prefix(1000).compactMap { value -> Double? in
                guard case .map(let chapter) = value, let time = chapter["time"]?.double, time.isFinite, time > 0 else { return nil }
                return time
            }.sorted()
        }) ?? nil
    }

    /// `handler` runs on the loop when mpv's window is minimized or restored (the output is
    /// hidden: the seed's "app goes to the background", R13; never with `vo=null`, which has
    /// no window) and when the item's duration becomes known or changes.
    public func onMpvDetailChange(_ handler: @escaping @Sendable (MpvDetailChange) -> Void) {
        try? loop.sync { core.detailChanged = handler }
    }

    /// Stops mpv (R5): blocks until the core is gone. Idempotent. On the loop (from an
    /// observer) it starts the shutdown and returns; the loop finishes it.
    public func shutdown() { handle.shutdown() }

    /// Another client of this core (`mpv_create_client`), as a script, mpv's IPC or a remote
    /// control would be: for tests and benchmarks that act from outside the adapter.
    @_spi(Foreign)
    public func makeForeignClient(name: String) throws -> MpvClient { try handle.makeClient(name: name) }

    // MARK: Commands

    public enum LoadMode: String, Sendable {
        case replace, append, appendPlay = "append-play"
    }

    /// Loads `path` and returns its playlist entry id. A local file that is missing, not a
    /// regular file, unreadable or empty is refused here with a `PlayerFailure`; a file mpv
    /// cannot play is reported later as `.failed`. Off the loop only (it waits for mpv's
    /// answer); on the loop use `load(_:mode:options:completion:)`.
    @discardableResult
    public func load(_ path: String, mode: LoadMode = .replace, options: [String: String] = [:]) throws -> Int64 {
        precondition(!loop.inLoop, "MpvPlayer.load waits for mpv; on the loop use load(_:mode:options:completion:)")
        try Self.checkLocalFile(path)
        try Self.checkThreads(path)
        let answer = Handover<Result<Int64, MpvError>>()
        try onLoop("loadfile") { core.load(path, mode: mode, options: options) { answer.fulfil($0) } }
        return try answer.wait()!.get()
    }

    /// Loads `path` without waiting: `completion` runs on the loop with the entry id or why
    /// not. Called off the loop, the file is checked first, there; on the loop it is not (no
    /// disk access on the loop, R18): a file mpv cannot open is then reported as `.failed`.
    public func load(_ path: String, mode: LoadMode = .replace, options: [String: String] = [:],
                     completion: @escaping @Sendable (Result<Int64, any Error>) -> Void) {
        let core = self.core
        if !loop.inLoop {
            do {
                try Self.checkLocalFile(path)
            } catch {
                loop.run { completion(.failure(error)) }
                return
            }
        }
        loop.run {
            do {
                try Self.checkThreads(path)
            } catch {
                completion(.failure(error))
                return
            }
            core.load(path, mode: mode, options: options) { completion($0.mapError { $0 }) }
        }
    }

    public func play() throws { try setPaused(false) }
    public func pause() throws { try setPaused(true) }

    public func setPaused(_ paused: Bool) throws {
        try onLoop("set pause") { try core.setPaused(paused) }
    }

    public func togglePause() throws {
        try onLoop("set pause") { try core.setPaused(core.mapping.playing) }
    }

    /// Seeks to `seconds` into the item (`absolute`) or by `seconds` (`relative`). Returns
    /// once mpv has the command; a seek mpv refuses is logged.
    public func seek(_ seconds: Double, relative: Bool = false) throws {
        guard seconds.isFinite else { throw MpvError(code: -4, operation: "seek \(seconds)") }
        try onLoop("seek") { core.seek(seconds, relative: relative) }
    }

    public func setSpeed(_ speed: Double) throws {
        let scale = core.handle.timeScale
        guard speed.isFinite, speed >= 0.01, speed * scale <= 100 else {
            throw MpvError(code: -4, operation: "speed \(speed) (allowed: 0.01…\(String(format: "%g", 100 / scale)))")
        }
        try onLoop("set speed") { try core.handle.set("speed", speed * scale) }
    }

    /// Loops the current file (`loop-file=inf`) or stops looping.
    public func setLoop(_ loop: Bool) throws {
        try onLoop("set loop-file") { try core.handle.set("loop-file", loop ? "inf" : "no") }
    }

    /// Takes the item out (mpv's `stop`); an item a break holds leaves too.
    public func stop() throws {
        try onLoop("stop") {
            core.releaseHold()
            core.handle.commandAsync(["stop"])
        }
    }

    // MARK: Audio, tracks, the screen

    /// The content's volume, 0–100 % (mpv's `volume`); ads' videos play at most at
    /// `setAdAudio`'s share of it.
    public func setVolume(_ percent: Double) throws {
        guard percent.isFinite, percent >= 0, percent <= 100 else { throw MpvError(code: -4, operation: "volume \(percent) (allowed: 0…100)") }
        try onLoop("set volume") {
            try core.handle.set("volume", percent)
            core.contentVolume = percent
        }
    }

    public func setMute(_ muted: Bool) throws {
        try onLoop("set mute") { try core.handle.set("mute", muted) }
    }

    /// How loud ads' videos may be: at most `volumePercent` % of the content's volume
    /// (`ad-volume`). Their level against the content (R28) comes with each ad
    /// (`LoudnessDecision`, applied by `playAd`).
    public func setAdAudio(volumePercent: Double) {
        let share = max(0, min(100, volumePercent.isFinite ? volumePercent : 100)) / 100
        try? loop.sync { core.adVolumeShare = share }
    }

    /// A track of the item, as mpv's `track-list` has it.
    public typealias Track = PlayerTrack

    /// The item's tracks (mpv's `track-list`; a property read: on the loop, microseconds).
    public func tracks() -> [Track] {
        (try? loop.sync { () -> [Track] in
            guard case .array(let list)? = try? core.handle.get("track-list", as: .node) else { return [] }
            return list.prefix(256).compactMap { value -> Track? in
                guard case .map(let t) = value, let id = t["id"]?.int, let type = t["type"]?.string else { return nil }
                return Track(id: Int(id), type: type, language: t["lang"]?.string, title: t["title"]?.string, codec: t["codec"]?.string,
                             selected: t["selected"]?.flag ?? false, external: t["external"]?.flag ?? false)
            }
        }) ?? []
    }

    /// Selects the audio (`aid`) or subtitle (`sid`) track: an id, `auto` (mpv picks by
    /// `alang`/`slang`), or `no`. Asynchronous (handed to mpv, not waited for).
    public func selectTrack(_ type: String, _ value: String) throws {
        guard type == "audio" || type == "sub" else { throw MpvError(code: -4, operation: "select a \(type) track") }
        try onLoop("set \(type == "audio" ? "aid" : "sid")") { core.handle.commandAsync(["set", type == "audio" ? "aid" : "sid", value]) }
    }

    /// An output device mpv can play to (`audio-device-list`).
    public typealias AudioDevice = PlayerAudioDevice

    public func audioDevices() -> [AudioDevice] {
        (try? loop.sync { () -> [AudioDevice] in
            guard case .array(let list)? = try? core.handle.get("audio-device-list", as: .node) else { return [] }
            return list.prefix(256).compactMap { value -> AudioDevice? in
                guard case .map(let d) = value, let name = d["name"]?.string else { return nil }
                return AudioDevice(name: name, description: d["description"]?.string ?? "")
            }
        }) ?? []
    }

    /// Writes what is on screen to `path` (PNG): `window` — the video with what mpv draws over
    /// it (the ads) — or `video` alone. `completion` runs on the loop once mpv has written it.
    public func screenshot(to path: String, withOverlays: Bool, completion: @escaping @Sendable (Result<Void, MpvError>) -> Void) {
        loop.run { [core] in
            core.handle.commandAsync(["screenshot-to-file", path, withOverlays ? "window" : "video"]) { result in
                completion(result.map { _ in () })
            }
        }
    }

    /// What the output and the decoder do now (`status`'s `output`, the health verdict): six
    /// property reads on the loop, each a lock and a copy in mpv (docs/benchmarks.md §1).
    public func output() -> PlayerOutput {
        (try? loop.sync { () -> PlayerOutput in
            let handle = core.handle
            func text(_ name: String) -> String? { (try? handle.get(name, as: .string))?.string.flatMap { $0.isEmpty ? nil : $0 } }
            func int(_ name: String) -> Int? { (try? handle.get(name, as: .int))?.int.map { Int(clamping: $0) } }
            let size = core.mapping.outputSize
            var fps = (try? handle.get("estimated-vf-fps", as: .double))?.double
            if fps == nil || !(fps!.isFinite) { fps = (try? handle.get("container-fps", as: .double))?.double }
            return PlayerOutput(vo: text("current-vo"), width: size.width > 0 ? size.width : nil, height: size.height > 0 ? size.height : nil,
                                hwdecRequested: text("hwdec"), hwdecCurrent: text("hwdec-current") ?? (text("current-vo") != nil ? "no" : nil),
                                droppedByDecoder: int("decoder-frame-drop-count"), droppedByOutput: int("frame-drop-count"),
                                fps: fps.flatMap { $0.isFinite && $0 > 0 ? ($0 * 1000).rounded() / 1000 : nil })
        }) ?? PlayerOutput()
    }

    /// Shows `text` on the output for `seconds` (mpv's OSD, above the video and the ads):
    /// `identify`. A command as an array: mpv expands no property in it; the caller keeps ASS's
    /// escape (ESC) out of `text`.
    public func showLabel(_ text: String, seconds: Double) throws {
        let milliseconds = String(Int((min(max(seconds, 1), 600) * 1000).rounded()))
        try onLoop("show-text") { core.handle.commandAsync(["show-text", text, milliseconds]) }
    }

    /// The output black (true) or showing the video again (false): an opaque black ASS
    /// drawing over the whole OSD (`osd-overlay`, an id of its own beside the ads' 1–63), so
    /// no track, option or item is touched and any vo that draws the OSD blanks (the display's
    /// operating hours). Costs one `osd-overlay` command on the loop.
    public func setBlanked(_ blanked: Bool) throws {
        let data = blanked ? Self.blackout : ""
        try onLoop("osd-overlay") {
            core.handle.commandAsync(node: ["name": .string("osd-overlay"), "id": .int(Self.blankOverlayID), "format": .string("ass-events"),
                                            "data": .string(data), "res_x": .int(100), "res_y": .int(100), "z": .int(1000)])
        }
    }

    static let blankOverlayID: Int64 = 1000
    /// A black rectangle far larger than the virtual 100 × 100 canvas, whatever the scaling.
    static let blackout = "{\\an7\\pos(0,0)\\bord0\\shad0\\1c&H000000&\\1a&H00&\\p1}m -10000 -10000 l 20000 -10000 l 20000 20000 l -10000 20000{\\p0}"

    /// The next playlist entry (`playlist-next force`).
    public func next() throws { try onLoop("playlist-next") { core.handle.commandAsync(["playlist-next", "force"]) } }

    /// Runs `body` on the loop; once mpv is shut down, `MpvError.shutDown(operation)`.
    private func onLoop<T>(_ operation: String, _ body: () throws -> T) throws -> T {
        do {
            return try loop.sync(body)
        } catch is LoopStopped {
            throw MpvError.shutDown(operation)
        }
    }

    // MARK: Ads' videos and the output (for MpvAdSurface, on the loop)

    var outputSize: (width: Int, height: Int) { core.mapping.outputSize }
    /// The item shows a video (on the loop): an audio-only episode has nothing to show an ad over.
    var showsVideo: Bool { core.mapping.showsVideo }
    /// Whether the item shows a video: nil until mpv has loaded it and said (on the loop).
    public var videoShown: Bool? { (try? loop.sync { core.mapping.videoSelected }) ?? nil }

    func attach(_ surface: any MpvOutputListener) {
        loop.requireInLoop()
        core.listener = surface
    }

    /// Plays an ad's video in this mpv's output, replacing what is there, at 1× and unpaused
    /// whatever the content's speed and pause flag are (per-file options: mpv restores them
    /// after the file). It is never reported as an item (R8); its progress and end go to the
    /// attached surface. `completion` gets its playlist entry id (mpv answers before the
    /// file starts, so the entry is known to be an ad's by then).
    func playAd(_ location: String, loudness: LoudnessDecision?, completion: @escaping (Result<Int64, any Error>) -> Void) {
        do {
            try Self.checkThreads(location)
        } catch {
            completion(.failure(error))
            return
        }
        core.playAd(location, audioFilter: Self.audioFilter(loudness)) { completion($0.mapError { $0 }) }
    }

    /// Stops an ad's video if it has not ended yet (it replaced everything, so it is what plays).
    func stopAd(_ entry: Int64) { core.stopAd(entry) }


    /// On the loop: the mpv handle, for the surface's drawing commands.
    var drawingHandle: MpvHandle { handle }

    /// Tests: `tap` sees every mpv event on the loop, after the mapping has applied it.
    func tapEvents(_ tap: @escaping @Sendable (MpvEvent) -> Void) {
        try? loop.sync { core.tap = tap }
    }

    // MARK: Files

    /// Threads mpv starts to play a file (demuxer, decoders, output, audio, cache): 7 measured
    /// on libmpv 0.35 with video and audio, and one to spare.
    static let threadsToPlay = 8

    /// Refuses a load when the process may not start the threads mpv needs for it: libmpv
    /// 0.35 then crashes (SIGSEGV in its core thread) or fails without a reason. A
    /// `PlayerFailure` `no-threads` naming the likely limits; nothing is handed to mpv.
    /// The ad's audio filter (mpv's `af`, a per-file option: the content's chain is untouched
    /// and comes back after the ad's file) for its level (R28): one static gain for the whole
    /// ad (libavfilter's `volume`, no pumping), or, for an ad that could not be measured ahead,
    /// a single-pass `loudnorm` toward the target. Numbers only: nothing from outside is in it.
    static func audioFilter(_ loudness: LoudnessDecision?) -> String? {
        guard let loudness else { return nil }
        if let gain = loudness.gain, gain.isFinite {
            return gain == 0 ? nil : String(format: "lavfi=[volume=%.2fdB]", gain)
        }
        if loudness.dynamic, let target = loudness.target, target.isFinite {
            return String(format: "lavfi=[loudnorm=I=%.1f:TP=%.1f]", max(-70, min(-5, target)), LoudnessDecision.peakCeiling - 1)
        }
        return nil
    }

    static func checkThreads(_ path: String) throws {
        guard let code = threadHeadroom(threadsToPlay) else { return }
        throw PlayerFailure(entry: -1, path: path, code: "no-threads",
                            message: "cannot start the \(threadsToPlay) threads mpv needs to play it: \(String(cString: strerror(code)))"
                                + " — the process may start no more threads (ulimit -u, systemd's TasksMax=, a container's pid limit)")
    }

    /// A local file mpv may open: `SafeFile`'s check (a readable regular file, symlinks
    /// resolved), and not empty. URLs are mpv's to open.
    static func checkLocalFile(_ path: String) throws {
        if path.contains("://") { return }
        let checked: SafeFile.Checked
        do {
            checked = try SafeFile.check(path)
        } catch {
            let code = switch error.kind {
            case .missing: "not-found"
            case .notRegular: "not-a-file"
            default: "not-readable"
            }
            throw PlayerFailure(entry: -1, path: path, code: code, message: error.description)
        }
        guard checked.size > 0 else { throw PlayerFailure(entry: -1, path: path, code: "empty", message: "empty file: \(path)") }
    }
}

extension MpvPlayer: BreakablePlayer {
    /// On the loop: the item stops for a linear break at `position` (`.held`). The ad's video,
    /// loaded next, replaces its file in mpv; the item stays in (R10).
    public func holdForBreak(at position: Double) {
        loop.requireInLoop()
        core.holdForBreak(at: position)
    }

    /// On the loop: the held item's file is loaded again at `position` (`start=`, a precise
    /// seek): the same item comes back and plays (`.playing`).
    public func resumeAfterBreak(at position: Double) {
        loop.requireInLoop()
        core.resumeAfterBreak(at: position)
    }
}

/// The player's state on its loop: the mapping, the feed, the ads' surface.
///
/// Threading contract: loop-only (every method runs on `handle`'s loop, and checks it).
final class PlayerCore: @unchecked Sendable {
    // @unchecked: every stored var is touched only on the loop.
    let handle: MpvHandle
    var mapping: MpvPlayerMapping
    let feed: PlayerChangeFeed
    weak var player: MpvPlayer?
    /// The ad surface drawing into this mpv, told about its ads' videos and the output size.
    weak var listener: (any MpvOutputListener)?
    private let onLog: @Sendable (MpvLogMessage) -> Void
    /// The mapping's rare read-backs (see `MpvPlayerMapping`), built once.
    private let query: MpvPlayerMapping.Query
    /// The daemon's: told of window and duration changes.
    var detailChanged: (@Sendable (MpvDetailChange) -> Void)?
    /// The content's volume as last set (mpv's default, 100, until then), and the ads' audio.
    var contentVolume = 100.0
    var adVolumeShare = 1.0
    /// Tests: sees every event after the mapping (`MpvPlayer.tapEvents`).
    var tap: (@Sendable (MpvEvent) -> Void)?

    init(handle: MpvHandle, mapping: MpvPlayerMapping, onLog: @escaping @Sendable (MpvLogMessage) -> Void) {
        self.handle = handle
        self.mapping = mapping
        self.onLog = onLog
        feed = PlayerChangeFeed(loop: handle)
        query = MpvPlayerMapping.Query(
            pause: { (try? handle.get("pause", as: .flag))?.flag },
            eofReached: { (try? handle.get("eof-reached", as: .flag))?.flag },
            timePos: { (try? handle.get("time-pos", as: .double))?.double },
            path: { (try? handle.get("path", as: .string))?.string },
            vid: { (try? handle.get("vid", as: .string))?.string })
    }

    func handle(_ event: MpvEvent, receivedAt: UInt64) {
        handle.requireInLoop()
        if case .log(let message) = event {
            onLog(message)
            return
        }
        switch event {
        case .startFile, .endFile:
            pendingSeek = nil   // it was for the item that is gone (before observers hear of the new one)
        default:
            break
        }
        let events = mapping.apply(event, now: receivedAt, query: query)
        if let paused = mapping.takeAdPauseToApply() { try? handle.set("pause", paused) }
        publish(events)
        if case .fileLoaded = event, let seek = pendingSeek, !mapping.isLoadingItem {
            pendingSeek = nil
            issueSeek(seek.seconds, relative: seek.relative)
        }
        tap?(event)
    }

    func setPaused(_ paused: Bool) throws {
        handle.requireInLoop()
        try handle.set("pause", paused)
        publish(mapping.applyOwnPause(paused, now: handle.now()))
    }

    /// A seek asked for while mpv is still opening the item: mpv refuses seeks then, so it is
    /// made when the file is loaded, before playback starts (it lands as the item's start).
    private var pendingSeek: (seconds: Double, relative: Bool)?

    func seek(_ seconds: Double, relative: Bool) {
        handle.requireInLoop()
        if mapping.isLoadingItem {
            switch (pendingSeek, relative) {
            case (let pending?, true): pendingSeek = (pending.seconds + seconds, pending.relative)
            default: pendingSeek = (seconds, relative)
            }
            return
        }
        issueSeek(seconds, relative: relative)
    }

    private func issueSeek(_ seconds: Double, relative: Bool) {
        handle.commandAsync(["seek", String(seconds), relative ? "relative" : "absolute", "exact"]) { [weak self] result in
            if case .success = result { self?.mapping.ownSeekAccepted() }
        }
    }

    func load(_ path: String, mode: MpvPlayer.LoadMode, options: [String: String],
              completion: @escaping (Result<Int64, MpvError>) -> Void) {
        handle.requireInLoop()
        var args = ["loadfile", path, mode.rawValue]
        if !options.isEmpty {
            args.append(options.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: ","))
        }
        handle.commandAsync(args) { [weak self] result in
            // mpv answers before START_FILE of the entry: its path is known when it starts.
            completion(result.flatMap { value in
                guard let entry = value["playlist_entry_id"]?.int else {
                    return .failure(MpvError(code: -12, operation: "loadfile (no playlist_entry_id)"))
                }
                self?.mapping.noteLoad(entry: entry, path: path)
                return .success(entry)
            })
        }
    }

    func playAd(_ location: String, audioFilter: String?, completion: @escaping (Result<Int64, MpvError>) -> Void) {
        handle.requireInLoop()
        // Per-file options: mpv restores the content's after the ad's file.
        // keep-open: its last frame stays until the next file replaces it (no black frame
        // between the post-roll and the next episode); its end is told at `eof-reached`.
        var options = String(format: "speed=%g", handle.timeScale) + ",pause=no,keep-open=yes,keep-open-pause=no,loop-file=no"
        options += String(format: ",volume=%.3f", contentVolume * adVolumeShare)
        if let audioFilter { options += ",af=" + audioFilter }
        handle.commandAsync(["loadfile", location, "replace", options]) { [weak self] result in
            completion(result.flatMap { value in
                guard let entry = value["playlist_entry_id"]?.int else {
                    return .failure(MpvError(code: -12, operation: "loadfile (no playlist_entry_id)"))
                }
                self?.mapping.noteAdLoad(entry: entry)
                return .success(entry)
            })
        }
    }

    func holdForBreak(at position: Double) {
        handle.requireInLoop()
        guard let (_, events) = mapping.hold(at: position, now: handle.now()) else { return }
        publish(events)
    }

    func resumeAfterBreak(at position: Double) {
        handle.requireInLoop()
        guard mapping.heldPosition != nil, let path = mapping.item?.path else { return }
        let at = position.isFinite ? position : mapping.heldPosition!
        // Per-file: a precise start at the break's time (`hr-seek`), the rest as the content had it.
        let start = String(format: "%.6f", max(0, at))
        handle.commandAsync(["loadfile", path, "replace", "start=\(start),hr-seek=yes"]) { [weak self] result in
            guard let self, case .success(let value) = result, let entry = value["playlist_entry_id"]?.int else {
                self?.releaseHold()   // mpv refused the load: the item cannot come back
                return
            }
            mapping.noteResume(entry: entry, path: path)
        }
    }

    func releaseHold() {
        handle.requireInLoop()
        publish(mapping.releaseHold(now: handle.now()))
    }

    func stopAd(_ entry: Int64) {
        handle.requireInLoop()
        if mapping.isAdPending(entry) { handle.commandAsync(["stop"]) }
    }

    /// Hands changes to the observers, then the ads' playback and a new output size to the
    /// surface, in this turn.
    private func publish(_ events: [PlayerEvent]) {
        if let player, !events.isEmpty { feed.publish(events, from: player) }
        let adEvents = mapping.takeAdEvents()
        let resized = mapping.takeOutputSizeChange()
        for change in mapping.takeDetailChanges() { detailChanged?(change) }
        if resized { detailChanged?(.outputSize(width: mapping.outputSize.width, height: mapping.outputSize.height)) }
        guard let listener else { return }
        adEvents.forEach { listener.adPlayback($0) }
        if resized { listener.outputResized(width: mapping.outputSize.width, height: mapping.outputSize.height) }
    }
}
