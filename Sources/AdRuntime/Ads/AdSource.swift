/// What the runtime asks a source for (SPEC §4): the content id, the kind and the
/// position — 0 before `track(_:)` and after the tracked item is gone (R11).
public struct AdRequest: Sendable, Equatable {
    public var content: ContentInfo
    public var kind: AdKind
    /// Seconds into the episode.
    public var position: Double
    /// The ad's place in its break: 0 for the first (or only) one; 1, 2… for the next ads of a
    /// post-roll pod (asked for while the one before said more follow: `AdCreative.podRemaining`).
    public var podPosition: Int
    /// Mid-rolls: the content time of the break asked for (the source's next break at or after
    /// it); nil: the next after `position`.
    public var breakTime: Double?

    public init(content: ContentInfo, kind: AdKind, position: Double, podPosition: Int = 0, breakTime: Double? = nil) {
        self.content = content
        self.kind = kind
        self.position = position
        self.podPosition = podPosition
        self.breakTime = breakTime
    }
}

/// Where ads come from: the local catalog, a VAST server, the slots API, or a test's.
///
/// `ad(for:)` returns nil for no fill and throws when it fails. It is called from a task
/// of its own; the runtime gives up on it after its timeout and cancels the task (R16), so
/// a source should honour cancellation but need not enforce a deadline of its own.
public protocol AdSource: Sendable {
    func ad(for request: AdRequest) async throws -> AdCreative?

    /// Whether a request of `kind` for `content` at `position` can be filled at all: false only
    /// when the source knows it has nothing (a catalog with no slot after the position, no
    /// pause ad for this episode), so that no request is made that can only come back empty.
    /// Called on the player's loop: cheap, non-blocking, no I/O. Default: true.
    func mayFill(_ kind: AdKind, content: ContentInfo, at position: Double) -> Bool

    /// Gets ready for `request` ahead of time (asks its server, downloads the creatives), so
    /// that the request itself, when it comes, does not wait for the network. Called on the
    /// player's loop: it returns at once and does the work elsewhere. Default: nothing.
    func prefetch(_ request: AdRequest)

    /// `creative`, which this source (or one it stands for) served, went on screen over
    /// `content`: caps are counted here — when the ad shows, not when it is served. Any thread;
    /// returns at once. Default: nothing.
    func didShow(_ creative: AdCreative, content: ContentInfo)

    /// The content times of the mid-roll breaks `content` has, as far as the source knows now
    /// (a VMAP schedule once it is loaded), in order. Called on the player's loop: cheap,
    /// non-blocking, no I/O. The ad of a break carries its time in `slotStart`. Default: none.
    func midrollTimes(for content: ContentInfo) -> [Double]

    /// The viewing `content.viewing` is over (its `VideoAds` destroyed, or its episode looped
    /// into the next pass, R14): whatever the source kept for it alone (a VMAP schedule and the
    /// breaks it served, a pod) is dropped — the next viewing asks again. Any thread; returns at
    /// once. Default: nothing.
    func endViewing(_ content: ContentInfo)
}

extension AdSource {
    public func mayFill(_ kind: AdKind, content: ContentInfo, at position: Double) -> Bool { true }
    public func prefetch(_ request: AdRequest) {}
    public func didShow(_ creative: AdCreative, content: ContentInfo) {}
    public func midrollTimes(for content: ContentInfo) -> [Double] { [] }
    public func endViewing(_ content: ContentInfo) {}
}
