import AdRuntime
import AdSources
import ControlProtocol
import Foundation
@_spi(Foreign) @_spi(Bench) import MpvPlayerAdapter

/// `adplayerd bench-latency [--rounds N] [--idle S] FILE`: how fast an overlay goes when the
/// content pauses (R6), measured three ways in one run, for a text and an image overlay, and
/// how often the process wakes while paused with nothing scheduled. Method in
/// docs/benchmarks.md.
///
/// Each round shows an overlay over playing content, then pauses from **another client of
/// the same mpv core** (a remote control, a script, mpv's IPC), at `t0`:
/// - mpv's floor: `t0` → our loop took the `pause` PROPERTY_CHANGE off `mpv_wait_event`;
/// - `latency_us`: that moment → mpv's removal of the overlay returned (the `ad.ended` field);
/// - end to end: `t0` → `ad.ended` handed to the app.
struct BenchCommand {
    static let usage = """
        usage: adplayerd-dev bench-latency [--rounds N] [--idle S] [--measure-loudness EPISODE] FILE
                                                  pause-to-removal latency and wakeups while paused (docs/benchmarks.md)
        """

    let arguments: [String]

    func run() throws -> Int32 {
        let parsed = try CommandLineArguments(arguments, spec: ["rounds": .value, "idle": .value, "measure-loudness": .value])
        let rounds = try parsed.integer("rounds", in: 1...100_000) ?? 1000
        var idle = 10.0
        if let text = parsed.value("idle") {
            do { idle = try Seconds.parse(text, .duration, field: "--idle") } catch { throw UsageError("\(error)") }
        }
        guard parsed.positional.count == 1, let file = parsed.positional.first else { throw UsageError("bench-latency needs a media FILE") }
        let overlayImage = URL(fileURLWithPath: file).deletingLastPathComponent().appendingPathComponent("overlay.png").path
        let player = try MpvPlayer()
        defer { player.shutdown() }
        let surface = MpvAdSurface(player: player)
        let client = try player.makeForeignClient(name: "bench-remote")
        defer { client.close() }
        let pauses = PauseClock()
        let observation = player.addObserver(pauses)
        defer { observation.cancel() }
        try player.setLoop(true)
        try player.load(file)
        guard pauses.waitUntilPlaying(player) else { throw UsageError("\(file) does not play") }

        print("bench-latency: \(rounds) pauses per overlay kind, \(file)")
        // R28: an episode's loudness measured in the background meanwhile, as the daemon does
        // when an episode first plays (the loudness book: nice 19, at most half a core).
        let book = LoudnessBook(path: nil)
        let measuring = parsed.value("measure-loudness")
        if let measuring {
            _ = book.known(measuring)
            print("meanwhile: the loudness of \(measuring) measured in the background")
        }
        // R26: a squeezeback's removal is the content's whole picture back (its margins at 0,
        // set synchronously) and its creative down; its way in is 0.1 s here (1 s by default).
        for (name, content, kind) in [("text overlay", AdCreativeContent.text("Sponsored · bench"), AdKind.overlay),
                                      ("image overlay", .image(location: overlayImage), .overlay),
                                      ("image squeezeback (content restored)", .image(location: overlayImage), .squeezeback)] {
            let samples = try measure(content, kind: kind, rounds: rounds, player: player, surface: surface, client: client, pauses: pauses)
            print("\n\(name) (\(samples.count) of \(rounds) rounds), µs:")
            print("| measure | p50 | p95 | p99 | max |")
            print("|---|---|---|---|---|")
            for (label, values) in [("mpv floor: set pause by another client → our PROPERTY_CHANGE", samples.map(\.floor)),
                                    ("latency_us: PROPERTY_CHANGE → mpv removed the ad (a squeezeback: the whole picture back)", samples.map(\.latency)),
                                    ("end to end: set pause by another client → ad.ended", samples.map(\.endToEnd))] {
                print(Self.row(label, values))
            }
        }

        print("\nmpv calls the loop makes, while mpv plays (\(min(rounds, 300)) calls each), µs:")
        print("| call | p50 | p95 | p99 | max |")
        print("|---|---|---|---|---|")
        for (name, values) in try player.measureLoopCalls(rounds: min(rounds, 300)) {
            print(Self.row(name, values))
        }

        if let measuring {
            print("\nthe background's measurement: \(book.known(measuring).map { "done (\($0.integrated.map { String(format: "%.2f LUFS", $0) } ?? "silent"))" } ?? "still under way at the rounds' end")")
            book.settle()
        }

        // Wakeups while paused with nothing scheduled: every thread's context switches.
        try player.pause()
        Thread.sleep(forTimeInterval: 1)   // the redraw nudges after the last change are done
        let before = ThreadSwitches.read()
        Thread.sleep(forTimeInterval: idle)
        let after = ThreadSwitches.read()
        print("\nwakeups while paused, nothing scheduled, over \(idle) s (context switches per second, by thread):")
        var total = 0.0
        for (name, count) in after.delta(since: before).sorted(by: { $0.key < $1.key }) {
            let rate = Double(count) / idle
            total += rate
            print("  \(name): \(String(format: "%.2f", rate))/s")
        }
        print("  all threads: \(String(format: "%.2f", total))/s (the main thread's own sleep counts 1 in \(idle) s)")
        return 0
    }

    struct Sample {
        var floor: UInt64
        var latency: UInt64
        var endToEnd: UInt64
    }

    private func measure(_ content: AdCreativeContent, kind: AdKind, rounds: Int, player: MpvPlayer, surface: MpvAdSurface,
                         client: MpvClient, pauses: PauseClock) throws -> [Sample] {
        let worker = Workers(name: "bench-requests")
        let source = BenchSource(content: content, kind: kind)
        // Blocking hand-overs, not polling: a polling thread would take CPU from mpv and the
        // loop on a 2-core machine and slow what is measured.
        let round = Locked<(started: Handover<Bool>, ended: Handover<(latency: UInt64, at: UInt64)>)>((Handover(), Handover()))
        var configuration = VideoAdsConfiguration()
        configuration.executor = worker
        let ads = VideoAds(content: ContentInfo(id: "bench"), source: source, surface: surface, loop: player.loop,
                           configuration: configuration) { event in
            switch event {
            case .ended(_, .paused, let latency?):
                let now = MonotonicTime.now()
                round.withLock { $0.ended }.fulfil((latency, now))
            case .started:
                round.withLock { $0.started }.fulfil(true)
            default:
                break
            }
        }
        defer { ads.destroy() }
        var samples: [Sample] = []
        var skipped: [String: Int] = [:]
        defer { if !skipped.isEmpty { print("rounds tried again: \(skipped)") } }
        var attempts = 0
        while samples.count < rounds, attempts < rounds * 2 {
            attempts += 1
            guard pauses.waitUntilPlaying(player) else { break }
            let (started, ended) = round.withLock { current in
                current = (Handover(), Handover())
                return current
            }
            ads.track(player)   // each loop wrap is another item
            guard case .success(let overlay)? = requestBlocking(ads, .overlay) else { continue }
            do {
                try overlay.show { _ in }
            } catch {
                skipped[error.code, default: 0] += 1   // the loop wrapped between the request and the show: again
                continue
            }
            guard started.wait(timeout: 10) != nil else { continue }
            usleep(20_000)   // let mpv put it up and draw
            let t0 = MonotonicTime.now()
            try client.set("pause", true)
            guard let end = ended.wait(timeout: 10), let observed = pauses.firstPause(after: t0) else {
                try client.set("pause", false)
                continue
            }
            samples.append(Sample(floor: (observed &- t0) / 1000, latency: end.latency, endToEnd: (end.at &- t0) / 1000))
            try client.set("pause", false)
        }
        return samples
    }

    static func row(_ label: String, _ values: [UInt64]) -> String {
        let sorted = values.sorted()
        guard !sorted.isEmpty else { return "| \(label) | – | – | – | – |" }
        func pct(_ p: Double) -> UInt64 { sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }
        return "| \(label) | \(pct(0.5)) | \(pct(0.95)) | \(pct(0.99)) | \(sorted.last!) |"
    }
}

/// When the loop took each pause off `mpv_wait_event` (`PlayerEvent.observedAt`), and a
/// hand-over for the next time the player plays.
private final class PauseClock: PlayerObserver {
    private let pauses = Locked<[UInt64]>([])
    private let playing = Locked(Handover<Bool>())

    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) {
        switch event.change {
        case .paused: pauses.withLock { $0.append(event.observedAt) }
        case .playing: playing.withLock { $0 }.fulfil(true)
        case .item, .ended: playing.withLock { $0 = Handover() }
        default: break
        }
    }

    func firstPause(after t: UInt64) -> UInt64? { pauses.withLock { $0.first { $0 >= t } } }

    /// Waits (10 s at most) until the player plays.
    func waitUntilPlaying(_ player: MpvPlayer) -> Bool {
        if player.snapshot().playing { return true }
        let next = playing.withLock { $0 }
        return next.wait(timeout: 10) != nil || player.snapshot().playing
    }
}

/// Context switches per thread of this process (`/proc/self/task/*/status`).
struct ThreadSwitches {
    var byThread: [String: Int] = [:]

    static func read() -> ThreadSwitches {
        var result = ThreadSwitches()
        let tasks = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/task")) ?? []
        for tid in tasks {
            guard let status = try? String(contentsOfFile: "/proc/self/task/\(tid)/status", encoding: .utf8) else { continue }
            var name = tid, switches = 0
            for line in status.split(separator: "\n") {
                if line.hasPrefix("Name:") { name = line.dropFirst(5).trimmingCharacters(in: .whitespaces) }
                if line.hasPrefix("voluntary_ctxt_switches:") || line.hasPrefix("nonvoluntary_ctxt_switches:") {
                    switches += Int(line.split(separator: ":")[1].trimmingCharacters(in: .whitespaces)) ?? 0
                }
            }
            result.byThread["\(name) [\(tid)]"] = switches
        }
        return result
    }

    func delta(since before: ThreadSwitches) -> [String: Int] {
        byThread.reduce(into: [:]) { out, pair in out[pair.key] = pair.value - (before.byThread[pair.key] ?? 0) }
    }
}

/// One overlay (or squeezeback) of the given content, always.
private struct BenchSource: AdSource {
    let content: AdCreativeContent
    var kind = AdKind.overlay
    func ad(for request: AdRequest) async throws -> AdCreative? {
        var creative = AdCreative(id: "bench", kind: kind, content: content, duration: 60)
        if kind == .squeezeback { creative.squeezeback = SqueezebackLayout(transition: 0.1) }
        return creative
    }
    func mayFill(_ kind: AdKind, content: ContentInfo, at position: Double) -> Bool { !kind.isLinear || kind == .postroll }
}

/// `request` for synchronous tools (never on the loop).
func requestBlocking(_ ads: VideoAds, _ kind: AdKind, timeout: Double = 15) -> Result<Ad, AdError>? {
    let answer = Handover<Result<Ad, AdError>>()
    ads.request(kind) { answer.fulfil($0) }
    return answer.wait(timeout: timeout)
}
