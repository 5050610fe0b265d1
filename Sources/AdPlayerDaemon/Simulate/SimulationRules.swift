import AdRuntime
import AdSources
import ControlProtocol
import Foundation

/// The rules a simulation checks (docs/simulate.md, "The rules"): one JUnit test case each,
/// every failure naming the ad, the simulated time and the evidence.
public enum SimulationRules {
    public struct Failure: Sendable, Equatable {
        public var at: Double
        public var message: String
    }

    public struct Result: Sendable {
        public var name: String
        /// What was checked (the case's `system-out`): counts, and what could not be checked.
        public var checked: String
        public var failures: [Failure]
        public var passed: Bool { failures.isEmpty }
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

    /// One ad of the run, as its events tell it.
    struct Ad {
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
        /// A linear ad's video: the last quartile its own progress reached (1–3), whether or not
        /// the output showed it (a hidden output plays a linear ad on, unseen).
        var quartileReached = 0
    }

    public static let names = ["impressions-once", "quartiles-in-order", "nothing-billed-unshown", "vmap-breaks", "macros-filled",
                               "caps-separation-dayparts-flights", "pop-deadline", "overlays-end-on-pause", "simulation-ran"]

    public static func check(_ outcome: Simulation.Outcome, caps: [String: Cap], sentBeacons: Bool) -> [Result] {
        let ads = Self.ads(outcome)
        let beacons = outcome.exchanges.filter { $0.kind == .beacon }
        let byPlay = Dictionary(grouping: beacons.filter { $0.play != nil }, by: { $0.play! })
        return [impressions(ads, byPlay, sentBeacons), quartiles(ads, byPlay), unshown(ads, byPlay), vmapBreaks(outcome, ads, beacons),
                macros(outcome, ads), capsRule(ads, caps, outcome.configuration.adSeparation), popDeadline(ads, byPlay, outcome.popDeadline),
                overlaysOnPause(outcome, ads), ran(outcome)]
    }

    static func ads(_ outcome: Simulation.Outcome) -> [Ad] {
        var ads: [UInt64: Ad] = [:]
        var order: [UInt64] = []
        func touch(_ info: AdInfo) {
            if ads[info.id] == nil {
                ads[info.id] = Ad(id: info.id, kind: info.kind, creativeID: info.creativeID, contentID: info.contentID)
                order.append(info.id)
            }
        }
        for (at, event) in outcome.adEvents {
            switch event {
            case .loaded(let info, let creative):
                touch(info)
                ads[info.id]?.creative = creative
            case .started(let info):
                touch(info)
                if ads[info.id]?.started == nil {
                    ads[info.id]?.started = at
                    ads[info.id]?.startPosition = info.contentPosition
                }
            case .quartile(let info, let quartile):
                touch(info)
                let reached = max(ads[info.id]?.quartileReached ?? 0, quartile)
                ads[info.id]?.quartileReached = reached
            case .ended(let info, let reason, _):
                touch(info)
                ads[info.id]?.ended = at
                ads[info.id]?.reason = reason
                ads[info.id]?.onScreen = info.onScreenSeconds
            default:
                break
            }
        }
        return order.compactMap { ads[$0] }
    }

    private static func time(_ at: Double) -> String { ISO8601.format(at) }
    private static func name(_ ad: Ad) -> String { "\(ad.kind.protocolName) \(ad.creativeID) (play \(ad.play))" }

    // MARK: The rules

    /// Every ad that started has each of its impression URLs recorded once (sent, with a 2xx,
    /// when beacons are sent).
    static func impressions(_ ads: [Ad], _ byPlay: [String: [RecordedExchange]], _ sent: Bool) -> Result {
        var failures: [Failure] = []
        var checked = 0
        for ad in ads {
            guard let started = ad.started, let templates = ad.creative?.tracking["impression"], !templates.isEmpty else { continue }
            checked += 1
            let recorded = (byPlay[ad.play] ?? []).filter { $0.event == "impression" }
            if recorded.count != templates.count {
                failures.append(Failure(at: started, message: "\(name(ad)) started at \(time(started)): \(recorded.count) impression\(recorded.count == 1 ? "" : "s") recorded, "
                                        + "its VAST has \(templates.count): " + templates.joined(separator: " ")))
            }
            if sent {
                for impression in recorded where !(200..<300).contains(impression.status) {
                    let answer = impression.status == 0 ? (impression.failure ?? "no answer") : "HTTP \(impression.status)"
                    failures.append(Failure(at: impression.started, message: "\(name(ad)): its impression was refused (\(answer)): \(impression.url)"))
                }
            }
        }
        return Result(name: "impressions-once", checked: "\(checked) ads with impression URLs started", failures: failures)
    }

    static let quartileEvents: [(event: String, fraction: Double)] = [("firstQuartile", 0.25), ("midpoint", 0.5), ("thirdQuartile", 0.75), ("complete", 1)]

    /// A linear ad's quartiles and `complete`: each sent once its point was played and never
    /// before, in order; a point played whose tracker the ad lacks (while it has others) is the
    /// ad server's missing quartile.
    static func quartiles(_ ads: [Ad], _ byPlay: [String: [RecordedExchange]]) -> Result {
        var failures: [Failure] = []
        var checked = 0
        for ad in ads where ad.kind.isLinear {
            guard let started = ad.started, let creative = ad.creative, let duration = creative.duration, duration > 0 else { continue }
            checked += 1
            let played = ad.onScreen ?? 0
            let recorded = (byPlay[ad.play] ?? [])
            let present = quartileEvents.filter { !(creative.tracking[$0.event] ?? []).isEmpty }.map(\.event)
            var last: (String, Double)?
            for (event, fraction) in quartileEvents {
                let fired = recorded.filter { $0.event == event }
                // Its point played: on screen that long, or the video's own progress passed it
                // (a linear ad plays on while the output is hidden: its time on screen is 0).
                let reached = event == "complete" ? ad.reason == .completed
                    : played + 0.05 >= fraction * duration || Double(ad.quartileReached) >= fraction * 4 - 0.001
                if let first = fired.first {
                    if !reached {
                        failures.append(Failure(at: first.started, message: "\(name(ad)): \(event) sent after \(String(format: "%.3f", played)) s played "
                                                + "of \(String(format: "%g", duration)) s (its point is \(String(format: "%g", fraction * duration)) s): \(first.url)"))
                    }
                    if let (before, at) = last, first.started < at {
                        failures.append(Failure(at: first.started, message: "\(name(ad)): \(event) sent at \(time(first.started)), before \(before) at \(time(at))"))
                    }
                    last = (event, first.started)
                } else if reached, !present.isEmpty {
                    let why = present.contains(event) ? "it was not sent" : "its VAST has no \(event) tracker (it has \(present.joined(separator: ", ")))"
                    failures.append(Failure(at: started, message: "\(name(ad)) started at \(time(started)): \(event) reached "
                                            + "(\(String(format: "%.3f", played)) s of \(String(format: "%g", duration)) s played) but \(why)"))
                }
            }
        }
        return Result(name: "quartiles-in-order", checked: "\(checked) linear ads with a duration", failures: failures)
    }

    static let billable: Set<String> = ["impression", "creativeView", "start", "firstQuartile", "midpoint", "thirdQuartile", "complete"]

    /// Nothing billable for an ad that never showed; its `notUsed` instead, when it has one.
    static func unshown(_ ads: [Ad], _ byPlay: [String: [RecordedExchange]]) -> Result {
        var failures: [Failure] = []
        var checked = 0
        for ad in ads where ad.started == nil && ad.creative != nil {
            checked += 1
            let recorded = byPlay[ad.play] ?? []
            for beacon in recorded where billable.contains(beacon.event ?? "") {
                failures.append(Failure(at: beacon.started, message: "\(name(ad)) never showed, yet its \(beacon.event!) was recorded: \(beacon.url)"))
            }
            let ended = ad.ended ?? 0
            if ad.reason != .failed, !(ad.creative?.tracking["notUsed"] ?? []).isEmpty, !recorded.contains(where: { $0.event == "notUsed" }), ad.ended != nil {
                failures.append(Failure(at: ended, message: "\(name(ad)) never showed (\(ad.reason?.rawValue ?? "ended")) and its notUsed was not sent"))
            }
        }
        return Result(name: "nothing-billed-unshown", checked: "\(checked) ads fetched and never shown", failures: failures)
    }

    /// Every VMAP break the content reached was played (an ad started there, or its
    /// `breakStart` sent) or reported through its error URL.
    static func vmapBreaks(_ outcome: Simulation.Outcome, _ ads: [Ad], _ beacons: [RecordedExchange]) -> Result {
        var documents: [(at: Double, url: String, document: VMAPDocument)] = []
        var seenBodies: Set<Data> = []
        for exchange in outcome.exchanges where exchange.kind == .request && (200..<300).contains(exchange.status) {
            guard VMAPDocument.looksLikeVMAP(exchange.body), seenBodies.insert(exchange.body).inserted,
                  let document = try? VMAPDocument.parse(exchange.body) else { continue }
            documents.append((exchange.started, exchange.url, document))
        }
        // How far the content went, and whether an episode ended.
        var furthest = 0.0
        var ended = false
        for (_, change, snapshot) in outcome.playerEvents {
            furthest = max(furthest, snapshot.position)
            if case .ended = change { ended = true }
        }
        var failures: [Failure] = []
        var checked = 0, skipped: [String] = []
        for (at, url, document) in documents {
            for vmapBreak in document.breaks {
                let label = "break \(vmapBreak.id.map { "\"\($0)\"" } ?? "(no id)") of \(url)"
                let due: Bool
                var near: Double?
                switch vmapBreak.offset {
                case .start: due = true; near = 0
                case .end: due = ended
                case .seconds(let t): due = furthest >= t; near = t
                case .percent, .position:
                    skipped.append("\(label): at a percentage or cue point (checked by its tracking only)")
                    due = false
                }
                let reported = beacons.contains { beacon in (vmapBreak.breakStart + vmapBreak.error).contains { matches(beacon.url, template: $0) } }
                let played = ads.contains { ad in
                    guard ad.started != nil else { return false }
                    switch vmapBreak.offset {
                    case .start: return ad.kind == .preroll
                    case .end: return ad.kind == .postroll
                    default: return near.map { t in (ad.startPosition ?? -100) >= t - 1 && (ad.startPosition ?? -100) <= t + 5 } ?? false
                    }
                }
                guard due || reported else { continue }
                checked += 1
                if !(reported || played) {
                    let errors = vmapBreak.error.isEmpty ? "the VMAP gives it no error URL" : "its error URL was not called (\(vmapBreak.error.joined(separator: " ")))"
                    failures.append(Failure(at: at, message: "\(label) (\(describe(vmapBreak.offset)), \(vmapBreak.types.joined(separator: "/"))): "
                                            + "no ad played there and \(errors)"))
                }
            }
        }
        let note = "\(documents.count) VMAP documents, \(checked) breaks due" + (skipped.isEmpty ? "" : "; " + skipped.joined(separator: "; "))
        return Result(name: "vmap-breaks", checked: note, failures: failures)
    }

    private static func describe(_ offset: VMAPDocument.Offset) -> String {
        switch offset {
        case .start: "start"
        case .end: "end"
        case .seconds(let t): "at \(String(format: "%g", t)) s"
        case .percent(let p): "at \(String(format: "%g", p)) %"
        case .position(let n): "cue point #\(n)"
        }
    }

    /// Whether `url` is `template` with its macros filled: the template's literal pieces, in order.
    static func matches(_ url: String, template: String) -> Bool {
        var pieces: [Substring] = []
        var rest = template[...]
        while let open = rest.firstIndex(of: "["), let close = rest[open...].firstIndex(of: "]") {
            pieces.append(rest[..<open])
            rest = rest[rest.index(after: close)...]
        }
        pieces.append(rest)
        var remaining = url[...]
        for (index, piece) in pieces.enumerated() where !piece.isEmpty {
            if index == 0 {
                guard remaining.hasPrefix(piece) else { return false }
                remaining = remaining.dropFirst(piece.count)
            } else {
                guard let found = remaining.range(of: piece) else { return false }
                remaining = remaining[found.upperBound...]
            }
        }
        return true
    }

    /// No documented macro is left unfilled in a request or a beacon; a beacon's `[TIMESTAMP]`
    /// is its event's simulated time; and the `[CONTENTPLAYHEAD]` of an ad's start beacons
    /// (impression, creativeView, start) is where the content was when the ad started.
    static func macros(_ outcome: Simulation.Outcome, _ ads: [Ad]) -> Result {
        let known = Macro.allCases.map { "[\($0.rawValue)]" }
        var failures: [Failure] = []
        var playheads = 0
        let adsByPlay = Dictionary(ads.map { ($0.play, $0) }, uniquingKeysWith: { a, _ in a })
        for exchange in outcome.exchanges {
            let decoded = exchange.url.removingPercentEncoding ?? exchange.url
            if let left = known.first(where: { exchange.url.contains($0) || decoded.contains($0) }) {
                failures.append(Failure(at: exchange.started, message: "\(exchange.kind == .beacon ? "beacon \(exchange.event ?? "")" : "request") "
                                        + "left \(left) unfilled: \(exchange.url)"))
                continue
            }
            guard exchange.kind == .beacon else { continue }
            let expected = Macros.timestamp(Date(timeIntervalSince1970: exchange.started))
            for stamp in timestamps(in: decoded) where stamp != expected {
                failures.append(Failure(at: exchange.started, message: "beacon \(exchange.event ?? ""): [TIMESTAMP] says \(stamp), its event happened at \(expected): \(exchange.url)"))
            }
            guard let event = exchange.event, ["impression", "creativeView", "start"].contains(event), let play = exchange.play,
                  let ad = adsByPlay[play], let position = ad.startPosition else { continue }
            for template in ad.creative?.tracking[event] ?? [] where template.contains("[CONTENTPLAYHEAD]") && matches(exchange.url, template: template) {
                guard let filled = value(of: "CONTENTPLAYHEAD", in: exchange.url, template: template) else { continue }
                playheads += 1
                let text = filled.removingPercentEncoding ?? filled
                if let seconds = clockSeconds(text), abs(seconds - position) <= 0.002 { continue }
                failures.append(Failure(at: exchange.started, message: "\(name(ad)): its \(event)'s [CONTENTPLAYHEAD] says \(text), the content was at "
                                        + "\(Macros.playhead(position)) when it started: \(exchange.url)"))
            }
        }
        return Result(name: "macros-filled", checked: "\(outcome.exchanges.count) URLs, \(playheads) [CONTENTPLAYHEAD] of start beacons", failures: failures)
    }

    /// What `url` has where `template` has `[NAME]`: the text between the literal pieces around it.
    static func value(of name: String, in url: String, template: String) -> String? {
        guard let macro = template.range(of: "[\(name)]") else { return nil }
        // The literal text right before and after the macro (up to the macros next to it).
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
    static func timestamps(in text: String) -> [String] {
        guard let pattern = try? NSRegularExpression(pattern: "[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}\\.[0-9]{3}(Z|[+-][0-9]{2}:[0-9]{2})") else { return [] }
        let range = NSRange(text.startIndex..., in: text)
        return pattern.matches(in: text, range: range).compactMap { Range($0.range, in: text).map { String(text[$0]) } }
    }

    /// Each creative's caps (per episode, per hour, per day, spacing), daypart and flight, from
    /// the catalogs and `--expect`; and competitive separation (`ad-separation`) across all.
    static func capsRule(_ ads: [Ad], _ caps: [String: Cap], _ separation: Double) -> Result {
        var failures: [Failure] = []
        let shown = ads.filter { $0.started != nil }
        var byCreative: [String: [Ad]] = [:]
        for ad in shown { byCreative[ad.creativeID, default: []].append(ad) }
        for creative in byCreative.keys.sorted() {
            guard let cap = caps[creative] else { continue }
            let plays = byCreative[creative]!
            for (index, ad) in plays.enumerated() {
                let at = ad.started!
                let before = plays[..<index].map { $0.started! }
                if let perHour = cap.perHour, before.filter({ at - $0 < 3600 }).count >= perHour {
                    failures.append(Failure(at: at, message: "\(name(ad)) shown at \(time(at)): past its cap of \(perHour) an hour"))
                }
                if let perDay = cap.perDay, before.filter({ at - $0 < 86_400 }).count >= perDay {
                    failures.append(Failure(at: at, message: "\(name(ad)) shown at \(time(at)): past its cap of \(perDay) a day"))
                }
                if let perEpisode = cap.perEpisode, plays[..<index].filter({ $0.contentID == ad.contentID }).count >= perEpisode {
                    failures.append(Failure(at: at, message: "\(name(ad)) shown at \(time(at)): past its cap of \(perEpisode) an episode over \(ad.contentID)"))
                }
                if let interval = cap.minInterval, let last = before.last, at - last < interval - 0.001 {
                    failures.append(Failure(at: at, message: "\(name(ad)) shown at \(time(at)), \(String(format: "%g", at - last)) s after the last: its spacing is \(String(format: "%g", interval)) s"))
                }
                if let daypart = cap.daypart, !daypart.isOpen(at: Date(timeIntervalSince1970: at)) {
                    failures.append(Failure(at: at, message: "\(name(ad)) shown at \(time(at)): outside its daypart"))
                }
                if let start = cap.flightStart, at < start {
                    failures.append(Failure(at: at, message: "\(name(ad)) shown at \(time(at)): before its flight (\(time(start)))"))
                }
                if let end = cap.flightEnd, at >= end {
                    failures.append(Failure(at: at, message: "\(name(ad)) shown at \(time(at)): after its flight (\(time(end)))"))
                }
            }
        }
        if separation > 0 {
            for (index, ad) in shown.enumerated() {
                guard let creative = ad.creative else { continue }
                let marks = Set((creative.advertiser.map { ["advertiser " + $0] } ?? []) + creative.categories.map { "category " + $0 })
                guard !marks.isEmpty else { continue }
                for other in shown[..<index] {
                    guard let otherCreative = other.creative, other.id != ad.id else { continue }
                    let otherMarks = Set((otherCreative.advertiser.map { ["advertiser " + $0] } ?? []) + otherCreative.categories.map { "category " + $0 })
                    let end = other.ended ?? other.started!
                    if let shared = marks.intersection(otherMarks).sorted().first, ad.started! - end < separation - 0.001 {
                        failures.append(Failure(at: ad.started!, message: "\(name(ad)) shown at \(time(ad.started!)), \(String(format: "%g", ad.started! - end)) s after "
                                                + "\(name(other)) of the same \(shared): ad-separation is \(String(format: "%g", separation)) s"))
                        break
                    }
                }
            }
        }
        let capped = byCreative.keys.filter { caps[$0] != nil }.count
        return Result(name: "caps-separation-dayparts-flights",
                      checked: "\(shown.count) ads shown; \(capped) creatives with caps, dayparts or flights; separation \(String(format: "%g", separation)) s",
                      failures: failures)
    }

    /// Every impression recorded within `pop-deadline` (the ad's own, else the box's) of its
    /// ad's start.
    static func popDeadline(_ ads: [Ad], _ byPlay: [String: [RecordedExchange]], _ box: Double?) -> Result {
        var failures: [Failure] = []
        var checked = 0
        for ad in ads {
            guard let started = ad.started, let deadline = ad.creative?.popDeadline ?? box else { continue }
            for impression in (byPlay[ad.play] ?? []) where impression.event == "impression" {
                checked += 1
                if impression.started - started > deadline + 0.001 {
                    failures.append(Failure(at: impression.started, message: "\(name(ad)) started at \(time(started)): its impression was recorded "
                                            + "\(String(format: "%g", impression.started - started)) s later, past pop-deadline \(String(format: "%g", deadline)) s"))
                }
            }
        }
        return Result(name: "pop-deadline", checked: box == nil && checked == 0 ? "no pop-deadline configured" : "\(checked) impressions", failures: failures)
    }

    /// The seed's rule: an overlay is on screen over playing content only; any pause (the
    /// viewer's, a break's hold, the end, another episode) ends it at that instant — except
    /// while the output is hidden, where it freezes instead (R13).
    static func overlaysOnPause(_ outcome: Simulation.Outcome, _ ads: [Ad]) -> Result {
        var failures: [Failure] = []
        let overlays = Dictionary(ads.filter { $0.kind == .overlay }.map { ($0.id, $0) }, uniquingKeysWith: { a, _ in a })
        // When each overlay was on the surface: [up, down), down nil while still up at the end.
        var intervals: [(ad: Ad, up: Double, down: Double?)] = []
        var up: [UInt64: Double] = [:]
        for (at, id, shown) in outcome.surface where overlays[id] != nil {
            if shown {
                up[id] = up[id] ?? at
            } else if let since = up.removeValue(forKey: id) {
                intervals.append((overlays[id]!, since, at))
            }
        }
        for (id, since) in up.sorted(by: { $0.key < $1.key }) { intervals.append((overlays[id]!, since, nil)) }
        // While the output is hidden an overlay freezes through a pause instead (R13).
        var background: [(at: Double, on: Bool)] = []
        for entry in outcome.timeline {
            if case .object(let fields) = entry.json, fields["event"] == .string("player.background"), case .bool(let on)? = fields["background"] {
                background.append((entry.at, on))
            }
        }
        func hidden(at instant: Double) -> Bool { background.last { $0.at <= instant }?.on ?? false }
        var pauses = 0
        for (at, change, _) in outcome.playerEvents where !hidden(at: at) {
            let stopping: String
            switch change {
            case .paused: stopping = "the content paused"
            case .held: stopping = "a break held the content"
            case .ended: stopping = "the episode ended"
            case .item(nil): stopping = "the episode left the player"
            default: continue
            }
            pauses += 1
            for interval in intervals where interval.up < at && (interval.down.map { $0 > at } ?? true) {
                failures.append(Failure(at: at, message: "\(name(interval.ad)) was still on screen when \(stopping) at \(time(at))"
                                        + (interval.down.map { "; it came down at \(time($0))" } ?? "; it never came down")))
            }
        }
        return Result(name: "overlays-end-on-pause", checked: "\(overlays.count) overlays, \(intervals.count) times on screen, \(pauses) pauses and ends",
                      failures: failures)
    }

    /// The simulation itself did what it was asked (its sources made, its work settled).
    static func ran(_ outcome: Simulation.Outcome) -> Result {
        Result(name: "simulation-ran", checked: "\(outcome.timeline.count) timeline entries",
               failures: outcome.problems.map { Failure(at: outcome.from, message: $0) })
    }
}
