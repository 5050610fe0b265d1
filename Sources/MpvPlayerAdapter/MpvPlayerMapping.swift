import AdRuntime

/// The mapping of mpv's events and properties onto the player model (SPEC §2), as a pure
/// state machine: events in, player changes out. `MpvPlayer` feeds it on the event thread
/// (and with the effects of its own commands); tests can feed it directly.
///
/// | fact     | from mpv |
/// |----------|----------|
/// | item     | `START_FILE` of an entry (playlist entry id + path + loop index); a loop wrap; a replay after the end |
/// | position | `time-pos`, clamped at 0; unavailable ⇒ last known (0 for a new item) |
/// | playing  | `pause == no`, `eof-reached != yes`, a file loaded and started (`FILE_LOADED`, then the first `PLAYBACK_RESTART`); buffering is ignored |
/// | rate     | `speed` while playing, else 0 |
/// | seek     | `SEEK` then `PLAYBACK_RESTART` (a restart without `SEEK` is a file start); backstop: a jump of `time-pos` that `speed × elapsed` does not explain |
/// | ended    | `eof-reached == yes` (keep-open) or `END_FILE` reason `eof` |
///
/// Loop wraps: mpv implements `loop-file` as a seek to the start with no event of its own
/// (measured: `SEEK`, `PLAYBACK_RESTART`, `eof-reached` stays `no`). A `SEEK` that we did
/// not issue, while `loop-file` is on and the position is within `wrapWindow` of the end, is
/// taken as a wrap if it lands near the start; anything else is a seek.
///
/// File start: a `SEEK` between `FILE_LOADED` and the first `PLAYBACK_RESTART` is mpv
/// applying a start position (`start=`), part of loading, not a seek; the item plays from
/// the first `PLAYBACK_RESTART`.
struct MpvPlayerMapping {
    /// Properties the adapter observes, with their observation ids. `eof-reached` comes
    /// before `pause`, so that when both changed mpv reports the end first (R2).
    enum Observed: UInt64, CaseIterable {
        case eofReached = 1, pause, speed, timePos, duration, loopFile, path
        /// Not player-model facts: the size ads are placed in.
        case osdWidth, osdHeight, videoWidth, videoHeight

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
            }
        }

        var format: MpvFormat {
            switch self {
            case .eofReached, .pause: .flag
            case .speed, .timePos, .duration: .double
            case .loopFile, .path: .string
            case .osdWidth, .osdHeight, .videoWidth, .videoHeight: .int
            }
        }
    }

    /// What the mapping may read from mpv synchronously, on the event thread, when a
    /// property change alone cannot be trusted to have arrived yet.
    struct Query {
        var pause: () -> Bool?
        var eofReached: () -> Bool?
        var timePos: () -> Double?
        var path: () -> String?
    }

    /// What happens to an ad's video played in the same mpv (R8): never an item.
    enum AdPlayback: Equatable {
        case started(entry: Int64)
        case progress(entry: Int64, position: Double, duration: Double)
        /// Paused (true) or resumed (false) while it plays.
        case paused(entry: Int64, Bool)
        /// Played to its end, or stopped: `error` is nil. Could not be played: mpv's reason.
        case ended(entry: Int64, error: String?)
    }

    private struct Seek {
        var from: Double
        var wrap: Bool
    }

    /// The position backstop (a jump that rate × elapsed does not explain); off when mpv
    /// runs `untimed`, where position legitimately outruns the wall clock.
    var backstopEnabled = true
    /// Forward slack of the backstop, in seconds of content.
    var backstopSlack = 1.0

    // Paths of entries we loaded ourselves, by playlist entry id.
    private var knownPaths: [Int64: String] = [:]
    private var currentEntry: Int64?
    private var loaded = false
    private var started = false
    private(set) var item: PlayerItem?
    /// The item that played to its end while its file stays open (keep-open): a seek back
    /// into it replays it as the next loop.
    private var endedItem: PlayerItem?
    private var pause = false
    private var eof: Bool?
    private var speed = 1.0
    private var position = 0.0
    private var positionAt: UInt64 = 0
    private var duration: Double?
    private var loopFile = false
    private var seek: Seek?
    private var ownSeeksPending = 0
    private var publishedPlaying = false
    private var publishedRate = 1.0
    /// Entries loaded as ads' videos, and the one playing now.
    private var adEntries: Set<Int64> = []
    private var adPlaying: Int64?
    private var adDuration: Double?
    private var adEvents: [AdPlayback] = []
    private var osd = (width: 0, height: 0)
    private var video = (width: 0, height: 0)
    private var outputSizeChanged = false

    var playing: Bool { publishedPlaying }

    func snapshot() -> PlayerSnapshot {
        guard item != nil else { return .empty }
        var clamped = max(0, position)
        if let duration, duration > 0 { clamped = min(clamped, duration) }
        return PlayerSnapshot(item: item, position: clamped, playing: publishedPlaying, rate: speed)
    }

    // MARK: Our own commands

    mutating func noteLoad(entry: Int64, path: String) {
        knownPaths[entry] = path
    }

    /// A pause or play that our own command path set successfully: it takes effect here at
    /// once, because mpv may coalesce a short pause into no notification at all (notes §3.3).
    mutating func applyOwnPause(_ paused: Bool) -> [PlayerChange] {
        var out: [PlayerChange] = []
        if let entry = adPlaying, paused != pause { adEvents.append(.paused(entry: entry, paused)) }
        pause = paused
        recompute(&out)
        return out
    }

    /// `entry` is an ad's video: it is never an item of the player model (R8).
    mutating func noteAdLoad(entry: Int64) { adEntries.insert(entry) }

    /// The ad's video was loaded and has not ended.
    func isAdPending(_ entry: Int64) -> Bool { adEntries.contains(entry) }

    /// Ad playback events since the last call.
    mutating func takeAdEvents() -> [AdPlayback] {
        defer { adEvents = [] }
        return adEvents
    }

    /// The size to place ads in: mpv's OSD, else the video's display size, else 1280×720
    /// (headless, `vo=null` has no OSD).
    var outputSize: (width: Int, height: Int) {
        if osd.width > 0, osd.height > 0 { return osd }
        if video.width > 0, video.height > 0 { return video }
        return (1280, 720)
    }

    /// True once after the output size changed.
    mutating func takeOutputSizeChange() -> Bool {
        defer { outputSizeChanged = false }
        return outputSizeChanged
    }

    mutating func noteOwnSeek() { ownSeeksPending += 1 }
    mutating func ownSeekFailed() { ownSeeksPending = max(0, ownSeeksPending - 1) }

    // MARK: mpv's events

    mutating func apply(_ event: MpvEvent, now: UInt64, query: Query) -> [PlayerChange] {
        var out: [PlayerChange] = []
        if applyAd(event, query, &out) {
            recompute(&out)
            return out
        }
        switch event {
        case .startFile(let entry):
            if item != nil { item = nil }
            currentEntry = entry
            loaded = false
            started = false
            eof = nil
            seek = nil
            endedItem = nil
            ownSeeksPending = 0
            position = 0
            positionAt = now
            duration = nil
            let path = knownPaths[entry] ?? query.path() ?? ""
            enterItem(PlayerItem(entry: entry, path: path), &out)

        case .endFile(let entry, let reason):
            let path = knownPaths.removeValue(forKey: entry) ?? item?.path ?? ""
            guard entry == currentEntry else {
                if case .error(let error) = reason { out.append(.failed(failure(entry, path, error))) }
                break
            }
            loaded = false
            started = false
            currentEntry = nil
            endedItem = nil
            switch reason {
            case .eof:
                if let item { end(item, &out) }
            case .error(let error):
                leaveItem(&out)
                out.append(.failed(failure(entry, path, error)))
            default:
                leaveItem(&out)
            }

        case .fileLoaded:
            if currentEntry != nil {
                loaded = true
                position = 0
                positionAt = now
            }

        case .seek:
            guard loaded, started else { break }
            let ours = ownSeeksPending > 0
            if seek == nil {
                let nearEnd = duration.map { position >= $0 - wrapWindow } ?? false
                seek = Seek(from: position, wrap: !ours && loopFile && nearEnd && item != nil)
            }

        case .playbackRestart:
            guard loaded else { break }
            ownSeeksPending = 0
            if !started {
                started = true
                break
            }
            guard let pending = seek else { break }
            seek = nil
            let to = max(0, query.timePos() ?? position)
            position = to
            positionAt = now
            if item == nil {
                // A seek in a file that had played to its end (keep-open): back into it?
                if query.eofReached() == false { replay(&out) }
            } else if pending.wrap && to < wrapWindow, let current = item {
                enterItem(current.nextLoop(), &out)
            } else {
                out.append(.seeked(from: pending.from, to: to))
            }

        case .property(let id, _, let value):
            guard let property = Observed(rawValue: id) else { break }
            applyProperty(property, value, now: now, query: query, &out)

        default:
            break
        }
        recompute(&out)
        return out
    }

    /// Handles `event` if it concerns an ad's video; false if it is the content's.
    private mutating func applyAd(_ event: MpvEvent, _ query: Query, _ out: inout [PlayerChange]) -> Bool {
        switch event {
        case .startFile(let entry) where adEntries.contains(entry):
            // The content (played to its end, or stopped) is gone from mpv; no item comes in.
            leaveItem(&out)
            currentEntry = entry
            loaded = false
            started = false
            eof = nil
            endedItem = nil
            seek = nil
            adPlaying = entry
            adDuration = nil
            adEvents.append(.started(entry: entry))
            return true
        case .endFile(let entry, let reason) where adEntries.contains(entry):
            adEntries.remove(entry)
            if adPlaying == entry {
                adPlaying = nil
                currentEntry = nil
            }
            if case .error(let error) = reason {
                adEvents.append(.ended(entry: entry, error: error.message))
            } else {
                adEvents.append(.ended(entry: entry, error: nil))
            }
            return true
        default:
            break
        }
        guard let entry = adPlaying else { return false }
        if case .property(let id, _, let value) = event, let property = Observed(rawValue: id) {
            switch property {
            case .timePos:
                if let position = value.double { adEvents.append(.progress(entry: entry, position: max(0, position), duration: adDuration ?? 0)) }
            case .duration:
                adDuration = value.double
            case .eofReached, .path, .loopFile:
                break
            case .pause:
                // The flag now, not the notification's snapshot (see applyProperty).
                if let paused = query.pause() ?? value.flag, paused != pause {
                    pause = paused
                    adEvents.append(.paused(entry: entry, paused))
                }
            default:
                return false   // speed and sizes are the player's, whatever plays
            }
        }
        return true
    }

    private mutating func applyProperty(_ property: Observed, _ value: MpvValue, now: UInt64, query: Query,
                                        _ out: inout [PlayerChange]) {
        switch property {
        case .pause:
            // A notification is a snapshot from when mpv made it; our own command may have
            // changed the flag since (a stale `yes` after our play() would be a pause that
            // never was). What counts is the flag now.
            guard let paused = query.pause() ?? value.flag else { return }   // unknown: keep what we knew (R1)
            if paused && !pause && eof != true && loaded, query.eofReached() == true {
                // keep-open's own pause at the end (R2): the end first, and it is no viewer's pause.
                applyEOF(true, &out)
            }
            pause = paused

        case .eofReached:
            applyEOF(value.flag, &out)

        case .speed:
            if let rate = value.double, rate > 0 { speed = rate }

        case .timePos:
            guard let reported = value.double else { return }   // unknown: last known stays
            let new = max(0, reported)
            if backstopEnabled, publishedPlaying, started, seek == nil, item != nil, positionAt > 0 {
                let elapsed = Double(now &- positionAt) / 1e9
                let delta = new - position
                if delta < -0.5 || delta > speed * elapsed + backstopSlack {
                    out.append(.seeked(from: position, to: new))
                }
            }
            position = new
            positionAt = now

        case .duration:
            duration = value.double

        case .loopFile:
            let text = value.string ?? "no"
            loopFile = !(text == "no" || text == "0")

        case .path:
            if let path = value.string, var current = item, current.path.isEmpty {
                current.path = path
                item = current
            }

        case .osdWidth, .osdHeight, .videoWidth, .videoHeight:
            let size = Int(value.int ?? 0)
            let before = outputSize
            switch property {
            case .osdWidth: osd.width = size
            case .osdHeight: osd.height = size
            case .videoWidth: video.width = size
            default: video.height = size
            }
            if outputSize != before { outputSizeChanged = true }
        }
    }

    private mutating func applyEOF(_ value: Bool?, _ out: inout [PlayerChange]) {
        eof = value
        if value == true, loaded, let item {
            end(item, &out)
            endedItem = item
        } else if value == false, loaded, item == nil, endedItem != nil {
            replay(&out)
        }
    }

    // MARK: Helpers

    /// How close to the end a foreign `SEEK` must come, and how close to the start it must
    /// land, to be a loop wrap: two position updates at the current speed, at least 0.5 s.
    private var wrapWindow: Double { 0.5 * max(1, speed) }

    private mutating func enterItem(_ next: PlayerItem, _ out: inout [PlayerChange]) {
        item = next
        publishedPlaying = false
        out.append(.item(next))
    }

    private mutating func leaveItem(_ out: inout [PlayerChange]) {
        guard item != nil else { return }
        item = nil
        publishedPlaying = false
        out.append(.item(nil))
    }

    private mutating func end(_ ended: PlayerItem, _ out: inout [PlayerChange]) {
        publishedPlaying = false
        out.append(.ended(ended))
        leaveItem(&out)
    }

    private mutating func replay(_ out: inout [PlayerChange]) {
        guard let ended = endedItem else { return }
        endedItem = nil
        eof = false
        enterItem(ended.nextLoop(), &out)
    }

    private func failure(_ entry: Int64, _ path: String, _ error: MpvError) -> PlayerFailure {
        PlayerFailure(entry: entry, path: path, code: error.name, message: error.message)
    }

    /// Publishes `.playing` / `.paused` / `.rate` when the derived facts changed.
    private mutating func recompute(_ out: inout [PlayerChange]) {
        let playing = item != nil && loaded && started && !pause && eof != true
        if playing != publishedPlaying {
            publishedPlaying = playing
            out.append(playing ? .playing(rate: speed) : .paused)
        } else if playing && speed != publishedRate {
            out.append(.rate(speed))
        }
        publishedRate = speed
    }
}
