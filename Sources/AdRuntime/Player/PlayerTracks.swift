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

/// What the output and the decoder do now (`status`'s `output`, the health verdict, the
/// dropped-frame counters): each nil where the player does not know it (no video, no item).
public struct PlayerOutput: Sendable, Equatable {
    /// The video output in use (`vo=null` reports "null"); nil before one is made.
    public var vo: String?
    public var width: Int?
    public var height: Int?
    /// Hardware decoding asked for (`hwdec`: "no", "auto", "vaapi"…) and in use ("no" when software decodes).
    public var hwdecRequested: String?
    public var hwdecCurrent: String?
    /// Frames the decoder dropped and the output dropped, for the item now in the player
    /// (they start again from 0 with each item).
    public var droppedByDecoder: Int?
    public var droppedByOutput: Int?
    /// The video's frame rate as the output sees it.
    public var fps: Double?

    public init(vo: String? = nil, width: Int? = nil, height: Int? = nil, hwdecRequested: String? = nil, hwdecCurrent: String? = nil,
                droppedByDecoder: Int? = nil, droppedByOutput: Int? = nil, fps: Double? = nil) {
        self.vo = vo
        self.width = width
        self.height = height
        self.hwdecRequested = hwdecRequested
        self.hwdecCurrent = hwdecCurrent
        self.droppedByDecoder = droppedByDecoder
        self.droppedByOutput = droppedByOutput
        self.fps = fps
    }
}
