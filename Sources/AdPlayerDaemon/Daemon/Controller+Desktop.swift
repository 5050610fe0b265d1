import AdRuntime
import AdTracking
import ControlProtocol
import Foundation

extension Controller {
    // MARK: Desktop media controls

    /// What MPRIS shows: built on the loop from the model, the queue and the post-roll.
    public func desktopState() -> DesktopState {
        player.loop.requireInLoop()
        let snapshot = player.snapshot()
        var state = DesktopState()
        state.linearAd = linearAd != nil || adBreak != nil
        state.rate = state.linearAd ? 1 : speedSetting   // a linear ad plays at its own pace
        state.position = snapshot.position
        state.at = MonotonicTime.now()
        state.loop = loopOn
        state.repeatMode = queue.repeatMode
        state.shuffle = queue.shuffle
        state.volume = muted ? 0 : volume / 100
        state.canPlay = episode != nil || !queue.isEmpty
        guard let episode else { return state }
        state.track = episode.track
        state.length = snapshot.item != nil ? player.duration() : nil
        if let linearAd {
            state.status = linearAd.paused ? .paused : .playing
            state.position = 0
        } else if snapshot.item != nil {
            state.status = snapshot.playing ? .playing : .paused
            state.moving = snapshot.playing
        } else {
            state.status = .playing   // loading, or between the end and the post-roll
        }
        state.canPause = true
        state.canSeek = linearAd == nil && adBreak == nil && snapshot.item != nil
        state.canGoNext = linearAd == nil && adBreak == nil && (current.map { queue.hasNext(after: $0) } ?? false)
        state.canGoPrevious = linearAd == nil && adBreak == nil && (current.map { queue.previous(before: $0) != nil } ?? false)
        return state
    }

    func publishDesktop(seekedTo: Double? = nil) {
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
    func publishMetrics() {
        guard let metrics else { return }
        let playing = linearAd.map { !$0.paused } ?? (episode != nil && player.snapshot().playing)
        let item = episode.map { [$0.entry.path, $0.entry.contentID] }
        guard playing != publishedPlaying || item != publishedItem else { return }
        publishedPlaying = playing
        publishedItem = item
        metrics.set("adplayerd_playing", [:], playing ? 1 : 0)
        metrics.clear("adplayerd_item_info")
        if let item { metrics.set("adplayerd_item_info", ["path": item[0], "content_id": item[1]], 1) }
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
    /// A linear ad or its break has the screen: `Rate` reads 1 and a write of it is refused.
    public var linearAd = false

    public init() {}

    /// The position now, extrapolated from the last change (never past the length).
    public func position(now: UInt64) -> Double {
        guard moving, now > at else { return position }
        let moved = position + Double(now - at) / 1e9 * rate
        return length.map { min(moved, $0) } ?? moved
    }
}
