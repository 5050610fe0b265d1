import AdPlayerDaemon
import AdRuntime
import AdSources
import ControlProtocol
import Foundation

/// The rules a simulation checks (docs/simulate.md, "The rules"): one JUnit test case each,
/// every failure naming the ad, the simulated time and the evidence.
///
/// Checked as the run goes (`RuleBook`): what each rule needs is kept only as long as it can
/// still matter — an ad until a while after its end, a creative's shows for a day, a VMAP
/// viewing until the next — so that a month's run holds no more than a day's.
public enum SimulationRules {
    public struct Failure: Sendable, Equatable {
        public var at: Double
        public var message: String
    }

    public struct Result: Sendable {
        public var name: String
        /// What was checked (the case's `system-out`): counts, and what could not be checked.
        public var checked: String
        /// The first failures (at most `maxKept`), and how many there were in all.
        public var failures: [Failure]
        public var failureCount: Int
        public var passed: Bool { failureCount == 0 }
    }

    /// Caps an ad server promised for its creatives (`--expect`), besides the catalogs' own.
    public struct Cap: Sendable, Equatable {
        public var perHour: Int?
        public var perDay: Int?
        public var perEpisode: Int?
        public var minInterval: Double?
        public var daypart: WeeklyHours?
        public var flightStart: Double?
        public var flightEnd: Double?
        public init() {}
    }

    public static let names = ["impressions-once", "quartiles-in-order", "nothing-billed-unshown", "vmap-breaks", "macros-filled",
                               "caps-separation-dayparts-flights", "pop-deadline", "overlays-end-on-pause", "screen-lit", "media-plays",
                               "simulation-ran"]

    /// Failures kept a rule (the report says how many more).
    public static let maxKept = 1000

    static let quartileEvents: [(event: String, fraction: Double)] = [("firstQuartile", 0.25), ("midpoint", 0.5), ("thirdQuartile", 0.75), ("complete", 1)]
    static let billable: Set<String> = ["impression", "creativeView", "start", "firstQuartile", "midpoint", "thirdQuartile", "complete"]

    /// Whether `url` is `template` with its macros filled: the template's literal pieces, in order.
    /// Bytes compared (no Foundation search: every beacon of a day is matched against templates).
    static func matches(_ url: String, template: String) -> Bool {
        let text = Array(url.utf8)
        var pieces: [ArraySlice<UInt8>] = []
        let pattern = Array(template.utf8)
        var start = 0
        var index = 0
        while index < pattern.count {
            if pattern[index] == UInt8(ascii: "["), let close = pattern[index...].firstIndex(of: UInt8(ascii: "]")) {
                pieces.append(pattern[start..<index])
                start = close + 1
                index = close + 1
            } else {
                index += 1
            }
        }
        pieces.append(pattern[start...])
        var at = 0
        for (number, piece) in pieces.enumerated() where !piece.isEmpty {
            if number == 0 {
                guard text.count >= piece.count, text[0..<piece.count].elementsEqual(piece) else { return false }
                at = piece.count
            } else {
                guard let found = Self.find(piece, in: text, from: at) else { return false }
                at = found + piece.count
            }
        }
        return true
    }

    /// Where `piece` first occurs in `text` at or after `from`.
    private static func find(_ piece: ArraySlice<UInt8>, in text: [UInt8], from: Int) -> Int? {
        guard let first = piece.first, text.count - from >= piece.count else { return nil }
        var index = from
        let last = text.count - piece.count
        while index <= last {
            if text[index] == first, text[index..<index + piece.count].elementsEqual(piece) { return index }
            index += 1
        }
        return nil
    }

    /// What `url` has where `template` has `[NAME]`: the text between the literal pieces around it.
    static func value(of name: String, in url: String, template: String) -> String? {
        guard let macro = template.range(of: "[\(name)]") else { return nil }
        let before = template[..<macro.lowerBound].split(separator: "]", omittingEmptySubsequences: false).last.map(String.init) ?? ""
        let after = template[macro.upperBound...].split(separator: "[", omittingEmptySubsequences: false).first.map(String.init) ?? ""
        guard let start = before.isEmpty ? url.startIndex : url.range(of: before)?.upperBound else { return nil }
        let rest = url[start...]
        guard let end = after.isEmpty ? rest.endIndex : rest.range(of: after)?.lowerBound else { return nil }
        return String(rest[..<end])
    }

    /// `HH:MM:SS(.mmm)` in seconds.
    static func clockSeconds(_ text: String) -> Double? {
        let parts = text.split(separator: ":")
        guard parts.count == 3, let h = Double(parts[0]), let m = Double(parts[1]), let s = Double(parts[2]) else { return nil }
        return h * 3600 + m * 60 + s
    }

    /// ISO 8601 times with milliseconds in `text` (what `[TIMESTAMP]` writes).
    private static let timestampPattern = try? NSRegularExpression(pattern: "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}(Z|[+-][0-9]{2}:[0-9]{2})")

    static func timestamps(in text: String) -> [String] {
        // Most URLs carry none: a 'T' between digits is looked for first.
        guard text.utf8.contains(UInt8(ascii: "T")), let pattern = timestampPattern else { return [] }
        let range = NSRange(text.startIndex..., in: text)
        return pattern.matches(in: text, range: range).compactMap { Range($0.range, in: text).map { String(text[$0]) } }
    }

    static func describe(_ offset: VMAPDocument.Offset) -> String {
        switch offset {
        case .start: "start"
        case .end: "end"
        case .seconds(let t): "at \(String(format: "%g", t)) s"
        case .percent(let p): "at \(String(format: "%g", p)) %"
        case .position(let n): "cue point #\(n)"
        }
    }
}

/// The rules, checked as the run goes: told every ad event, player change, surface change,
/// exchange and viewer step in the order they happened (`tick` as time passes), then
/// `finish`. What each rule needs is kept only while it can still matter.
///
/// Threading: any thread (one lock); calls in the order things happened.
public final class RuleBook: @unchecked Sendable {
    // @unchecked: `state` behind its lock; the rest immutable.
    public struct Settings: Sendable {
        public var caps: [String: SimulationRules.Cap] = [:]
        /// `ad-separation`, seconds (0: none).
        public var separation = 0.0
        /// The box's `pop-deadline`.
        public var popDeadline: Double?
        /// Beacons were sent for real: an impression must have been answered 2xx.
        public var sentBeacons = false
        /// The box follows a schedule: a person's `stop` darkens it for at most its override.
        public var scheduled = false
        /// The longest stretch with nothing on screen that is not a gap (seconds).
        public var maxDark = 5.0
        /// After a viewer's `stop` or `clear`: the screen may stay dark this long (a schedule's
        /// override), or for good without a schedule (nil).
        public var personDark: Double? = 600
        /// The run's start (simulated wall time): the screen is dark from there until something
        /// plays — a run where nothing ever played fails `screen-lit` for all of it.
        public var start: Double?
        public init() {}
    }

    private struct Ad {
        var id: UInt64
        var play: String { String(id, radix: 16) }
        var kind: AdKind
        var creativeID: String
        var contentID: String
        var creative: AdCreative?
        var started: Double?
        var startPosition: Double?
        var ended: Double?
        var reason: AdEndReason?
        var onScreen: Double?
        var quartileReached = 0
        /// When the rules first heard of it.
        var heard = 0.0
        /// Beacons by event: each URL once (its attempts: the last status), in the order first recorded.
        var beacons: [String: [(url: String, at: Double, status: Int, failure: String?)]] = [:]
        var name: String { "\(kind.protocolName) \(creativeID) (play \(play))" }
    }

    /// One VMAP document and the viewing it was asked for: how far the content went, whether it
    /// ended, what played there, which break URLs were called.
    private struct VMAPViewing {
        var at: Double
        var url: String
        var document: VMAPDocument
        var furthest = 0.0
        var ended = false
        var started: [(kind: AdKind, position: Double?)] = []
        var called: [String] = []
        /// Asked once its item was in: the box gave the item no pre-roll phase (a boundary within
        /// 30 s, a resume), so its `start` break is not due.
        var askedAfterStart = false
        /// Seeks forward: the breaks one passed, but the last, are passed over (R19).
        var seeks: [(from: Double, to: Double)] = []
        /// The item it is the viewing of: the first that came in after its document (another
        /// item's positions are not its own; another item in ends it).
        var entry: Int64?
        /// Where that item started (a resumed one, past 0, has no pre-roll).
        var startedAt: Double?
    }

    private struct State {
        var ads: [UInt64: Ad] = [:]
        var failures: [String: [SimulationRules.Failure]] = [:]
        var counts: [String: Int] = [:]
        var checked: [String: Int] = [:]
        /// Caps: each capped creative's shows within the last day; per-episode counts per content.
        var shows: [String: [Double]] = [:]
        var episodeShows: [String: [String: Int]] = [:]
        var prerollFor: String?
        var lastItemEntry: Int64?
        /// Where the item in the player was at the last change heard.
        var lastPosition = 0.0
        /// Separation: the last end of each advertiser's or category's ad.
        var lastByMark: [String: (end: Double, name: String, id: UInt64)] = [:]
        var shownCount = 0
        /// Overlays on the surface now (since), whether the output is hidden, pauses seen.
        var up: [UInt64: Double] = [:]
        var overlays: Set<UInt64> = []
        var hidden = false
        var pauses = 0
        var upTimes = 0
        /// VMAP: the viewing whose document came last; documents seen.
        var viewing: VMAPViewing?
        var documents = 0
        var breaksDue = 0
        var skipped: Set<String> = []
        /// Screen: what is lit (an item in the player, a linear ad), since when it is dark,
        /// whether it should be lit (the display on), a person's stop.
        var itemIn = false
        var linearUp: Set<UInt64> = []
        var darkSince: Double?
        var displayOn = true
        var stoppedBy: (at: Double, what: String)?
        var darkChecked = 0.0
        /// Media: files that could not be played.
        var failedMedia = 0
        var itemsLoaded = 0
        var exchanges = 0
        var playheads = 0
        var impressionsChecked = 0
        var popChecked = 0
        var quartilesChecked = 0
        var unshownChecked = 0
        var impressionAds = 0
        var problems: [String] = []
        var timelineEntries = 0
    }

    private let settings: Settings
    private let state = Locked(State())
    private static let known = Macro.allCases.map { "[\($0.rawValue)]" }
    /// How long after its end an ad's beacons still count toward it (retries come later).
    static let grace = 600.0

    public init(_ settings: Settings) {
        self.settings = settings
        state.withLock { $0.darkSince = settings.start }
    }

    // MARK: What happened

    public func adEvent(_ at: Double, _ event: AdEvent) {
        state.withLock { state in
            switch event {
            case .loaded(let info, let creative):
                touch(&state, info, at)
                state.ads[info.id]?.creative = creative
                // Over playing content from the moment it is up: a squeezeback's content moving in counts (R26).
                if info.kind.isOverPlayingContent { state.overlays.insert(info.id) }
            case .started(let info):
                touch(&state, info, at)
                guard state.ads[info.id]?.started == nil else { return }
                state.ads[info.id]?.started = at
                state.ads[info.id]?.startPosition = info.contentPosition
                if let ad = state.ads[info.id] { shown(&state, ad, at) }
                if info.kind.isLinear {
                    state.linearUp.insert(info.id)
                    lit(&state, at)
                }
                if state.viewing != nil { state.viewing?.started.append((info.kind, info.contentPosition)) }
            case .quartile(let info, let quartile):
                touch(&state, info, at)
                let reached = max(state.ads[info.id]?.quartileReached ?? 0, quartile)
                state.ads[info.id]?.quartileReached = reached
            case .ended(let info, let reason, _):
                touch(&state, info, at)
                state.ads[info.id]?.ended = at
                state.ads[info.id]?.reason = reason
                state.ads[info.id]?.onScreen = info.onScreenSeconds
                if let ad = state.ads[info.id], ad.started != nil { ended(&state, ad, at) }
                if state.linearUp.remove(info.id) != nil { darken(&state, at) }
            case .breakStarted(.preroll, let contentID, _):
                state.episodeShows[contentID] = [:]
                state.prerollFor = contentID
            default:
                break
            }
        }
    }

    public func player(_ at: Double, _ change: PlayerChange, _ snapshot: PlayerSnapshot) {
        state.withLock { state in
            if case .item(let item?) = change, let viewing = state.viewing {
                if viewing.entry == nil {
                    state.viewing!.entry = item.entry
                    state.viewing!.startedAt = snapshot.position
                } else if viewing.entry != item.entry {
                    closeViewing(&state)   // another item: this viewing is over
                }
            }
            if let viewing = state.viewing, let item = snapshot.item, viewing.entry == item.entry {
                state.viewing!.furthest = max(viewing.furthest, snapshot.position)
            }
            if snapshot.item != nil { state.lastPosition = snapshot.position }
            switch change {
            case .item(let item?):
                if item.entry != state.lastItemEntry {
                    state.itemsLoaded += 1
                    state.lastItemEntry = item.entry
                    let content = (item.path as NSString).lastPathComponent
                    let stem = (content as NSString).deletingPathExtension
                    if state.prerollFor != stem { state.episodeShows[stem] = [:] }
                    state.prerollFor = nil
                }
                state.itemIn = true
                lit(&state, at)   // the dark stretch judged with the person's stop that began it
                state.stoppedBy = nil
            case .item(nil):
                overlaysMustBeDown(&state, at, "the episode left the player")
                state.itemIn = false
                darken(&state, at)
            case .paused: overlaysMustBeDown(&state, at, "the content paused")
            case .held: overlaysMustBeDown(&state, at, "a break held the content")
            case .seeked(let from, let to) where to > from:
                if let viewing = state.viewing, viewing.entry == snapshot.item?.entry, viewing.seeks.count < 10_000 { state.viewing!.seeks.append((from, to)) }
            case .ended:
                overlaysMustBeDown(&state, at, "the episode ended")
                if let viewing = state.viewing, viewing.entry == snapshot.item?.entry { state.viewing?.ended = true }
            case .failed(let failure):
                state.failedMedia += 1
                fail(&state, "media-plays", at, "\(failure.path) could not be played: \(failure.message) [\(failure.code)]; the next item played")
            default:
                break
            }
        }
    }

    /// An overlay or a pause ad went up (true) or came down.
    public func surface(_ at: Double, _ id: UInt64, _ shown: Bool) {
        state.withLock { state in
            if shown {
                if state.up[id] == nil { state.upTimes += 1 }
                state.up[id] = state.up[id] ?? at
            } else {
                state.up[id] = nil
            }
        }
    }

    /// A control event the box told (the output hidden or shown, the display on or off).
    public func event(_ at: Double, _ event: ControlEvent) {
        state.withLock { state in
            switch event.name {
            case .playerBackground: state.hidden = event.fields["background"]?.bool ?? state.hidden
            case .playerDisplay:
                let on = event.fields["on"]?.bool ?? true
                if on, !state.displayOn, state.darkSince != nil { state.darkSince = at }   // dark from now, when it should be lit
                state.displayOn = on
            default: break
            }
        }
    }

    /// A viewer's command, and whether it succeeded.
    public func viewer(_ at: Double, _ request: Request, ok: Bool) {
        guard ok else { return }
        state.withLock { state in
            switch request {
            // Its end is the next item in the player (the dark stretch is judged with it first).
            case .stop, .clear: state.stoppedBy = (at, request.name)
            default: break
            }
        }
    }

    public func exchange(_ exchange: RecordedExchange) {
        state.withLock { state in
            state.exchanges += 1
            let decoded = exchange.url.contains("%") ? exchange.url.removingPercentEncoding ?? exchange.url : exchange.url
            // A macro left is `[NAME]` (or its encoded brackets): looked for only where a bracket is.
            if decoded.utf8.contains(UInt8(ascii: "[")) || exchange.url.utf8.contains(UInt8(ascii: "[")),
               let left = Self.known.first(where: { exchange.url.contains($0) || decoded.contains($0) }) {
                fail(&state, "macros-filled", exchange.started, "\(exchange.kind == .beacon ? "beacon \(exchange.event ?? "")" : "request") "
                     + "left \(left) unfilled: \(exchange.url)")
                return
            }
            switch exchange.kind {
            case .request: request(&state, exchange)
            case .beacon: beacon(&state, exchange, decoded)
            }
        }
    }

    public func problem(_ text: String) { state.withLock { $0.problems.append(text) } }

    public func timelineEntry() { state.withLock { $0.timelineEntries += 1 } }

    /// Time passed to `now`: ads long ended are judged and forgotten.
    public func tick(_ now: Double) {
        state.withLock { state in
            // Done with: ended a while ago, or never ended a day after it was heard of (fetched and
            // dropped with no end told: judged as it stands, so that a month holds no more than a day).
            let done = state.ads.values.filter { ad in ad.ended.map { now - $0 > Self.grace } ?? (now - ad.heard > 86_400) }.map(\.id)
            for id in done.sorted() {
                if let ad = state.ads.removeValue(forKey: id) { judge(&state, ad) }
            }
            let horizon = now - 86_400
            for creative in state.shows.keys { state.shows[creative]?.removeAll { $0 < horizon } }
        }
    }

    /// The results, at the end of the run (`end`, simulated wall time).
    public func finish(at end: Double) -> [SimulationRules.Result] {
        state.withLock { state in
            for id in state.ads.keys.sorted() { judge(&state, state.ads[id]!) }
            state.ads = [:]
            closeViewing(&state)
            if state.darkSince != nil { darken(&state, end, closing: true) }
            for problem in state.problems { fail(&state, "simulation-ran", end, problem) }
            let separation = String(format: "%g", settings.separation)
            let checked: [String: String] = [
                "impressions-once": "\(state.impressionAds) ads with impression URLs started",
                "quartiles-in-order": "\(state.quartilesChecked) linear ads and squeezebacks with a duration",
                "nothing-billed-unshown": "\(state.unshownChecked) ads fetched and never shown",
                "vmap-breaks": "\(state.documents) VMAP viewings, \(state.breaksDue) breaks due"
                    + (state.skipped.isEmpty ? "" : "; " + state.skipped.sorted().prefix(10).joined(separator: "; ")),
                "macros-filled": "\(state.exchanges) URLs, \(state.playheads) [CONTENTPLAYHEAD] of start beacons",
                "caps-separation-dayparts-flights": "\(state.shownCount) ads shown; \(settings.caps.count) creatives with caps, dayparts or flights; "
                    + "separation \(separation) s",
                "pop-deadline": settings.popDeadline == nil && state.popChecked == 0 ? "no pop-deadline configured" : "\(state.popChecked) impressions",
                "overlays-end-on-pause": "\(state.overlays.count) overlays and squeezebacks served, \(state.upTimes) times on screen, \(state.pauses) pauses and ends",
                "screen-lit": "nothing on screen for more than \(String(format: "%g", settings.maxDark)) s while the display is on, "
                    + "but after a person's stop" + (settings.scheduled ? " (for at most the schedule's override)" : ""),
                "media-plays": "\(state.itemsLoaded) items loaded, \(state.failedMedia) could not be played",
                "simulation-ran": "\(state.timelineEntries) timeline entries",
            ]
            return SimulationRules.names.map { name in
                SimulationRules.Result(name: name, checked: checked[name] ?? "", failures: state.failures[name] ?? [], failureCount: state.counts[name] ?? 0)
            }
        }
    }

    // MARK: The rules

    private func touch(_ state: inout State, _ info: AdInfo, _ at: Double) {
        if state.ads[info.id] == nil {
            var ad = Ad(id: info.id, kind: info.kind, creativeID: info.creativeID, contentID: info.contentID)
            ad.heard = at
            state.ads[info.id] = ad
        }
    }

    private func fail(_ state: inout State, _ rule: String, _ at: Double, _ message: String) {
        state.counts[rule, default: 0] += 1
        if (state.failures[rule]?.count ?? 0) < SimulationRules.maxKept {
            state.failures[rule, default: []].append(SimulationRules.Failure(at: at, message: message))
        }
    }

    private static func time(_ at: Double) -> String { ISO8601.format(at) }

    /// A request: a VMAP document starts the viewing it was asked for.
    private func request(_ state: inout State, _ exchange: RecordedExchange) {
        guard (200..<300).contains(exchange.status), VMAPDocument.looksLikeVMAP(exchange.body),
              let document = try? VMAPDocument.parse(exchange.body) else { return }
        closeViewing(&state)
        state.documents += 1
        state.viewing = VMAPViewing(at: exchange.started, url: exchange.url, document: document)
        // Asked once its item was in (an item with no pre-roll: its first overlay asks): the
        // viewing is that item's, from where it was — not the next one's.
        if state.itemIn, let entry = state.lastItemEntry {
            state.viewing!.entry = entry
            state.viewing!.startedAt = state.lastPosition
            state.viewing!.furthest = state.lastPosition
            state.viewing!.askedAfterStart = true
        }
    }

    private func beacon(_ state: inout State, _ exchange: RecordedExchange, _ decoded: String) {
        if state.viewing != nil { state.viewing?.called.append(exchange.url) }
        // [TIMESTAMP] says the event's time.
        if let recorded = exchange.recordedAt {
            let expected = Macros.timestamp(Date(timeIntervalSince1970: recorded))
            for stamp in SimulationRules.timestamps(in: decoded) where stamp != expected {
                fail(&state, "macros-filled", exchange.started, "beacon \(exchange.event ?? ""): [TIMESTAMP] says \(stamp), its event happened at \(expected): \(exchange.url)")
            }
        }
        guard let play = exchange.play, let id = UInt64(play, radix: 16), var ad = state.ads[id], let event = exchange.event else { return }
        var list = ad.beacons[event] ?? []
        if let index = list.firstIndex(where: { $0.url == exchange.url }) {
            list[index].status = exchange.status   // a retry: its last answer
            list[index].failure = exchange.failure
        } else {
            list.append((exchange.url, exchange.started, exchange.status, exchange.failure))
            if event == "impression", let started = ad.started, let deadline = ad.creative?.popDeadline ?? settings.popDeadline {
                state.popChecked += 1
                if exchange.started - started > deadline + 0.001 {
                    fail(&state, "pop-deadline", exchange.started, "\(ad.name) started at \(Self.time(started)): its impression was recorded "
                         + "\(String(format: "%g", exchange.started - started)) s later, past pop-deadline \(String(format: "%g", deadline)) s")
                }
            }
            // The [CONTENTPLAYHEAD] of an ad's start beacons is where the content was when it started.
            if ["impression", "creativeView", "start"].contains(event), let position = ad.startPosition {
                for template in ad.creative?.tracking[event] ?? [] where template.contains("[CONTENTPLAYHEAD]") && SimulationRules.matches(exchange.url, template: template) {
                    guard let filled = SimulationRules.value(of: "CONTENTPLAYHEAD", in: exchange.url, template: template) else { continue }
                    state.playheads += 1
                    let text = filled.removingPercentEncoding ?? filled
                    if let seconds = SimulationRules.clockSeconds(text), abs(seconds - position) <= 0.002 { continue }
                    fail(&state, "macros-filled", exchange.started, "\(ad.name): its \(event)'s [CONTENTPLAYHEAD] says \(text), the content was at "
                         + "\(Macros.playhead(position)) when it started: \(exchange.url)")
                }
            }
        }
        ad.beacons[event] = list
        state.ads[id] = ad
    }

    /// An ad went on screen: its caps, daypart, flight and separation.
    private func shown(_ state: inout State, _ ad: Ad, _ at: Double) {
        state.shownCount += 1
        if let cap = settings.caps[ad.creativeID] {
            let before = state.shows[ad.creativeID] ?? []
            if let perHour = cap.perHour, before.filter({ at - $0 < 3600 }).count >= perHour {
                fail(&state, "caps-separation-dayparts-flights", at, "\(ad.name) shown at \(Self.time(at)): past its cap of \(perHour) an hour")
            }
            if let perDay = cap.perDay, before.filter({ at - $0 < 86_400 }).count >= perDay {
                fail(&state, "caps-separation-dayparts-flights", at, "\(ad.name) shown at \(Self.time(at)): past its cap of \(perDay) a day")
            }
            let episodeCount = state.episodeShows[ad.contentID]?[ad.creativeID] ?? 0
            if let perEpisode = cap.perEpisode, episodeCount >= perEpisode {
                fail(&state, "caps-separation-dayparts-flights", at, "\(ad.name) shown at \(Self.time(at)): past its cap of \(perEpisode) a viewing of \(ad.contentID)")
            }
            if let interval = cap.minInterval, let last = before.last, at - last < interval - 0.001 {
                fail(&state, "caps-separation-dayparts-flights", at, "\(ad.name) shown at \(Self.time(at)), \(String(format: "%g", at - last)) s after the last: "
                     + "its spacing is \(String(format: "%g", interval)) s")
            }
            if let daypart = cap.daypart, !daypart.isOpen(at: Date(timeIntervalSince1970: at)) {
                fail(&state, "caps-separation-dayparts-flights", at, "\(ad.name) shown at \(Self.time(at)): outside its daypart")
            }
            if let start = cap.flightStart, at < start {
                fail(&state, "caps-separation-dayparts-flights", at, "\(ad.name) shown at \(Self.time(at)): before its flight (\(Self.time(start)))")
            }
            if let end = cap.flightEnd, at >= end {
                fail(&state, "caps-separation-dayparts-flights", at, "\(ad.name) shown at \(Self.time(at)): after its flight (\(Self.time(end)))")
            }
            state.shows[ad.creativeID, default: []].append(at)
        }
        state.episodeShows[ad.contentID, default: [:]][ad.creativeID, default: 0] += 1
        guard settings.separation > 0, let creative = ad.creative else { return }
        for mark in marks(creative) {
            if let other = state.lastByMark[mark], other.id != ad.id, at - other.end < settings.separation - 0.001 {
                fail(&state, "caps-separation-dayparts-flights", at, "\(ad.name) shown at \(Self.time(at)), \(String(format: "%g", at - other.end)) s after "
                     + "\(other.name) of the same \(mark): ad-separation is \(String(format: "%g", settings.separation)) s")
                break
            }
        }
        // While it is up, it separates (its end moves the mark on).
        for mark in marks(creative) { state.lastByMark[mark] = (at, ad.name, ad.id) }
    }

    private func ended(_ state: inout State, _ ad: Ad, _ at: Double) {
        guard settings.separation > 0, let creative = ad.creative else { return }
        for mark in marks(creative) where state.lastByMark[mark]?.id == ad.id { state.lastByMark[mark] = (at, ad.name, ad.id) }
    }

    private func marks(_ creative: AdCreative) -> [String] {
        ((creative.advertiser.map { ["advertiser " + $0] } ?? []) + creative.categories.map { "category " + $0 }).sorted()
    }

    /// An ad done with: its impressions, quartiles, and — never shown — nothing billed.
    private func judge(_ state: inout State, _ ad: Ad) {
        if let started = ad.started {
            if let templates = ad.creative?.tracking["impression"], !templates.isEmpty {
                state.impressionAds += 1
                let recorded = ad.beacons["impression"] ?? []
                let expected = Set(templates).count
                if recorded.count != expected {
                    fail(&state, "impressions-once", started, "\(ad.name) started at \(Self.time(started)): \(recorded.count) impression\(recorded.count == 1 ? "" : "s") "
                         + "recorded, its VAST has \(expected): " + templates.joined(separator: " "))
                }
                if settings.sentBeacons {
                    for impression in recorded where !(200..<300).contains(impression.status) {
                        let answer = impression.status == 0 ? (impression.failure ?? "no answer") : "HTTP \(impression.status)"
                        fail(&state, "impressions-once", impression.at, "\(ad.name): its impression was refused (\(answer)): \(impression.url)")
                    }
                }
            }
            quartiles(&state, ad, started)
        } else if let creative = ad.creative {
            state.unshownChecked += 1
            for (event, list) in ad.beacons.sorted(by: { $0.key < $1.key }) where SimulationRules.billable.contains(event) {
                for beacon in list { fail(&state, "nothing-billed-unshown", beacon.at, "\(ad.name) never showed, yet its \(event) was recorded: \(beacon.url)") }
            }
            if ad.reason != .failed, ad.ended != nil, !(creative.tracking["notUsed"] ?? []).isEmpty, ad.beacons["notUsed"] == nil {
                fail(&state, "nothing-billed-unshown", ad.ended ?? 0, "\(ad.name) never showed (\(ad.reason?.rawValue ?? "ended")) and its notUsed was not sent")
            }
        }
    }

    /// A linear ad's quartiles and `complete`: each sent once its point was played (on screen
    /// that long, or its video's own progress: a hidden output plays a linear ad on), in order; a
    /// point played is sent — a point whose tracker the ad lacks while it has others is the ad
    /// server's missing quartile.
    private func quartiles(_ state: inout State, _ ad: Ad, _ started: Double) {
        guard ad.kind.hasQuartiles, let creative = ad.creative, let duration = creative.duration, duration > 0 else { return }
        state.quartilesChecked += 1
        let played = ad.onScreen ?? 0
        let present = SimulationRules.quartileEvents.filter { !(creative.tracking[$0.event] ?? []).isEmpty }.map(\.event)
        var last: (String, Double)?
        for (event, fraction) in SimulationRules.quartileEvents {
            let reached = event == "complete" ? ad.reason == .completed
                : played + 0.05 >= fraction * duration || Double(ad.quartileReached) >= fraction * 4 - 0.001
            if let first = ad.beacons[event]?.first {
                if !reached {
                    fail(&state, "quartiles-in-order", first.at, "\(ad.name): \(event) sent after \(String(format: "%.3f", played)) s played "
                         + "of \(String(format: "%g", duration)) s (its point is \(String(format: "%g", fraction * duration)) s): \(first.url)")
                }
                if let (before, at) = last, first.at < at {
                    fail(&state, "quartiles-in-order", first.at, "\(ad.name): \(event) sent at \(Self.time(first.at)), before \(before) at \(Self.time(at))")
                }
                last = (event, first.at)
            } else if reached, !present.isEmpty {
                let why = present.contains(event) ? "it was not sent" : "its VAST has no \(event) tracker (it has \(present.joined(separator: ", ")))"
                fail(&state, "quartiles-in-order", started, "\(ad.name) started at \(Self.time(started)): \(event) reached "
                     + "(\(String(format: "%.3f", played)) s of \(String(format: "%g", duration)) s played) but \(why)")
            }
        }
    }

    /// The seed's rule: an overlay is on screen over playing content only; any pause (the
    /// viewer's, a break's hold, the end, another episode) ends it at that instant — except
    /// while the output is hidden, where it freezes instead (R13).
    private func overlaysMustBeDown(_ state: inout State, _ at: Double, _ stopping: String) {
        guard !state.hidden else { return }
        state.pauses += 1
        for (id, since) in state.up.sorted(by: { $0.key < $1.key }) where state.overlays.contains(id) && since < at {
            let name = state.ads[id]?.name ?? "overlay (play \(String(id, radix: 16)))"
            fail(&state, "overlays-end-on-pause", at, "\(name) was still on screen when \(stopping) at \(Self.time(at))")
        }
    }

    /// Every break of a viewing's VMAP that the content reached was played (an ad started there,
    /// or its `breakStart` called) or reported through its error URL. Breaks at a percentage or a
    /// cue point are checked by their tracking only.
    private func closeViewing(_ state: inout State) {
        guard let viewing = state.viewing else { return }
        state.viewing = nil
        for vmapBreak in viewing.document.breaks {
            let label = "break \(vmapBreak.id.map { "\"\($0)\"" } ?? "(no id)") of \(viewing.url)"
            let due: Bool
            var near: Double?
            switch vmapBreak.offset {
            case .start:
                // Due when the item started at its beginning (a resumed one has none) and was not
                // cut within its first 30 s (the box plays no pre-roll before content cut so soon).
                let fromStart = (viewing.startedAt ?? 0) < 1
                due = vmapBreak.types.contains("linear") && fromStart && !viewing.askedAfterStart && (viewing.ended || viewing.furthest >= 30)
                near = 0
            case .end: due = viewing.ended && vmapBreak.types.contains("linear")
            case .seconds(let t):
                // Passed over: a seek jumped it and a later break it also jumped (the snapback plays that one).
                let timed = viewing.document.breaks.compactMap { item -> Double? in if case .seconds(let s) = item.offset { s } else { nil } }
                let passedOver = viewing.seeks.contains { seek in
                    seek.from < t - 0.001 && t <= seek.to + 0.001 && timed.contains { $0 > t + 0.001 && $0 <= seek.to + 0.001 }
                }
                // An item resumed past it (after a slot, a takeover, a restart) never reached it.
                let resumedPast = t < (viewing.startedAt ?? 0) - 0.001
                due = viewing.furthest >= t && !passedOver && !resumedPast
                near = t
            case .percent, .position:
                state.skipped.insert("breaks at a percentage or cue point: checked by their tracking only")
                due = false
            }
            let reported = viewing.called.contains { url in (vmapBreak.breakStart + vmapBreak.error).contains { SimulationRules.matches(url, template: $0) } }
            let played = viewing.started.contains { started in
                switch vmapBreak.offset {
                case .start: return started.kind == .preroll
                case .end: return started.kind == .postroll
                default:
                    guard let t = near, let position = started.position else { return false }
                    if position >= t - 1 && position <= t + 5 { return true }
                    // A snapback: played at the landing of a seek that jumped it.
                    return viewing.seeks.contains { $0.from < t && t <= $0.to + 0.001 && abs(position - $0.to) <= 1 }
                }
            }
            guard due || reported else { continue }
            state.breaksDue += 1
            if !(reported || played) {
                let errors = vmapBreak.error.isEmpty ? "the VMAP gives it no error URL" : "its error URL was not called (\(vmapBreak.error.joined(separator: " ")))"
                fail(&state, "vmap-breaks", viewing.at, "\(label) (\(SimulationRules.describe(vmapBreak.offset)), \(vmapBreak.types.joined(separator: "/"))): "
                     + "no ad played there and \(errors)")
            }
        }
    }

    // MARK: The screen

    private func lit(_ state: inout State, _ at: Double) {
        if state.darkSince != nil { darken(&state, at, closing: true) }
    }

    /// The screen went dark at `at` (nothing in the player, no linear ad) — or, `closing`, it
    /// is lit again at `at`: a stretch longer than `maxDark` while the display was on, not a
    /// person's stop, is a failure naming it.
    private func darken(_ state: inout State, _ at: Double, closing: Bool = false) {
        if !closing {
            guard !state.itemIn, state.linearUp.isEmpty, state.darkSince == nil else { return }
            state.darkSince = at
            return
        }
        guard let since = state.darkSince else { return }
        state.darkSince = nil
        guard state.displayOn else { return }
        var from = since
        if let stop = state.stoppedBy {
            guard let allowed = settings.personDark else { return }
            from = max(since, stop.at + allowed)
        }
        let length = at - from
        guard length > settings.maxDark else { return }
        let why = state.stoppedBy.map { " (a person's \($0.what) at \(Self.time($0.at)) holds it at most \(String(format: "%g", settings.personDark ?? 0)) s)" } ?? ""
        fail(&state, "screen-lit", from, "nothing on screen from \(Self.time(from)) to \(Self.time(at)) (\(String(format: "%.0f", length)) s) while the display was on\(why)")
    }
}
