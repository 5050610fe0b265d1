import AdRuntime
import AdTracking
import Foundation

/// `metrics-file`: the metrics in Prometheus' text format, for node_exporter's textfile
/// collector — written every `every` seconds by a thread of its own (never the player's loop),
/// atomically (a temporary file, then a rename), and once more at `stop`.
public final class MetricsFile: Sendable {
    private let stopping = Locked(false)
    private let finished = Handover<Bool>()

    public init(path: String, every seconds: Double, metrics: Metrics, log: Logger) {
        let stopping = self.stopping, finished = self.finished
        startThread(named: "adplayerd-metric") {
            var failed = false
            while true {
                let stop = stopping.wait(timeout: seconds) { $0 ? true : nil } ?? false
                do {
                    try metrics.write(to: path)
                    if failed { log.notice("metrics-file: \(path) is written again") }
                    failed = false
                } catch {
                    if !failed { log.warning("metrics-file: \(path): \(error)") }   // once, until it works again
                    failed = true
                }
                if stop { break }
            }
            finished.fulfil(true)
        }
    }

    /// Writes the file once more and stops (waits up to 2 s).
    public func stop() {
        stopping.signal { $0 = true }
        _ = finished.wait(timeout: 2)
    }
}
