import AdRuntime

/// What the daemon's controller asks of the content player, beyond the player model the ads
/// follow: load an episode, the transport, speed, loop, stop. `MpvPlayer` in the daemon;
/// `VirtualPlayer` on virtual time in the controller's tests.
///
/// Threading: like `TrackablePlayer`. The controller calls these on the player's loop, where
/// each runs inline and costs microseconds (an mpv command handed over, not waited for).
public protocol ContentPlayer: TrackablePlayer {
    /// Puts `path` in the player, replacing what is there, from `start` seconds when given;
    /// `completion` runs on the loop with the player's id for the entry, or why it failed.
    /// On the loop the file is not checked (no disk access on the loop, R18): a file that
    /// cannot be played is reported later as `.failed`.
    func load(_ path: String, start: Double?, completion: @escaping @Sendable (Result<Int64, any Error>) -> Void)
    /// As `load`, played for `length` seconds at most (an image shown that long).
    func load(_ path: String, start: Double?, length: Double?, completion: @escaping @Sendable (Result<Int64, any Error>) -> Void)
    func play() throws
    func pause() throws
    func togglePause() throws
    func seek(_ seconds: Double, relative: Bool) throws
    func setSpeed(_ speed: Double) throws
    func setLoop(_ loop: Bool) throws
    /// Takes the item out.
    func stop() throws
    /// The content's volume, 0–100 %, and mute.
    func setVolume(_ percent: Double) throws
    func setMute(_ muted: Bool) throws
    /// The item's tracks; selecting an audio or subtitle track (`off` for subtitles only).
    func tracks() -> [PlayerTrack]
    func selectTrack(audio: Bool, _ choice: TrackSelection) throws
    /// The audio outputs the player can use.
    func audioDevices() -> [PlayerAudioDevice]
    /// A PNG of what is on screen at `path` — with the ads (`withOverlays`) or the video alone;
    /// `completion` on the loop once it is written.
    func screenshot(to path: String, withOverlays: Bool, completion: @escaping @Sendable (Result<Void, any Error>) -> Void)
    /// Whether the item shows a video (false for an audio-only episode: an overlay or a pause
    /// ad over it would be on no screen, so none is asked for); nil until the player knows
    /// (the file not loaded yet: it is known before it plays). On the loop.
    var videoShown: Bool? { get }
    /// What the output and the decoder do now (on the loop: a few property reads).
    func output() -> PlayerOutput
    /// The output black (true) or showing the video again (false): the display's operating
    /// hours. On the loop.
    func setBlanked(_ blanked: Bool) throws
    /// Shows `text` over everything on the output for `seconds` (`identify`).
    func showLabel(_ text: String, seconds: Double) throws
    /// The item's duration in seconds, when an item is in and it is known.
    func duration() -> Double?
    /// The item's cue points (its chapters' starts after 0, seconds in order) once the item is
    /// loaded; nil before. On the loop (a property read).
    func cuePoints() -> [Double]?
    /// `handler` runs on the loop when the output is hidden or shown by the window system, and
    /// when the item's duration becomes known.
    func onDetailChange(_ handler: @escaping @Sendable (PlayerDetailChange) -> Void)
}

/// What changed about the output and the item besides the player model.
public enum PlayerDetailChange: Sendable, Equatable {
    /// The window was minimized (true) or restored: the output is hidden or shown (R13).
    case windowMinimized(Bool)
    /// The item's duration became known, or changed.
    case duration
    /// The output's size in pixels (`[PLAYERSIZE]`).
    case outputSize(width: Int, height: Int)
}

/// A track to select: one by the player's id, the player's own choice (by the language
/// preferences), or none (subtitles). The daemon's own type: the protocol's `TrackChoice` is
/// read into it by the controller, so that the player knows no wire type.
public enum TrackSelection: Sendable, Equatable {
    case id(Int)
    case auto
    case off
}

extension ContentPlayer {
    /// A player that cannot cut an item plays it whole.
    public func load(_ path: String, start: Double?, length: Double?, completion: @escaping @Sendable (Result<Int64, any Error>) -> Void) {
        load(path, start: start, completion: completion)
    }
}
