import AdPlayerDaemon
import AdRuntime
import ControlProtocol
import MpvPlayerAdapter

// Where the daemon is assembled: mpv as the daemon's `ContentPlayer`, and mpv's log as the
// daemon's. The daemon library itself knows no mpv (its controller's tests need no libmpv).

extension MpvPlayer: ContentPlayer {
    public func load(_ path: String, start: Double?, completion: @escaping @Sendable (Result<Int64, any Error>) -> Void) {
        load(path, start: start, length: nil, completion: completion)
    }

    /// `length`: mpv's per-file `length` (a file cut) and `image-display-duration` (an image's
    /// time on screen, which mpv otherwise makes 1 s).
    public func load(_ path: String, start: Double?, length: Double?, completion: @escaping @Sendable (Result<Int64, any Error>) -> Void) {
        var options: [String: String] = [:]
        if let start, start > 0.5 { options["start"] = String(format: "%.3f", start) }
        if let length, length.isFinite, length > 0 {
            options["length"] = String(format: "%.3f", length)
            options["image-display-duration"] = String(format: "%.3f", length)
        }
        load(path, mode: .replace, options: options, completion: completion)
    }

    public func selectTrack(audio: Bool, _ choice: TrackSelection) throws {
        let value = switch choice {
        case .id(let id): String(id)
        case .auto: "auto"
        case .off: "no"
        }
        try selectTrack(audio ? "audio" : "sub", value)
    }

    public func screenshot(to path: String, withOverlays: Bool, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        screenshot(to: path, withOverlays: withOverlays) { (result: Result<Void, MpvError>) in completion(result.mapError { $0 }) }
    }

    public func onDetailChange(_ handler: @escaping @Sendable (PlayerDetailChange) -> Void) {
        onMpvDetailChange { change in
            switch change {
            case .windowMinimized(let minimized): handler(.windowMinimized(minimized))
            case .duration: handler(.duration)
            case .outputSize(let width, let height): handler(.outputSize(width: width, height: height))
            }
        }
    }
}

extension Logger {
    /// A message of mpv's: its errors as errors (but the harmless ones), the rest as warnings.
    public func mpv(_ message: MpvLogMessage) {
        let level: LogLevel = message.isKnownHarmless ? .info : message.isError ? .error : .warning
        log(level, "mpv: [\(message.prefix)] \(message.text.trimmingCharacters(in: .newlines))")
    }
}
