import AdRuntime
import AdPlayerSimulation
import AdSchedule
import Foundation

/// A walk over `ScheduleState`'s decisions alone, for the tests of the schedule's rules over
/// days and time zones: at each item's end the next pick; at each boundary the item that no
/// longer rules is cut; an interrupt counts its share when it ends — no ads, no player, no
/// controller. What the box plays (ads included) is `adplayerd schedule-check`, the box itself
/// on simulated time (ScheduleCheckTests); this is not it.
enum ScheduleSimulation {
    public struct Entry: Sendable, Equatable {
        public var start: Date
        public var end: Date
        public var pick: SchedulePick
        /// Cut at a boundary (else it played to its end).
        public var cut: Bool
    }

    /// What plays from `from` for `seconds`. `duration`: a file's length in seconds (nil:
    /// unknown — it plays `unknownLength`). The timeline is worked out again as the real one is.
    public static func run(_ state: ScheduleState, from: Date, seconds: Double, unknownLength: Double = 60,
                           duration: (String) -> Double?) -> [Entry] {
        var entries: [Entry] = []
        var now = from
        let end = from.addingTimeInterval(seconds)
        var guardCount = 0
        while now < end, guardCount < 5_000_000 {
            guardCount += 1
            if state.needsTimeline(at: now) { state.setTimeline(ScheduleTimeline.compute(state.schedule, from: now)) }
            _ = state.expireTakeover(at: now)
            guard let pick = state.pick(at: now) else { break }
            let full = duration(pick.path) ?? unknownLength
            var length = max(0.001, full - (pick.start ?? 0))
            if let cap = pick.length { length = min(length, cap) }
            var stop = now.addingTimeInterval(length)
            var cut = false
            // Boundaries within the item: cut at the first one where it no longer rules.
            var probe = now
            while let boundary = state.nextBoundary(after: probe), boundary < stop {
                if state.needsTimeline(at: boundary) { state.setTimeline(ScheduleTimeline.compute(state.schedule, from: boundary)) }
                _ = state.expireTakeover(at: boundary)
                if !state.stillRules(pick, at: boundary) {
                    state.cut(pick, at: (pick.start ?? 0) + boundary.timeIntervalSince(now))
                    stop = boundary
                    cut = true
                    break
                }
                probe = boundary
            }
            entries.append(Entry(start: now, end: stop, pick: pick, cut: cut))
            if pick.rule.kind == .interrupt { state.interruptPlayed(pick.rule.id, seconds: stop.timeIntervalSince(now), startedAt: now) }
            now = stop
        }
        return entries
    }

    /// One line an entry: `2026-12-07 06:00:00  +300s  slot breakfast  /srv/media/menu.mp4 (from 42.0 s) [cut]`,
    /// local time of the schedule's zone.
    public static func describe(_ entry: Entry, timeZone: TimeZone) -> String {
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = timeZone
        formatter.dateFormat = "yyyy-MM-dd HH:mm:ss"
        let seconds = entry.end.timeIntervalSince(entry.start)
        return "\(formatter.string(from: entry.start))  +\(String(format: "%.0f", seconds))s  \(entry.pick.rule.kind.rawValue) \(entry.pick.rule.id)  "
            + entry.pick.path + (entry.pick.start.map { String(format: " (from %.1f s)", $0) } ?? "") + (entry.cut ? " [cut]" : "")
    }
}
