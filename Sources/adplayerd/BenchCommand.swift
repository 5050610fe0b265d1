import AdRuntime
import Foundation
import MpvPlayerAdapter
import Synchronization

/// `adplayerd bench-latency [--rounds N] FILE`: how long, after mpv reports a pause, the
/// overlay on screen takes to be told to go (R6). Each round shows an overlay over playing
/// content, pauses through another client of the core (as a remote control would), and reads
/// the `ad.ended` latency; then resumes. Prints the distribution. See docs/benchmarks.md.
struct BenchCommand {
    static let usage = """
        usage: adplayerd bench-latency [--rounds N] FILE   pause-to-dismissal latency (docs/benchmarks.md)
        """

    let arguments: [String]

    func run() throws -> Int32 {
        var rounds = 200
        var file: String?
        var rest = arguments[...]
        while let arg = rest.popFirst() {
            switch arg {
            case "--rounds":
                guard let value = rest.popFirst(), let n = Int(value), n > 0 else { throw UsageError(message: "--rounds needs a count") }
                rounds = n
            default:
                if arg.hasPrefix("-") { throw UsageError(message: "unknown option \(arg)") }
                file = arg
            }
        }
        guard let file else { throw UsageError(message: "bench-latency needs a media FILE") }
        let player = try MpvPlayer()
        defer { player.shutdown() }
        let surface = MpvAdSurface(player: player)
        let source = StaticOverlaySource()
        let latencies = Mutex<[UInt64]>([])
        let endToEnd = Mutex<[UInt64]>([])
        let pausedAt = Atomic<UInt64>(0)
        let ended = DispatchSemaphore(value: 0)
        let ads = VideoAds(content: ContentInfo(id: "bench"), source: source, surface: surface) { event in
            if case .ended(_, .paused, let latency?) = event {
                let now = MonotonicTime.now()
                latencies.withLock { $0.append(latency) }
                endToEnd.withLock { $0.append((now &- pausedAt.load(ordering: .acquiring)) / 1000) }
                ended.signal()
            }
        }
        defer { ads.destroy() }
        try player.setLoop(true)
        try player.load(file)
        let client = try player.handle.makeClient(name: "bench-remote")
        defer { client.close() }
        guard waitFor({ player.snapshot().playing }) else { throw UsageError(message: "\(file) does not play") }
        ads.track(player)
        for _ in 0..<rounds {
            guard waitFor({ player.snapshot().playing }) else { break }
            if player.snapshot().item != nil { ads.track(player) }   // loops are new items
            guard case .success(let overlay) = ads.requestBlocking(.overlay), (try? overlay.show { _ in }) != nil else { continue }
            pausedAt.store(MonotonicTime.now(), ordering: .releasing)
            try client.set("pause", true)
            _ = ended.wait(timeout: .now() + 5)
            try client.set("pause", false)
        }
        func report(_ name: String, _ values: [UInt64]) {
            let sorted = values.sorted()
            guard !sorted.isEmpty else { return print("\(name): no round completed") }
            func pct(_ p: Double) -> UInt64 { sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }
            print("\(name), \(sorted.count) rounds: median \(pct(0.5)) µs, p95 \(pct(0.95)) µs, p99 \(pct(0.99)) µs, max \(sorted.last!) µs")
        }
        report("mpv event handled → overlay told to go", latencies.withLock { $0 })
        report("pause set by another client → ad.ended delivered (end to end)", endToEnd.withLock { $0 })
        return 0
    }

    private func waitFor(_ condition: () -> Bool) -> Bool {
        let deadline = Date().addingTimeInterval(10)
        while Date() < deadline {
            if condition() { return true }
            Thread.sleep(forTimeInterval: 0.005)
        }
        return false
    }
}

/// One text overlay, always.
private struct StaticOverlaySource: AdSource {
    func ad(for request: AdRequest) async throws -> AdCreative? {
        AdCreative(id: "bench", kind: .overlay, content: .text("bench"), duration: 60)
    }
}

extension VideoAds {
    /// `request` for synchronous tools (never from a callback).
    func requestBlocking(_ kind: AdKind) -> Result<Ad, AdError> {
        let box = ResultBox<Ad>()
        let done = DispatchSemaphore(value: 0)
        request(kind) { result in
            box.set(result.mapError { $0 as any Error })
            done.signal()
        }
        done.wait()
        return (box.get() ?? .failure(AdError.destroyed)).mapError { ($0 as? AdError) ?? .loadFailed("\($0)") }
    }
}
