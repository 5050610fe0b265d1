/// A track of the item (`tracks`): an audio, subtitle or video track as the player reads it.
public struct PlayerTrack: Sendable, Equatable {
    public var id: Int
    /// `audio`, `sub` or `video`.
    public var type: String
    public var language: String?
    public var title: String?
    public var codec: String?
    public var selected: Bool
    public var external: Bool

    public init(id: Int, type: String, language: String?, title: String?, codec: String?, selected: Bool, external: Bool) {
        self.id = id
        self.type = type
        self.language = language
        self.title = title
        self.codec = codec
        self.selected = selected
        self.external = external
    }
}

/// An audio output the player can use (`audio-devices`; `name` is what `audio-device` takes).
public struct PlayerAudioDevice: Sendable, Equatable {
    public var name: String
    public var description: String

    public init(name: String, description: String) {
        self.name = name
        self.description = description
    }
}
