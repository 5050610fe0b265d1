import AdRuntime
import Foundation

/// The catalog's manifest (docs/ads.md): its JSON decoded and every field checked, each problem
/// named with its JSON path; serving and rotation are in LocalCatalog.swift.
extension LocalCatalog {
    private struct Manifest: Decodable {
        let version: Int
        let overlays: [Decoded<EntryJSON>]?
        let pauseAds: [Decoded<EntryJSON>]?
        let postrolls: [Decoded<EntryJSON>]?
        let prerolls: [Decoded<EntryJSON>]?
        let midrolls: [Decoded<EntryJSON>]?
        let squeezebacks: [Decoded<EntryJSON>]?
        let screensavers: [Decoded<EntryJSON>]?

        enum CodingKeys: String, CodingKey {
            case version, overlays, postrolls, prerolls, midrolls, squeezebacks, screensavers
            case pauseAds = "pause_ads"
        }
    }

    /// An entry decoded on its own: one that does not decode is a problem of that entry, and
    /// the others are still read (every problem of a catalog is named, not the first alone).
    private enum Decoded<T: Decodable>: Decodable {
        case value(T)
        case failure(DecodingError)

        init(from decoder: any Decoder) throws {
            do {
                self = .value(try T(from: decoder))
            } catch let error as DecodingError {
                self = .failure(error)
            }
        }
    }

    private struct EntryJSON: Decodable {
        let id: String
        let image: String?
        let text: String?
        let video: String?
        let slots: [SlotJSON]?
        let content: [String]?
        let maxPerEpisode: WholeNumber?
        let impression: [String]?
        let tracking: [String: [String]]?
        let click: String?
        // Version 2.
        let flight: FlightJSON?
        let daypart: [DaypartJSON]?
        let cap: CapJSON?
        let weight: WholeNumber?
        let advertiser: String?
        let categories: [String]?
        // Linear ads.
        let at: BreakAtJSON?
        let skipOffset: Double?
        // Squeezebacks.
        let layout: String?
        let scale: Double?
        let transition: Double?
        let background: String?

        enum CodingKeys: String, CodingKey {
            case id, image, text, video, slots, content, impression, tracking, click, flight, daypart, cap, weight, advertiser, categories, at
            case layout, scale, transition, background
            case maxPerEpisode = "max_per_episode"
            case skipOffset = "skip_offset"
        }

        var hasVersion2Fields: Bool {
            flight != nil || daypart != nil || cap != nil || weight != nil || advertiser != nil || categories != nil
        }
    }

    /// A count in the manifest (a weight, a cap): a JSON number that is a whole number, or an
    /// error that names its field (`1.5` is "must be a whole number", not a broken document).
    struct WholeNumber: Decodable, Equatable {
        let value: Int

        init(from decoder: any Decoder) throws {
            let container = try decoder.singleValueContainer()
            let number = try container.decode(Double.self)
            guard number.isFinite, number == number.rounded(), abs(number) <= 1e9 else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "must be a whole number, not \(number)")
            }
            value = Int(number)
        }
    }

    /// A mid-roll's `at`: seconds (a number) or a percentage of the episode (`"25%"`).
    private enum BreakAtJSON: Decodable {
        case seconds(Double)
        case percent(String)

        init(from decoder: any Decoder) throws {
            let value = try decoder.singleValueContainer()
            if let seconds = try? value.decode(Double.self) {
                self = .seconds(seconds)
            } else {
                self = .percent(try value.decode(String.self))
            }
        }
    }

    private struct FlightJSON: Decodable {
        let start: String?
        let end: String?
    }

    private struct DaypartJSON: Decodable {
        let days: [String]
        let from: String
        let to: String
    }

    private struct CapJSON: Decodable {
        let perHour: WholeNumber?
        let perDay: WholeNumber?
        let perEpisode: WholeNumber?
        let minInterval: Double?

        enum CodingKeys: String, CodingKey {
            case perHour = "per_hour", perDay = "per_day", perEpisode = "per_episode", minInterval = "min_interval"
        }
    }

    private struct SlotJSON: Decodable {
        let start: Double
        let duration: Double
    }

    static func parse(_ data: Data, file: String, timeZone: TimeZone = .current) throws -> (Int, [Entry]) {
        func fail(_ field: String, _ reason: String) -> CatalogError { CatalogError(file: file, field: field, reason: reason) }
        let manifest: Manifest
        do {
            manifest = try JSONDecoder().decode(Manifest.self, from: data)
        } catch let error as DecodingError {
            throw Self.describe(error, data: data, file: file)
        }
        guard manifest.version == 1 || manifest.version == 2 else {
            throw fail("version", "\(manifest.version) is not supported (1, or 2 with schedules)")
        }
        var entries: [Entry] = []
        var ids = Set<String>()
        var slotCount = 0
        var problems: [CatalogError] = []
        for (key, kind, list) in [("overlays", AdKind.overlay, manifest.overlays), ("pause_ads", .pauseAd, manifest.pauseAds),
                                  ("postrolls", .postroll, manifest.postrolls), ("prerolls", .preroll, manifest.prerolls),
                                  ("midrolls", .midroll, manifest.midrolls), ("squeezebacks", .squeezeback, manifest.squeezebacks),
                                  ("screensavers", .screensaver, manifest.screensavers)] {
            for (index, decoded) in (list ?? []).enumerated() {
                let path = "\(key)[\(index)]"
                do {
                let entry: EntryJSON
                switch decoded {
                case .value(let value): entry = value
                case .failure(let error): throw Self.describe(error, data: data, file: file)
                }
                if let refusal = AdIdentifier.refusal(entry.id) { throw fail("\(path).id", "must be a non-empty id on one line of at most \(AdIdentifier.maxBytes) bytes: \(refusal)") }
                guard ids.insert(entry.id).inserted else { throw fail("\(path).id", "\"\(entry.id)\" is used twice") }
                let creative: Creative
                switch kind {
                case .overlay, .pauseAd, .squeezeback:
                    if let image = entry.image, entry.text == nil, !image.isEmpty {
                        creative = .image(image)
                    } else if let text = entry.text, entry.image == nil, !text.isEmpty {
                        if let refusal = AdText.refusal(text) { throw fail("\(path).text", refusal) }
                        creative = .text(text)
                    } else {
                        throw fail(path, "needs exactly one of \"image\" (a file) or \"text\" (a non-empty string)")
                    }
                case .screensaver:
                    // Full-screen images (R27); a screen that idles is not read from.
                    guard let image = entry.image, entry.text == nil, entry.video == nil, !image.isEmpty else {
                        throw fail(path, "needs \"image\" (a file): a screensaver is a picture")
                    }
                    creative = .image(image)
                case .postroll, .preroll, .midroll:
                    guard let video = entry.video, !video.isEmpty else { throw fail("\(path).video", "missing, or not a file name") }
                    creative = .video(video)
                }
                var at: BreakAt?
                switch (kind, entry.at) {
                case (.midroll, nil): throw fail("\(path).at", "a mid-roll needs its time: seconds, or a percentage of the episode (\"25%\")")
                case (.midroll, .seconds(let seconds)?):
                    guard seconds > 0, seconds <= Seconds.Bounds.position.maximum else { throw fail("\(path).at", "must be a time in the episode after its start (seconds > 0)") }
                    at = .seconds(seconds)
                case (.midroll, .percent(let text)?):
                    guard text.hasSuffix("%"), let percent = Double(text.dropLast()), percent > 0, percent < 100 else {
                        throw fail("\(path).at", "\"\(text.prefix(32))\" is not a percentage of the episode between 0 and 100 (\"25%\")")
                    }
                    at = .percent(percent)
                case (_, nil): break
                case (_, _?): throw fail("\(path).at", "only mid-rolls have a time")
                }
                if let skip = entry.skipOffset {
                    guard kind.isLinear else { throw fail("\(path).skip_offset", "only linear ads (pre-, mid-, post-rolls) can be skipped") }
                    guard skip >= 0, skip <= Seconds.Bounds.duration.maximum else { throw fail("\(path).skip_offset", "must be seconds ≥ 0") }
                }
                var layout: SqueezebackLayout?
                if kind == .squeezeback {
                    layout = try Self.squeezeback(entry, path: path, fail: fail)
                } else if entry.layout != nil || entry.scale != nil || entry.transition != nil || entry.background != nil {
                    throw fail(path, "layout, scale, transition and background are a squeezeback's")
                }
                var slots: [Slot] = []
                if kind.isOverPlayingContent {
                    guard let list = entry.slots, !list.isEmpty else {
                        throw fail("\(path).slots", "\(kind == .overlay ? "an overlay" : "a squeezeback") needs at least one slot")
                    }
                    slotCount += list.count
                    guard slotCount <= maxSlots else { throw fail("\(path).slots", "more than \(maxSlots) slots in the catalog") }
                    slots.reserveCapacity(list.count)
                    for (s, slot) in list.enumerated() {
                        do {
                            slots.append(Slot(start: try Seconds.check(slot.start, .position, field: "\(path).slots[\(s)].start"),
                                              duration: try Seconds.check(slot.duration, .duration, field: "\(path).slots[\(s)].duration")))
                        } catch {
                            throw fail(error.field, error.reason)
                        }
                    }
                }
                if let content = entry.content, content.contains(where: \.isEmpty) {
                    throw fail("\(path).content", "must be an array of non-empty content ids")
                }
                if let cap = entry.maxPerEpisode?.value, cap <= 0 { throw fail("\(path).max_per_episode", "must be a positive integer") }
                var tracking = entry.tracking ?? [:]
                if let impression = entry.impression { tracking["impression", default: []] += impression }
                if let click = entry.click { tracking["clickThrough", default: []].append(click) }
                for (event, urls) in tracking {
                    guard !event.isEmpty, event.count <= 64, urls.count <= maxURLsPerEvent else {
                        throw fail("\(path).tracking", "\"\(event.prefix(64))\": at most \(maxURLsPerEvent) URLs an event, under a name of at most 64 characters")
                    }
                    if let bad = urls.first(where: { !($0.hasPrefix("http://") || $0.hasPrefix("https://")) || $0.utf8.count > 16 * 1024 }) {
                        throw fail("\(path).tracking.\(event)", "\"\(bad.prefix(80))\" is not an http(s) URL of at most 16 KiB")
                    }
                }
                var made = Entry(id: entry.id, kind: kind, creative: creative, slots: slots.sorted { $0.start < $1.start },
                                 content: entry.content, maxPerEpisode: entry.maxPerEpisode?.value, tracking: tracking)
                made.at = at
                made.skipOffset = entry.skipOffset
                made.squeezeback = layout
                if entry.hasVersion2Fields {
                    guard manifest.version == 2 else {
                        throw fail(path, "flight, daypart, cap, weight, advertiser and categories need \"version\": 2")
                    }
                    made.schedule = try Self.schedule(entry, path: path, timeZone: timeZone, fail: fail)
                }
                entries.append(made)
                } catch let problem as CatalogError {
                    problems.append(problem)   // the next entry is checked too: every problem is said
                }
            }
        }
        if var first = problems.first {
            first.more = Array(problems.dropFirst().prefix(99))
            throw first
        }
        return (manifest.version, entries)
    }

    /// A squeezeback's layout, every field checked (`SqueezebackLayout.checked`, R26).
    private static func squeezeback(_ entry: EntryJSON, path: String, fail: (String, String) -> CatalogError) throws -> SqueezebackLayout {
        do {
            return try SqueezebackLayout.checked(layout: entry.layout, scale: entry.scale, transition: entry.transition, background: entry.background)
        } catch {
            throw fail("\(path).\(error.field)", error.reason)
        }
    }

    /// A version 2 entry's schedule, every field checked.
    private static func schedule(_ entry: EntryJSON, path: String, timeZone: TimeZone,
                                 fail: (String, String) -> CatalogError) throws -> EntrySchedule {
        var schedule = EntrySchedule()
        if let flight = entry.flight {
            func time(_ text: String?, _ field: String) throws -> Date? {
                guard let text else { return nil }
                guard let date = EntrySchedule.date(text, timeZone: timeZone) else {
                    throw fail("\(path).flight.\(field)", "\"\(text.prefix(64))\" is not an ISO 8601 time (2026-12-01T09:00:00+01:00, or local: 2026-12-01T09:00)")
                }
                return date
            }
            schedule.flightStart = try time(flight.start, "start")
            schedule.flightEnd = try time(flight.end, "end")
            if let start = schedule.flightStart, let end = schedule.flightEnd, end <= start {
                throw fail("\(path).flight", "ends before it starts")
            }
        }
        if let daypart = entry.daypart {
            guard !daypart.isEmpty, daypart.count <= 64 else { throw fail("\(path).daypart", "1 to 64 parts") }
            var groups: [String] = []
            for (i, part) in daypart.enumerated() {
                guard !part.days.isEmpty, part.days.count <= 7 else { throw fail("\(path).daypart[\(i)].days", "1 to 7 days (mon … sun)") }
                groups += part.days.map { "\($0) \(part.from)-\(part.to)" }
            }
            do {
                schedule.daypart = try WeeklyHours(groups.joined(separator: ", "), timeZone: timeZone, key: "\(path).daypart")
            } catch {
                throw fail("\(path).daypart", "\(error)".replacingOccurrences(of: "\(path).daypart: ", with: ""))
            }
        }
        if let cap = entry.cap {
            for (value, name) in [(cap.perHour?.value, "per_hour"), (cap.perDay?.value, "per_day"), (cap.perEpisode?.value, "per_episode")] {
                if let value, !(1...maxShows).contains(value) { throw fail("\(path).cap.\(name)", "1 to \(maxShows)") }
            }
            schedule.perHour = cap.perHour?.value
            schedule.perDay = cap.perDay?.value
            schedule.perEpisode = cap.perEpisode?.value
            if let interval = cap.minInterval {
                do {
                    schedule.minInterval = try Seconds.check(interval, .delay, field: "\(path).cap.min_interval")
                } catch {
                    throw fail(error.field, error.reason)
                }
            }
        }
        if let weight = entry.weight?.value {
            guard (1...1000).contains(weight) else { throw fail("\(path).weight", "an integer from 1 to 1000") }
            schedule.weight = weight
        }
        if let advertiser = entry.advertiser {
            guard !advertiser.isEmpty, advertiser.count <= 256 else { throw fail("\(path).advertiser", "1 to 256 characters") }
            schedule.advertiser = advertiser
        }
        if let categories = entry.categories {
            guard categories.count <= 32, categories.allSatisfy({ !$0.isEmpty && $0.count <= 128 }) else {
                throw fail("\(path).categories", "at most 32 non-empty names of at most 128 characters")
            }
            schedule.categories = categories
        }
        return schedule
    }

    /// A decoding error as a field and a reason in words; a syntax error with its line and column.
    private static func describe(_ error: DecodingError, data: Data, file: String) -> CatalogError {
        func path(_ codingPath: [any CodingKey]) -> String {
            var out = ""
            for key in codingPath {
                if let index = key.intValue { out += "[\(index)]" } else { out += (out.isEmpty ? "" : ".") + key.stringValue }
            }
            return out.isEmpty ? "(document)" : out
        }
        switch error {
        case .keyNotFound(let key, let context):
            return CatalogError(file: file, field: path(context.codingPath + [key]), reason: "missing")
        case .typeMismatch(let type, let context):
            return CatalogError(file: file, field: path(context.codingPath), reason: "must be \(Self.noun(type))")
        case .valueNotFound(let type, let context):
            return CatalogError(file: file, field: path(context.codingPath), reason: "must be \(Self.noun(type)), not null")
        case .dataCorrupted(let context) where !context.codingPath.isEmpty:
            return CatalogError(file: file, field: path(context.codingPath), reason: context.debugDescription)
        default:
            return syntaxError(data, file: file)
        }
    }

    private static func noun(_ type: Any.Type) -> String {
        switch type {
        case is Double.Type: "a number of seconds"
        case is Int.Type: "an integer"
        case is String.Type: "a string"
        case is [String].Type: "an array of strings"
        default: String(describing: type).hasPrefix("Array") ? "an array" : "an object"
        }
    }

    /// Where the JSON is broken, as line and column (JSONDecoder does not say; JSONSerialization
    /// gives the character offset).
    private static func syntaxError(_ data: Data, file: String) -> CatalogError {
        guard String(data: data, encoding: .utf8) != nil else {
            return CatalogError(file: file, field: "(document)", reason: "not UTF-8 text")
        }
        do {
            _ = try JSONSerialization.jsonObject(with: data)
            return CatalogError(file: file, field: "(document)", reason: "not a catalog manifest")
        } catch {
            let text = ((error as NSError).userInfo[NSDebugDescriptionErrorKey] as? String) ?? "not valid JSON"
            var offset = text.components(separatedBy: "character ").last
                .flatMap { Int($0.trimmingCharacters(in: CharacterSet(charactersIn: ". "))) }
            if offset == nil, text.hasPrefix("Number "), let number = text.dropFirst(7).split(separator: " ").first,
               let range = data.range(of: Data(number.utf8)) {
                offset = range.lowerBound   // "Number 1e999 is not representable": where it is written
            }
            guard let offset, offset >= 0 else {
                return CatalogError(file: file, field: "(document)", reason: "not valid JSON: \(text)")
            }
            var line = 1, column = 1
            for (i, byte) in data.enumerated() where i < offset {
                if byte == 10 { line += 1; column = 1 } else if byte & 0xC0 != 0x80 { column += 1 }
            }
            let what = text.components(separatedBy: " around").first ?? text
            return CatalogError(file: file, field: "line \(line), column \(column)", reason: "not valid JSON: \(what)")
        }
    }
}
