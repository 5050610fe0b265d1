import AdRuntime
import Foundation

/// Several ad sources in order (`ads` given more than once: a VAST tag, then the local
/// catalog): a request goes to each until one fills. A source that fails is reported
/// (`onProblem`) and the next one asked; the request fails only when every source failed, and
/// is no fill when none had an ad. The next ads of a post-roll pod come from the source that
/// served its first.
///
/// Threading: any thread; the pods' sources behind a lock.
public final class FallbackSource: AdSource {
    public struct Member: Sendable {
        /// How the configuration named it (`ads = …`), for messages and `ads-check`.
        public let name: String
        public let source: any AdSource

        public init(name: String, source: any AdSource) {
            self.name = name
            self.source = source
        }
    }

    public let members: [Member]
    private let onProblem: @Sendable (String) -> Void
    /// Which member served the first ad of a content's post-roll pod.
    private let podSource = Locked<[String: Int]>([:])

    public init(_ members: [Member], onProblem: @escaping @Sendable (String) -> Void = { _ in }) {
        self.members = members
        self.onProblem = onProblem
    }

    public func ad(for request: AdRequest) async throws -> AdCreative? {
        if request.podPosition > 0 {
            // The rest of a pod: from its source only.
            guard let index = podSource.withLock({ $0[request.content.viewingKey] }), members.indices.contains(index) else { return nil }
            return try await members[index].source.ad(for: request)
        }
        var failure: (any Error)?
        var answeredNoFill = false
        // A mid-roll's break may lie behind the playhead (a snapback): asked at the break's time.
        let at = request.kind == .midroll ? request.breakTime ?? request.position : request.position
        for (index, member) in members.enumerated()
        where member.source.mayFill(request.kind, content: request.content, at: at) {
            try Task.checkCancellation()
            do {
                if let creative = try await member.source.ad(for: request) {
                    if request.kind.isLinear { podSource.withLock { $0[request.content.viewingKey] = index } }
                    return creative
                }
                answeredNoFill = true
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                failure = failure ?? error
                if index < members.count - 1 { onProblem("ad source \(member.name): \(error); asking the next one") }
            }
        }
        if let failure, !answeredNoFill { throw failure }
        return nil
    }

    public func mayFill(_ kind: AdKind, content: ContentInfo, at position: Double) -> Bool {
        members.contains { $0.source.mayFill(kind, content: content, at: position) }
    }

    /// The first source that may fill gets ready (the others are asked only if it fails then).
    public func prefetch(_ request: AdRequest) {
        members.first { $0.source.mayFill(request.kind, content: request.content, at: request.position) }?.source.prefetch(request)
    }

    /// Every member's breaks, merged as one source merges its own (within 1 ms, one): two
    /// breaks close together are two breaks — each asked for, played or reported by the member
    /// it belongs to, never one hidden behind the other.
    public func midrollTimes(for content: ContentInfo) -> [Double] {
        var times: [Double] = []
        for time in members.flatMap({ $0.source.midrollTimes(for: content) }).sorted() where times.last.map({ time - $0 > 0.001 }) ?? true {
            times.append(time)
        }
        return times
    }

    /// Every member drops what it kept for the viewing; so does the chain (its pod's source).
    public func endViewing(_ content: ContentInfo) {
        _ = podSource.withLock { $0.removeValue(forKey: content.viewingKey) }
        for member in members { member.source.endViewing(content) }
    }

    /// Every member hears of it (each counts only what it served).
    public func didShow(_ creative: AdCreative, content: ContentInfo) {
        for member in members { member.source.didShow(creative, content: content) }
    }
}
