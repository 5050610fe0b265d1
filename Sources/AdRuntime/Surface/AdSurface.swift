/// One ad as the surface is asked to show it.
public struct AdPresentation: Sendable, Equatable {
    /// Unique per shown ad within a process: the key for `dismiss` and reports.
    public var id: UInt64
    public var kind: AdKind
    public var creative: AdCreative

    public init(id: UInt64, kind: AdKind, creative: AdCreative) {
        self.id = id
        self.kind = kind
        self.creative = creative
    }
}

/// A surface is where ads appear: mpv's own output (`MpvAdSurface`), a UI shell, a test's.
///
/// Threading contract: the runtime calls these methods with its own lock held, on the
/// thread where it decided (for an end caused by the player: the thread that delivered the
/// player's change), so that an ad is taken down in the same step in which it ended. They
/// must return promptly and must not call back into the runtime synchronously; reports
/// about a post-roll go through the `PostrollReporter`, from any thread, later.
public protocol AdSurface: AnyObject, Sendable {
    /// Puts an overlay or a pause ad up. Throws when the creative cannot be shown (R16).
    func present(_ presentation: AdPresentation) throws
    /// Takes an overlay or a pause ad down. Idempotent.
    func dismiss(_ id: UInt64)
    /// Starts a post-roll's video; progress and its end arrive through `reporter`.
    func playPostroll(_ presentation: AdPresentation, reporter: PostrollReporter) throws
    /// Stops a post-roll's video (closed, destroyed, content changed). Idempotent.
    func stopPostroll(_ id: UInt64)
}
