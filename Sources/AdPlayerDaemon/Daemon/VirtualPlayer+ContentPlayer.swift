import AdRuntime
import ControlProtocol
import Foundation

/// The virtual player as the box's content player, on virtual time: `adplayerd simulate`,
/// `schedule-check` (docs/simulate.md) and the controller's tests. Loads take its media (each
/// file's length as FFmpeg reads it).
extension VirtualPlayer: ContentPlayer {
    public func load(_ path: String, start: Double?, completion: @escaping @Sendable (Result<Int64, any Error>) -> Void) {
        // A file that cannot be played fails as mpv's does: the load answers, then the entry fails.
        load(path, start: start ?? 0) { entry in completion(.success(entry)) }
    }

    /// Played for `length` seconds when given (an image in a schedule), else the script's length.
    public func load(_ path: String, start: Double?, length: Double?, completion: @escaping @Sendable (Result<Int64, any Error>) -> Void) {
        // A file that cannot be played fails however long it was to play.
        guard let length, playable(path) else { return load(path, start: start, completion: completion) }
        let entry = load(path, duration: length, start: start ?? 0).entry
        loop.run { completion(.success(entry)) }
    }

    public func seek(_ seconds: Double, relative: Bool) throws {
        seek(to: relative ? snapshot().position + seconds : seconds)
    }

    public func setSpeed(_ speed: Double) throws { setRate(speed) }
    // The queue, the modes and the ads are the controller's; audio and the screen are mpv's
    // (DaemonTests check them on real mpv): nothing here.
    public func setVolume(_ percent: Double) throws {}
    public func setMute(_ muted: Bool) throws {}
    public func tracks() -> [PlayerTrack] { [] }
    public func selectTrack(audio: Bool, _ choice: TrackSelection) throws {}
    public func audioDevices() -> [PlayerAudioDevice] { [] }
    public func screenshot(to path: String, withOverlays: Bool, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        loop.run { completion(.failure(ControlError(.unavailable, "no screen"))) }
    }
    public func duration() -> Double? { itemDuration }
    /// The script's media have no chapters.
    public func cuePoints() -> [Double]? { snapshot().item == nil ? nil : [] }
    /// The script's rule: an item whose name is an audio file's shows no video.
    public var videoShown: Bool? {
        guard let path = snapshot().item?.path else { return nil }
        return !["m4a", "mp3", "wav", "flac", "ogg", "opus"].contains((path as NSString).pathExtension)
    }
    public func output() -> PlayerOutput { PlayerOutput(vo: "scripted", hwdecRequested: "no", hwdecCurrent: "no", droppedByDecoder: 0, droppedByOutput: 0) }
    public func showLabel(_ text: String, seconds: Double) throws { screenRecord.label(text, seconds: seconds) }
    public func setBlanked(_ blanked: Bool) throws { screenRecord.blank(blanked) }
    public func onDetailChange(_ handler: @escaping @Sendable (PlayerDetailChange) -> Void) {}
}
