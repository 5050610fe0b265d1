import Foundation

/// Hours of the week in a time zone: the screen's operating hours (`display-hours`) and a
/// catalog entry's daypart (docs/catalog.md), in the box's time zone (`timezone`):
///
/// ```
/// display-hours = mon-fri 08:00-20:00, sat 10:00-18:00 12:00-14:00, daily 22:00-02:00
/// ```
///
/// Groups separated by commas; each a day, a range of days (`mon-fri`, `fri-mon` wraps) or
/// `daily`, then one or more ranges `HH:MM[:SS]-HH:MM[:SS]` (`24:00` ends the day). A range
/// whose end is not after its start runs into the next day (`22:00-02:00`: the night from
/// Friday belongs to Friday). Hours are wall-clock times of the day they name, so
/// **08:00 is 08:00 local on the day the clocks change**: each is turned into an instant with
/// that day's offset (a time the clocks skip — 02:30 on a spring-forward night — is the first
/// instant after the gap; a time they repeat is its first occurrence).
///
/// Pure: `isOpen(at:)` and `nextChange(after:)` are asked for any instant (the wall clock may
/// jump; the caller asks again, it keeps no state).
public struct WeeklyHours: Sendable, Equatable, CustomStringConvertible {
    public struct Range: Sendable, Equatable {
        /// Seconds from the day's midnight (wall clock); `end` may exceed a day (into the next).
        public var start: Int
        public var end: Int
    }

    /// Ranges by weekday (1 = Sunday … 7 = Saturday, as `Calendar` numbers them).
    public let ranges: [Int: [Range]]
    public let timeZone: TimeZone
    public let description: String

    static let dayNames = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]

    public struct Problem: Error, CustomStringConvertible {
        public let description: String
    }

    /// The key the text came from, for the errors (`display-hours`, `overlays[0].daypart`).
    public let key: String

    public init(_ text: String, timeZone: TimeZone, key: String = "display-hours") throws(Problem) {
        self.timeZone = timeZone
        self.key = key
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.utf8.count <= 1024 else { throw Problem(description: "\(key): longer than 1024 bytes") }
        description = trimmed
        var ranges: [Int: [Range]] = [:]
        for group in trimmed.split(separator: ",", omittingEmptySubsequences: false) {
            let words = group.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            guard let daysWord = words.first else { throw Problem(description: "\(key): an empty group between commas") }
            let days = try Self.days(daysWord.lowercased(), key)
            guard words.count > 1 else { throw Problem(description: "\(key): \"\(group.trimmingCharacters(in: .whitespaces))\" names days but no hours (HH:MM-HH:MM)") }
            for word in words.dropFirst() {
                let range = try Self.range(word, key)
                for day in days { ranges[day, default: []].append(range) }
            }
        }
        guard !ranges.isEmpty else { throw Problem(description: "\(key): empty (leave the key out for always on)") }
        self.ranges = ranges.mapValues { $0.sorted { $0.start < $1.start } }
    }

    private static func days(_ word: String, _ key: String) throws(Problem) -> [Int] {
        if word == "daily" || word == "all" { return Array(1...7) }
        let parts = word.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        func number(_ name: String) throws(Problem) -> Int {
            guard let index = dayNames.firstIndex(of: String(name.prefix(3))), name.count == 3 else {
                throw Problem(description: "\(key): \"\(name)\" is not a day (mon, tue, wed, thu, fri, sat, sun, daily)")
            }
            return index + 1
        }
        switch parts.count {
        case 1: return [try number(parts[0])]
        case 2:
            let first = try number(parts[0]), last = try number(parts[1])
            var days = [first]
            var day = first
            while day != last {
                day = day % 7 + 1
                days.append(day)
            }
            return days
        default:
            throw Problem(description: "\(key): \"\(word)\" is not a day or a range of days (mon-fri)")
        }
    }

    private static func range(_ word: String, _ key: String) throws(Problem) -> Range {
        let parts = word.split(separator: "-", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 else { throw Problem(description: "\(key): \"\(word)\" is not a range of hours (HH:MM-HH:MM)") }
        let start = try time(parts[0], word, key), end = try time(parts[1], word, key)
        guard start < 24 * 3600 else { throw Problem(description: "\(key): \"\(word)\" starts at 24:00 (a day starts at 00:00)") }
        guard start != end else { throw Problem(description: "\(key): \"\(word)\" is empty (use 00:00-24:00 for a whole day)") }
        return Range(start: start, end: end > start ? end : end + 24 * 3600)
    }

    private static func time(_ text: String, _ word: String, _ key: String) throws(Problem) -> Int {
        let fields = text.split(separator: ":", omittingEmptySubsequences: false)
        guard (2...3).contains(fields.count), fields.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCII) && $0.allSatisfy(\.isNumber) }),
              let hours = Int(fields[0]), let minutes = Int(fields[1]), minutes < 60 else {
            throw Problem(description: "\(key): \"\(text)\" in \"\(word)\" is not a time (HH:MM or HH:MM:SS)")
        }
        let seconds = fields.count == 3 ? Int(fields[2]) ?? 60 : 0
        guard seconds < 60, hours < 24 || (hours == 24 && minutes == 0 && seconds == 0) else {
            throw Problem(description: "\(key): \"\(text)\" in \"\(word)\" is not a time of day (00:00 to 24:00)")
        }
        return hours * 3600 + minutes * 60 + seconds
    }

    private var calendar: Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        return calendar
    }

    /// The instant `seconds` of wall-clock time after the start of the local day `day`.
    private func instant(_ day: DateComponents, _ seconds: Int, _ calendar: Calendar) -> Date {
        var components = day
        let dayOffset = seconds / 86_400, within = seconds % 86_400
        components.day = (components.day ?? 1) + dayOffset
        components.hour = within / 3600
        components.minute = within / 60 % 60
        components.second = within % 60
        // A repeated time is its first occurrence (Foundation's choice). A time the clocks skip
        // Foundation moves forward by the gap (02:30 → 03:30 on a spring-forward night): it is
        // the first instant after the gap instead (03:00), whether it opens or closes a range.
        guard let found = calendar.date(from: components) else { return calendar.date(from: day) ?? Date.distantFuture }
        let back = calendar.dateComponents([.hour, .minute, .second], from: found)
        guard back.hour != components.hour || back.minute != components.minute || back.second != components.second else { return found }
        return Self.lastTransition(atOrBefore: found, in: timeZone) ?? found
    }

    /// The time zone's last offset change at or before `date` (within two days), if any.
    static func lastTransition(atOrBefore date: Date, in timeZone: TimeZone) -> Date? {
        var last: Date?
        var cursor = date.addingTimeInterval(-2 * 86_400)
        while let next = timeZone.nextDaylightSavingTimeTransition(after: cursor), next <= date {
            last = next
            cursor = next
        }
        return last
    }

    /// The open intervals that touch the local days around `date` (the day before, for ranges
    /// that run past midnight, to two days after), as instants.
    private func intervals(around date: Date, days: ClosedRange<Int> = -1...8) -> [(Date, Date)] {
        let calendar = self.calendar
        var out: [(Date, Date)] = []
        let today = calendar.startOfDay(for: date)
        for offset in days {
            guard let day = calendar.date(byAdding: .day, value: offset, to: today) else { continue }
            let components = calendar.dateComponents([.year, .month, .day, .weekday], from: day)
            guard let weekday = components.weekday else { continue }
            let base = DateComponents(year: components.year, month: components.month, day: components.day)
            for range in ranges[weekday] ?? [] {
                let start = instant(base, range.start, calendar), end = instant(base, range.end, calendar)
                if end > start { out.append((start, end)) }
            }
        }
        return out.sorted { $0.0 < $1.0 }
    }

    /// The open intervals within `[from, to)`, merged where they touch, in order (a schedule's
    /// timeline, computed ahead).
    public func openIntervals(from: Date, to: Date) -> [(start: Date, end: Date)] {
        guard to > from else { return [] }
        let days = Int((to.timeIntervalSince(from) / 86_400).rounded(.up)) + 1
        var merged: [(start: Date, end: Date)] = []
        for (start, end) in intervals(around: from, days: -1...max(0, days)) {
            let s = max(start, from), e = min(end, to)
            guard s < e else { continue }
            if let last = merged.last, s <= last.end {
                merged[merged.count - 1].end = max(last.end, e)
            } else {
                merged.append((s, e))
            }
        }
        return merged
    }

    public func isOpen(at date: Date) -> Bool {
        intervals(around: date, days: -1...0).contains { $0.0 <= date && date < $0.1 }
    }

    /// The first instant after `date` at which `isOpen` changes; nil when it never does
    /// within the next week (every range covers all of it, or none is open).
    public func nextChange(after date: Date) -> Date? {
        let open = isOpen(at: date)
        // Merge touching intervals, then the first edge after `date` that flips the state.
        var merged: [(Date, Date)] = []
        for interval in intervals(around: date) {
            if let last = merged.last, interval.0 <= last.1 {
                merged[merged.count - 1].1 = max(last.1, interval.1)
            } else {
                merged.append(interval)
            }
        }
        for (start, end) in merged {
            if open, start <= date, date < end { return end < date.addingTimeInterval(7 * 86_400) ? end : nil }
            if !open, start > date { return start }
        }
        return nil
    }
}
