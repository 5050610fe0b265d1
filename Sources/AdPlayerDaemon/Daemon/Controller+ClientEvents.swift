import AdRuntime
import AdSchedule
import AdTracking
import ControlProtocol
import Foundation

extension Controller {
    // MARK: What the player and the ads say (on the loop)

    /// The controller is the player's last observer: every other observer of a change has
    /// reacted — the ads above all, whose reaction (an overlay taken down) is what
    /// `latency_us` measures and what a viewer sees — before clients hear of it, in this same
    /// turn: the change, then the ads' events it caused (docs/benchmarks.md, §5).
    public func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) {
        self.player.loop.requireInLoop()
        handle(event)
    }

    func emit(_ event: ControlEvent) {
        if batch != nil { batch!.append(event) } else { emitNow(event) }
    }

    func handle(_ event: PlayerEvent) {
        let s = event.snapshot
        batch = []
        // First what clients hear — the change, then what the ads did about it (they reacted
        // before this last observer) — then the rest, which wakes other threads.
        switch event.change {
        case .item(let item?):
            lastFailure = nil
            if let episode, episode.playlistEntry == nil || item.entry == episode.playlistEntry, item.path == episode.entry.path { scheduleItemPlays() }
            emit(.playerItem(path: item.path, entry: item.entry, pass: (episode?.pass ?? 0) + item.loop, contentID: episode?.entry.contentID))
        case .item(nil): emit(.playerEmpty)
        case .playing(let rate): emit(.playerPlaying(rate: rate, position: s.position))
        case .paused: emit(.playerPaused(position: s.position))
        case .held: break   // a linear break's stop, not a pause: clients hear of the break (ad.break_started)
        case .rate(let rate): emit(.playerRate(rate))
        case .seeked(let from, let to): emit(.playerSeeked(from: from, to: to))
        case .ended(let item): emit(.playerEnded(path: item.path, position: s.position))
        case .failed(let failure): emit(.playerFailed(path: failure.path, code: failure.code, message: failure.message))
        }
        flushAdEvents()
        if let events = batch, !events.isEmpty { emitMany(events) }
        batch = nil
        if case .paused = event.change, pausesTold.count < 100_000 { pausesTold.append(MonotonicTime.now() &- event.observedAt) }
        if !recordAfterBatch.isEmpty {
            recordAfterBatch.forEach(reporting.record)
            recordAfterBatch = []
        }
        switch event.change {
        case .item, .playing, .seeked: setResting(false)
        default: break
        }
        switch event.change {
        case .item(let item?) where item.loop > 0 && item.entry == episode?.playlistEntry:
            // Another pass of the episode (`repeat one`): a new viewing, its frequency caps anew.
            if let episode { store.resetCounters(content: episode.entry.contentID) }
        case .item: break
        case .playing(let rate):
            speedSetting = rate
            armPositionTimer()
        case .paused, .held:
            positionTimer?.cancel()
            savePosition()
        case .rate(let rate):
            speedSetting = rate
        case .seeked:
            savePosition()
        case .ended(let item):
            positionTimer?.cancel()
            // Played to its end: the next time it starts from 0 — by its path, whether or not the
            // policy has already moved on to the next episode.
            remember(item.path, nil)
            if let episode, item.entry == episode.playlistEntry, episode.policy == nil { episodeFinished(episode.serial) }   // no ads: next
        case .failed(let failure):
            log.warning("\(failure.path): cannot be played: \(failure.message) [\(failure.code)]; the next entry plays")
            lastFailure = (failure.path, "\(failure.message) [\(failure.code)]")
            if failure.entry == episode?.playlistEntry { episode?.failure = "\(failure.message) [\(failure.code)]" }
            if let episode, failure.entry == episode.playlistEntry, episode.policy == nil { episodeFinished(episode.serial) }
        }
        if case .seeked(_, let to) = event.change { publishDesktop(seekedTo: to) } else { publishDesktop() }
    }

    /// Ad events from the episode's runtime (on the loop): told in this turn — after the
    /// player change that caused them, when one is being told (`handle`), else right after the
    /// work under way (a timer's end, a request's answer) — in `pendingAdEvents`.

    func queueAdEvent(_ event: AdEvent) {
        pendingAdEvents.append(event)
        guard !adFlushScheduled else { return }
        adFlushScheduled = true
        _ = player.loop.execute { [weak self] in self?.flushAdEvents() }
    }

    func flushAdEvents() {
        adFlushScheduled = false
        guard !pendingAdEvents.isEmpty else { return }
        let events = pendingAdEvents
        pendingAdEvents = []
        events.forEach(adEvent)
    }

    /// An ad event: the controller's own state at once (status, MPRIS), tracking in order,
    /// and clients — `ad.started` once proof of play holds the ad (`AdReporting.recordStart`),
    /// that ad's later events after it.
    func adEvent(_ event: AdEvent) {
        switch event {
        case .started(let info):
            // A linear ad has the screen: an overlay it took down (suspended for a mid-roll)
            // is not the ad on screen; it is again once the break is over.
            if info.kind.isLinear, let shown = adOnScreen, !shown.kind.isLinear { adUnderBreak = shown }
            adOnScreen = info
            if info.kind.isLinear {
                linearAd = (info.id, info.kind, false)
                publishDesktop()
            }
            if let recordStart = reporting.recordStart {
                unannounced[info.id] = []
                recordStart(event) { [weak self, loop = player.loop] in
                    _ = loop.execute { [weak self] in self?.announceStart(info) }
                }
                displayWitness?.observe(event)
                return
            }
        case .breakStarted(let kind, _, _):
            adBreak = kind
            publishDesktop()
        case .breakEnded:
            adBreak = nil
            if adOnScreen == nil || adOnScreen?.kind.isLinear == true { adOnScreen = adUnderBreak }
            adUnderBreak = nil
            publishDesktop()
        case .postrollPaused(let info, let paused):
            if linearAd?.id == info.id {
                linearAd?.paused = paused
                publishDesktop()
            }
        case .ended(let info, let reason, _):
            displayWitness?.observe(event)   // its evidence judged before tracking records the end
            if adOnScreen?.id == info.id { adOnScreen = nil }
            if adUnderBreak?.id == info.id { adUnderBreak = nil }
            // `pause-ad-max` reached: the paused frame is not shown either (burn-in), unless the
            // next pause ad takes its place (`pause-ad-rotate`): blank until the content moves.
            if reason == .limitReached, info.kind == .pauseAd, !pauseAdRotate { setResting(true) }
            if linearAd?.id == info.id {
                linearAd = nil
                publishDesktop()
            }
        default:
            break
        }
        // Clients first (a socket write), then tracking (a writer thread woken): while a
        // batch of events is being told, after it is out.
        if let id = event.adID, unannounced[id] != nil {
            unannounced[id]?.append(event)
        } else {
            announce(event)
        }
        if batch != nil { recordAfterBatch.append(event) } else { reporting.record(event) }
        if case .started = event { displayWitness?.observe(event) }
    }


    /// Proof of play holds the ad: clients hear of its start, then of what followed.
    func announceStart(_ info: AdInfo) {
        if info.at > 0, startsTold.count < 100_000 { startsTold.append(MonotonicTime.now() &- info.at) }
        let later = unannounced.removeValue(forKey: info.id) ?? []
        announce(.started(info))
        later.forEach(announce)
    }

    func announce(_ event: AdEvent) {
        switch event {
        case .requested(let kind, let content, let position): emit(.adRequested(kind, contentID: content, position: position))
        case .noFill(let kind, let content, let position): emit(.adNoFill(kind, contentID: content, position: position))
        case .loaded(let info, _): emit(.adLoaded(info))
        case .started(let info):
            emit(.adStarted(info))
            log.event(.info, "ad shown: \(info.kind.protocolName) \(info.creativeID) over \(info.contentID)", id: .adShown,
                      fields: ["AD_ID": info.creativeID, "AD_KIND": info.kind.protocolName, "CONTENT_ID": info.contentID,
                               "AD_INSTANCE": String(info.id, radix: 16)])
        case .quartile(let info, let quartile): emit(.adQuartile(info, quartile))
        case .viewability(let info, let viewability): emit(.adViewability(info, viewability))
        case .postrollPaused(let info, let paused): emit(.adPaused(info, paused))
        case .ended(let info, let reason, let latency): emit(.adEnded(info, reason: reason, latencyMicroseconds: latency))
        case .error(let kind, let creativeID, let error):
            emit(.adError(kind, adID: creativeID, error: error))
            var fields = ["AD_KIND": kind.protocolName, "AD_ERROR": error.code, "CONTENT_ID": episode?.entry.contentID ?? ""]
            if let creativeID { fields["AD_ID"] = creativeID }
            if let vast = error.vastCode { fields["VAST_ERROR"] = String(vast) }
            log.event(.notice, "ad error: \(kind.protocolName)\(creativeID.map { " " + $0 } ?? ""): \(error)", id: .adError, fields: fields)
        case .breakStarted(let kind, let content, let position): emit(.adBreak(kind, started: true, contentID: content, position: position))
        case .breakEnded(let kind, let content, let position): emit(.adBreak(kind, started: false, contentID: content, position: position))
        case .progress, .iconShown, .contentEnded: break
        }
    }
}

/// Where the controller hands the ads' events for tracking (`TrackingReporter`): every event
/// in order, and an ad's start with a continuation for once proof of play holds it.
public struct AdReporting: Sendable {
    public var record: @Sendable (AdEvent) -> Void
    /// Records `.started` durably, then runs the continuation (any thread). Nil: clients hear
    /// of a start at once.
    public var recordStart: (@Sendable (AdEvent, @escaping @Sendable () -> Void) -> Void)?
    /// The output's size changed (pixels): for `[PLAYERSIZE]` in tracking and ad requests.
    public var playerSize: (@Sendable (Int, Int) -> Void)?

    public init(record: @escaping @Sendable (AdEvent) -> Void = { _ in },
                recordStart: (@Sendable (AdEvent, @escaping @Sendable () -> Void) -> Void)? = nil) {
        self.record = record
        self.recordStart = recordStart
    }
}

extension AdEvent {
    /// The shown ad an event is about, if any.
    var adID: UInt64? {
        switch self {
        case .started(let info), .quartile(let info, _), .viewability(let info, _), .postrollPaused(let info, _), .ended(let info, _, _),
             .progress(let info, _, _), .iconShown(let info, _):
            info.id
        default:
            nil
        }
    }
}
