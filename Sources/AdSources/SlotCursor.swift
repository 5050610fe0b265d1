import AdRuntime
import Foundation

/// A player's view of a slot-based ad source (the catalog: "a request at position p gets the
/// earliest slot at or after p"): overlay requests look for slots from the cursor on —
/// never at or before the last slot whose overlay ended, until a seek moves the playhead
/// back. Without it, an overlay that ends within a frame of its start (time-pos moves a
/// frame at a time) is served again by the next request. Other requests pass through.
///
/// Threading: any thread; the cursor behind its lock.
public final class SlotCursor: AdSource {
    private let base: any AdSource
    private let from = Locked(0.0)

    public init(_ base: any AdSource) { self.base = base }

    /// A slot starting at `start` is done with: the next request looks after it.
    public func passed(_ start: Double) { from.withLock { $0 = max($0, start + 0.002) } }

    /// The playhead moved to `to`: slots from there on.
    public func seeked(to: Double) { from.withLock { $0 = to } }

    public func ad(for request: AdRequest) async throws -> AdCreative? {
        var request = request
        if request.kind == .overlay { request.position = max(request.position, from.withLock { $0 }) }
        return try await base.ad(for: request)
    }

    public func mayFill(_ kind: AdKind, content: ContentInfo, at position: Double) -> Bool {
        base.mayFill(kind, content: content, at: kind == .overlay ? max(position, from.withLock { $0 }) : position)
    }

    public func prefetch(_ request: AdRequest) { base.prefetch(request) }

    public func didShow(_ creative: AdCreative, content: ContentInfo) { base.didShow(creative, content: content) }

    public func midrollTimes(for content: ContentInfo) -> [Double] { base.midrollTimes(for: content) }

    public func endViewing(_ content: ContentInfo) { base.endViewing(content) }
}
