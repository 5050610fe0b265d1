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

    /// Told of every overlay or pause ad put up (true) and taken down (false), on the loop.
    private let onScreen: @Sendable (UInt64, Bool) -> Void

    public init(loop: any PlayerLoop, onScreen: @escaping @Sendable (UInt64, Bool) -> Void = { _, _ in }) {
        self.loop = loop
        self.onScreen = onScreen
    }

    public func present(_ presentation: AdPresentation) throws {
        loop.requireInLoop()
        onScreen(presentation.id, true)
    }

    public func dismiss(_ id: UInt64) throws {
        loop.requireInLoop()
        onScreen(id, false)
    }

    public func playPostroll(_ presentation: AdPresentation, reporter: PostrollReporter) throws {
        loop.requireInLoop()
        // A linear creative without a duration plays as long as its file would: the VAST's
        // duration is required by VAST, so 30 s stands in only for a malformed one.
        let duration = presentation.creative.duration ?? 30
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
