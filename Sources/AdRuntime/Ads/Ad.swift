import Foundation

/// An ad that a source delivered: shown once, then ended exactly once (R15).
///
/// Threading: any thread. `show` decides on the `VideoAds`' facts as last delivered by the
/// player; `didEnd` runs once, later, with no lock held, in order with the `VideoAds`'
/// other callbacks and events.
public final class Ad: Sendable {
    /// Unique within the process; the surface knows the ad by it.
    public let id: UInt64
    public let kind: AdKind
    public let creative: AdCreative
    private weak let owner: VideoAds?

    init(kind: AdKind, creative: AdCreative, owner: VideoAds) {
        // Random rather than counted: no process-wide counter, and a collision of two
        // live ads in 2^64 is not a concern.
        self.id = UInt64.random(in: 1...UInt64.max)
        self.kind = kind
        self.creative = creative
        self.owner = owner
    }

    deinit { owner?.forget(id) }

    /// Shows it now. An overlay needs playing content, a pause ad paused content, a
    /// post-roll an episode that played to its end. Throws `invalidated(.contentChanged)`
    /// when the player holds another item than this ad's (R10, R14).
    public func show(didEnd: @escaping @Sendable (AdEndReason) -> Void) throws(AdError) {
        try show(.now, didEnd)
    }

    /// Overlays: shows it when playback plays across `seconds` of content time — not when a
    /// seek lands past it (R12). It waits while the content is paused.
    public func show(atContentTime seconds: Double, didEnd: @escaping @Sendable (AdEndReason) -> Void) throws(AdError) {
        try show(.atContentTime(seconds), didEnd)
    }

    /// Pause ads: shows it once the content has stayed paused for `seconds`; a seek in that
    /// time starts the wait again (R7). Ends as `played`, unseen, if the content plays first.
    public func show(afterPausedFor seconds: Double, didEnd: @escaping @Sendable (AdEndReason) -> Void) throws(AdError) {
        try show(.afterPausedFor(seconds), didEnd)
    }

    /// The viewer closed it (or skipped a post-roll): it ends as `closed`.
    public func close() { owner?.close(id) }

    private func show(_ options: ShowOptions, _ didEnd: @escaping @Sendable (AdEndReason) -> Void) throws(AdError) {
        guard let owner else { throw .destroyed }
        try owner.show(id, options: options, didEnd: didEnd)
    }
}

/// How a surface reports on a post-roll's video. Any thread, any time after
/// `playPostroll` returned; reports about an ad that ended already are dropped.
public final class PostrollReporter: Sendable {
    enum Report: Equatable {
        case progress(Double, Double)
        case paused(Bool)
        case finished
        case failed(String)
    }

    private weak let owner: VideoAds?
    public let id: UInt64

    init(owner: VideoAds, id: UInt64) {
        self.owner = owner
        self.id = id
    }

    /// The video is at `position` of `duration` seconds (quartile events follow).
    public func progress(_ position: Double, of duration: Double) { owner?.postrollReport(id, .progress(position, duration)) }
    /// The video was paused (true) or resumed (false).
    public func paused(_ paused: Bool) { owner?.postrollReport(id, .paused(paused)) }
    /// The video played to its end.
    public func finished() { owner?.postrollReport(id, .finished) }
    /// The video could not be played.
    public func failed(_ message: String) { owner?.postrollReport(id, .failed(message)) }
}
