import AdRuntime
import Foundation
import MpvPlayerAdapter
import Synchronization

/// Prints a player's changes as a readable timeline: time since start, the change, the facts.
final class TimelinePrinter: PlayerObserver {
    private let start = MonotonicTime.now()
    private let onChange: @Sendable (PlayerEvent) -> Void

    init(onChange: @escaping @Sendable (PlayerEvent) -> Void = { _ in }) {
        self.onChange = onChange
    }

    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) {
        print(line(event))
        onChange(event)
    }

    func line(_ event: PlayerEvent) -> String {
        let t = Double(event.observedAt &- start) / 1e9
        let s = event.snapshot
        let facts = "pos \(format(s.position))s, \(s.playing ? "playing" : "not playing"), rate \(format(s.rate))"
        return "\(format(t, width: 7))s  \(describe(event.change).padding(toLength: 60, withPad: " ", startingAt: 0))  \(facts)"
    }

    private func describe(_ change: PlayerChange) -> String {
        switch change {
        case .item(let item?): "item      \(item.path) (entry \(item.entry), loop \(item.loop))"
        case .item(nil): "item      none"
        case .playing(let rate): "playing   at \(format(rate))x"
        case .paused: "paused"
        case .rate(let rate): "rate      \(format(rate))x"
        case .seeked(let from, let to): "seeked    \(format(from))s -> \(format(to))s"
        case .ended(let item): "ended     \(item.path)"
        case .failed(let failure): "failed    \(failure)"
        }
    }

    private func format(_ value: Double, width: Int = 0) -> String {
        let s = String(format: "%.2f", value)
        return String(repeating: " ", count: max(0, width - s.count)) + s
    }
}
