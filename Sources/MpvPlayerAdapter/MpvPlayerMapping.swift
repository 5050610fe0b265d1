import AdRuntime

/// The mapping of mpv's events and properties onto the player model (SPEC §2), as a pure
/// state machine: events in, player changes out, each with the facts right after it.
/// `MpvPlayer` feeds it on its loop (with the effects of its own commands too); tests feed it
/// directly.
///
/// | fact     | from mpv |
/// |----------|----------|
/// | item     | `START_FILE` of an entry (playlist entry id + path + pass); a loop wrap; a replay of an entry that played before (`loop-playlist`, a seek back into a kept-open ended file) is the entry's next pass |
/// | position | `time-pos`, clamped at 0; unavailable ⇒ last known (0 for a new item) |
/// | playing  | `pause == no`, `eof-reached != yes`, a file loaded and started (`FILE_LOADED`, then the first `PLAYBACK_RESTART`); buffering is ignored |
/// | rate     | `speed` while playing, else 0 |
/// | seek     | `SEEK` then `PLAYBACK_RESTART` (a restart without `SEEK` is a file start); backstop: a jump of `time-pos` that `speed × elapsed` does not explain |
/// | ended    | `eof-reached == yes` (keep-open) or `END_FILE` reason `eof`; it carries the position where the item ended (its duration when known) |
///
/// Observed values are used as they arrive; mpv is read back only where a notification
/// alone cannot decide, each case rare and measured (docs/benchmarks.md):
/// - a `pause` notification that contradicts our own latest write (it may be stale: mpv made
///   it before our write, notes §3.3) — read `pause`;
/// - with `keep-open-pause`, a `pause=yes` while the end is not known yet (mpv's own pause at
///   the end can come before `eof-reached`, R2) — read `eof-reached`;
/// - the landing position of a seek at its `PLAYBACK_RESTART` — read `time-pos`;
/// - the path of an entry another client loaded — read `path`.
///
/// Loop wraps: mpv implements `loop-file` as a seek to the start with no event of its own
/// (measured: `SEEK`, `PLAYBACK_RESTART`, `eof-reached` stays `no`). A `SEEK` that we did
/// not issue, while `loop-file` is on and the position is within `wrapWindow` of the end, is
/// taken as a wrap if it lands near the start; anything else is a seek. The position at the
/// `SEEK` is the last `time-pos` carried forward by the time since at the rate: libmpv makes
/// property notifications only when its event queue is empty, so when the loop is behind,
/// `SEEK` comes before the `time-pos` updates of the pass's last frames (a loop stalled over
/// a wrap was measured reporting it as a seek from 0.04 s). A seek is ours once mpv answered
/// our command — it answers before it seeks (measured, 400 of 400) — so a wrap that comes
/// between our command and its answer is still a wrap.
///
/// File start: a `SEEK` between `FILE_LOADED` and the first `PLAYBACK_RESTART` is mpv
/// applying a start position (`start=`), part of loading, not a seek; the item plays from
/// the first `PLAYBACK_RESTART`.
///
/// Linear breaks (mid-rolls): `hold(at:)` keeps the item in, not playing, at the break's
/// time (`.held`, never `.paused`); the ad's video then replaces the content's file in mpv
/// without the item leaving (no `.item(nil)`), and the content's file loaded again at that time
/// (`noteResume`) is the same item coming back (`.playing` once it plays), not a new one — R10's
/// binding holds across the break. A failure of that reload is the item's, under its own entry.
struct MpvPlayerMapping {
    /// Properties the adapter observes, with their observation ids. `eof-reached` comes
    /// before `pause`, so that when both changed mpv reports the end first (R2).
    enum Observed: UInt64, CaseIterable {
        case eofReached = 1, pause, speed, timePos, duration, loopFile, path
        /// Not player-model facts: the size ads are placed in.
        case osdWidth, osdHeight, videoWidth, videoHeight
        /// Not a player-model fact: the output is hidden (R13's background, SPEC §7).
        case windowMinimized
        /// Not a player-model fact: the video track chosen (`no` for an audio-only item).
        case vid

        var name: String {
            switch self {
            case .eofReached: "eof-reached"
            case .pause: "pause"
            case .speed: "speed"
            case .timePos: "time-pos"
            case .duration: "duration"
            case .loopFile: "loop-file"
            case .path: "path"
            case .osdWidth: "osd-width"
            case .osdHeight: "osd-height"
            case .videoWidth: "dwidth"
            case .videoHeight: "dheight"
            case .windowMinimized: "window-minimized"
            case .vid: "vid"
            }
        }

        var format: MpvFormat {
            switch self {
            case .eofReached, .pause, .windowMinimized: .flag
            case .speed, .timePos, .duration: .double
            case .loopFile, .path, .vid: .string
            case .osdWidth, .osdHeight, .videoWidth, .videoHeight: .int
            }
        }
    }

    /// What the mapping may read from mpv synchronously, in the rare cases listed on the type.
    struct Query {
        var pause: () -> Bool?
        var eofReached: () -> Bool?
        var timePos: () -> Double?
        var path: () -> String?
        /// The video track selected, once the file is loaded ("no": audio only).
        var vid: () -> String? = { nil }
    }

    struct Seek {
        var from: Double
        var wrap: Bool
    }

    /// The position backstop (a jump that rate × elapsed does not explain); off when mpv
    /// runs `untimed`, where position legitimately outruns the wall clock.
    var backstopEnabled = true
    /// Forward slack of the backstop, in seconds of content.
    var backstopSlack = 1.0
    /// mpv pauses by itself at the end of a file (`keep-open-pause`, R2).
    var keepOpenPause = false

    /// Entries kept in the bounded tables below (paths of our loads, passes per entry).
    static let rememberedEntries = 256

    // Paths of entries we loaded ourselves, by playlist entry id.
    private var knownPaths: [Int64: String] = [:]
    /// The last pass of each entry that played: a replay is the next one (R14).
    private var passes: [Int64: Int] = [:]
    var currentEntry: Int64?
    var loaded = false
    var started = false
    private(set) var item: PlayerItem?
    /// The item that played to its end while its file stays open (keep-open): a seek back
    /// into it replays it as the next pass.
    var endedItem: PlayerItem?
    var pause = false
    /// Our own latest `pause` write, until mpv's notification of it arrives.
    var ownPause: Bool?
    var eof: Bool?
    private var speed = 1.0
    /// mpv's speed over this is the model's rate (`MpvPlayerConfiguration.timeScale`).
    var timeScale = 1.0
    private var position = 0.0
    private var positionAt: UInt64 = 0
    private var duration: Double?
    private var loopFile = false
    var seek: Seek?
    /// Our seeks that mpv has accepted and not yet made (`ownSeekAccepted`).
    private var ownSeeksPending = 0
    private var publishedPlaying = false
    private var publishedRate = 1.0
    /// Entries loaded as ads' videos, and the one playing now.
    var adEntries: Set<Int64> = []
    var adPlaying: Int64?
    /// The ad's video has started playing: from here a pause change is the viewer's.
    var adSettled = false
    /// The ad's video played to its end and holds its last frame (it is played with
    /// `keep-open`, so that the next file replaces that frame, not a black window): its end is
    /// told at `eof-reached`, and its `END_FILE` later, when the next file comes, is not.
    var adHeld = false
    /// The viewer's own pause or play while the ad's video was still opening: it holds once
    /// the video plays, and is told then (a pause before that has nothing to pause yet).
    var adViewerPause: Bool?
    /// A pause flag mpv must be told again when the ad's video starts (`takeAdPauseToApply`).
    var adPauseToApply: Bool?
    var adDuration: Double?
    var adEvents: [AdPlayback] = []
    private var osd = (width: 0, height: 0)
    private var video = (width: 0, height: 0)
    /// Whether the item has a video track: nil until mpv has chosen (`vid` is `auto` before the
    /// file is loaded), false for `no`.
    private var videoTrack: Bool?
    private var outputSizeChanged = false
    /// mpv's window is minimized (false while there is no window, `vo=null`).
    private(set) var windowMinimized = false
    /// What changed about the output and the item's details since `takeDetailChanges`.
    private var detailChanges: [MpvDetailChange] = []
    /// The changes of the current step, each with the facts right after it.
    private var out: [PlayerEvent] = []
    private var now: UInt64 = 0
    /// A linear break holds the item, to resume at this content time.
    var holdAt: Double?
    /// The entry that loads the held item's file again, once mpv answered the load.
    private var resumeEntry: Int64?
    /// The held item's file is loading again, to play from here (until it plays).
    private var resumingAt: Double?
    /// mpv entries that reloaded an item (a break's resume), by the item's own entry.
    private var aliases: [Int64: Int64] = [:]

    var playing: Bool { publishedPlaying }
    /// The item's file is loaded (its properties, chapters included, can be read).
    var isItemLoaded: Bool { item != nil && loaded }
    /// An item is in (START_FILE) and mpv is still opening it: a seek now would be refused.
    var isLoadingItem: Bool { item != nil && currentEntry != nil && !loaded }

    func snapshot() -> PlayerSnapshot {
        guard item != nil else { return .empty }
        var clamped = max(0, position)
        if let duration, duration > 0 { clamped = min(clamped, duration) }
        return PlayerSnapshot(item: item, position: clamped, playing: publishedPlaying, rate: speed)
    }

    // MARK: Our own commands

    mutating func noteLoad(entry: Int64, path: String) {
        knownPaths[entry] = path
        Self.bound(&knownPaths)
    }

    /// A pause or play of our own: it takes effect here at once (before mpv is even told),
    /// because mpv may coalesce a short pause into no notification at all (notes §3.3).
    mutating func applyOwnPause(_ paused: Bool, now: UInt64) -> [PlayerEvent] {
        begin(now)
        if let entry = adPlaying, adSettled, paused != pause { adEvents.append(.paused(entry: entry, paused)) }
        if adPlaying != nil, !adSettled { adViewerPause = paused }
        pause = paused
        ownPause = paused
        recompute()
        return finish()
    }

    /// A linear break stops the item at `position` (the content's file is about to be replaced
    /// by the ad's): it stays in, not playing (`.held`). Nil when no item is in (nothing held);
    /// else the path to load again at the end of the break.
    mutating func hold(at position: Double, now: UInt64) -> (path: String, events: [PlayerEvent])? {
        begin(now)
        guard let item, holdAt == nil else { return nil }
        holdAt = position
        resumeEntry = nil
        self.position = position
        positionAt = now
        if !publishedPlaying { emit(.held) }   // not playing already (a snapback while paused): said all the same
        recompute()
        return (item.path, finish())
    }

    /// The held item is let go of without coming back (`stop` during a break): it leaves.
    mutating func releaseHold(now: UInt64) -> [PlayerEvent] {
        begin(now)
        guard holdAt != nil else { return [] }
        holdAt = nil
        resumeEntry = nil
        // Its file is gone already (the ad's replaced it): it leaves now; else its END_FILE does.
        if currentEntry.map({ adEntries.contains($0) || $0 == adPlaying }) ?? true { leaveItem() }
        return finish()
    }

    /// The held item's position to resume at, while a break holds it.
    var heldPosition: Double? { holdAt }

    /// mpv answered the reload of the held item's file: `entry` brings the same item back.
    mutating func noteResume(entry: Int64, path: String) {
        guard holdAt != nil, let item else { return }
        resumeEntry = entry
        knownPaths[entry] = path
        aliases[entry] = item.entry
        Self.bound(&aliases)
    }

    /// The size to place ads in: mpv's OSD, else the video's display size, else 1280×720
    /// (headless, `vo=null` has no OSD).
    var outputSize: (width: Int, height: Int) {
        if osd.width > 0, osd.height > 0 { return osd }
        if video.width > 0, video.height > 0 { return video }
        return (1280, 720)
    }

    /// The item has a video (mpv chose a video track): false only once mpv says it has none —
    /// an audio-only episode, whatever the output, nothing an ad could be shown over. Unknown
    /// (before the file is loaded) is not "no".
    var showsVideo: Bool { videoTrack != false }
    /// Whether the item has a video track selected; nil until mpv says (the file not loaded yet).
    var videoSelected: Bool? { videoTrack }

    private mutating func setVideoTrack(_ vid: String?) {
        switch vid {
        case "no", "false": videoTrack = false
        case nil, "auto": videoTrack = nil
        default: videoTrack = true
        }
    }

    /// The item's duration, when the item is in and mpv knows it.
    var itemDuration: Double? { item == nil ? nil : duration.flatMap { $0 > 0 ? $0 : nil } }

    /// What changed about the window and the item's duration since the last call.
    mutating func takeDetailChanges() -> [MpvDetailChange] {
        defer { detailChanges = [] }
        return detailChanges
    }

    /// True once after the output size changed.
    mutating func takeOutputSizeChange() -> Bool {
        defer { outputSizeChanged = false }
        return outputSizeChanged
    }

    /// mpv answered our `seek` command: its `SEEK` is to come (mpv answers before it seeks).
    mutating func ownSeekAccepted() { ownSeeksPending += 1 }

    // MARK: mpv's events

    mutating func apply(_ event: MpvEvent, now: UInt64, query: Query) -> [PlayerEvent] {
        begin(now)
        if applyAd(event, query) {
            recompute()
            return finish()
        }
        switch event {
        case .startFile(let entry) where entry == resumeEntry && holdAt != nil && item != nil:
            // The held item's file again, at the break's time: the same item, not a new one.
            beginFile(entry, at: holdAt ?? position)
            resumingAt = holdAt
            holdAt = nil
            resumeEntry = nil
        case .startFile(let entry):
            holdAt = nil
            resumeEntry = nil
            resumingAt = nil
            leaveItem()
            videoTrack = nil
            beginFile(entry, at: 0)
            let path = knownPaths[entry] ?? query.path() ?? ""
            enterItem(PlayerItem(entry: entry, path: path, loop: passes[entry].map { $0 + 1 } ?? 0))

        case .endFile(let entry, let reason):
            let path = knownPaths.removeValue(forKey: entry) ?? item?.path ?? ""
            guard entry == currentEntry else {
                if case .error(let error) = reason { emit(.failed(failure(entry, path, error))) }
                break
            }
            loaded = false
            started = false
            currentEntry = nil
            endedItem = nil
            if holdAt != nil, item != nil {
                // Replaced by the break's ad (or stopped meanwhile): the item stays held; a failure
                // of its reload is still said.
                if case .error(let error) = reason, let item { emit(.failed(failure(item.entry, path, error))) }
                break
            }
            switch reason {
            case .eof:
                if let item { end(item) }
            case .error(let error):
                leaveItem()
                emit(.failed(failure(entry, path, error)))
            default:
                leaveItem()
            }

        case .fileLoaded:
            if currentEntry != nil {
                loaded = true
                position = resumingAt ?? 0
                positionAt = now
                // Whether the item shows a video is known from here (before it plays): the
                // policy asks for no overlay over an audio-only episode (issue 23).
                if let vid = query.vid() { setVideoTrack(vid) }
            }

        case .seek:
            guard loaded, started else { break }
            let ours = ownSeeksPending > 0
            if seek == nil {
                let nearEnd = duration.map { positionNow >= $0 - wrapWindow } ?? false
                seek = Seek(from: position, wrap: !ours && loopFile && nearEnd && item != nil)
            }

        case .playbackRestart:
            guard loaded else { break }
            ownSeeksPending = 0
            if !started {
                started = true
                if let at = resumingAt {
                    // A break's resume: where mpv's start landed (one read, once a break).
                    resumingAt = nil
                    position = max(0, query.timePos() ?? at)
                    positionAt = now
                }
                break
            }
            guard let pending = seek else { break }
            seek = nil
            // Where it landed: the time-pos notification may still be on its way.
            let to = max(0, query.timePos() ?? position)
            position = to
            positionAt = now
            if item == nil {
                // A seek in a file that had played to its end (keep-open): the `eof-reached`
                // notification that follows decides whether it went back into it.
                break
            } else if pending.wrap && to < wrapWindow, let current = item {
                enterItem(current.nextLoop())
            } else {
                emit(.seeked(from: pending.from, to: to))
            }

        case .property(let id, _, let value):
            guard let property = Observed(rawValue: id) else { break }
            applyProperty(property, value, query: query)

        default:
            break
        }
        recompute()
        return finish()
    }

    private mutating func applyProperty(_ property: Observed, _ value: MpvValue, query: Query) {
        switch property {
        case .pause:
            guard let reported = value.flag else { return }   // unknown: keep what we knew (R1)
            let paused = resolvePause(reported, query)
            if paused && !pause && eof != true && loaded && keepOpenPause, query.eofReached() == true {
                // keep-open's own pause at the end (R2): the end first, and it is no viewer's pause.
                applyEOF(true)
            }
            pause = paused

        case .eofReached:
            applyEOF(value.flag)

        case .speed:
            if let rate = value.double, rate > 0 { speed = rate / timeScale }

        case .timePos:
            guard let reported = value.double else { return }   // unknown: last known stays
            let new = max(0, reported)
            if backstopEnabled, publishedPlaying, started, seek == nil, item != nil, positionAt > 0 {
                let elapsed = Double(now &- positionAt) / 1e9
                let delta = new - position
                if delta < -0.5 || delta > speed * elapsed + backstopSlack {
                    position = new
                    positionAt = now
                    emit(.seeked(from: position - delta, to: new))
                    return
                }
            }
            position = new
            positionAt = now

        case .duration:
            let before = itemDuration
            duration = value.double
            if itemDuration != before { detailChanges.append(.duration(itemDuration)) }

        case .loopFile:
            let text = value.string ?? "no"
            loopFile = !(text == "no" || text == "0")

        case .path:
            if let path = value.string, var current = item, current.path.isEmpty {
                current.path = path
                item = current
            }

        case .osdWidth, .osdHeight, .videoWidth, .videoHeight:
            let size = Int(clamping: value.int ?? 0)
            let before = outputSize
            switch property {
            case .osdWidth: osd.width = size
            case .osdHeight: osd.height = size
            case .videoWidth: video.width = size
            default: video.height = size
            }
            if outputSize != before { outputSizeChanged = true }

        case .vid:
            setVideoTrack(value.string)

        case .windowMinimized:
            let minimized = value.flag ?? false   // no window: not minimized
            if minimized != windowMinimized {
                windowMinimized = minimized
                detailChanges.append(.windowMinimized(minimized))
            }
        }
    }

    /// What a `pause` notification means. Trusted as it is unless it contradicts our own
    /// latest write: then it may be stale (made before the write) or another client's after
    /// it, and the flag now decides — our writes are synchronous, so mpv's answer is definitive.
    mutating func resolvePause(_ reported: Bool, _ query: Query) -> Bool {
        guard let own = ownPause else { return reported }
        if reported == own {
            ownPause = nil   // the echo of our own write
            return reported
        }
        let now = query.pause() ?? reported
        if now != own { ownPause = nil }
        return now
    }

    private mutating func applyEOF(_ value: Bool?) {
        eof = value
        if value == true, loaded, let item {
            end(item)
            endedItem = item
        } else if value == false, loaded, item == nil, let ended = endedItem {
            // Back into a file that had played to its end (keep-open): its next pass.
            endedItem = nil
            enterItem(ended.nextLoop())
        }
    }

    // MARK: Helpers

    /// How close to the end a foreign `SEEK` must come, and how close to the start it must
    /// land, to be a loop wrap: two position updates at the current speed, at least 0.5 s.
    private var wrapWindow: Double { 0.5 * max(1, speed) }

    /// The last `time-pos`, carried forward at the rate while playing (at most to the end).
    private var positionNow: Double {
        guard publishedPlaying, positionAt > 0, now > positionAt else { return position }
        let carried = position + Double(now - positionAt) / 1e9 * speed
        return duration.map { min(carried, max($0, position)) } ?? carried
    }

    private mutating func begin(_ now: UInt64) {
        self.now = now
        out = []
    }

    private mutating func finish() -> [PlayerEvent] {
        defer { out = [] }
        return out
    }

    /// Records `change` with the facts as they are now (after it).
    private mutating func emit(_ change: PlayerChange, snapshot: PlayerSnapshot? = nil) {
        out.append(PlayerEvent(change: change, snapshot: snapshot ?? self.snapshot(), observedAt: now))
    }

    private mutating func enterItem(_ next: PlayerItem) {
        item = next
        passes[next.entry] = next.loop
        Self.bound(&passes)
        publishedPlaying = false
        emit(.item(next))
    }

    mutating func leaveItem() {
        guard item != nil else { return }
        item = nil
        publishedPlaying = false
        emit(.item(nil))
    }

    /// A content file starts: nothing of the one before carries over (its position aside).
    private mutating func beginFile(_ entry: Int64, at start: Double) {
        currentEntry = entry
        loaded = false
        started = false
        eof = nil
        seek = nil
        endedItem = nil
        ownSeeksPending = 0
        position = start
        positionAt = now
        duration = nil
    }

    /// The item played to its end: `.ended` with it at the position where it ended, then
    /// `.item(nil)`. mpv's last `time-pos` can fall short of the duration by a frame or a
    /// coalesced notification: within `endTolerance` of it, the duration. A container that
    /// claims more than it holds (10 h for a 3 s file) is not believed: the last position is
    /// where it really ended (and what `[CONTENTPLAYHEAD]` says of it).
    private mutating func end(_ ended: PlayerItem) {
        publishedPlaying = false
        let at = duration.map { $0 - position <= Self.endTolerance ? max(position, $0) : position } ?? position
        position = at
        emit(.ended(ended), snapshot: PlayerSnapshot(item: ended, position: max(0, at), playing: false, rate: 0))
        leaveItem()
    }

    /// How far short of the duration mpv's last `time-pos` may be at the end and still be the end.
    static let endTolerance = 2.0

    private func failure(_ entry: Int64, _ path: String, _ error: MpvError) -> PlayerFailure {
        PlayerFailure(entry: aliases[entry] ?? entry, path: path, code: error.name, message: error.message)
    }

    /// Publishes `.playing` / `.paused` / `.rate` when the derived facts changed.
    private mutating func recompute() {
        let playing = item != nil && loaded && started && !pause && eof != true && holdAt == nil
        if playing != publishedPlaying {
            publishedPlaying = playing
            emit(playing ? .playing(rate: speed) : holdAt != nil ? .held : .paused)
        } else if playing && speed != publishedRate {
            emit(.rate(speed))
        }
        publishedRate = speed
    }

    /// Keeps a table of entries to `rememberedEntries`, dropping the oldest entries.
    private static func bound<V>(_ table: inout [Int64: V]) {
        guard table.count > rememberedEntries else { return }
        for key in table.keys.sorted().prefix(table.count - rememberedEntries) { table[key] = nil }
    }
}

/// Facts about the output and the item that are not player-model changes, for a daemon's
/// desktop controls: told on the loop (`MpvPlayer.onDetailChange`).
public enum MpvDetailChange: Sendable, Equatable {
    /// mpv's window was minimized (true) or restored: the output is hidden or shown (R13).
    case windowMinimized(Bool)
    /// The item's duration became known, or changed (nil: no item, or unknown).
    case duration(Double?)
    /// The output's size in pixels changed (`[PLAYERSIZE]` for ad servers).
    case outputSize(width: Int, height: Int)
}
