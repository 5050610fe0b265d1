import AdRuntime
import AdTracking
import ControlProtocol
import Foundation

/// `adplayerd bench-outbox --url URL [--per-minute N] [--seconds S] [--per-event K]`: the
/// tracking outbox as the daemon runs it (`BeaconOutbox` in a new SQLite database, its
/// `OutboxCourier` delivering over `BoundedHTTP`), fed N beacons a minute in events of K URLs
/// for S seconds, then drained. Prints what it cost: CPU time, transactions, and what was
/// delivered. scripts/bench_state.py runs it against a loopback server and counts the
/// fsyncs (docs/benchmarks.md §6).
struct BenchOutboxCommand {
    static let usage = """
        usage: adplayerd-dev bench-outbox --url URL [--per-minute N] [--seconds S] [--per-event K]
                                                  the tracking outbox's cost at a beacon rate (docs/benchmarks.md)
        """

    let arguments: [String]

    func run() throws -> Int32 {
        let parsed = try CommandLineArguments(arguments, spec: ["url": .value, "per-minute": .value, "seconds": .value, "per-event": .value])
        guard parsed.positional.isEmpty, let url = parsed.value("url") else { throw UsageError("bench-outbox needs --url URL") }
        let perMinute = try parsed.integer("per-minute", in: 1...1_000_000) ?? 1000
        let seconds = try parsed.integer("seconds", in: 1...3600) ?? 60
        let perEvent = try parsed.integer("per-event", in: 1...64) ?? 4
        let folder = FileManager.default.temporaryDirectory.path + "/adplayerd-bench-outbox-\(getpid())"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }

        // [TIMESTAMP] filled at send without waiting for the clock's synchronisation (this
        // machine's kernel may say it is not synchronised: the beacons would wait).
        var configuration = BeaconOutbox.Configuration()
        configuration.timeSyncWait = 0
        let outbox = try BeaconOutbox(path: folder + "/adplayerd.sqlite", configuration: configuration)
        let courier = OutboxCourier(outbox: outbox)
        outbox.onEnqueued { courier.wake() }
        courier.start()

        let events = max(1, perMinute * seconds / 60 / perEvent)
        let interval = Double(seconds) / Double(events)
        let cpuBefore = Self.cpuSeconds()
        let transactionsBefore = SQLiteDatabase.transactionCount()
        let start = MonotonicTime.now()
        var queued = 0
        for event in 0..<events {
            let due = start + LoopTime.nanoseconds(Double(event) * interval)
            let now = MonotonicTime.now()
            if due > now { usleep(useconds_t((due - now) / 1000)) }
            let recorded = RecordedTime.now(SystemTrackingClock())
            queued += outbox.enqueue((0..<perEvent).map { k in
                Beacon(url: "\(url)?e=\(event)&k=\(k)&ts=[TIMESTAMP]", event: k == 0 ? "impression" : "creativeView",
                       play: "bench-\(event)", billable: k == 0, recorded: recorded)
            })
        }
        let fed = Double(MonotonicTime.now() - start) / 1e9
        let drainStart = MonotonicTime.now()
        while outbox.pendingCount() > 0, MonotonicTime.now() - drainStart < LoopTime.nanoseconds(60) { usleep(20_000) }
        courier.stop(flushingFor: 1)
        let cpu = Self.cpuSeconds() - cpuBefore
        let transactions = SQLiteDatabase.transactionCount() - transactionsBefore
        let status = outbox.status()
        let total = Double(MonotonicTime.now() - start) / 1e9
        print(String(format: "bench-outbox: %d beacons a minute in events of %d for %.1f s (%d queued), drained %.1f s later; "
                     + "sent %d, pending %d, failed attempts %d; CPU %.2f s (%.1f%% of the run); %d transactions",
                     perMinute, perEvent, fed, queued, total - fed, status.sent, status.pending, status.failedAttempts, cpu,
                     100 * cpu / total, transactions))
        return status.pending == 0 && status.sent == queued ? 0 : 1
    }

    /// This process's CPU time, user and system.
    static func cpuSeconds() -> Double {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
    }
}
