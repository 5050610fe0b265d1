import AdRuntime
import Foundation

/// VMAP (SPEC §4.2): an ad server's schedule of breaks for the episode — which breaks this player
/// plays, at what times, and the ads each serves; the rest of the client resolves VAST.
extension VASTClient {
    /// Keeps `vmap` for the request's episode; the breaks this player does not play are
    /// reported at once, each through its `error` URLs with VMAP's 1003 (type not supported).
    func loadSchedule(_ vmap: VMAPDocument, for request: AdRequest, _ values: MacroContext) {
        answersVMAP.withLock { $0 = true }
        let order = loadOrder.withLock { order -> UInt64 in
            order += 1
            return order
        }
        let first = schedules.withLock { schedules in
            guard schedules[request.content.viewingKey] == nil else { return false }
            if schedules.count >= Self.maxViewings, let oldest = schedules.min(by: { $0.value.loaded < $1.value.loaded })?.key {
                schedules[oldest] = nil
            }
            schedules[request.content.viewingKey] = Schedule(breaks: vmap.breaks.map(Self.normalized), values: values, loaded: order)
            return true
        }
        guard first else { return }   // another request of the episode loaded it first
        let breaks = vmap.breaks.map(Self.normalized)
        for item in breaks where !Self.playable(item) {
            fireBreak(item.error, .breakTypeNotSupported, values)
        }
        // A linear break at the same offset as an earlier linear break: one linear break plays
        // at an instant (its pod, in order); the other is told through its error URLs once,
        // never dropped in silence.
        var linearOffsets: [VMAPDocument.Offset] = []
        for item in breaks where Self.playable(item) && item.types.contains("linear") {
            if linearOffsets.contains(item.offset) {
                fireBreak(item.error, .breakTypeNotSupported, values)
            } else {
                linearOffsets.append(item.offset)
            }
        }
    }

    /// A linear break at `00:00:00` or `0%` is the pre-roll. One at `100%` (or timed at the
    /// episode's end) is at the end, but it is not the `end` break: the post-roll request
    /// sorts them out (`atTheEndBreaks`), so that neither is mistaken for a duplicate of the other.
    private static func normalized(_ item: VMAPDocument.Break) -> VMAPDocument.Break {
        guard item.types.contains("linear") else { return item }
        var item = item
        switch item.offset {
        case .seconds(let s) where s <= 0: item.offset = .start
        case .percent(let p) where p <= 0: item.offset = .start
        default: break
        }
        return item
    }

    /// Breaks this player plays: nonlinear ones at a time (overlays, with `repeatAfter`), linear
    /// ones at the start (the pre-roll), at a time or a cue point (mid-rolls) and at the end (the
    /// post-roll), a pod when one holds several ads. `display` breaks are not.
    private static func playable(_ item: VMAPDocument.Break) -> Bool {
        switch item.offset {
        case .end: return item.types.contains("linear")
        case .start, .seconds, .percent, .position: return item.types.contains("nonlinear") || item.types.contains("linear")
        }
    }

    /// The content time of a break at a time (`start`: 0), nil for the end, a percentage of an
    /// episode whose length is not known, or a cue point (`#n`: the n-th of the episode's cue
    /// points, its chapters) it does not have or that is not known yet.
    private static func time(of item: VMAPDocument.Break, in content: ContentInfo) -> Double? {
        switch item.offset {
        case .start: 0
        case .seconds(let s): s
        case .percent(let p): content.duration.map { $0 * p / 100 }
        case .position(let n): content.cuePoints.flatMap { n >= 1 && n <= $0.count ? $0[n - 1] : nil }
        case .end: nil
        }
    }

    /// The content times of the VMAP schedule's mid-roll breaks for `content`, once its schedule
    /// is loaded (empty before).
    public func midrollTimes(for content: ContentInfo) -> [Double] {
        guard let schedule = schedules.withLock({ $0[content.viewingKey] }) else { return [] }
        reportMissingCuePoints(schedule, content)
        let times = schedule.breaks.indices.compactMap { index -> Double? in
            let item = schedule.breaks[index]
            guard item.types.contains("linear"), item.offset != .start, !Self.repeatsAnOffset(index, schedule.breaks),
                  let time = Self.time(of: item, in: content), time > 0, !Self.atTheEnd(time, content) else { return nil }
            return time
        }.sorted()
        var distinct: [Double] = []
        for time in times where distinct.last.map({ time - $0 > 0.001 }) ?? true { distinct.append(time) }
        return distinct
    }

    /// A linear break at the same offset as an earlier linear break (told at load, not played).
    private static func repeatsAnOffset(_ index: Int, _ breaks: [VMAPDocument.Break]) -> Bool {
        let item = breaks[index]
        guard item.types.contains("linear") else { return false }
        return breaks[..<index].contains { $0.types.contains("linear") && playable($0) && $0.offset == item.offset }
    }

    /// A time at (or past) the episode's end, its length known: a break there is the post-roll.
    private static func atTheEnd(_ time: Double, _ content: ContentInfo) -> Bool {
        content.duration.map { time >= $0 - 0.001 } ?? false
    }

    /// The linear breaks at the end of a viewing that played to its end at `request.position`
    /// (R11), not served yet, in the document's order: the `end` break, one at `100%`, one timed
    /// at or past the episode's length — and a mid-roll whose time the content did not cross
    /// before it ended (within a quarter second of the end: the last frame came first). A
    /// prefetch (`ended` false: its position is not where the content ended) sees the first ones only.
    private static func atTheEndBreaks(_ schedule: Schedule, _ request: AdRequest, ended: Bool) -> [Int] {
        schedule.breaks.indices.filter { index in
            let item = schedule.breaks[index]
            guard item.types.contains("linear"), playable(item), item.offset != .start, !repeatsAnOffset(index, schedule.breaks),
                  !schedule.served.contains("\(index)@end") else { return false }
            if item.offset == .end { return true }
            guard let time = time(of: item, in: request.content) else { return false }
            return atTheEnd(time, request.content) || (ended && time >= request.position - 0.25 && !schedule.served.contains("\(index)@mid"))
        }
    }

    /// Once the episode's cue points are known: a `#n` break past them can never be played —
    /// told once through its `error` URLs with 1003 (the content has no such opportunity).
    private func reportMissingCuePoints(_ schedule: Schedule, _ content: ContentInfo) {
        guard let cues = content.cuePoints else { return }
        let missing = schedule.breaks.filter { item in
            if case .position(let n) = item.offset { return Self.playable(item) && !(n >= 1 && n <= cues.count) }
            return false
        }
        guard !missing.isEmpty, schedules.withLock({ schedules in
            guard schedules[content.viewingKey]?.cuesReported == false else { return false }
            schedules[content.viewingKey]?.cuesReported = true
            return true
        }) else { return }
        for item in missing { fireBreak(item.error, .breakTypeNotSupported, schedule.values) }
    }

    /// The ad of the schedule's next break for `request`: an overlay at its break's time (the
    /// next unserved instance at or after the position), the `end` break's post-roll; nil when
    /// there is none. A break that cannot be honoured is reported through its `error` URLs.
    func fromSchedule(_ request: AdRequest, prefetching: Bool) async throws -> Resolution? {
        guard let schedule = schedules.withLock({ $0[request.content.viewingKey] }) else { return nil }
        var chosen: (index: Int, key: String, time: Double?)?
        switch request.kind {
        case .overlay:
            let duration = request.content.duration
            var best: (Int, String, Double)?
            for (index, item) in schedule.breaks.enumerated() where Self.playable(item) && item.types.contains("nonlinear") {
                guard let first = Self.time(of: item, in: request.content) else { continue }
                for k in 0..<(item.repeatAfter == nil ? 1 : 1000) {
                    let time = first + Double(k) * (item.repeatAfter ?? 0)
                    if let duration, time >= duration { break }
                    let key = "\(index)@\(k)"
                    guard time >= request.position - 0.001, !schedule.served.contains(key) else { continue }
                    if best == nil || time < best!.2 { best = (index, key, time) }
                    break
                }
            }
            chosen = best.map { ($0.0, $0.1, $0.2) }
        case .postroll:
            // The episode is over: a `#n` break past its cue points is told now if it was not
            // (an end-of-episode break must not hide it).
            reportMissingCuePoints(schedule, request.content)
            let atEnd = Self.atTheEndBreaks(schedule, request, ended: !prefetching)
            if let index = atEnd.first(where: { schedule.breaks[$0].offset == .end }) ?? atEnd.first {
                chosen = (index, "\(index)@end", nil)
                if !prefetching {
                    // One linear break plays at an instant: the others at the end are told
                    // through their error URLs (1003), once — never dropped in silence.
                    let others = atEnd.filter { $0 != index }
                    _ = schedules.withLock { schedules in others.forEach { schedules[request.content.viewingKey]?.served.insert("\($0)@end") } }
                    for other in others { fireBreak(schedule.breaks[other].error, .breakTypeNotSupported, schedule.values) }
                }
            }
        case .preroll:
            if let index = schedule.breaks.indices.first(where: {
                schedule.breaks[$0].offset == .start && schedule.breaks[$0].types.contains("linear") && !schedule.served.contains("\($0)@start")
            }) {
                chosen = (index, "\(index)@start", nil)
            }
        case .midroll:
            // The first unserved linear break at or after the position (the policy asks a little
            // ahead of it, or at a snapback's landing for the last one passed: its own time).
            var best: (Int, String, Double)?
            for (index, item) in schedule.breaks.enumerated()
            where item.types.contains("linear") && item.offset != .start && !Self.repeatsAnOffset(index, schedule.breaks) {
                guard let time = Self.time(of: item, in: request.content), time > 0, !Self.atTheEnd(time, request.content),
                      !schedule.served.contains("\(index)@mid") else { continue }
                let wanted = request.breakTime ?? request.position
                guard time >= wanted - 0.001 else { continue }
                if best == nil || time < best!.2 { best = (index, "\(index)@mid", time) }
            }
            chosen = best.map { ($0.0, $0.1, $0.2) }
        case .pauseAd, .squeezeback, .screensaver:
            chosen = nil   // a squeezeback comes as a nonlinear break's creative (its extension)
        }
        guard let chosen else { return nil }
        if !prefetching { _ = schedules.withLock { $0[request.content.viewingKey]?.served.insert(chosen.key) } }
        let item = schedule.breaks[chosen.index]
        let data: Data
        if let inline = item.vast {
            data = inline
        } else if let uri = item.tagURI {
            do {
                data = try await fetcher.fetch(Macros.expand(uri, schedule.values, policy),
                                               limits: HTTPLimits(maxBytes: configuration.maxDocumentBytes, deadline: configuration.firstTimeout,
                                                                  maxRedirects: item.followRedirects ? 5 : 0))
            } catch let error as FetchError {
                fireBreak(item.error, error.kind == .timeout ? .retrievalTimeout : .retrievalError, schedule.values)
                throw Self.vastError(error, wrapper: false)
            }
        } else {
            fireBreak(item.error, .adResponseError, schedule.values)
            return nil
        }
        var resolution: Resolution?
        do {
            resolution = try await resolve(request, document: data, prefetching: prefetching)
        } catch let error as VASTError {
            let code: VMAPDocument.ErrorCode = switch error.code {
            case .xmlParsing, .schemaValidation, .unsupportedVersion: .extractionError
            case .wrapperTimeout: .retrievalTimeout
            default: .adResponseError
            }
            fireBreak(item.error, code, schedule.values)
            throw error
        }
        guard var answer = resolution else {
            fireBreak(item.error, .adResponseError, schedule.values)
            return nil
        }
        if let time = chosen.time { answer.creative.slotStart = time }
        if !item.allowMultipleAds, answer.creative.podRemaining > 0 {
            answer.creative.podRemaining = 0
            _ = pods.withLock { $0.removeValue(forKey: request.content.viewingKey) }
        }
        // Once a break: `breakStart` with its first ad, `breakEnd` with its last.
        answer.creative.tracking["breakStart", default: []] += item.breakStart
        if answer.creative.podRemaining == 0 {
            answer.creative.tracking["breakEnd", default: []] += item.breakEnd
        } else if !item.breakEnd.isEmpty {
            pendingBreakEnd.withLock { $0[request.content.viewingKey] = item.breakEnd }
        }
        return answer
    }

    private func fireBreak(_ urls: [String], _ code: VMAPDocument.ErrorCode, _ values: MacroContext) {
        guard !urls.isEmpty else { return }
        var values = values
        values.errorCode = code.rawValue
        onErrorURLs(urls, values)
    }

    func fire(_ urls: [String], code: VASTErrorCode, _ values: MacroContext) {
        guard !urls.isEmpty else { return }
        var values = values
        values.errorCode = code.rawValue
        onErrorURLs(urls, values)
    }
}
