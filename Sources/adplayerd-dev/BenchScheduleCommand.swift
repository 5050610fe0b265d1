import AdPlayerDaemon
import AdRuntime
import AdSchedule
import ControlProtocol
import Foundation

/// `adplayerd-dev bench-schedule [--slots N] [--items N]` (issue 37): a schedule of N slots
/// (default 10,000: each a day of the week and a half hour, priorities 0–9) and a playlist of N
/// items (default 10,000): how long it takes to parse, to work out the 48 h timeline (off the
/// loop in the daemon), and what each decision the loop makes costs — `pick` at an item
/// boundary, `nextBoundary` and `stillRules` at a boundary — each timed 10,000 times.
struct BenchScheduleCommand {
    static let usage = """
        usage: adplayerd-dev bench-schedule [--slots N] [--items N]   parse, timeline and per-decision cost of a large schedule
        """

    let arguments: [String]

    func run() throws -> Int32 {
        let parsed = try CommandLineArguments(arguments, spec: ["slots": .value, "items": .value])
        let slots = try parsed.integer("slots", in: 1...Schedule.maxSlots) ?? 10_000
        let items = try parsed.integer("items", in: 1...Schedule.maxItems) ?? 10_000
        var json = #"{"version": 1, "playlists": {"filler": {"items": ["f.mp4"]}, "big": {"items": ["#
        json += (0..<items).map { #""item-\#($0).mp4""# }.joined(separator: ",") + "]}}, \"default\": \"filler\", \"slots\": ["
        json += (0..<slots).map { index in
            let day = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"][index % 7]
            let hour = String(format: "%02d", index % 24), minute = index % 2 == 0 ? "00" : "30"
            let end = index % 2 == 0 ? "\(hour):30" : String(format: "%02d:00", (index % 24 + 1) % 24 == 0 ? 24 : (index % 24 + 1))
            return #"{"id": "s\#(index)", "playlist": "big", "hours": "\#(day) \#(hour):\#(minute)-\#(end)", "priority": \#(index % 10), "weight": \#(1 + index % 3)}"#
        }.joined(separator: ",") + "]}"
        let zone = TimeZone(identifier: "Europe/Paris")!
        func time<T>(_ body: () throws -> T) rethrows -> (T, Double) {
            let start = MonotonicTime.now()
            let value = try body()
            return (value, Double(MonotonicTime.now() - start) / 1e6)
        }
        let (schedule, parseMs) = try time { try Schedule.parse(Array(json.utf8), timeZone: zone) }
        let files = ["filler": [ResolvedSchedule.File(path: "/lib/f.mp4", seconds: nil)],
                     "big": (0..<items).map { ResolvedSchedule.File(path: "/lib/item-\($0).mp4", seconds: nil) }]
        let resolved = ResolvedSchedule(schedule: schedule, files: files)
        let from = Date(timeIntervalSince1970: 1_796_000_000)
        let (timeline, timelineMs) = time { ScheduleTimeline.compute(schedule, from: from) }
        let state = ScheduleState(resolved, timeline: timeline, now: from)
        func perCall(_ body: (Date) -> Void) -> (p50: Double, p99: Double, max: Double) {
            var samples: [Double] = []
            for index in 0..<10_000 {
                let at = from.addingTimeInterval(Double(index) * 17)
                let start = MonotonicTime.now()
                body(at)
                samples.append(Double(MonotonicTime.now() - start) / 1000)
            }
            samples.sort()
            return (samples[5_000], samples[9_900], samples.last!)
        }
        let picks = perCall { _ = state.pick(at: $0) }
        let boundaries = perCall { _ = state.nextBoundary(after: $0) }
        let probe = state.pick(at: from)!
        let rules = perCall { _ = state.stillRules(probe, at: $0) }
        print("schedule of \(slots) slots, a playlist of \(items) items (\(json.utf8.count / 1024) KiB of JSON):")
        print(String(format: "  parse and check: %.1f ms; timeline of 48 h: %.1f ms, %d segments (off the loop)", parseMs, timelineMs, timeline.segments.count))
        print("  on the loop, per call (µs): | call | p50 | p99 | max |")
        for (name, figures) in [("pick (an item boundary)", picks), ("nextBoundary", boundaries), ("stillRules (a boundary)", rules)] {
            print(String(format: "  | %@ | %.1f | %.1f | %.1f |", name, figures.p50, figures.p99, figures.max))
        }
        return 0
    }
}
