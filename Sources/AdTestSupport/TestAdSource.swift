import AdRuntime
import Foundation

/// An ad source for tests: answers each kind as scripted and records every request.
public final class TestAdSource: AdSource {
    public enum Behaviour: Sendable {
        case creative(AdCreative)
        case noFill
        case fail(String)
        /// Never answers (until cancelled): the runtime's timeout must end it.
        case never
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    private let behaviours: Locked<[AdKind: Behaviour]>
    private let log = Locked<[AdRequest]>([])
    private let cancellations = Locked(0)

    public init(_ behaviours: [AdKind: Behaviour] = TestAdSource.standard) {
        self.behaviours = Locked(behaviours)
    }

    /// An image overlay of 5 s, an image pause ad, a video post-roll.
    public static let standard: [AdKind: Behaviour] = [
        .overlay: .creative(AdCreative(id: "ov-test", kind: .overlay, content: .image(location: "overlay.png"), duration: 5)),
        .pauseAd: .creative(AdCreative(id: "pa-test", kind: .pauseAd, content: .image(location: "pause.png"))),
        .postroll: .creative(AdCreative(id: "pr-test", kind: .postroll, content: .video(location: "postroll.mp4"))),
    ]

    public func set(_ kind: AdKind, _ behaviour: Behaviour) { behaviours.withLock { $0[kind] = behaviour } }

    /// Pre-rolls and mid-rolls only when the test scripted them (and mid-rolls at `midrolls`);
    /// other kinds always (their requests are part of what tests watch).
    public func mayFill(_ kind: AdKind, content: ContentInfo, at position: Double) -> Bool {
        switch kind {
        case .preroll: behaviours.withLock { $0[kind] != nil }
        case .midroll: midrollTimes(for: content).contains { $0 >= position - 0.001 }
        default: true
        }
    }

    /// The mid-roll breaks the test scripted.
    private let midrolls = Locked<[Double]>([])
    public func setMidrolls(_ times: [Double]) { midrolls.withLock { $0 = times } }

    public func midrollTimes(for content: ContentInfo) -> [Double] {
        behaviours.withLock { $0[.midroll] } == nil ? [] : midrolls.withLock { $0 }.sorted()
    }

    public var requests: [AdRequest] { log.withLock { $0 } }
    public var cancelledCount: Int { cancellations.withLock { $0 } }

    public func ad(for request: AdRequest) async throws -> AdCreative? {
        log.withLock { $0.append(request) }
        switch behaviours.withLock({ $0[request.kind] }) ?? .noFill {
        case .creative(let creative): return creative
        case .noFill: return nil
        case .fail(let why): throw Failure(description: why)
        case .never:
            while !Task.isCancelled { try? await Task.sleep(nanoseconds: 5_000_000) }
            cancellations.withLock { $0 += 1 }
            throw CancellationError()
        }
    }
}

/// Waits for an ad request's completion; the runtime answers from a task of its own.
public func requestAd(_ ads: VideoAds, _ kind: AdKind, timeout: TimeInterval = 10) -> Result<Ad, AdError>? {
    let answer = Handover<Result<Ad, AdError>>()
    ads.request(kind) { answer.fulfil($0) }
    return answer.wait(timeout: timeout)
}
