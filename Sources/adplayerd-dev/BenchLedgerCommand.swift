import AdRuntime
import AdTracking
import ControlProtocol
import Foundation

/// `adplayerd-dev bench-ledger [--plays N]`: what the ledger of proof of play costs per play,
/// on the daemon's `BeaconOutbox` in a new SQLite database (WAL, `synchronous=FULL`, as the
/// daemon runs it): the start's write (the row with its sequence number — what `ad.started`
/// waits for), the end's write (the row's end and its link in the chain, hashed in the same
/// transaction), the hash alone, and the heartbeat's write while an ad is on screen. Medians
/// and 99th percentiles of N plays; transactions counted (each one fsync). docs/benchmarks.md §11.
struct BenchLedgerCommand {
    static let usage = """
        usage: adplayerd-dev bench-ledger [--plays N]     the ledger's cost per play (docs/benchmarks.md)
        """

    let arguments: [String]

    func run() throws -> Int32 {
        let parsed = try CommandLineArguments(arguments, spec: ["plays": .value])
        guard parsed.positional.isEmpty else { throw UsageError("bench-ledger takes --plays N") }
        let count = try parsed.integer("plays", in: 10...100_000) ?? 1000
        let folder = FileManager.default.temporaryDirectory.path + "/adplayerd-bench-ledger-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var configuration = BeaconOutbox.Configuration()
        configuration.ownsLedger = true
        configuration.heartbeat = 0   // every call writes: its cost alone
        let outbox = try BeaconOutbox(path: folder + "/adplayerd.sqlite", configuration: configuration)

        var starts: [Double] = [], ends: [Double] = [], heartbeats: [Double] = []
        let transactionsBefore = SQLiteDatabase.transactionCount()
        for n in 0..<count {
            var play = Play(id: "p\(n)", adID: "ad-\(n % 7)", kind: "overlay", source: "catalog", contentID: "episode-\(n % 3)",
                            startedWall: 1_800_000_000 + Double(n) * 10)
            play.latLong = "40.712800,-74.006000"
            play.venue = "lobby-7"
            play.adDuration = 5
            var t = MonotonicTime.now()
            outbox.recordPlayStart(play)
            starts.append(Double(MonotonicTime.now() - t) / 1e6)
            t = MonotonicTime.now()
            outbox.keepAlive()
            heartbeats.append(Double(MonotonicTime.now() - t) / 1e6)
            t = MonotonicTime.now()
            outbox.recordPlayEnd(id: play.id, endedWall: play.startedWall + 5, seconds: 5, reason: "completed", viewable: "viewable")
            ends.append(Double(MonotonicTime.now() - t) / 1e6)
        }
        let transactions = SQLiteDatabase.transactionCount() - transactionsBefore
        let sample = outbox.plays(afterSequence: 0, limit: 1).first!
        let t = MonotonicTime.now()
        for _ in 0..<count { _ = PlayLedger.hash(sample, previous: sample.previousHash ?? "") }
        let hash = Double(MonotonicTime.now() - t) / 1e6 / Double(count)
        func line(_ name: String, _ values: [Double]) -> String {
            let sorted = values.sorted()
            return String(format: "%@ median %.3f ms, p99 %.3f ms", name, sorted[sorted.count / 2], sorted[min(sorted.count - 1, sorted.count * 99 / 100)])
        }
        print("bench-ledger: \(count) plays; " + [line("start (row + sequence)", starts), line("end (row + chain link)", ends),
                                                  line("heartbeat", heartbeats)].joined(separator: "; ")
              + String(format: "; the hash alone %.4f ms; %d transactions (%.1f a play)", hash, transactions, Double(transactions) / Double(count)))
        let verdict = try BeaconOutbox.verifyLedger(path: folder + "/adplayerd.sqlite").verdict
        return verdict.broken == nil && verdict.rows == count ? 0 : 1
    }
}
