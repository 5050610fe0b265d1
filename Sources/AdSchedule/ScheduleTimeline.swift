import AdRuntime
import Foundation

/// Which slots rule when, worked out ahead for a window of time (issue 37): contiguous
/// segments, each with the highest priority among the slots open then and those slots (equal
/// priorities share by weight). Computed off the loop — 10,000 slots are calendar arithmetic
/// for each of them — and looked up on the loop by a binary search.
public struct ScheduleTimeline: Sendable {
    public struct Segment: Sendable, Equatable {
        public var start: Date
        public var end: Date
        /// The slots that rule (indices into `Schedule.slots`), in the schedule's order; empty:
        /// none is open (the default playlist plays).
        public var slots: [Int]
        public var priority: Int?
    }

    public let from: Date
    public let to: Date
    public let segments: [Segment]

    /// How far ahead a timeline is worked out, and when a new one is due (half-way).
    public static let window = 48 * 3600.0

    /// The timeline of `schedule` over `[from, from + window)`.
    public static func compute(_ schedule: Schedule, from: Date, window: Double = ScheduleTimeline.window) -> ScheduleTimeline {
        let to = from.addingTimeInterval(window)
        // Every slot's open intervals, clipped to its validity, as edges.
        var edges: [(at: Date, slot: Int, opens: Bool)] = []
        for (index, slot) in schedule.slots.enumerated() {
            let start = max(from, slot.from ?? from), end = min(to, slot.until ?? to)
            guard start < end else { continue }
            let open = slot.hours.map { $0.openIntervals(from: start, to: end) } ?? [(start, end)]
            for interval in open {
                edges.append((interval.start, index, true))
                edges.append((interval.end, index, false))
            }
        }
        edges.sort { $0.at != $1.at ? $0.at < $1.at : (!$0.opens && $1.opens) }
        var segments: [Segment] = []
        var open: [Int: Set<Int>] = [:]   // priority → open slots
        var cursor = from
        var index = 0
        func close(at end: Date) {
            guard end > cursor else { return }
            let top = open.keys.max()
            let slots = top.map { open[$0]!.sorted() } ?? []
            if var last = segments.last, last.slots == slots, last.end == cursor {
                last.end = end
                segments[segments.count - 1] = last
            } else {
                segments.append(Segment(start: cursor, end: end, slots: slots, priority: top))
            }
            cursor = end
        }
        while index < edges.count {
            let at = edges[index].at
            close(at: at)
            while index < edges.count, edges[index].at == at {
                let edge = edges[index], priority = schedule.slots[edge.slot].priority
                if edge.opens {
                    open[priority, default: []].insert(edge.slot)
                } else {
                    open[priority]?.remove(edge.slot)
                    if open[priority]?.isEmpty == true { open[priority] = nil }
                }
                index += 1
            }
        }
        close(at: to)
        return ScheduleTimeline(from: from, to: to, segments: segments)
    }

    /// The segment at `date`; nil outside the window.
    public func segment(at date: Date) -> Segment? {
        var low = 0, high = segments.count - 1
        while low <= high {
            let middle = (low + high) / 2
            let segment = segments[middle]
            if date < segment.start { high = middle - 1 } else if date >= segment.end { low = middle + 1 } else { return segment }
        }
        return nil
    }

    /// The first instant after `date` at which the ruling slots change; nil past the window.
    public func nextChange(after date: Date) -> Date? {
        guard let current = segment(at: date) else { return nil }
        return current.end < to ? current.end : nil
    }
}
