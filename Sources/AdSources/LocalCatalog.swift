import AdRuntime
import Foundation

/// A bad manifest: which file, which field, why.
public struct CatalogError: Error, Sendable, Equatable, CustomStringConvertible {
    public let file: String
    /// A JSON path: `overlays[1].slots[0].start`, or `line 3, column 7` for a syntax error.
    public let field: String
    public let reason: String

    /// The catalog's other problems, each named as this one is (a catalog is checked whole:
    /// `check-config` prints a line a problem).
    public var more: [CatalogError] = []

    public init(file: String, field: String, reason: String) {
        self.file = file
        self.field = field
        self.reason = reason
    }

    /// Every problem, a line each.
    public var problems: [CatalogError] { [CatalogError(file: file, field: field, reason: reason)] + more }

    public var description: String { problems.map { "\($0.file): \($0.field): \($0.reason)" }.joined(separator: "\n") }
}

/// How often each entry was served per episode, for `max_per_episode`. In memory by default;
/// the daemon keeps them in its state database so that they survive a restart.
/// Threading: any thread (called from the source's requests, off the player's loop).
public protocol FrequencyCounters: Sendable {
    func count(content: String, entry: String) -> Int
    func increment(content: String, entry: String)
    /// When an entry showed, most recent last (at most `maxShows` kept an entry): the hourly
    /// and daily caps and their spacing are measured from these.
    func shows(entry: String) -> [ShowTime]
    func recordShow(entry: String, at time: ShowTime)
}

/// Shows kept an entry (a day's cap can be no larger).
public let maxShows = 10_000

/// `FrequencyCounters` for the life of the process.
public final class MemoryFrequencyCounters: FrequencyCounters {
    private let counts = Locked<[String: Int]>([:])
    private let log = Locked<[String: [ShowTime]]>([:])
    public init() {}
    public func count(content: String, entry: String) -> Int { counts.withLock { $0["\(content)\u{1}\(entry)", default: 0] } }
    public func increment(content: String, entry: String) { counts.withLock { $0["\(content)\u{1}\(entry)", default: 0] += 1 } }
    public func shows(entry: String) -> [ShowTime] { log.withLock { $0[entry] ?? [] } }
    public func recordShow(entry: String, at time: ShowTime) {
        log.withLock { log in
            log[entry, default: []].append(time)
            if log[entry]!.count > maxShows { log[entry]!.removeFirst(log[entry]!.count - maxShows) }
        }
    }
}

/// The embedded default ad source (SPEC §4.1): a folder with `catalog.json` and creative
/// files. See docs/catalog.md for the schema.
///
/// - Overlays: each slot of each entry is one ad; a request at position p gets the earliest
///   slot starting at or after p (so a request made when an overlay ends gets the next). Slots
///   are indexed per content id by start: a request costs O(log n) (plus the capped entries
///   it skips).
/// - Pause ads, post-rolls: entries rotate round-robin per episode.
/// - `content` limits an entry to those content ids; `max_per_episode` caps how often an
///   entry is served per episode (`FrequencyCounters`).
/// - A creative file is resolved when it is served (`SafeFile`: a regular file inside the
///   folder once symlinks are resolved); one that is missing or escapes fails that ad only
///   (`loadFailed`); the content plays on.
///
/// Threading: any thread; rotation behind a lock.
public final class LocalCatalog: AdSource {
    public struct Slot: Sendable, Equatable {
        public let start: Double
        public let duration: Double
    }

    public enum Creative: Sendable, Equatable {
        case image(String)
        case text(String)
        case video(String)
    }

    public struct Entry: Sendable, Equatable {
        public let id: String
        public let kind: AdKind
        public let creative: Creative
        public let slots: [Slot]
        public let content: [String]?
        public let maxPerEpisode: Int?
        /// Tracking URLs by VAST event name (`impression`, `start`, `complete`, …), with VAST's macros.
        public let tracking: [String: [String]]
        /// Version 2: when, how often, how much and beside whom it may show.
        public var schedule = EntrySchedule()
        /// Mid-rolls: where in the episode.
        public var at: BreakAt?
        /// Linear ads: seconds after which the viewer may skip it.
        public var skipOffset: Double?
        /// Squeezebacks: how the screen is shared.
        public var squeezeback: SqueezebackLayout?

        func isFor(_ contentID: String) -> Bool { content.map { $0.contains(contentID) } ?? true }

        /// A mid-roll's content time in `content` (a percentage needs its length).
        func time(in content: ContentInfo) -> Double? {
            switch at {
            case .seconds(let seconds)?: seconds
            case .percent(let percent)?: content.duration.map { $0 * percent / 100 }
            case nil: nil
            }
        }
    }

    /// A mid-roll's place in the episode.
    public enum BreakAt: Sendable, Equatable {
        case seconds(Double)
        case percent(Double)
    }

    /// Limits of a manifest: the file's size and what it may hold.
    public static let maxManifestBytes = 64 * 1024 * 1024
    public static let maxSlots = 1_000_000
    public static let maxTextLength = AdText.maxCharacters
    /// Tracking URLs an entry may name for one event.
    public static let maxURLsPerEvent = 64

    public let folder: URL
    public let entries: [Entry]
    private let index: SlotIndex
    /// Pause ads and post-rolls, by kind (overlays are in `index`).
    private let rotated: [AdKind: [Entry]]
    private let counters: any FrequencyCounters
    /// Smooth weighted rotation: each entry's running weight, by "content|kind".
    private let rotation = Locked(SmoothRotation())
    public let version: Int
    private let clock: any ScheduleClock
    private let separation: AdSeparation?
    private let onIneligible: @Sendable (AdKind, String) -> Void
    private let byID: [String: Entry]

    /// Reads and validates `folder/catalog.json`. `timeZone`: the box's, for dayparts and
    /// local flight times; `separation`: competitive separation across every source;
    /// `onIneligible` hears why a request found nothing (`flight`, `daypart`, `cap`, `separation`).
    public init(folder: URL, counters: any FrequencyCounters = MemoryFrequencyCounters(), timeZone: TimeZone = .current,
                clock: any ScheduleClock = SystemScheduleClock(), separation: AdSeparation? = nil,
                onIneligible: @escaping @Sendable (AdKind, String) -> Void = { _, _ in }) throws {
        self.folder = folder
        self.counters = counters
        self.clock = clock
        self.separation = separation
        self.onIneligible = onIneligible
        let file = folder.appendingPathComponent("catalog.json").path
        let data: Data
        do {
            data = try SafeFile.read("catalog.json", inside: folder.path, maxBytes: Self.maxManifestBytes)
        } catch {
            throw CatalogError(file: file, field: "(file)", reason: error.reason)
        }
        (version, entries) = try Self.parse(data, file: file, timeZone: timeZone)
        byID = Dictionary(entries.map { ($0.id, $0) }) { first, _ in first }
        index = SlotIndex(entries)
        rotated = Dictionary(grouping: entries.filter { !$0.kind.isOverPlayingContent }, by: \.kind)
    }

    // MARK: AdSource

    public func ad(for request: AdRequest) async throws -> AdCreative? {
        let contentID = request.content.id
        let now = clock.now()
        var passedOver: [String: Int] = [:]
        let allowed: (Entry) -> Bool = { entry in
            guard let reason = self.ineligible(entry, contentID, now) else { return true }
            passedOver[reason, default: 0] += 1
            return false
        }
        let chosen: (Entry, Slot?)?
        if request.kind == .overlay {
            // The earliest slot any eligible entry has; the entries that share it take turns by
            // their weights (smooth weighted rotation, the episode's state across its slots).
            let candidates = index.earliest(for: contentID, atOrAfter: request.position - 0.001, allowed: allowed)
            if candidates.count > 1, let entry = rotate(candidates.map(\.0), key: "\(contentID)|overlay") {
                chosen = candidates.first { $0.0.id == entry.id }
            } else {
                chosen = candidates.first
            }
        } else if request.kind == .midroll {
            // The break asked for (or the next after the position): among its entries, rotated.
            let wanted = request.breakTime ?? request.position
            let time = midrollTimes(for: request.content).first { $0 >= wanted - 0.001 }
            let eligible = (rotated[.midroll] ?? []).filter { entry in
                entry.isFor(contentID) && time != nil && entry.time(in: request.content).map { abs($0 - time!) <= 0.001 } == true && allowed(entry)
            }
            chosen = rotate(eligible, key: "\(contentID)|midroll@\(time ?? 0)").map { ($0, nil) }
            if let time, var made = try chosen.map({ try creative($0.0, nil) }) {
                made.slotStart = time
                return made
            }
        } else {
            let eligible = (rotated[request.kind] ?? []).filter { $0.isFor(contentID) && allowed($0) }
            chosen = rotate(eligible, key: "\(contentID)|\(request.kind.rawValue)").map { ($0, nil) }
        }
        guard let (entry, slot) = chosen else {
            // Nothing eligible: said with the reason that held back the most entries.
            if let reason = passedOver.max(by: { ($0.value, $1.key) < ($1.value, $0.key) })?.key { onIneligible(request.kind, reason) }
            return nil
        }
        return try creative(entry, slot)
    }

    /// Counted when it shows, not when it is served (a pause that ends before its pause ad
    /// appears uses up nothing): the episode's count and the entry's show log.
    public func didShow(_ creative: AdCreative, content: ContentInfo) {
        guard creative.source == "catalog", let entry = byID[creative.id] else { return }
        counters.increment(content: content.id, entry: entry.id)
        if entry.schedule.perHour != nil || entry.schedule.perDay != nil || entry.schedule.minInterval != nil {
            counters.recordShow(entry: entry.id, at: clock.now())
        }
    }

    /// Why `entry` may not show now over `contentID`, or nil: outside its flight or daypart
    /// (the wall clock as it is now), capped (per episode, per hour, per day, its spacing:
    /// measured so that a clock set back does not re-allow it), separated from an ad shown.
    private func ineligible(_ entry: Entry, _ contentID: String, _ now: ShowTime) -> String? {
        let schedule = entry.schedule
        let wall = Date(timeIntervalSince1970: now.wall)
        if let start = schedule.flightStart, wall < start { return "flight" }
        if let end = schedule.flightEnd, wall >= end { return "flight" }
        if let daypart = schedule.daypart, !daypart.isOpen(at: wall) { return "daypart" }
        if let cap = entry.maxPerEpisode ?? schedule.perEpisode, counters.count(content: contentID, entry: entry.id) >= cap { return "cap" }
        if schedule.perHour != nil || schedule.perDay != nil || schedule.minInterval != nil {
            let shows = counters.shows(entry: entry.id)
            let ages = shows.suffix(max(schedule.perHour ?? 0, schedule.perDay ?? 0, 1)).map { $0.elapsed(until: now) }
            if let perHour = schedule.perHour, ages.filter({ $0 < 3600 }).count >= perHour { return "cap" }
            if let perDay = schedule.perDay, shows.suffix(perDay).filter({ $0.elapsed(until: now) < 86_400 }).count >= perDay { return "cap" }
            // Spread, not a burst at the top of the hour: `min_interval`, else an even spacing.
            let spacing = schedule.minInterval ?? schedule.perHour.map { 3600 / Double($0) } ?? 0
            if spacing > 0, let last = shows.last, last.elapsed(until: now) < spacing { return "cap" }
        }
        if let separation, !separation.allows(advertiser: schedule.advertiser, categories: schedule.categories) { return "separation" }
        return nil
    }

    /// Whether `ad(for:)` could serve something: a slot at or after `position` (overlays), an
    /// entry for this episode (pause ads, post-rolls), under their caps. A binary search and
    /// a lock: cheap enough for the player's loop.
    /// A version 1 catalog answers by its slots and caps alone; with schedules (version 2)
    /// whether an entry is in its flight, daypart, caps and separation is asked at the request,
    /// so this says yes when an entry is there at all (an empty answer is `ad.nofill` with its
    /// reason).
    /// The episode's mid-roll times: every `midrolls` entry for it (a percentage once its length is known).
    public func midrollTimes(for content: ContentInfo) -> [Double] {
        let times = (rotated[.midroll] ?? []).filter { $0.isFor(content.id) }.compactMap { $0.time(in: content) }
        var distinct: [Double] = []
        for time in times.sorted() where distinct.last.map({ time - $0 > 0.001 }) ?? true { distinct.append(time) }
        return distinct
    }

    public func mayFill(_ kind: AdKind, content: ContentInfo, at position: Double) -> Bool {
        if kind == .midroll { return midrollTimes(for: content).contains { $0 >= position - 0.001 } }
        if version == 2 {
            if kind == .overlay { return index.first(for: content.id, atOrAfter: position - 0.001) { _ in true } != nil }
            return (rotated[kind] ?? []).contains { $0.isFor(content.id) }
        }
        if kind == .overlay {
            return index.first(for: content.id, atOrAfter: position - 0.001) { !capped($0, content.id) } != nil
        }
        return (rotated[kind] ?? []).contains { $0.isFor(content.id) && !capped($0, content.id) }
    }

    private func capped(_ entry: Entry, _ contentID: String) -> Bool {
        guard let cap = entry.maxPerEpisode else { return false }
        return counters.count(content: contentID, entry: entry.id) >= cap
    }

    /// Smooth weighted rotation (as nginx's upstreams): each eligible entry's running weight
    /// grows by its weight, the largest is chosen and loses the total — 3 against 1 gives
    /// A A B A, A A B A…, never a streak of chance. Equal weights: round-robin in order.
    private func rotate(_ entries: [Entry], key: String) -> Entry? {
        guard !entries.isEmpty else { return nil }
        let id = rotation.withLock { $0.choose(entries.map { ($0.id, $0.schedule.weight) }, key: key) }
        return entries.first { $0.id == id }
    }

    /// The creative file `name` of the catalog, checked (`SafeFile`): the same check for
    /// serving and for `ads-check`.
    public func creativeFile(_ name: String, maxBytes: Int? = nil) throws(FileRefusal) -> String {
        try SafeFile.check(name, inside: folder.path, maxBytes: maxBytes).path
    }

    private func creative(_ entry: Entry, _ slot: Slot?) throws -> AdCreative {
        func file(_ name: String, _ field: String) throws -> String {
            do {
                return try creativeFile(name)
            } catch {
                throw CatalogError(file: folder.appendingPathComponent("catalog.json").path, field: "\(entry.id).\(field)",
                                   reason: "the creative \(error.reason == "does not exist" ? "file \(name) is missing" : "\(name) \(error.reason)")")
            }
        }
        let content: AdCreativeContent = switch entry.creative {
        case .image(let name): .image(location: try file(name, "image"))
        case .text(let text): .text(text)
        case .video(let name): .video(location: try file(name, "video"))
        }
        var made = AdCreative(id: entry.id, kind: entry.kind, content: content, duration: slot?.duration, slotStart: slot?.start,
                              tracking: entry.tracking, source: "catalog")
        made.advertiser = entry.schedule.advertiser
        made.categories = entry.schedule.categories
        made.skipOffset = entry.skipOffset
        made.squeezeback = entry.squeezeback
        return made
    }
}

/// Overlay slots by start, for every episode and per content id: the earliest slot at or
/// after a position is a binary search away.
private struct SlotIndex: Sendable {
    struct Ref: Sendable {
        let start: Double
        let slot: Int
        let entry: Int
    }

    let entries: [LocalCatalog.Entry]
    let forAll: [Ref]
    let byContent: [String: [Ref]]

    init(_ entries: [LocalCatalog.Entry]) {
        self.entries = entries
        var forAll: [Ref] = []
        var byContent: [String: [Ref]] = [:]
        for (e, entry) in entries.enumerated() where entry.kind.isOverPlayingContent {
            for (s, slot) in entry.slots.enumerated() {
                let ref = Ref(start: slot.start, slot: s, entry: e)
                if let content = entry.content {
                    for id in Set(content) { byContent[id, default: []].append(ref) }
                } else {
                    forAll.append(ref)
                }
            }
        }
        let order: (Ref, Ref) -> Bool = { ($0.start, $0.entry, $0.slot) < ($1.start, $1.entry, $1.slot) }
        self.forAll = forAll.sorted(by: order)
        self.byContent = byContent.mapValues { $0.sorted(by: order) }
    }

    /// The earliest slot for `content` starting at or after `position` whose entry `allowed`.
    func first(for content: String, atOrAfter position: Double,
               allowed: (LocalCatalog.Entry) -> Bool) -> (LocalCatalog.Entry, LocalCatalog.Slot?)? {
        let own = byContent[content] ?? []
        var a = Self.lowerBound(forAll, position), b = Self.lowerBound(own, position)
        while a < forAll.count || b < own.count {
            let pickShared = b >= own.count || (a < forAll.count && forAll[a].start <= own[b].start)
            let ref = pickShared ? forAll[a] : own[b]
            if pickShared { a += 1 } else { b += 1 }
            let entry = entries[ref.entry]
            if allowed(entry) { return (entry, entry.slots[ref.slot]) }
        }
        return nil
    }

    /// Every allowed entry's slot at the earliest start any allowed entry has at or after
    /// `position` (starts within a millisecond are one), in the index's order.
    func earliest(for content: String, atOrAfter position: Double,
                  allowed: (LocalCatalog.Entry) -> Bool) -> [(LocalCatalog.Entry, LocalCatalog.Slot)] {
        let own = byContent[content] ?? []
        var a = Self.lowerBound(forAll, position), b = Self.lowerBound(own, position)
        var found: [(LocalCatalog.Entry, LocalCatalog.Slot)] = []
        var start: Double?
        while a < forAll.count || b < own.count {
            let pickShared = b >= own.count || (a < forAll.count && forAll[a].start <= own[b].start)
            let ref = pickShared ? forAll[a] : own[b]
            if let start, ref.start > start + 0.001 { break }
            if pickShared { a += 1 } else { b += 1 }
            let entry = entries[ref.entry]
            guard allowed(entry), !found.contains(where: { $0.0.id == entry.id }) else { continue }
            start = start ?? ref.start
            found.append((entry, entry.slots[ref.slot]))
        }
        return found
    }

    private static func lowerBound(_ refs: [Ref], _ position: Double) -> Int {
        var low = 0, high = refs.count
        while low < high {
            let mid = (low + high) / 2
            if refs[mid].start < position { low = mid + 1 } else { high = mid }
        }
        return low
    }
}

/// A version 2 catalog entry's schedule (docs/catalog.md): its flight, its daypart in the
/// box's time zone, its caps (counted when it shows), its share of voice, its advertiser and
/// categories (competitive separation).
public struct EntrySchedule: Sendable, Equatable {
    public var flightStart: Date?
    public var flightEnd: Date?
    public var daypart: WeeklyHours?
    public var perHour: Int?
    public var perDay: Int?
    public var perEpisode: Int?
    public var minInterval: Double?
    public var weight = 1
    public var advertiser: String?
    public var categories: [String] = []

    public init() {}

    /// ISO 8601 with an offset (`2026-12-01T09:00:00+01:00`, `…Z`), or without one: local
    /// time in `timeZone` (`2026-12-01T09:00`, `2026-12-01T09:00:00`, `2026-12-01`).
    public static func date(_ text: String, timeZone: TimeZone) -> Date? {
        guard text.utf8.count <= 64 else { return nil }
        let withOffset = ISO8601DateFormatter()
        withOffset.formatOptions = [.withInternetDateTime]
        if let date = withOffset.date(from: text) { return date }
        withOffset.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = withOffset.date(from: text) { return date }
        let local = DateFormatter()
        local.locale = Locale(identifier: "en_US_POSIX")
        local.timeZone = timeZone
        for format in ["yyyy-MM-dd'T'HH:mm:ss", "yyyy-MM-dd'T'HH:mm", "yyyy-MM-dd"] {
            local.dateFormat = format
            if let date = local.date(from: text) { return date }
        }
        return nil
    }
}
