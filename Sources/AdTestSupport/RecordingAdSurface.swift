import AdRuntime

/// An ad surface for tests: records every call and what is on screen now; can be told to
/// refuse creatives. Keeps each post-roll's reporter so that a test can drive the video.
public final class RecordingAdSurface: AdSurface {
    public enum Call: Equatable, Sendable {
        case present(UInt64, String)
        case dismiss(UInt64)
        case playPostroll(UInt64, String)
        case stopPostroll(UInt64)
        case squeeze(UInt64, SqueezeStep)
        case icon(UInt64, Int, Bool)
    }

    public struct Refused: Error, CustomStringConvertible {
        public let description: String
    }

    private struct State {
        var calls: [Call] = []
        var visible: [UInt64: AdPresentation] = [:]
        var reporters: [UInt64: PostrollReporter] = [:]
        var refuse: Set<String> = []
        var refuseRemoval = false
        var silentVideos = false
        var presentCount: [UInt64: Int] = [:]
        var videos: [UInt64: AdPresentation] = [:]
    }

    private let state = Locked(State())
    private let onCall: @Sendable (Call) -> Void

    public init(onCall: @escaping @Sendable (Call) -> Void = { _ in }) {
        self.onCall = onCall
    }

    /// Creatives with this id fail to show.
    public func refuse(creativeID: String) { state.withLock { _ = $0.refuse.insert(creativeID) } }

    public func present(_ presentation: AdPresentation) throws {
        try show(presentation, .present(presentation.id, presentation.creative.id), reporter: nil)
    }

    /// From now on, taking an overlay or pause ad down fails (as an mpv that refuses the removal).
    public func refuseRemoval(_ on: Bool = true) { state.withLock { $0.refuseRemoval = on } }

    public func dismiss(_ id: UInt64) throws {
        if state.withLock({ $0.refuseRemoval }) { throw Refused(description: "the removal was refused") }
        takeDown(id, .dismiss(id))
    }

    public func playPostroll(_ presentation: AdPresentation, reporter: PostrollReporter) throws {
        try show(presentation, .playPostroll(presentation.id, presentation.creative.id), reporter: reporter)
        // A scripted video shows its first frame at once (on the loop's next turn); one that
        // must never show a frame is one this surface refuses.
        if state.withLock({ !$0.silentVideos }) { reporter.began() }
    }

    /// From now on a post-roll's video never shows a frame (its `began` is not told): tests
    /// of a video that loads and never plays.
    public func silenceVideos(_ on: Bool = true) { state.withLock { $0.silentVideos = on } }

    public func stopPostroll(_ id: UInt64) { takeDown(id, .stopPostroll(id)) }

    public func icon(_ id: UInt64, _ index: Int, shown: Bool) {
        state.withLock { $0.calls.append(.icon(id, index, shown)) }
        onCall(.icon(id, index, shown))
    }

    public func squeeze(_ id: UInt64, _ step: SqueezeStep) {
        state.withLock { $0.calls.append(.squeeze(id, step)) }
        onCall(.squeeze(id, step))
    }

    private func show(_ presentation: AdPresentation, _ call: Call, reporter: PostrollReporter?) throws {
        try state.withLock { state in
            if state.refuse.contains(presentation.creative.id) { throw Refused(description: "refused \(presentation.creative.id)") }
            state.calls.append(call)
            state.visible[presentation.id] = presentation
            if let reporter {
                state.reporters[presentation.id] = reporter
                state.videos[presentation.id] = presentation
            } else { state.presentCount[presentation.id, default: 0] += 1 }
        }
        onCall(call)
    }

    private func takeDown(_ id: UInt64, _ call: Call) {
        state.withLock { state in
            state.calls.append(call)
            state.visible[id] = nil
        }
        onCall(call)
    }

    public var calls: [Call] { state.withLock { $0.calls } }
    public var visible: Set<UInt64> { state.withLock { Set($0.visible.keys) } }
    public func isVisible(_ id: UInt64) -> Bool { state.withLock { $0.visible[id] != nil } }
    public func reporter(_ id: UInt64) -> PostrollReporter? { state.withLock { $0.reporters[id] } }
    /// A video ad as it was handed to `playPostroll` (its loudness decision among it).
    public func video(_ id: UInt64) -> AdPresentation? { state.withLock { $0.videos[id] } }
    /// How often each ad was put up (an ad is presented at most once).
    public var presentCounts: [UInt64: Int] { state.withLock { $0.presentCount } }
}

/// Records a `VideoAds`' events and its ads' ends.
public final class AdEventLog: Sendable {
    private let events = Locked<[AdEvent]>([])
    private let ends = Locked<[(UInt64, AdEndReason)]>([])

    public init() {}

    public func record(_ event: AdEvent) { events.withLock { $0.append(event) } }

    /// A `didEnd` for ad `id` that records its reason.
    public func didEnd(_ id: UInt64) -> @Sendable (AdEndReason) -> Void {
        { reason in self.ends.withLock { $0.append((id, reason)) } }
    }

    public var all: [AdEvent] { events.withLock { $0 } }
    public func endReasons(_ id: UInt64) -> [AdEndReason] { ends.withLock { $0.filter { $0.0 == id }.map(\.1) } }
    public var endCount: Int { ends.withLock { $0.count } }

    public var ended: [(AdInfo, AdEndReason, UInt64?)] {
        all.compactMap { if case .ended(let info, let reason, let latency) = $0 { (info, reason, latency) } else { nil } }
    }

    public var errors: [AdError] {
        all.compactMap { if case .error(_, _, let error) = $0 { error } else { nil } }
    }
}
