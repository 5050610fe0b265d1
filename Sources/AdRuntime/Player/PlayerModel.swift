/// The player model: the facts the ad runtime reads from a content player (SPEC §2).
///
/// A player pushes every change to its observers (R4); the runtime never polls it for
/// pauses or item changes. The position may be read on demand through `snapshot()`.

/// Identity of what is in the player now.
///
/// Two values are equal only when they are the same pass over the same entry: a loop
/// wrap (R14) or a replay after the end is another item, with `loop` one higher. The path
/// describes the item and takes no part in its identity.
public struct PlayerItem: Hashable, Sendable, CustomStringConvertible {
    /// The player's own id for the entry (for mpv: the `playlist_entry_id` of `loadfile`).
    public var entry: Int64
    /// What was loaded.
    public var path: String
    /// 0 for the first pass over the entry, +1 on each loop wrap or replay after its end.
    public var loop: Int

    public init(entry: Int64, path: String, loop: Int = 0) {
        self.entry = entry
        self.path = path
        self.loop = loop
    }

    /// The next pass over the same entry.
    public func nextLoop() -> PlayerItem { PlayerItem(entry: entry, path: path, loop: loop + 1) }

    public var description: String { "#\(entry).\(loop) \(path)" }

    public static func == (a: PlayerItem, b: PlayerItem) -> Bool { a.entry == b.entry && a.loop == b.loop }
    public func hash(into hasher: inout Hasher) {
        hasher.combine(entry)
        hasher.combine(loop)
    }
}

/// The facts at one moment.
public struct PlayerSnapshot: Sendable, Equatable {
    /// What is in the player; nil when nothing is, or the last item played to its end.
    public var item: PlayerItem?
    /// Seconds into the item, ≥ 0 (0 when there is no item).
    public var position: Double
    /// The item is in, is not paused and has not played to its end. Buffering counts as playing.
    public var playing: Bool
    /// Playback speed while playing; 0 while not playing.
    public var rate: Double

    public init(item: PlayerItem?, position: Double, playing: Bool, rate: Double) {
        self.item = item
        self.position = position
        self.playing = playing
        self.rate = playing ? rate : 0
    }

    public static let empty = PlayerSnapshot(item: nil, position: 0, playing: false, rate: 0)
}

/// Why an item could not be played.
public struct PlayerFailure: Error, Sendable, Equatable, CustomStringConvertible {
    /// The entry that failed (the player's id), and what it was.
    public var entry: Int64
    public var path: String
    /// A code a program can match (for mpv: `loading-failed`, `unknown-format`, …).
    public var code: String
    /// A sentence a person can read.
    public var message: String

    public init(entry: Int64, path: String, code: String, message: String) {
        self.entry = entry
        self.path = path
        self.code = code
        self.message = message
    }

    public var description: String { "\(path): \(message) [\(code)]" }
}

/// One change, as a player pushes it.
public enum PlayerChange: Sendable, Equatable {
    /// Another item is in the player (nil: none). Playing restarts from "not playing":
    /// a `.playing` follows when the new item plays.
    case item(PlayerItem?)
    /// The item started or went on playing, at this rate.
    case playing(rate: Double)
    /// The item stopped playing while still in the player: a pause from anywhere (R3).
    /// Not sent for the end of an item (that is `.ended`, R2).
    case paused
    /// The speed changed while playing.
    case rate(Double)
    /// The item stopped for a linear ad break (`BreakablePlayer.holdForBreak`): it stays in,
    /// not playing — not a pause (R3): no pause ad, no overlay ends `paused`. `.playing`
    /// follows when it resumes.
    case held
    /// A time jump of the current item.
    case seeked(from: Double, to: Double)
    /// The item played to its end. An `.item` change (to nil or to the next item) follows.
    case ended(PlayerItem)
    /// An entry could not be played; the player holds no item for it.
    case failed(PlayerFailure)
}

/// A change and the facts right after it.
public struct PlayerEvent: Sendable, Equatable {
    public var change: PlayerChange
    /// The facts right after this change (not after a batch of changes): `.ended` carries the
    /// ended item at the position where it ended, not playing; the `.item(nil)` that follows
    /// carries nothing.
    public var snapshot: PlayerSnapshot
    /// When the player learned of the change, on its loop's clock (nanoseconds; for mpv the
    /// moment `mpv_wait_event` returned the event, `MonotonicTime.now()`); ends of ads report
    /// their latency from here.
    public var observedAt: UInt64

    public init(change: PlayerChange, snapshot: PlayerSnapshot, observedAt: UInt64) {
        self.change = change
        self.snapshot = snapshot
        self.observedAt = observedAt
    }
}

/// Receives a player's changes.
///
/// Threading: called on the player's loop (SPEC R18), one change at a time, in order. An
/// observer may call back into the player (commands, `snapshot()`): they run inline, and
/// the changes they cause are delivered to every observer after the current one. It must
/// return promptly: the player's loop waits for it.
public protocol PlayerObserver: AnyObject, Sendable {
    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent)
}

/// A player that the ad runtime can follow.
///
/// Implementations own their state on their `loop` and push changes to observers through a
/// `PlayerChangeFeed` there; their public calls may be made from any thread (they run on
/// the loop: inline there, handed over and waited for elsewhere).
public protocol TrackablePlayer: AnyObject, Sendable {
    /// The loop that owns the player, on which its changes are delivered.
    var loop: any PlayerLoop { get }
    /// The facts now. On the loop it is a read of the loop's state; elsewhere a hop to the loop.
    func snapshot() -> PlayerSnapshot
    /// Starts pushing changes to `observer`, which is held weakly. The observation ends
    /// when the returned token is cancelled or released, or when the observer is gone.
    /// Registered on the loop, so no change falls between the call and the first delivery.
    /// In `phase` (`ObserverPhase`: the ads, then policies, then reporters).
    func addObserver(_ observer: any PlayerObserver, phase: ObserverPhase) -> PlayerObservation
}

extension TrackablePlayer {
    /// In the ads' phase.
    public func addObserver(_ observer: any PlayerObserver) -> PlayerObservation { addObserver(observer, phase: .ads) }
}

/// A player that can stop its item for a linear ad break and resume the same item after it
/// (mid-rolls): the item stays in (R10's binding holds), its stop is `.held`, never `.paused`.
///
/// Threading: loop-only, like the observers' calls; each costs an mpv command or two.
public protocol BreakablePlayer: TrackablePlayer {
    /// Stops the item where it is, to resume at `position` (`.held`). Nothing if no item is in.
    func holdForBreak(at position: Double)
    /// The held item plays again from `position` — the same item, not a new one (`.playing`
    /// once it plays). Nothing if none is held.
    func resumeAfterBreak(at position: Double)
}
