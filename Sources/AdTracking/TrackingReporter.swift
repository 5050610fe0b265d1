import AdRuntime
import AdSources
import Foundation

/// Turns what the runtime does into the creative's tracking beacons, written to the outbox
/// (R17): `impression` and `creativeView` when an ad is on screen, `start` and the quartiles
/// of a post-roll, its `pause` and `resume`, `complete`, `close` (or `skip` for a post-roll),
/// and `error` URLs with `[ERRORCODE]` when a creative cannot be shown (405 linear, 502
/// non-linear).
///
/// Threading: `record` may be called from any thread — it is a `VideoAds` `onEvent`
/// consumer, so usually the player's loop — and returns at once: the outbox (SQLite with
/// full fsync) is written by a writer queue of its own, in the order of the events (R18).
public final class TrackingReporter: @unchecked Sendable {
    // @unchecked: `creatives` is touched only on `writer`, a serial thread of its own.
    private let outbox: BeaconOutbox
    private let writer = Workers(name: "adplayerd-track")
    private var creatives: [UInt64: AdCreative] = [:]
    private let onFailure: @Sendable (any Error) -> Void

    public init(outbox: BeaconOutbox, onFailure: @escaping @Sendable (any Error) -> Void = { _ in }) {
        self.outbox = outbox
        self.onFailure = onFailure
    }

    public func record(_ event: AdEvent) {
        writer.execute { self.write(event) }
    }

    /// Waits until every event recorded so far is in the outbox (or failed). Not on the loop.
    public func flush() {
        let done = Handover<Bool>()
        writer.execute { done.fulfil(true) }
        _ = done.wait()
    }

    private func write(_ event: AdEvent) {
        switch event {
        case .loaded(let info, let creative):
            creatives[info.id] = creative
        case .started(let info):
            send(info, ["impression", "creativeView"] + (info.kind == .postroll ? ["start"] : []))
        case .postrollPaused(let info, let paused):
            send(info, [paused ? "pause" : "resume"])
        case .quartile(let info, let quartile):
            send(info, [["firstQuartile", "midpoint", "thirdQuartile"][max(0, min(2, quartile - 1))]])
        case .ended(let info, let reason, _):
            switch reason {
            case .completed: send(info, info.kind == .postroll ? ["complete"] : [])
            case .closed: send(info, info.kind == .postroll ? ["skip", "closeLinear"] : ["close"])
            case .failed: send(info, ["error"], errorCode: info.kind == .postroll ? 405 : 502)
            default: break
            }
            creatives[info.id] = nil
        default:
            break
        }
    }

    private func send(_ info: AdInfo, _ events: [String], errorCode: Int? = nil) {
        guard let creative = creatives[info.id] else { return }
        let values = VASTMacros.Values(errorCode: errorCode)
        let urls = events.flatMap { creative.tracking[$0] ?? [] }.map { VASTMacros.expand($0, values) }
        guard !urls.isEmpty else { return }
        do { try outbox.enqueue(urls) } catch { onFailure(error) }
    }
}
