import AdRuntime

/// What a run writes and judges — the timeline, the HAR, the rules — done in the order it
/// happened on a thread of its own, so that the box's thread only hands it over: the second core
/// of a box records and judges while the first plays (a month of a busy box is about 650,000
/// entries). Nothing here changes what the box does; each piece of work is given the values of
/// its instant (simulated time, the event), never reads them later.
///
/// Handed over in batches (one wake of the thread a batch, not one an entry); at most
/// `maxBatches` wait, then the run waits for the recorder, so memory stays flat however far
/// ahead the box runs. `drain` returns once everything handed over is done (the run's end reads
/// the rules' verdicts and closes the files after it).
final class Recorder: Sendable {
    typealias Work = @Sendable () -> Void

    static let batchSize = 256
    static let maxBatches = 64

    private struct State {
        var filling: [Work] = []
        var batches: [[Work]] = []
        var working = false
        var closed = false
    }

    private let state = Locked(State())

    init() {
        startThread(named: "adp-sim-record") { [state] in
            while let batch = state.wait(until: { state -> [Work]?? in
                if !state.batches.isEmpty {
                    state.working = true
                    return .some(state.batches.removeFirst())
                }
                return state.closed ? .some(nil) : nil
            }) ?? nil {
                for work in batch { work() }
                state.signal { $0.working = false }
            }
        }
    }

    /// A run that ended early (a box that could not be built) lets the thread end too.
    deinit { state.signal { $0.closed = true } }

    /// `work` done after everything handed over before it.
    func record(_ work: @escaping Work) {
        let full = state.withLock { state -> Bool in
            // After `close` nothing more is recorded (a late log line): kept, it would hold the
            // run that made it for ever.
            guard !state.closed else { return false }
            state.filling.append(work)
            return state.filling.count >= Self.batchSize
        }
        if full { handOver() }
    }

    /// Waits until everything handed over so far is done.
    func drain() {
        handOver()
        _ = state.wait { state -> Bool? in state.batches.isEmpty && !state.working ? true : nil }
    }

    /// Drains, then ends the thread.
    func close() {
        drain()
        state.signal { $0.closed = true }
    }

    /// The batch being filled, to the thread, once fewer than `maxBatches` wait.
    private func handOver() {
        state.wait { state -> Bool? in
            guard state.batches.count < Self.maxBatches else { return nil }
            if !state.filling.isEmpty {
                state.batches.append(state.filling)
                state.filling = []
            }
            return true
        }
        state.signal { _ in }
    }
}
