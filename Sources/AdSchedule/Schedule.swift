import AdRuntime
import ControlProtocol
import Foundation

/// What plays when on a signage box (issue 37, docs/schedule.md): `schedule = FILE`, a JSON
/// document with a `version`, read and checked here — every problem named with its JSON path.
/// Paths are as written (relative to the first library folder, or absolute inside one);
/// `ScheduleLoader` resolves them to files, off the loop.
///
/// ```json
/// {"version": 1,
///  "playlists": {"filler": {"items": ["loops"], "order": "shuffle"},
///                "breakfast": {"items": ["menu.mp4", {"path": "board.png", "seconds": 15}], "resume": true}},
///  "default": "filler",
///  "slots": [{"id": "breakfast", "playlist": "breakfast", "hours": "mon-fri 06:00-11:00",
///             "from": "2026-12-01", "until": "2027-01-06", "priority": 10, "weight": 1}],
///  "interrupts": [{"id": "safety", "playlist": "safety", "share": "60s/h"}]}
/// ```
public struct Schedule: Sendable {
    public struct Item: Sendable, Equatable {
        /// As written: a file or a folder (its playable files and images, in name order).
        public var path: String
        /// How long it is shown at most (an image's time on screen; a long file cut).
        public var seconds: Double?
    }

    public struct Playlist: Sendable, Equatable {
        public var name: String
        public var items: [Item]
        public var shuffle: Bool
        /// An item cut by a higher slot or a takeover resumes where it was when the playlist
        /// plays again (else the playlist goes on from its next item).
        public var resume: Bool
    }

    public struct Slot: Sendable {
        public var id: String
        public var playlist: String
        /// Days and hours of the week, local (`WeeklyHours`: DST both ways); nil: always.
        public var hours: WeeklyHours?
        /// Validity: from the start of `from` to the end of `until`, local dates; nil: open.
        public var from: Date?
        public var until: Date?
        public var priority: Int
        public var weight: Int
    }

    public enum Share: Sendable, Equatable {
        /// Seconds of it an hour.
        case secondsPerHour(Double)
        /// A part of the time (0 < fraction ≤ 0.5).
        case fraction(Double)

        /// Seconds of anything else between two of its items, after one of `seconds`.
        public func gap(after seconds: Double) -> Double {
            switch self {
            case .secondsPerHour(let share): max(1, seconds) * 3600 / share
            case .fraction(let part): max(1, seconds) / part
            }
        }
    }

    public struct Interrupt: Sendable {
        public var id: String
        public var playlist: String
        public var share: Share
        public var hours: WeeklyHours?
        public var from: Date?
        public var until: Date?
    }

    public var version: Int
    public var playlists: [String: Playlist]
    /// The filler: whatever nothing else is scheduled for.
    public var defaultPlaylist: String
    public var slots: [Slot]
    public var interrupts: [Interrupt]
    public var timeZone: TimeZone

    /// The largest schedule read, and its counts.
    public static let maxFileBytes = 32 << 20
    public static let maxSlots = 20_000
    public static let maxPlaylists = 2_000
    public static let maxItems = 20_000
    /// Files across every playlist once their folders are read: 2,000 playlists of one folder of
    /// 20,000 files would be 40 million paths at start.
    public static let maxTotalFiles = 200_000
    public static let maxInterrupts = 100

    /// Whether `date` is inside `from`…`until` (local days).
    static func valid(_ date: Date, from: Date?, until: Date?) -> Bool {
        (from.map { date >= $0 } ?? true) && (until.map { date < $0 } ?? true)
    }
}

/// A schedule that cannot be read: every problem, with its JSON path.
public struct ScheduleError: Error, CustomStringConvertible, Sendable {
    public let problems: [String]
    /// What could be read of a document with problems (its good playlists): the loader checks
    /// their files too, so that every problem is named at once, a missing file among them.
    public var partial: Schedule?

    public init(problems: [String], partial: Schedule? = nil) {
        self.problems = problems
        self.partial = partial
    }
    public var description: String {
        problems.prefix(10).joined(separator: "; ") + (problems.count > 10 ? "; and \(problems.count - 10) more" : "")
    }
}

extension Schedule {
    /// Reads a schedule document. `timeZone`: the box's (`timezone`), for hours and dates.
    public static func parse(_ bytes: [UInt8], timeZone: TimeZone) throws(ScheduleError) -> Schedule {
        guard bytes.count <= maxFileBytes else { throw ScheduleError(problems: ["$: larger than \(maxFileBytes >> 20) MiB"]) }
        let root: JSONValue
        do { root = try JSONValue.parse(bytes) } catch { throw ScheduleError(problems: ["$: not JSON: \(error)"]) }
        var problems: [String] = []
        func problem(_ path: String, _ text: String) { if problems.count < 200 { problems.append("\(path): \(text)") } }
        guard let top = root.object else { throw ScheduleError(problems: ["$: not an object"]) }
        for key in top.keys.sorted() where !["version", "playlists", "default", "slots", "interrupts"].contains(key) {
            problem("$.\(key.prefix(64))", "not a key of a schedule (version, playlists, default, slots, interrupts)")
        }
        let version = top["version"]?.integer
        if version != 1 { problem("$.version", "must be 1") }

        var playlists: [String: Playlist] = [:]
        let lists = top["playlists"]?.object ?? [:]
        if top["playlists"]?.object == nil { problem("$.playlists", "an object of named playlists is required") }
        if lists.count > maxPlaylists { problem("$.playlists", "more than \(maxPlaylists) playlists") }
        for (name, value) in lists.sorted(by: { $0.key < $1.key }).prefix(maxPlaylists) {
            let path = "$.playlists.\(name.prefix(64))"
            guard Self.isName(name) else { problem(path, "a playlist's name is 1 to 64 letters, digits and - _ ."); continue }
            guard let fields = value.object else { problem(path, "not an object"); continue }
            for key in fields.keys.sorted() where !["items", "order", "resume"].contains(key) {
                problem("\(path).\(key.prefix(64))", "not a key of a playlist (items, order, resume)")
            }
            var items: [Item] = []
            let written = fields["items"]?.array ?? []
            if written.isEmpty { problem("\(path).items", "a non-empty array of files or folders is required") }
            if written.count > maxItems { problem("\(path).items", "more than \(maxItems) items") }
            for (index, item) in written.prefix(maxItems).enumerated() {
                let itemPath = "\(path).items[\(index)]"
                switch item {
                case .string(let file):
                    if Self.isPath(file) { items.append(Item(path: file, seconds: nil)) } else { problem(itemPath, "not a path (1 to 4096 bytes, no control characters)") }
                case .object(let entry):
                    for key in entry.keys.sorted() where !["path", "seconds"].contains(key) {
                        problem("\(itemPath).\(key.prefix(64))", "not a key of an item (path, seconds)")
                    }
                    guard let file = entry["path"]?.string, Self.isPath(file) else { problem("\(itemPath).path", "a path is required"); continue }
                    var seconds: Double?
                    if let value = entry["seconds"] {
                        if let number = value.number, number.isFinite, number >= 1, number <= 86_400 {
                            seconds = number
                        } else {
                            problem("\(itemPath).seconds", "seconds from 1 to 86400")
                        }
                    }
                    items.append(Item(path: file, seconds: seconds))
                default:
                    problem(itemPath, "a path, or {\"path\", \"seconds\"}")
                }
            }
            var shuffle = false
            switch fields["order"] {
            case nil, .string("sequence")?: break
            case .string("shuffle")?: shuffle = true
            default: problem("\(path).order", "sequence or shuffle")
            }
            var resume = true
            if let value = fields["resume"] {
                if let flag = value.bool { resume = flag } else { problem("\(path).resume", "true or false") }
            }
            playlists[name] = Playlist(name: name, items: items, shuffle: shuffle, resume: resume)
        }
        func playlist(_ value: JSONValue?, _ path: String) -> String {
            guard let name = value?.string else { problem(path, "a playlist's name is required"); return "" }
            if lists[name] == nil { problem(path, "no playlist \"\(name.prefix(64))\"") }
            return name
        }
        let defaultPlaylist = playlist(top["default"], "$.default")

        func dates(_ fields: [String: JSONValue], _ path: String) -> (Date?, Date?) {
            func date(_ key: String, endOfDay: Bool) -> Date? {
                guard let value = fields[key] else { return nil }
                guard let text = value.string, let day = Self.localDay(text, timeZone: timeZone, next: endOfDay) else {
                    problem("\(path).\(key)", "a date YYYY-MM-DD"); return nil
                }
                return day
            }
            let from = date("from", endOfDay: false), until = date("until", endOfDay: true)
            if let from, let until, until <= from { problem("\(path).until", "before \(path).from") }
            return (from, until)
        }
        func hours(_ fields: [String: JSONValue], _ path: String) -> WeeklyHours? {
            guard let value = fields["hours"] else { return nil }
            guard let text = value.string else { problem("\(path).hours", "days and hours as text (mon-fri 06:00-11:00)"); return nil }
            do { return try WeeklyHours(text, timeZone: timeZone, key: "\(path).hours") } catch { problem("\(path).hours", "\(error)"); return nil }
        }

        var slots: [Slot] = []
        var ids = Set<String>()
        let writtenSlots = top["slots"].map { $0.array ?? [] } ?? []
        if let value = top["slots"], value.array == nil { problem("$.slots", "an array") }
        if writtenSlots.count > maxSlots { problem("$.slots", "more than \(maxSlots) slots") }
        for (index, value) in writtenSlots.prefix(maxSlots).enumerated() {
            let path = "$.slots[\(index)]"
            guard let fields = value.object else { problem(path, "not an object"); continue }
            for key in fields.keys.sorted() where !["id", "playlist", "hours", "from", "until", "priority", "weight"].contains(key) {
                problem("\(path).\(key.prefix(64))", "not a key of a slot (id, playlist, hours, from, until, priority, weight)")
            }
            let id = fields["id"]?.string ?? ""
            if !Self.isName(id) { problem("\(path).id", "1 to 64 letters, digits and - _ .") } else if !ids.insert(id).inserted { problem("\(path).id", "\"\(id)\" is used twice") }
            let list = playlist(fields["playlist"], "\(path).playlist")
            let (from, until) = dates(fields, path)
            var priority = 0, weight = 1
            if let value = fields["priority"] {
                if let number = value.integer, (-1000...1000).contains(number) { priority = Int(number) } else { problem("\(path).priority", "an integer from -1000 to 1000") }
            }
            if let value = fields["weight"] {
                if let number = value.integer, (1...1000).contains(number) { weight = Int(number) } else { problem("\(path).weight", "an integer from 1 to 1000") }
            }
            slots.append(Slot(id: id, playlist: list, hours: hours(fields, path), from: from, until: until, priority: priority, weight: weight))
        }

        var interrupts: [Interrupt] = []
        let writtenInterrupts = top["interrupts"].map { $0.array ?? [] } ?? []
        if let value = top["interrupts"], value.array == nil { problem("$.interrupts", "an array") }
        if writtenInterrupts.count > maxInterrupts { problem("$.interrupts", "more than \(maxInterrupts) interrupts") }
        for (index, value) in writtenInterrupts.prefix(maxInterrupts).enumerated() {
            let path = "$.interrupts[\(index)]"
            guard let fields = value.object else { problem(path, "not an object"); continue }
            for key in fields.keys.sorted() where !["id", "playlist", "share", "hours", "from", "until"].contains(key) {
                problem("\(path).\(key.prefix(64))", "not a key of an interrupt (id, playlist, share, hours, from, until)")
            }
            let id = fields["id"]?.string ?? ""
            if !Self.isName(id) { problem("\(path).id", "1 to 64 letters, digits and - _ .") } else if !ids.insert(id).inserted { problem("\(path).id", "\"\(id)\" is used twice") }
            let list = playlist(fields["playlist"], "\(path).playlist")
            guard let share = fields["share"]?.string.flatMap(Self.share) else {
                problem("\(path).share", "seconds an hour (\"60s/h\", 1 to 1800) or a part of the time (\"5%\", above 0 and at most 50)")
                continue
            }
            let (from, until) = dates(fields, path)
            interrupts.append(Interrupt(id: id, playlist: list, share: share, hours: hours(fields, path), from: from, until: until))
        }
        let schedule = Schedule(version: 1, playlists: playlists, defaultPlaylist: defaultPlaylist, slots: slots, interrupts: interrupts, timeZone: timeZone)
        guard problems.isEmpty else { throw ScheduleError(problems: problems, partial: schedule) }
        return schedule
    }

    static func isName(_ text: String) -> Bool {
        (1...64).contains(text.utf8.count) && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }
    }

    public static func isPath(_ text: String) -> Bool {
        (1...4096).contains(text.utf8.count) && !text.unicodeScalars.contains { $0.value < 0x20 || $0.value == 0x7F }
    }

    /// `60s/h` or `5%`.
    static func share(_ text: String) -> Share? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        if trimmed.hasSuffix("%"), let percent = Double(trimmed.dropLast()), percent.isFinite, percent > 0, percent <= 50 {
            return .fraction(percent / 100)
        }
        if trimmed.hasSuffix("s/h"), let seconds = Double(trimmed.dropLast(3)), seconds.isFinite, seconds >= 1, seconds <= 1800 {
            return .secondsPerHour(seconds)
        }
        return nil
    }

    /// The start of local day `text` (YYYY-MM-DD), or of the day after it (`next`).
    static func localDay(_ text: String, timeZone: TimeZone, next: Bool) -> Date? {
        let parts = text.split(separator: "-").map { Int($0) }
        guard text.utf8.count == 10, parts.count == 3, let year = parts[0], let month = parts[1], let day = parts[2],
              (1970...9999).contains(year), (1...12).contains(month), (1...31).contains(day) else { return nil }
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        guard let start = calendar.date(from: DateComponents(year: year, month: month, day: day)),
              calendar.component(.day, from: start) == day else { return nil }
        return next ? calendar.date(byAdding: .day, value: 1, to: start) : start
    }
}
