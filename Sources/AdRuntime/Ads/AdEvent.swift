/// Identifies a shown or loaded ad in events, with what was measured at that moment.
public struct AdInfo: Sendable, Equatable {
    /// The presentation id (unique within the process).
    public var id: UInt64
    public var kind: AdKind
    /// The source's id for the creative (`ov-1`, a VAST `Ad` id, a slot id).
    public var creativeID: String
    /// The content id of the episode.
    public var contentID: String
    /// When the event happened, on the loop's clock (ns) — not when a consumer got to it.
    public var at: UInt64 = 0
    /// The content's position then (seconds; `started` and `ended`).
    public var contentPosition: Double?
    /// `ended`: seconds the ad was on a visible output (an overlay frozen while the output was
    /// hidden, a paused post-roll, do not count).
    public var onScreenSeconds: Double?
    /// `started` of an ad with sound: the level it plays at (R28), recorded with its play.
    public var loudness: LoudnessDecision?

    public init(id: UInt64, kind: AdKind, creativeID: String, contentID: String, at: UInt64 = 0,
                contentPosition: Double? = nil, onScreenSeconds: Double? = nil) {
        self.id = id
        self.kind = kind
        self.creativeID = creativeID
        self.contentID = contentID
        self.at = at
        self.contentPosition = contentPosition
        self.onScreenSeconds = onScreenSeconds
    }
}

/// Whether an ad was viewable, as the MRC counts it for a player that knows whether its
/// output is visible (R13 tells): on a visible output, continuously, for 1 s (overlays and
/// pause ads: display) or 2 s (post-rolls: video, playing).
public enum AdViewability: String, Sendable, Equatable {
    /// It met the MRC time.
    case viewable
    /// It ended before it met it.
    case notViewable
    /// Whether it was seen cannot be told (an HTML creative a UI shell draws; an output that
    /// reports nothing, `vo=null`).
    case undetermined
}

/// What the runtime does, in order, as it does it.
public enum AdEvent: Sendable, Equatable {
    /// A request went to the source, with the position it carried (R11).
    case requested(kind: AdKind, contentID: String, position: Double)
    /// The source had nothing for the request: a normal outcome, not an error (R16: the
    /// content plays on). The request's completion gets `AdError.noFill`.
    case noFill(kind: AdKind, contentID: String, position: Double)
    /// The source delivered an ad: the creative, with its tracking URLs.
    case loaded(AdInfo, AdCreative)
    /// It is on screen (overlay, pause ad) or its video started (post-roll).
    case started(AdInfo)
    /// A linear ad's video was paused (true) or resumed (false) — by the viewer, from anywhere.
    case postrollPaused(AdInfo, Bool)
    /// A linear break began: `kind` `.midroll` — the content stopped at `position` for it (not
    /// a pause: no pause ad, no overlay ends `paused`); `.preroll` — the episode waits for it.
    case breakStarted(kind: AdKind, contentID: String, position: Double)
    /// The break is over: a mid-roll's content resumes at `position`; a pre-roll's episode starts.
    case breakEnded(kind: AdKind, contentID: String, position: Double)
    /// A linear ad passed a quartile (1: first quartile, 2: midpoint, 3: third quartile).
    case quartile(AdInfo, Int)
    /// A post-roll's video passed one of its creative's `progress` offsets (`00:00:05`, `25%`),
    /// at `adPlayhead` seconds into the video. Once per offset.
    case progress(AdInfo, offset: String, adPlayhead: Double)
    /// A linear ad's icon `index` (of its creative's `icons`) was drawn: once per icon (R27).
    case iconShown(AdInfo, index: Int)
    /// Whether it was viewable (`AdViewability`): once per ad that started — as soon as it met
    /// the MRC time, or at its end (before `ended`) when it did not or cannot be told.
    case viewability(AdInfo, AdViewability)
    /// It ended. `latencyMicroseconds`: from the moment the player learned of the change
    /// that ended it to the moment the surface was told to take it down; nil when no
    /// player change caused the end (its duration ran out, it was closed, destroyed).
    case ended(AdInfo, reason: AdEndReason, latencyMicroseconds: UInt64?)
    /// The tracked episode played to its end: post-roll time. The app shows its post-roll
    /// from here (a player observer of its own may see the end before the runtime does).
    case contentEnded(contentID: String)
    /// A request or a show failed; the content plays on (R16).
    case error(kind: AdKind, creativeID: String?, error: AdError)
}
