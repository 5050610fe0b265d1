import AdRuntime
import AdSources
import ControlProtocol
import Foundation
import MpvPlayerAdapter

/// `adplayerd-dev bench-loudness FILE`: what measuring a file's loudness (R28) costs — flat out
/// (a creative, which an ad's preparation waits for) and as the daemon measures an episode in
/// the background (the loudness book's thread: nice 19, at most half a core). Method in
/// docs/benchmarks.md.
struct BenchLoudnessCommand {
    static let usage = """
        usage: adplayerd-dev bench-loudness FILE
                                                  the CPU and time one loudness measurement costs (docs/benchmarks.md)
        """

    let arguments: [String]

    func run() throws -> Int32 {
        let parsed = try CommandLineArguments(arguments, spec: [:])
        guard parsed.positional.count == 1, let file = parsed.positional.first else { throw UsageError("bench-loudness needs a media FILE") }
        let seconds = MediaProbe.duration(file)
        print("bench-loudness: \(file)\(seconds.map { String(format: " (%.0f s of audio)", $0) } ?? "")")
        let wall = Date(), cpu = Self.threadCPU()
        let loudness = try LoudnessMeter.measure(file)
        let spentCPU = Self.threadCPU() - cpu, spentWall = Date().timeIntervalSince(wall)
        print(String(format: "flat out, with the true peak (a creative's measurement): %.2f s CPU, %.2f s wall", spentCPU, spentWall)
              + (seconds.map { String(format: " (%.0f× real time)", $0 / max(spentWall, 0.001)) } ?? ""))
        print("  integrated \(loudness.integrated.map { String(format: "%.2f LUFS", $0) } ?? "silent"), "
              + "true peak \(loudness.truePeak.map { String(format: "%.2f dBTP", $0) } ?? "–")")
        let integratedOnly = Date(), integratedCPU = Self.threadCPU()
        _ = try LoudnessMeter.measure(file, truePeak: false)
        print(String(format: "flat out, integrated only (an episode's measurement): %.2f s CPU, %.2f s wall",
                     Self.threadCPU() - integratedCPU, Date().timeIntervalSince(integratedOnly)))
        let book = LoudnessBook(path: nil)
        let paced = Date()
        _ = book.known(file)
        book.settle()
        print(String(format: "in the background (the daemon's way: nice 19, at most half a core): %.2f s wall", Date().timeIntervalSince(paced)))
        // What the loop pays (R18): `known` when an ad starts (a lock and a lookup), `refresh`
        // when an episode starts (a lock; a hand-over to the book's thread when not queued).
        let rounds = 100_000
        var samples: [UInt64] = []
        samples.reserveCapacity(rounds)
        for _ in 0..<rounds {
            let start = DispatchTime.now().uptimeNanoseconds
            _ = book.known(file)
            samples.append(DispatchTime.now().uptimeNanoseconds - start)
        }
        print("on the loop, `known` of a file the book has (\(rounds) calls), ns: \(Self.percentiles(samples))")
        samples.removeAll(keepingCapacity: true)
        for round in 0..<1000 {
            let start = DispatchTime.now().uptimeNanoseconds
            book.refresh(round % 2 == 0 ? file : file + ".absent")
            samples.append(DispatchTime.now().uptimeNanoseconds - start)
        }
        book.settle()
        print("on the loop, `refresh` (1000 calls: a hand-over each while the last is not done), ns: \(Self.percentiles(samples))")
        return 0
    }

    static func percentiles(_ values: [UInt64]) -> String {
        let sorted = values.sorted()
        func at(_ p: Double) -> UInt64 { sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }
        return "p50 \(at(0.5)), p99 \(at(0.99)), max \(sorted.last ?? 0)"
    }

    /// This thread's CPU time, seconds.
    static func threadCPU() -> Double {
        var now = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}
