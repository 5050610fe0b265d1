import AdRuntime
import Foundation

/// The screen of `adplayerd simulate --virtual`: nothing is drawn; an overlay or a pause ad is
/// up from `present` to `dismiss`, and a linear ad's video plays on the loop's virtual time —
/// it shows its first frame at once, reports its position each second of the ad (and at each
/// quartile), and ends at its duration, or when the viewer pauses it, where it was.
///
/// Threading: `present`, `dismiss`, `playPostroll`, `stopPostroll` and `viewerPaused` on the
/// loop (the runtime calls them there; the simulation's viewer too).
public final class SimulatedAdSurface: AdSurface, @unchecked Sendable {
    // @unchecked: `videos` is touched only on the loop.
    private let loop: any PlayerLoop
    private var videos: [UInt64: Video] = [:]

    private struct Video {
        let reporter: PostrollReporter
        let duration: Double
        var position = 0.0
        var paused = false
        var timer: LoopTimer?
        /// When the wait for the next tick began (loop time), while it runs.
        var lastTick: UInt64?
    }

    /// A video file's length as FFmpeg reads it (a creative that does not say its duration).
    private let probe: @Sendable (String) -> Double?

    public init(loop: any PlayerLoop, probe: @escaping @Sendable (String) -> Double? = { _ in nil }) {
        self.loop = loop
        self.probe = probe
    }

    /// Off the loop: a local video without a declared duration is measured (its payload).
    public func prepare(_ creative: AdCreative) async -> PreparedCreative {
        guard creative.duration == nil, case .video(let location) = creative.content else { return .nothing }
        let path = location.hasPrefix("file://") ? String(location.dropFirst(7)) : location
        guard path.hasPrefix("/") else { return .nothing }
        return PreparedCreative(probe(path))
    }

    public func present(_ presentation: AdPresentation) throws {
        loop.requireInLoop()
    }

    public func dismiss(_ id: UInt64) throws {
        loop.requireInLoop()
    }

    public func playPostroll(_ presentation: AdPresentation, reporter: PostrollReporter) throws {
        loop.requireInLoop()
        // A linear creative plays its declared duration, else its file's as measured (`prepare`);
        // 30 s stands in for one that says nothing and cannot be measured (a stream).
        let duration = presentation.creative.duration ?? (presentation.prepared.payload as? Double) ?? 30
        videos[presentation.id] = Video(reporter: reporter, duration: max(0.04, duration))
        reporter.began()
        tick(presentation.id)
    }

    public func stopPostroll(_ id: UInt64) {
        loop.requireInLoop()
        videos.removeValue(forKey: id)?.timer?.cancel()
    }

    /// The viewer paused (true) or played: every linear ad's video does the same.
    public func viewerPaused(_ paused: Bool) {
        loop.requireInLoop()
        for id in videos.keys.sorted() {
            guard var video = videos[id], video.paused != paused else { continue }
            video.paused = paused
            video.timer?.cancel()
            video.timer = nil
            if paused, let started = video.lastTick {
                video.position = min(video.duration, video.position + Double(loop.now() &- started) / 1e9)
            }
            videos[id] = video
            video.reporter.paused(paused)
            if !paused { tick(id) }
        }
    }

    /// Reports the position, then waits for the next second, quartile or the end.
    private func tick(_ id: UInt64) {
        guard var video = videos[id], !video.paused else { return }
        video.reporter.progress(video.position, of: video.duration)
        guard video.position < video.duration else {
            videos[id] = nil
            video.reporter.finished()
            return
        }
        let marks = [1, 2, 3].map { video.duration * Double($0) / 4 } + [video.duration, (video.position + 1).rounded(.down)]
        let next = marks.filter { $0 > video.position + 1e-9 }.min() ?? video.duration
        let step = next - video.position
        video.lastTick = loop.now()
        video.timer = loop.schedule(after: step) { [weak self] in
            guard let self, var video = self.videos[id] else { return }
            video.position = next
            video.lastTick = nil
            self.videos[id] = video
            self.tick(id)
        }
        videos[id] = video
    }
}
