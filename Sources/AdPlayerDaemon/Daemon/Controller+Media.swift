import AdRuntime
import AdTracking
import ControlProtocol
import Foundation

extension Controller {
    // MARK: Tracks, outputs, the screen

    /// The item's audio and subtitle tracks (a property read of mpv's: microseconds).
    public func tracks() throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        guard episode != nil, player.snapshot().item != nil else { throw ControlError(.notPlaying, "no episode is in the player") }
        let tracks = player.tracks().filter { $0.type == "audio" || $0.type == "sub" }
        func describe(_ t: PlayerTrack) -> JSONValue {
            ["id": .int(Int64(t.id)), "language": t.language.map { .string($0) } ?? .null, "title": t.title.map { .string($0) } ?? .null,
             "codec": t.codec.map { .string($0) } ?? .null, "selected": .bool(t.selected), "external": .bool(t.external)]
        }
        return ["audio": .array(tracks.filter { $0.type == "audio" }.map(describe)),
                "subtitle": .array(tracks.filter { $0.type == "sub" }.map(describe))]
    }

    public func selectTrack(audio: Bool, _ choice: TrackChoice) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        guard episode != nil, player.snapshot().item != nil else { throw ControlError(.notPlaying, "no episode is in the player") }
        if case .id(let id) = choice, !player.tracks().contains(where: { $0.id == id && $0.type == (audio ? "audio" : "sub") }) {
            throw ControlError(.badArgs, "the episode has no \(audio ? "audio" : "subtitle") track \(id) (`tracks` lists them)")
        }
        let selection: TrackSelection = switch choice {
        case .id(let id): .id(id)
        case .auto: .auto
        case .off: .off
        }
        try onPlayer { try player.selectTrack(audio: audio, selection) }
        let id: JSONValue = switch choice {
        case .id(let id): .int(Int64(id))
        case .auto: "auto"
        case .off: .null
        }
        emit(.playerTrack(type: audio ? "audio" : "subtitle", id: id))
        return try tracks()
    }

    public func audioDevices() -> JSONValue {
        player.loop.requireInLoop()
        return ["devices": .array(player.audioDevices().map { ["name": .string($0.name), "description": .string($0.description)] })]
    }

    /// What is on screen, as a PNG at `path` (a folder of the daemon's, made off the loop).
    public func screenshot(to path: String, withAds: Bool, reply: @escaping @Sendable (Result<JSONValue, ControlError>) -> Void) {
        player.loop.requireInLoop()
        guard episode != nil else { return reply(.failure(ControlError(.notPlaying, "nothing plays: nothing on screen"))) }
        player.screenshot(to: path, withOverlays: withAds) { result in
            switch result {
            case .success: reply(.success(["path": .string(path), "with_ads": .bool(withAds)]))
            case .failure(let error) where withAds:
                // mpv grabs its whole window only from the outputs that can (gpu, drm); x11 and
                // null give the video alone, which is no proof that an ad showed.
                reply(.failure(ControlError(.player, "screenshot: this video output cannot be grabbed with the ads "
                                            + "(vo = gpu or drm can; \(error)); with_ads false gives the video alone")))
            case .failure(let error): reply(.failure(ControlError(.player, "screenshot: \(error)")))
            }
        }
    }
}
