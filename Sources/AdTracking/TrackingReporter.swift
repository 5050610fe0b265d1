import AdRuntime
import AdSources
import Foundation

/// Turns what the runtime does into what ad servers and operators are told (docs/reporting.md):
///
/// - **Beacons** of the creative, written to the outbox (R17): `impression` (billable) and
///   `creativeView` when an ad goes on screen, `start`, the quartiles and `progress` offsets of
///   a post-roll, its `pause` and `resume`, `complete`, `close` (or `skip` and `closeLinear` for
///   a post-roll), `viewable`/`notViewable`/`viewUndetermined` (VAST's `ViewableImpression`),
///   and `error` URLs with `[ERRORCODE]` (405) when a creative cannot be shown. Every macro is
///   filled here (`Macros`, the configured `MacroPolicy`) but `[TIMESTAMP]`, which the outbox
///   fills with the event's time when it sends. Each URL is judged alone; at most
///   `maxURLsPerEvent` an event and `maxURLsPerAd` an ad — the rest refused and counted.
/// - **Proof of play**: a row for every ad that went on screen, written durably *before*
///   `recordStart`'s continuation runs (the daemon tells clients `ad.started` only then), ended
///   with its reason, time on screen and viewability.
/// - **Metrics**: requests, fills, no-fills, starts, ends, errors, viewability, time on screen.
///
/// Threading: `record` may be called from any thread — it is a `VideoAds` `onEvent` consumer,
/// so usually the player's loop — and returns at once: everything is done by a writer thread of
/// its own, in the order of the events (R18).
public final class TrackingReporter: @unchecked Sendable {
    // @unchecked: `ads` and `playerSize` are touched only on `writer`, a serial thread of its own.
    public static let maxURLsPerEvent = 64
    public static let maxURLsPerAd = 256

    private struct Shown {
        let creative: AdCreative
        var urls = 0
        var viewability: AdViewability?
        /// It went on screen (else its end is VAST 4's `notUsed`: the slot can be sold again).
        var started = false
        /// `pop-require-display`: the start's beacons, held until the screen's evidence is in.
        var held: [String]?
        /// The evidence, once judged (the first judgement counts).
        var display: DisplayEvidence?
        /// Its evidence did not verify under `pop-require-display`: `notUsed` was sent and its
        /// later beacons are withheld (counted, never sent).
        var withheld = false
    }

    /// The screen's place and audience, and the default proof-of-play deadline (digital out of
    /// home buyers: docs/reporting.md, "Proof of play for DOOH buyers").
    public struct Placement: Sendable, Equatable {
        public var venueID: String?
        /// The audience one play counts for (the multiplier the operator was given).
        public var impressionsPerPlay: Double?
        /// `lat,long`.
        public var latLong: String?
        /// Seconds after an ad showed within which its billable beacons are delivered or
        /// dropped, for every source without its own (`pop-deadline`).
        public var popDeadline: Double?
        /// `pop-require-display` for every source without its own: an ad's impression waits
        /// for its display evidence, at most `displayWait` seconds after it went on screen.
        public var requireDisplay = false
        public var displayWait = 2.0
        public init() {}
    }

    private let outbox: BeaconOutbox
    private let placement: Placement
    private let policy: MacroPolicy
    private let clock: any TrackingClock
    private let metrics: Metrics?
    private let writer: Workers
    private var ads: [UInt64: Shown] = [:]
    private var playerSize: MacroContext.PlayerSize?

    /// Its writer thread is of `policy`'s environment (a simulation's shares its one thread).
    public init(outbox: BeaconOutbox, policy: MacroPolicy = MacroPolicy(), clock: any TrackingClock = SystemTrackingClock(),
                metrics: Metrics? = nil, placement: Placement = Placement()) {
        writer = Workers(name: "adplayerd-track", environment: policy.environment)
        self.placement = placement
        self.outbox = outbox
        self.policy = policy
        self.clock = clock
        self.metrics = metrics
    }

    /// Records an event of the runtime (any thread; returns at once).
    public func record(_ event: AdEvent) {
        writer.execute { self.write(event) }
    }

    /// Records that an ad went on screen — its proof-of-play row written and on disk — then
    /// runs `then` (on the writer thread): the daemon tells clients `ad.started` from there, so
    /// that no client hears of an ad that proof of play could lose to a `kill -9`.
    ///
    /// The order is the promise's and no more: the play row (one synced write), then `then`,
    /// then the start's beacons (one synced write for all of them) — a client hears
    /// `ad.started` one fsync after the ad went on screen, not one per beacon and counter.
    public func recordStart(_ event: AdEvent, then: @escaping @Sendable () -> Void) {
        writer.execute {
            guard case .started(let info) = event else {
                self.write(event)
                return then()
            }
            self.metrics?.count(event)
            self.startPlay(info)
            then()
            self.sendStart(info)
        }
    }

    /// The output's size, for `[PLAYERSIZE]`.
    public func setPlayerSize(width: Int, height: Int) {
        writer.execute { self.playerSize = MacroContext.PlayerSize(width: width, height: height) }
    }

    /// What the screen showed while ad `info` was up (issue 36): recorded with its play, and,
    /// under `pop-require-display`, its held impression sent (`verified`) or `notUsed` instead.
    /// The first judgement of an ad counts. Any thread; call it before the ad's `.ended` is
    /// recorded for the play to carry it.
    public func recordDisplay(_ info: AdInfo, _ evidence: DisplayEvidence) {
        writer.execute { self.judged(info, evidence) }
    }

    /// A content item the schedule played, in proof of play as a play of kind `content`
    /// (`record-content-plays`: contracts that bill house content): its start, then its end
    /// (`ended` set). On the writer, in order with the ads' plays.
    public func recordContent(id: String, contentID: String, source: String, startedWall: Double, endedWall: Double?, seconds: Double?, reason: String?) {
        writer.execute { [self] in
            guard let endedWall else {
                var play = Play(id: id, adID: contentID, kind: "content", source: source, contentID: contentID, startedWall: startedWall)
                play.venue = placement.venueID
                play.impressions = placement.impressionsPerPlay
                play.latLong = placement.latLong
                return outbox.recordPlayStart(play)
            }
            outbox.recordPlayEnd(id: id, endedWall: endedWall, seconds: seconds, reason: reason ?? "completed", viewable: nil)
        }
    }

    /// A source's `Error` URLs (it gave up on an ad or a chain), with the VAST code in `context`.
    public func recordErrorURLs(_ templates: [String], _ context: MacroContext) {
        writer.execute { self.queue(templates, event: "error", play: nil, context: context, at: nil) }
    }

    /// A source's `notUsed` URLs for an ad it fetched and never handed out.
    public func recordNotUsedURLs(_ templates: [String], _ context: MacroContext) {
        writer.execute { self.queue(templates, event: "notUsed", play: nil, context: context, at: nil) }
    }

    /// Waits until every event recorded so far is handled (or failed), at most `timeout`
    /// seconds (nil: as long as it takes — tests). Not on the loop. False when it timed out
    /// (a disk that hangs at stop): what was not written is in memory only, and said so.
    @discardableResult
    public func flush(timeout: Double? = nil) -> Bool {
        let done = Handover<Bool>()
        writer.execute { done.fulfil(true) }
        if let timeout { return done.wait(timeout: timeout) == true }
        return done.wait() == true
    }

    // MARK: On the writer thread

    private func write(_ event: AdEvent) {
        metrics?.count(event)
        switch event {
        case .requested, .noFill, .error, .contentEnded, .breakStarted, .breakEnded:
            break
        case .loaded(let info, let creative):
            ads[info.id] = Shown(creative: creative)
        case .started(let info):
            startPlay(info)
            sendStart(info)
        case .postrollPaused(let info, let paused):
            send(info, [paused ? "pause" : "resume"])
        case .quartile(let info, let quartile):
            send(info, [["firstQuartile", "midpoint", "thirdQuartile"][max(0, min(2, quartile - 1))]])
        case .progress(let info, let offset, let playhead):
            send(info, ["progress:\(offset)"], adPlayhead: playhead)
        case .iconShown(let info, let index):
            send(info, [AdIcon.viewEvent(index)])   // IconViewTracking, once: the icon was drawn
        case .viewability(let info, let viewability):
            ads[info.id]?.viewability = viewability
            outbox.recordViewability(id: Self.playID(info), viewability.rawValue)
            send(info, [viewability == .viewable ? "viewable" : viewability == .notViewable ? "notViewable" : "viewUndetermined"])
        case .ended(let info, let reason, _):
            if ads[info.id]?.held != nil {
                judged(info, .missing("the ad left the screen before its display evidence was in", at: clock.wallNow().timeIntervalSince1970))
            }
            // Fetched, never shown (the episode changed, `next`, withdrawn, the pause too short):
            // VAST 4's `notUsed`, once, so that the ad server can sell the slot again.
            if ads[info.id]?.started == false, reason != .failed { send(info, ["notUsed"]) }
            if ads[info.id]?.started == true { send(info, ["breakEnd"]) }   // a VMAP break's (its last ad)
            switch reason {
            case .completed: send(info, info.kind.hasQuartiles ? ["complete"] : [])
            case .closed: send(info, info.kind.isLinear ? ["skip", "closeLinear"] : ["close"])
            case .skipped: send(info, ["skip"])
            case .failed: send(info, ["error"], errorCode: 405)
            default: break
            }
            // A play that started is closed in the ledger whatever it ended with.
            if info.onScreenSeconds != nil || ads[info.id]?.viewability != nil || ads[info.id]?.started == true {
                outbox.recordPlayEnd(id: Self.playID(info), endedWall: wall(at: info.at), seconds: info.onScreenSeconds,
                                     reason: reason.rawValue, viewable: ads[info.id]?.viewability?.rawValue)
            }
            ads[info.id] = nil
        }
    }

    /// Proof of play: the row of an ad that went on screen, on disk when this returns.
    private func startPlay(_ info: AdInfo) {
        ads[info.id]?.started = true   // (both ways in: `write` and `recordStart`)
        var play = Play(id: Self.playID(info), adID: info.creativeID, kind: info.kind.protocolName,
                        source: ads[info.id]?.creative.source, contentID: info.contentID, startedWall: wall(at: info.at))
        play.venue = placement.venueID
        play.impressions = placement.impressionsPerPlay
        play.latLong = placement.latLong
        play.adDuration = ads[info.id]?.creative.duration
        play.loudness = info.loudness
        outbox.recordPlayStart(play)
    }

    private func sendStart(_ info: AdInfo) {
        let events = ["impression", "creativeView"] + (info.kind.hasQuartiles ? ["start"] : []) + ["breakStart"]
        guard let shown = ads[info.id], shown.creative.requireDisplay ?? placement.requireDisplay else { return send(info, events) }
        // `pop-require-display`: nothing goes out before the screen says it showed the ad;
        // past the wait, no evidence is not verified.
        ads[info.id]?.held = events
        let wait = max(0.1, min(placement.displayWait, 10))
        DispatchQueue.global().asyncAfter(deadline: .now() + wait) { [self] in
            writer.execute { [self] in
                guard ads[info.id]?.held != nil else { return }
                judged(info, .missing("no display evidence within \(String(format: "%g", wait)) s", at: clock.wallNow().timeIntervalSince1970))
            }
        }
    }

    /// The ad's display evidence: kept with its play, counted unless verified, and what was
    /// held for it sent — or, not verified, `notUsed` instead and its later beacons withheld.
    private func judged(_ info: AdInfo, _ evidence: DisplayEvidence) {
        guard let shown = ads[info.id], shown.display == nil else { return }
        ads[info.id]?.display = evidence
        outbox.recordDisplay(id: Self.playID(info), evidence)
        if let code = evidence.code {
            metrics?.increment("adplayerd_plays_unverified_total", ["reason": code, "verdict": evidence.verdict.rawValue])
        }
        guard let held = shown.held else { return }
        ads[info.id]?.held = nil
        if evidence.verdict == .verified { return send(info, held) }
        send(info, ["notUsed"])
        ads[info.id]?.withheld = true
        // No impression: no audience in the ad log (a DOOH buyer pays by `impressions`).
        outbox.recordNoAudience(id: Self.playID(info))
    }

    /// The play's id: the ad's instance, as the socket names it.
    static func playID(_ info: AdInfo) -> String { String(info.id, radix: 16) }

    /// The wall-clock time of a loop instant (`AdInfo.at`, monotonic ns), seconds since 1970.
    private func wall(at instant: UInt64) -> Double {
        let lag = clock.monotonicNow() - Double(instant) / 1e9
        let now = clock.wallNow().timeIntervalSince1970
        return instant > 0 && lag >= 0 && lag < 3600 ? now - lag : now
    }

    private func send(_ info: AdInfo, _ events: [String], errorCode: Int? = nil, adPlayhead: Double? = nil) {
        guard let shown = ads[info.id] else { return }
        if shown.held != nil || shown.withheld {
            // Held for the display evidence (a quartile before the verdict: after the start's,
            // in order), or withheld after `notUsed`: counted, never sent.
            if shown.held != nil {
                ads[info.id]?.held?.append(contentsOf: events)
                return
            }
            let urls = events.reduce(0) { $0 + (shown.creative.tracking[$1]?.count ?? 0) }
            if urls > 0 { metrics?.increment("adplayerd_beacons_withheld_total", by: Double(urls)) }
            return
        }
        let context = MacroContext(contentID: info.contentID, kind: info.kind, contentPlayhead: info.contentPosition, adPlayhead: adPlayhead,
                                   errorCode: errorCode, adServingID: shown.creative.adServingID,
                                   universalAdID: shown.creative.universalAdID, playerSize: playerSize,
                                   transactionID: shown.creative.transactionID, adCount: shown.creative.adCount ?? 1)
        let deadline = shown.creative.popDeadline ?? placement.popDeadline
        // Every URL of the events one runtime event causes, queued together: one synced write.
        let beacons = events.flatMap { event in
            beaconsFor(shown.creative.tracking[event] ?? [], event: event, play: Self.playID(info), context: context, at: info.at, ad: info.id,
                       deadline: deadline)
        }
        enqueue(beacons)
    }

    /// Fills and queues one event's URLs, within the bounds an event and an ad.
    private func queue(_ templates: [String], event: String, play: String?, context: MacroContext, at instant: UInt64?, ad: UInt64? = nil) {
        enqueue(beaconsFor(templates, event: event, play: play, context: context, at: instant, ad: ad))
    }

    private func enqueue(_ beacons: [Beacon]) {
        guard !beacons.isEmpty else { return }
        let queued = outbox.enqueue(beacons)   // not inside `metrics?.…`: with no metrics it would not run
        metrics?.increment("adplayerd_beacons_enqueued_total", by: Double(queued))
    }

    /// One event's URLs filled, within the bounds an event and an ad (the rest counted).
    private func beaconsFor(_ templates: [String], event: String, play: String?, context: MacroContext, at instant: UInt64?,
                            ad: UInt64?, deadline: Double? = nil) -> [Beacon] {
        guard !templates.isEmpty else { return [] }
        var allowed = min(templates.count, Self.maxURLsPerEvent)
        if let ad, let used = ads[ad]?.urls {
            allowed = max(0, min(allowed, Self.maxURLsPerAd - used))
            ads[ad]?.urls = used + allowed
        }
        outbox.countDrop(.tooMany, play: play, count: templates.count - allowed)
        var recorded = RecordedTime.now(clock)
        var lag = 0.0
        if let instant, instant > 0 {
            let behind = recorded.monotonic - Double(instant) / 1e9
            if behind >= 0 && behind < 3600 {   // the event's own time, not when this thread got to it
                lag = behind
                recorded.monotonic -= lag
                recorded.wall -= lag
            }
        }
        // The deadline runs from the event (the ad on screen), not from when it was queued.
        let billable = event == "impression"
        return templates.prefix(allowed).map { template in
            Beacon(url: Macros.expand(template, context, policy, keepingTimestamp: true), event: event, play: play,
                   billable: billable, recorded: recorded, deadline: billable ? deadline.map { max(0, $0 - lag) } : nil)
        }
    }
}
