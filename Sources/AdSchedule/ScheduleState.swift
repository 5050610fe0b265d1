import AdRuntime
import ControlProtocol
import Foundation

/// A schedule's files, resolved off the loop (`ScheduleLoader`): each playlist's items as the
/// files they name (a folder's in name order), each with its length cap.
public struct ResolvedSchedule: Sendable {
    public struct File: Sendable, Equatable {
        public var path: String
        public var seconds: Double?
        /// Its length as FFmpeg read it at load (an interrupt's files: the first instant of its
        /// share is half a period of the real length, not of a guess); nil: not measured.
        public var measured: Double?
        public init(path: String, seconds: Double?, measured: Double? = nil) {
            self.path = path
            self.seconds = seconds
            self.measured = measured
        }
    }

    public let schedule: Schedule
    public let files: [String: [File]]

    public init(schedule: Schedule, files: [String: [File]]) {
        self.schedule = schedule
        self.files = files
    }
}

/// What rules the screen: a takeover, a slot, an interrupt, the default playlist, or a person
/// (manual commands, until the schedule's next boundary).
public struct ScheduleRule: Sendable, Equatable {
    public enum Kind: String, Sendable { case takeover, slot, interrupt, `default`, manual }
    public var kind: Kind
    public var id: String
    public var priority: Int?
    public var why: String

    public var json: JSONValue {
        ["kind": .string(kind.rawValue), "id": .string(id), "priority": priority.map { .int(Int64($0)) } ?? .null, "why": .string(why)]
    }
}

/// The next item the schedule plays, and why.
public struct SchedulePick: Sendable, Equatable {
    public var rule: ScheduleRule
    public var playlist: String
    public var index: Int
    public var path: String
    /// Where to start (a cut item resumed); nil: its start.
    public var start: Double?
    /// Its length cap (an image's time on screen).
    public var length: Double?
}

/// A takeover (`adplayerctl takeover`): a file or a playlist, now, above the schedule.
public struct ScheduleTakeover: Sendable {
    public var target: String
    public var files: [ResolvedSchedule.File]
    public var until: Date?
    public var priority: Int
    public var who: String
    public var at: Date
    var cursor = 0

    public init(target: String, files: [ResolvedSchedule.File], until: Date?, priority: Int, who: String, at: Date) {
        self.target = target
        self.files = files
        self.until = until
        self.priority = priority
        self.who = who
        self.at = at
    }

    /// As the state folder keeps it (a takeover survives a restart until its end).
    public var json: JSONValue {
        ["target": .string(target), "files": .array(files.map { ["path": .string($0.path), "seconds": $0.seconds.map { .number($0) } ?? .null] }),
         "until": until.map { .number($0.timeIntervalSince1970) } ?? .null, "priority": .int(Int64(priority)), "who": .string(who),
         "at": .number(at.timeIntervalSince1970)]
    }

    /// Read back from `json` (bounded: a state file may have been edited); nil when it is not one.
    public init?(json: JSONValue) {
        guard let target = json["target"]?.string, target.utf8.count <= 4096, let who = json["who"]?.string, who.utf8.count <= 1024,
              let at = json["at"]?.number, at.isFinite, let list = json["files"]?.array, !list.isEmpty, list.count <= Schedule.maxItems else { return nil }
        var files: [ResolvedSchedule.File] = []
        for file in list {
            guard let path = file["path"]?.string, Schedule.isPath(path) else { return nil }
            let seconds = file["seconds"]?.number.flatMap { $0.isFinite && $0 > 0 && $0 <= 86_400 ? $0 : nil }
            files.append(ResolvedSchedule.File(path: path, seconds: seconds))
        }
        let priority = json["priority"]?.integer.map { Int(max(-1000, min(1_000_000, $0))) } ?? 1_000_000
        let until = json["until"]?.number.flatMap { $0.isFinite ? Date(timeIntervalSince1970: $0) : nil }
        self.init(target: target, files: files, until: until, priority: priority, who: who, at: Date(timeIntervalSince1970: at))
    }
}

/// The schedule's state and its decisions (issue 37, docs/schedule.md), one instance on the
/// player's loop — and the same code on virtual time in `schedule-check` and the tests. Every
/// decision takes the time it is made at: nothing here reads a clock.
///
/// - At each item boundary, `pick(at:)`: a takeover above everything (a higher slot than its
///   priority excepted); else an interrupt that is due (its share of voice spread evenly: the
///   next one due a whole period after the last one started — never two in a row); else the
///   ruling slots of the timeline (equal priorities by weight: smooth weighted rotation); else
///   the default playlist.
/// - At a boundary of the schedule (`nextBoundary(after:)`: the ruling slots change, a
///   takeover ends, a person's override runs out), the player asks `rule(at:)` again; an item
///   cut there is kept for its playlist (`cut`) and resumed when it plays again.
public final class ScheduleState {
    public private(set) var resolved: ResolvedSchedule
    public private(set) var timeline: ScheduleTimeline
    private var rotation = SmoothRotation()
    private var cursors: [String: Int] = [:]
    private var orders: [String: [Int]] = [:]
    private var resumes: [String: (index: Int, position: Double)] = [:]
    private var interruptDue: [String: Date] = [:]
    public private(set) var takeover: ScheduleTakeover?
    /// A person's commands rule until then (the schedule's next boundary when they were given).
    public private(set) var manualUntil: Date?
    private var random: SeededRandom

    public var schedule: Schedule { resolved.schedule }

    public init(_ resolved: ResolvedSchedule, timeline: ScheduleTimeline, now: Date, seed: UInt64 = 0x5EED) {
        self.resolved = resolved
        self.timeline = timeline
        random = SeededRandom(seed: seed)
        startInterrupts(now)
    }

    /// A new schedule (a reload): cursors of playlists that are still there are kept, so is a
    /// takeover; a person's override keeps its time.
    public func replace(_ resolved: ResolvedSchedule, timeline: ScheduleTimeline, now: Date) {
        self.resolved = resolved
        self.timeline = timeline
        cursors = cursors.filter { resolved.files[$0.key] != nil }
        orders = [:]
        resumes = resumes.filter { resolved.files[$0.key] != nil }
        rotation.reset()
        interruptDue = interruptDue.filter { due in resolved.schedule.interrupts.contains { $0.id == due.key } }
        startInterrupts(now)
    }

    public func setTimeline(_ timeline: ScheduleTimeline) { self.timeline = timeline }

    /// A new timeline is due (half its window is behind).
    public func needsTimeline(at now: Date) -> Bool { now >= timeline.from.addingTimeInterval(ScheduleTimeline.window / 2) || now < timeline.from }

    private func startInterrupts(_ now: Date) {
        for interrupt in schedule.interrupts where interruptDue[interrupt.id] == nil {
            // The first one half a period in: spread from the start, not a block at it.
            let file = resolved.files[interrupt.playlist]?.first
            let first = file?.seconds ?? file?.measured ?? 30
            interruptDue[interrupt.id] = now.addingTimeInterval(interrupt.share.gap(after: first) / 2)
        }
    }

    // MARK: What rules

    /// What rules at `now`, not counting interrupts (they are chosen at item boundaries).
    public func rule(at now: Date) -> ScheduleRule {
        if let manualUntil, now < manualUntil {
            return ScheduleRule(kind: .manual, id: "manual", priority: nil, why: "a person's command, until the schedule's next boundary")
        }
        let segment = timeline.segment(at: now)
        if let takeover, takeover.until.map({ now < $0 }) ?? true, takeover.priority >= (segment?.priority ?? Int.min) {
            return ScheduleRule(kind: .takeover, id: takeover.target, priority: takeover.priority, why: "taken over by \(takeover.who)")
        }
        if let segment, !segment.slots.isEmpty {
            let ids = segment.slots.map { schedule.slots[$0].id }
            let why = ids.count == 1 ? "its hours and dates" : "shared by weight with \(ids.count - 1) other slot\(ids.count == 2 ? "" : "s") of priority \(segment.priority ?? 0)"
            return ScheduleRule(kind: .slot, id: ids.joined(separator: ","), priority: segment.priority, why: why)
        }
        return ScheduleRule(kind: .default, id: schedule.defaultPlaylist, priority: nil, why: "nothing else is scheduled")
    }

    /// Whether `pick`, playing, still may at `now` (else the player cuts it at the boundary).
    public func stillRules(_ pick: SchedulePick, at now: Date) -> Bool {
        let rule = self.rule(at: now)
        switch (pick.rule.kind, rule.kind) {
        case (.interrupt, .slot), (.interrupt, .default): return true   // an interrupt item ends by itself
        case (.slot, .slot): return rule.id.split(separator: ",").contains { $0 == Substring(pick.rule.id) }
        default: return pick.rule.kind == rule.kind && pick.rule.id == rule.id
        }
    }

    /// The next item, at an item boundary at `now`; nil under a person's override.
    public func pick(at now: Date) -> SchedulePick? {
        let rule = self.rule(at: now)
        switch rule.kind {
        case .manual:
            return nil
        case .takeover:
            guard var current = takeover, !current.files.isEmpty else { return nil }
            let file = current.files[current.cursor % current.files.count]
            current.cursor += 1
            takeover = current
            return SchedulePick(rule: rule, playlist: "", index: (current.cursor - 1) % current.files.count, path: file.path, start: nil,
                                length: file.seconds)
        case .slot, .default, .interrupt:
            if let interrupt = dueInterrupt(at: now), let pick = next(in: interrupt.playlist, at: now, resuming: false) {
                return SchedulePick(rule: ScheduleRule(kind: .interrupt, id: interrupt.id, priority: nil,
                                                       why: "its share of voice (\(Self.describe(interrupt.share)))"),
                                    playlist: interrupt.playlist, index: pick.index, path: pick.path, start: nil, length: pick.length)
            }
            if rule.kind == .slot, let segment = timeline.segment(at: now) {
                let slots = segment.slots.map { schedule.slots[$0] }
                let chosen = slots.count == 1 ? slots[0].id
                    : rotation.choose(slots.map { ($0.id, $0.weight) }, key: slots.map(\.id).joined(separator: ",")) ?? slots[0].id
                if rotation.keys > 10_000 { rotation.reset() }
                if let slot = slots.first(where: { $0.id == chosen }), let pick = next(in: slot.playlist, at: now, resuming: true) {
                    let why = slots.count == 1 ? rule.why : "by weight among \(slots.map(\.id).joined(separator: ", ")) (priority \(slot.priority))"
                    return SchedulePick(rule: ScheduleRule(kind: .slot, id: slot.id, priority: slot.priority, why: why), playlist: slot.playlist,
                                        index: pick.index, path: pick.path, start: pick.start, length: pick.length)
                }
            }
            guard let pick = next(in: schedule.defaultPlaylist, at: now, resuming: true) else { return nil }
            return SchedulePick(rule: ScheduleRule(kind: .default, id: schedule.defaultPlaylist, priority: nil, why: "nothing else is scheduled"),
                                playlist: schedule.defaultPlaylist, index: pick.index, path: pick.path, start: pick.start, length: pick.length)
        }
    }

    private func dueInterrupt(at now: Date) -> Schedule.Interrupt? {
        schedule.interrupts.first { interrupt in
            guard let due = interruptDue[interrupt.id], due <= now, Schedule.valid(now, from: interrupt.from, until: interrupt.until) else { return false }
            return interrupt.hours?.isOpen(at: now) ?? true
        }
    }

    /// An interrupt's item played `seconds` from `started`: the next is due a period after the
    /// instant this one was due — the wait for an item's end is made up, so the share holds
    /// over the hour (starting a period after its start lost every wait) — and never sooner
    /// than half a period after this one started (no two in a row).
    public func interruptPlayed(_ id: String, seconds: Double, startedAt started: Date) {
        guard let interrupt = schedule.interrupts.first(where: { $0.id == id }) else { return }
        let gap = interrupt.share.gap(after: seconds)
        let due = min(interruptDue[id] ?? started, started)
        interruptDue[id] = max(due.addingTimeInterval(gap), started.addingTimeInterval(gap / 2))
    }

    /// The playlist's next item: a cut one where it was (`resuming`, when the playlist
    /// resumes), else the next in its order (a shuffle drawn again once played through).
    private func next(in playlist: String, at now: Date, resuming: Bool) -> (index: Int, path: String, start: Double?, length: Double?)? {
        guard let files = resolved.files[playlist], !files.isEmpty else { return nil }
        if resuming, let resume = resumes.removeValue(forKey: playlist), files.indices.contains(resume.index) {
            let file = files[resume.index]
            return (resume.index, file.path, resume.position, file.seconds.map { max(1, $0 - resume.position) })
        }
        let cursor = cursors[playlist, default: 0]
        var index = cursor % files.count
        if schedule.playlists[playlist]?.shuffle == true {
            if cursor % files.count == 0 || orders[playlist]?.count != files.count {
                var order = Array(files.indices)
                random.shuffle(&order)
                orders[playlist] = order
            }
            index = orders[playlist]![cursor % files.count]
        }
        cursors[playlist] = (cursor + 1) % (files.count * 1_000_000)
        return (index, files[index].path, nil, files[index].seconds)
    }

    /// `pick` was cut at `position` seconds (a boundary, a takeover): resumed there when its
    /// playlist plays again, if the playlist resumes.
    public func cut(_ pick: SchedulePick, at position: Double) {
        guard pick.rule.kind == .slot || pick.rule.kind == .default, schedule.playlists[pick.playlist]?.resume == true,
              position.isFinite, position > 1 else { return }
        resumes[pick.playlist] = (pick.index, position)
    }

    // MARK: Boundaries, people, takeovers

    /// The next instant at which what rules may change: the ruling slots change, a takeover
    /// ends, a person's override runs out; nil past the timeline.
    public func nextBoundary(after now: Date) -> Date? {
        var candidates: [Date] = []
        if let change = timeline.nextChange(after: now) { candidates.append(change) }
        if let until = takeover?.until, until > now { candidates.append(until) }
        if let manualUntil, manualUntil > now { candidates.append(manualUntil) }
        return candidates.min()
    }

    /// A person's command (open, queue, jump…): it rules until the schedule's next boundary —
    /// the end of the slots that rule now — and never more than `atMost` seconds.
    public func manual(at now: Date, atMost: Double) {
        let limit = now.addingTimeInterval(atMost)
        manualUntil = min(timeline.nextChange(after: now) ?? limit, limit)
    }

    /// `schedule auto`: the schedule rules again now.
    public func automatic() { manualUntil = nil }

    public func startTakeover(_ takeover: ScheduleTakeover) {
        self.takeover = takeover
        manualUntil = nil
    }

    /// Ends the takeover (`takeover end`, or its time ran out); returns it.
    @discardableResult
    public func endTakeover() -> ScheduleTakeover? {
        defer { takeover = nil }
        return takeover
    }

    /// A takeover whose time ran out is over.
    public func expireTakeover(at now: Date) -> ScheduleTakeover? {
        guard let until = takeover?.until, now >= until else { return nil }
        return endTakeover()
    }

    // MARK: Seeing it

    /// `status.schedule`: what rules and why, what plays, the next change.
    public func describe(at now: Date, playing: SchedulePick?) -> JSONValue {
        var fields: [String: JSONValue] = ["rule": (playing?.rule ?? rule(at: now)).json,
                                           "next_change": nextBoundary(after: now).map { .string(ISO8601.format($0.timeIntervalSince1970)) } ?? .null]
        if let playing { fields["playing"] = ["playlist": .string(playing.playlist), "path": .string(playing.path), "index": .int(Int64(playing.index))] }
        if let manualUntil, manualUntil > now { fields["override_until"] = .string(ISO8601.format(manualUntil.timeIntervalSince1970)) }
        if let takeover {
            fields["takeover"] = ["target": .string(takeover.target), "who": .string(takeover.who), "priority": .int(Int64(takeover.priority)),
                                  "since": .string(ISO8601.format(takeover.at.timeIntervalSince1970)),
                                  "until": takeover.until.map { .string(ISO8601.format($0.timeIntervalSince1970)) } ?? .null]
        }
        return .object(fields)
    }

    static func describe(_ share: Schedule.Share) -> String {
        switch share {
        case .secondsPerHour(let seconds): "\(String(format: "%g", seconds)) s an hour"
        case .fraction(let part): "\(String(format: "%g", part * 100)) % of the time"
        }
    }
}

/// A small deterministic generator (SplitMix64): shuffles that a seed repeats.
public typealias SeededRandom = SplitMix64

extension SplitMix64 {
    mutating func shuffle(_ array: inout [Int]) { array.shuffle(using: &self) }
}
