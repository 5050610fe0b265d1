import AdPlayerDaemon
import AdRuntime
import Foundation

/// Prints a player's changes and the ads' events as a readable timeline: time since start,
/// what happened, the facts.
final class TimelinePrinter: Sendable {
    private let start = MonotonicTime.now()

    func print(_ event: PlayerEvent) {
        write(line(event))
    }

    /// A line of its own (a demo step, a beacon sent).
    func note(_ text: String) {
        write("          \(Logger.escape(text))")
    }

    /// One line to stdout, flushed (the timeline is often read through a pipe).
    private func write(_ line: String) {
        FileHandle.standardOutput.write(Data((line + "\n").utf8))
    }

    func print(_ event: AdEvent) {
        let t = Double(MonotonicTime.now() &- start) / 1e9
        let text: String
        switch event {
        case .requested(let kind, let content, let position): text = "ad request  \(kind.rawValue) for \(content) at \(format(position))s"
        case .noFill(let kind, _, _): text = "ad no fill  \(kind.rawValue): the source had nothing"
        case .loaded(let info, _): text = "ad loaded   \(info.kind.rawValue) \(info.creativeID)"
        case .started(let info): text = "ad started  \(info.kind.rawValue) \(info.creativeID)"
        case .quartile(let info, let q): text = "ad quartile \(info.creativeID) \(q)/4"
        case .progress(let info, let offset, _): text = "ad progress \(info.creativeID) \(offset)"
        case .iconShown(let info, let index): text = "ad icon     \(info.creativeID) \(index) drawn"
        case .viewability(let info, let viewability): text = "ad \(viewability.rawValue.padding(toLength: 8, withPad: " ", startingAt: 0)) \(info.creativeID)"
        case .postrollPaused(let info, let paused): text = "ad \(paused ? "paused " : "resumed") \(info.creativeID)"
        case .ended(let info, let reason, let latency):
            text = "ad ended    \(info.kind.rawValue) \(info.creativeID): \(reason.rawValue)" + (latency.map { " (\($0) µs after the player's change)" } ?? "")
        case .contentEnded(let content): text = "ad          \(content) played to its end: post-roll time"
        case .breakStarted(let kind, _, let position): text = "ad break    \(kind.rawValue) at \(format(position))s: the content waits"
        case .breakEnded(let kind, _, let position): text = "ad break    \(kind.rawValue) over: the content from \(format(position))s"
        case .error(let kind, let creative, let error): text = "ad error    \(kind.rawValue) \(creative ?? ""): \(error)"
        }
        write("\(format(t, width: 7))s  \(Logger.escape(text))")
    }

    func line(_ event: PlayerEvent) -> String {
        let t = Double(event.observedAt &- start) / 1e9
        let s = event.snapshot
        let facts = "pos \(format(s.position))s, \(s.playing ? "playing" : "not playing"), rate \(format(s.rate))"
        return "\(format(t, width: 7))s  \(Logger.escape(describe(event.change)).padding(toLength: 60, withPad: " ", startingAt: 0))  \(facts)"
    }

    private func describe(_ change: PlayerChange) -> String {
        switch change {
        case .item(let item?): "item      \(item.path) (entry \(item.entry), loop \(item.loop))"
        case .item(nil): "item      none"
        case .playing(let rate): "playing   at \(format(rate))x"
        case .paused: "paused"
        case .held: "held      for a linear break"
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
