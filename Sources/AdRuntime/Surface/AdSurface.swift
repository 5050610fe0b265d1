/// What a surface made of a creative ahead of showing it (decoded pixels, a checked file),
/// or why it cannot show it. Opaque to the runtime, which carries it from `prepare` to
/// `present`/`playPostroll`.
public struct PreparedCreative: Sendable {
    public let payload: (any Sendable)?

    public init(_ payload: (any Sendable)?) {
        self.payload = payload
    }

    /// Nothing was prepared (the surface needs nothing ahead).
    public static let nothing = PreparedCreative(nil)
}

/// One ad as the surface is asked to show it.
public struct AdPresentation: Sendable {
    /// Unique per shown ad within a process: the key for `dismiss` and reports.
    public var id: UInt64
    public var kind: AdKind
    public var creative: AdCreative
    /// What `prepare` returned for this creative.
    public var prepared: PreparedCreative
    /// The creative's measured loudness (off the loop, with its preparation), when measured.
    public var measuredLoudness: Loudness?
    /// A video's: the level it plays at (R28), decided when it starts; nil for no sound or
    /// nothing to apply. The surface applies `gain` (or `dynamic` toward `target`) to the ad's
    /// audio only.
    public var loudness: LoudnessDecision?

    public init(id: UInt64, kind: AdKind, creative: AdCreative, prepared: PreparedCreative = .nothing, measuredLoudness: Loudness? = nil) {
        self.id = id
        self.kind = kind
        self.creative = creative
        self.prepared = prepared
        self.measuredLoudness = measuredLoudness
    }
}

/// A surface is where ads appear: mpv's own output (`MpvAdSurface`), a UI shell, a test's.
///
/// Threading contract (SPEC R18):
/// - `prepare` runs **off** the loop, once per ad the source delivered, before the request
///   completes: everything slow (opening, checking and decoding files) happens there;
/// - the other methods run **on** the player's loop, in the turn that decided, so that an ad
///   is taken down in the same step in which it ended. They must cost microseconds, must not
///   block, and must not call back into the runtime synchronously; reports about a post-roll
///   go through the `PostrollReporter` (from any thread).
public protocol AdSurface: AnyObject, Sendable {
    /// Off the loop: gets `creative` ready to show. A creative that cannot be shown is not an
    /// error here: `present`/`playPostroll` throw for it, and the ad ends as `failed` (R16).
    func prepare(_ creative: AdCreative) async -> PreparedCreative
    /// Puts an overlay or a pause ad up. Throws when the creative cannot be shown (R16).
    func present(_ presentation: AdPresentation) throws
    /// Takes an overlay or a pause ad down. Idempotent. When it returns, the ad is out of
    /// the output's state (the ad's `latency_us` ends here). Throws when the output refused
    /// the removal: the ad still ends, without a latency, and the failure is reported.
    func dismiss(_ id: UInt64) throws
    /// Starts a post-roll's video; progress and its end arrive through `reporter`.
    func playPostroll(_ presentation: AdPresentation, reporter: PostrollReporter) throws
    /// Stops a post-roll's video (closed, destroyed, content changed). Idempotent.
    func stopPostroll(_ id: UInt64)
    /// A squeezeback's next step (R26); `present` started the content's way into its window,
    /// `dismiss` restores the content at once from wherever it is.
    func squeeze(_ id: UInt64, _ step: SqueezeStep)
    /// A linear ad's icon `index` (of its creative's `icons`) goes up or down over its video
    /// (R27). The surface takes its icons down with the video itself.
    func icon(_ id: UInt64, _ index: Int, shown: Bool)
}

/// A squeezeback's steps after `present`.
public enum SqueezeStep: Sendable, Equatable {
    /// The content is in its window: the creative goes up in the space it freed.
    case out
    /// Its time is served: the creative goes down and the content starts back to the whole
    /// output (over the layout's transition; `dismiss` follows at its end).
    case back
}

extension AdSurface {
    /// Surfaces that draw no squeezeback (they show its creative as an overlay's).
    public func squeeze(_ id: UInt64, _ step: SqueezeStep) {}
    /// Surfaces that draw no icons.
    public func icon(_ id: UInt64, _ index: Int, shown: Bool) {}

    /// Surfaces that need nothing ahead.
    public func prepare(_ creative: AdCreative) async -> PreparedCreative { .nothing }
}
