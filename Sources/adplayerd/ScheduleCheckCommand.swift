import AdPlayerDaemon
import AdPlayerSimulation
import AdRuntime
import AdSchedule
import AdSources
import Bounds
import ControlProtocol
import Foundation
import MpvPlayerAdapter

/// `adplayerd schedule-check FILE [--at TIME] [--for LENGTH] [--KEY VALUE]...` (issues 37, 46):
/// what the schedule will play, item by item with its local times — worked out by the box
/// itself: the one assembly (`Box`) on the simulation's virtual stage, with the configuration's
/// ads (`--config FILE`, `--ads SOURCE`…), so an item's time includes its pre-roll, mid-rolls and
/// post-roll, and a boundary waits for a linear ad as the daemon's does. Each file as long as
/// FFmpeg reads it (an image for its `seconds`). Exit 0 with the listing, 1 when the schedule
/// does not load (every problem named), 2 on bad usage.
struct ScheduleCheckCommand {
    static let usage = """
        usage: adplayerd schedule-check FILE [--at TIME] [--for LENGTH] [--json] [--seed N] [--config FILE] [--library DIR]...
                                        [--ads SOURCE]... [--timezone ZONE] [--KEY VALUE]...
          what FILE's schedule plays from TIME (ISO 8601 or seconds since 1970; default now) for LENGTH
          (3600s, 90m, 24h; default 24h), item by item, ads included (the box on simulated time)
        """

    static let own: [String: CommandLineArguments.Kind] = ["at": .value, "for": .value, "json": .flag, "seed": .value]

    let arguments: [String]

    /// One item as the box played it: its turn from its start (its pre-roll's) to the next item's.
    struct Entry {
        var start: Double
        var end: Double
        var path: String
        var rule: ScheduleRule
        var from: Double?
        var reason: String
        /// Seconds of linear ads in its turn (pre-roll, mid-rolls, post-roll).
        var ads: Double
    }

    func run() throws -> Int32 {
        let (mine, rest) = SimulateCommand.split(arguments, own: Self.own)
        let parsed = try CommandLineArguments(mine, spec: Self.own)
        guard parsed.positional.count == 1 else { throw UsageError("schedule-check takes one FILE") }
        let path = parsed.positional[0].hasPrefix("/") ? parsed.positional[0] : FileManager.default.currentDirectoryPath + "/" + parsed.positional[0]
        var configuration: Configuration
        do {
            configuration = try Configuration.load(arguments: SimulateCommand.absolute(rest))
        } catch {
            throw UsageError("\(error)")
        }
        configuration.schedule = path
        let at: Double
        if let text = parsed.value("at") {
            guard let seconds = Double(text) ?? ISO8601.parse(text), seconds > 0 else { throw UsageError("--at: \(text) is not ISO 8601 or seconds since 1970") }
            at = seconds
        } else {
            at = Date().timeIntervalSince1970.rounded(.down)
        }
        let length: Double
        do {
            length = try Seconds.parseLength(parsed.value("for") ?? "24h", .span, field: "--for")
        } catch {
            throw UsageError("\(error)")
        }
        guard length > 0 else { throw UsageError("--for: give a length above 0") }
        var seed: UInt64 = 1
        if let text = parsed.value("seed") {
            guard let value = UInt64(text) else { throw UsageError("--seed: \(text) is not a whole number from 0 to \(UInt64.max)") }
            seed = value
        }
        // The schedule as the daemon reads it: a schedule that does not load is named here, with
        // every problem (the box would play the last good one, or the library, instead).
        do {
            _ = try ScheduleLoader.load(path: path, library: configuration.library, timeZone: configuration.timeZone)
        } catch {
            FileHandle.standardError.write(Data(("adplayerd schedule-check: \(path):\n  " + error.problems.joined(separator: "\n  ") + "\n").utf8))
            return 1
        }

        let work = try SimulateCommand.privateFolder(besides: FileManager.default.temporaryDirectory.path)
        defer { try? FileManager.default.removeItem(atPath: work) }
        let listing = Listing(until: at + length)
        let parts = SimulationStage.Parts(from: at, seed: seed, workFolder: work + "/state", network: .live(BoundedHTTP(threads: 1)), sendBeacons: false,
                                          screen: .verified, measure: { MediaProbe.duration($0) })
        let stage = SimulationStage.virtual(parts)
        let settings = Simulation.Settings(configuration: configuration, from: at, seconds: length, out: work + "/out")
        let outcome = try Simulation(settings, stage: stage, observers: Simulation.Observers(content: { listing.content($0) }, ad: { listing.ad($0, $1) })).run()
        let entries = listing.entries()

        if parsed.flag("json") {
            for entry in entries {
                let line: JSONValue = ["start": .string(ISO8601.format(entry.start)), "end": .string(ISO8601.format(entry.end)),
                                       "path": .string(entry.path), "rule": .string(entry.rule.kind.rawValue), "id": .string(entry.rule.id),
                                       "from": entry.from.map { .number($0) } ?? .null, "cut": .bool(entry.reason == "cut"),
                                       "reason": .string(entry.reason), "ads": .number((entry.ads * 1000).rounded() / 1000)]
                print(line.text)
            }
        } else {
            print("schedule \(path) in \(configuration.timeZone.identifier), from \(ISO8601.format(at)) for \(String(format: "%g", length)) s, "
                  + "ads \(configuration.ads.isEmpty ? "none" : configuration.ads.joined(separator: ", ")):")
            for entry in entries { print(OneLine.escape(Self.describe(entry, timeZone: configuration.timeZone))) }
        }
        // What the box met on the way (an ad server down, a file that does not play): said, not fatal.
        for result in outcome.results where !result.passed {
            FileHandle.standardError.write(Data("adplayerd schedule-check: \(result.name): \(result.failures.prefix(5).map { "\(ISO8601.format($0.at)) \($0.message)" }.joined(separator: "; "))\n".utf8))
        }
        return 0
    }

    /// One line an entry: `2026-12-07 06:00:00  +300s (ads 30s)  slot breakfast  /srv/media/menu.mp4 (from 42.0 s) [cut]`,
    /// local time of the schedule's zone.
    static func describe(_ entry: Entry, timeZone: TimeZone) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = timeZone
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        let seconds = entry.end - entry.start
        let ads = entry.ads > 0 ? String(format: " (ads %.0fs)", entry.ads) : ""
        let how = entry.reason == "completed" ? "" : " [\(entry.reason)]"
        return "\(formatter.string(from: Date(timeIntervalSince1970: entry.start)))  +\(String(format: "%.0f", seconds))s\(ads)  "
            + "\(entry.rule.kind.rawValue) \(entry.rule.id)  \(entry.path)" + (entry.from.map { String(format: " (from %.1f s)", $0) } ?? "") + how
    }

    /// The items as they start and end, and the linear ads in each one's turn.
    final class Listing: @unchecked Sendable {
        // @unchecked: behind the lock.
        private let state = Locked<(done: [Entry], open: Entry?)>(([], nil))
        private let runEnd: Double

        init(until end: Double) { runEnd = end }

        func content(_ play: ContentPlay) {
            state.withLock { state in
                if let ended = play.endedWall {
                    guard var open = state.open else { return }
                    open.end = min(ended, runEnd)
                    open.reason = ended >= runEnd ? "playing at the end" : play.reason ?? "ended"
                    state.done.append(open)
                    state.open = nil
                } else {
                    if var open = state.open {   // never: an item ends before the next starts
                        open.end = play.startedWall
                        state.done.append(open)
                    }
                    state.open = Entry(start: play.startedWall, end: play.startedWall, path: play.path, rule: play.rule, from: play.from,
                                       reason: "playing", ads: 0)
                }
            }
        }

        private let started = Locked<[UInt64: Double]>([:])

        /// A linear ad's time from its start to its end, counted in the turn of the item on.
        func ad(_ at: Double, _ event: AdEvent) {
            switch event {
            case .started(let info) where info.kind.isLinear:
                started.withLock { $0[info.id] = at }
            case .ended(let info, _, _) where info.kind.isLinear:
                guard let from = started.withLock({ $0.removeValue(forKey: info.id) }) else { return }
                state.withLock { state in state.open?.ads += max(0, at - from) }
            default:
                break
            }
        }

        /// Every item, the one on at the end until the run's end.
        func entries() -> [Entry] {
            state.withLock { state in
                var all = state.done
                if var open = state.open {
                    open.end = runEnd
                    open.reason = "playing at the end"
                    all.append(open)
                }
                return all
            }
        }
    }
}
