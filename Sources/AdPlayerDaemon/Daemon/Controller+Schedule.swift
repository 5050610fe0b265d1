import AdRuntime
import AdSchedule
import ControlProtocol
import Foundation

/// The schedule in the controller (issue 37, docs/schedule.md): what plays when, on the loop.
///
/// - Each item boundary (an item ends — after its post-roll — or the schedule starts) asks
///   `ScheduleState.pick` for the next item, which replaces the queue and plays.
/// - A boundary of the schedule (the ruling slots change, a takeover ends, a person's override
///   runs out) cuts what plays if it no longer rules — never a linear ad: the cut waits for its
///   end (at most `linearWait` seconds) — and the cut item is kept for its playlist to resume.
/// - A person's commands (`open`, `queue`, `jump`, `stop`, `clear`) rule — once they succeeded —
///   until the schedule's next boundary, and never longer than `overrideMax`; when a person's
///   own queue runs out, the schedule plays again at once; `schedule auto` gives it back.
///   `next` and `previous` move within what the schedule plays (its next item; the item it
///   played before), overriding nothing — a Next never darkens a scheduled screen.
/// - An item that cannot be loaded (a file gone: a USB stick pulled, a library replaced) is a
///   failed content play with its reason; the next item plays, and after failures in a row the
///   schedule waits a little longer each time before it tries again (`failureBackoff`); the
///   health verdict says "schedule items failing".
/// - A takeover is immediate: the ads on screen end `interrupted`.
///
/// Time: the wall clock is asked each time; the loop's timer only says when to ask again (at
/// the next boundary and at least every `recheck` seconds: a clock that jumps is followed).
/// The timeline (slots × days) is worked out off the loop (`timeline`), never on it.
struct Scheduler {
    var state: ScheduleState
    /// The item the schedule plays now (nil: nothing, or a person's choice plays).
    var playing: SchedulePick?
    var startedAt: Date?
    var timer: LoopTimer?
    var now: @Sendable () -> Date
    /// Works out a timeline off the loop and hands it back (on the loop).
    var timeline: @Sendable (Schedule, Date, @escaping @Sendable (ScheduleTimeline) -> Void) -> Void
    var timelineAsked = false
    /// Takeovers and their ends: who, when, what, until (the last 100).
    var audit: [JSONValue] = []
    var linearWaitStarted: Date?
    /// Content plays recorded like ad plays (`record-content-plays`): told each item's start and end.
    var onContent: (@Sendable (ContentPlay) -> Void)?
    /// Keeps the takeover (JSON, nil: none) and the audit (a JSON array) where a restart finds
    /// them (the state store, off the loop).
    var persist: (@Sendable (String?, String) -> Void)?
    /// This run's prefix of content plays' ids (unique across restarts).
    let run: String
    /// The content play of the item that plays: its id, fixed when it starts.
    var playID: String?
    /// The items the schedule started, the last one the one that plays (`previous`).
    var history: [SchedulePick] = []
    /// Items that could not be loaded in a row, the last one's path and why; the wait before
    /// the next try while they keep failing.
    var failures = 0
    var lastFailure: (path: String, reason: String)?
    var retry: LoopTimer?

    static let recheck = 30.0
    /// The longest a boundary waits for a linear ad to end (its budget).
    static let linearWait = 300.0
    /// The longest a person's override lasts when no boundary of the schedule comes sooner
    /// (docs/schedule.md): minutes, never the schedule's 48-hour horizon.
    static let overrideMax = 600.0
    /// An item that would be cut this close to its start is played without its pre-roll: no
    /// ad is billed before content that a boundary cuts before it plays.
    static let prerollMargin = 30.0
    /// Failures in a row after which the schedule waits before the next item (doubling from 1 s
    /// to 60 s): a library that is gone does not spin the player.
    static let failuresBeforeBackoff = 3

    static func failureBackoff(_ failures: Int) -> Double {
        guard failures >= failuresBeforeBackoff else { return 0 }
        return min(60, pow(2, Double(failures - failuresBeforeBackoff)))
    }

    /// What `history` keeps.
    static let historyLength = 20
}

/// A content item the schedule played, for proof of play (`record-content-plays`).
public struct ContentPlay: Sendable {
    public var id: String
    public var path: String
    public var contentID: String
    public var rule: ScheduleRule
    /// Where in the file it started (a cut item resumed), nil: from its start.
    public var from: Double?
    public var startedWall: Double
    /// Set at its end.
    public var endedWall: Double?
    public var seconds: Double?
    public var reason: String?
}

extension Controller {
    /// The longest a person's override of the schedule lasts when no boundary comes sooner.
    public static let scheduleOverrideMax = Scheduler.overrideMax

    /// Starts (or replaces, at a reload) the schedule. On the loop, after `start`.
    /// `timeline`: how a new timeline is worked out off the loop (the daemon's worker).
    /// `restoring`: a takeover the last run left on (and its `audit`), which goes on; `persist`
    /// keeps each change of them where the next start finds them.
    public func configureSchedule(_ resolved: ResolvedSchedule, timeline: ScheduleTimeline, now: @escaping @Sendable () -> Date = { Date() },
                                  compute: @escaping @Sendable (Schedule, Date, @escaping @Sendable (ScheduleTimeline) -> Void) -> Void,
                                  onContent: (@Sendable (ContentPlay) -> Void)? = nil, restoring takeover: ScheduleTakeover? = nil,
                                  audit: [JSONValue] = [], persist: (@Sendable (String?, String) -> Void)? = nil) {
        player.loop.requireInLoop()
        let at = now()
        if var scheduler {
            scheduler.state.replace(resolved, timeline: timeline, now: at)
            scheduler.onContent = onContent
            self.scheduler = scheduler
            log.notice("schedule: reloaded (\(resolved.schedule.slots.count) slots, \(resolved.schedule.playlists.count) playlists)")
            scheduleBoundary()
            return
        }
        scheduler = Scheduler(state: ScheduleState(resolved, timeline: timeline, now: at), now: now, timeline: compute, onContent: onContent,
                              persist: persist, run: String(adsConfiguration.environment.uint64(in: 1...UInt64.max), radix: 16))
        scheduler?.audit = Array(audit.suffix(100))
        if let takeover { scheduler?.state.startTakeover(takeover) }
        log.notice("schedule: \(resolved.schedule.slots.count) slots, \(resolved.schedule.playlists.count) playlists, default \(resolved.schedule.defaultPlaylist)")
        scheduleNext()
    }

    /// Whether the schedule decides what plays next (a schedule, and no person's override).
    var scheduleRules: Bool {
        guard let scheduler else { return false }
        return scheduler.state.rule(at: scheduler.now()).kind != .manual
    }

    /// The item boundary: the schedule's next item plays. On the loop.
    func scheduleNext() {
        guard var scheduler else { return }
        let now = scheduler.now()
        endContent(reason: "completed", now: now)
        if let ended = scheduler.state.expireTakeover(at: now) { scheduler.audit(ended, "ended: its time ran out", at: now, log: log) }
        if let playing = scheduler.playing, playing.rule.kind == .interrupt, let started = scheduler.startedAt {
            scheduler.state.interruptPlayed(playing.rule.id, seconds: max(1, now.timeIntervalSince(started)), startedAt: started)
        }
        scheduler.playing = nil
        scheduler.startedAt = nil
        scheduler.playID = nil
        requestTimelineIfDue(&scheduler, now)
        guard let pick = scheduler.state.pick(at: now) else {
            self.scheduler = scheduler
            armScheduleTimer()
            return
        }
        self.scheduler = scheduler
        startScheduled(pick, now: now)
    }

    /// Plays `pick` now, the schedule's item.
    private func startScheduled(_ pick: SchedulePick, now: Date) {
        guard var scheduler else { return }
        scheduler.playing = pick
        scheduler.startedAt = now
        scheduler.playID = scheduler.run + "-" + String(serial + 1, radix: 16)
        scheduler.history.append(pick)
        if scheduler.history.count > Scheduler.historyLength { scheduler.history.removeFirst(scheduler.history.count - Scheduler.historyLength) }
        // Cut within `prerollMargin` of its start (a boundary where it no longer rules): no
        // pre-roll is billed before content that would not play.
        let boundary = scheduler.state.nextBoundary(after: now)
        let cutSoon = boundary.map { $0.timeIntervalSince(now) < Scheduler.prerollMargin && !scheduler.state.stillRules(pick, at: $0) } ?? false
        self.scheduler = scheduler
        log.info("schedule: \(pick.rule.kind.rawValue) \(pick.rule.id): \(pick.path)" + (pick.start.map { String(format: " from %.1f s", $0) } ?? ""))
        queue.removeAll()
        _ = try? queue.append([QueueEntry(path: pick.path, length: pick.length)])
        queue.current = 0
        play(0, start: pick.start, fresh: pick.start == nil, preroll: !cutSoon)
        queueChanged()
        if let onContent = scheduler.onContent, let id = scheduler.playID {
            onContent(ContentPlay(id: id, path: pick.path, contentID: FilePath.stem(pick.path), rule: pick.rule, from: pick.start,
                                  startedWall: now.timeIntervalSince1970))
        }
        armScheduleTimer()
    }

    /// `next` while the schedule rules: its item ends (a person skipped it: not kept to resume)
    /// and the schedule's next item plays. Nothing is overridden.
    func scheduleSkip() -> JSONValue {
        guard let scheduler else { return status() }
        endContent(reason: "skipped", now: scheduler.now())
        self.scheduler?.playID = nil
        stopPlaying()
        scheduleNext()
        return status()
    }

    /// `previous` while the schedule rules: the item it played before this one plays again.
    func scheduleBack() throws(ControlError) -> JSONValue {
        guard var scheduler, scheduler.history.count >= 2 else {
            throw ControlError(.noPrevious, "the schedule has played no item before this one")
        }
        let now = scheduler.now()
        scheduler.history.removeLast()
        var pick = scheduler.history.removeLast()
        pick.start = nil
        self.scheduler = scheduler
        endContent(reason: "skipped", now: now)
        self.scheduler?.playing = nil
        self.scheduler?.playID = nil
        stopPlaying()
        startScheduled(pick, now: now)
        return status()
    }

    /// A person's command succeeded: it rules until the schedule's next boundary (at most
    /// `overrideMax`). `next` and `previous` that moved within the schedule override nothing;
    /// within a person's own queue they keep the override going. On the loop.
    public func commanded(_ request: Request) {
        player.loop.requireInLoop()
        guard scheduler != nil, request.overridesSchedule else { return }
        switch request {
        case .next, .previous: if scheduleRules { return }
        default: break
        }
        scheduleOverridden(by: request)
    }

    /// A person's own queue ran out: the schedule plays again at once.
    func personQueueDone() -> Bool {
        guard var scheduler else { return false }
        scheduler.state.automatic()
        self.scheduler = scheduler
        log.notice("schedule: a person's queue ran out; the schedule plays again")
        scheduleNext()
        return true
    }

    /// An item the schedule started could not be played (`reason`): a failed content play, the
    /// next item — at once, or after failures in a row once the back-off allows.
    func scheduleItemFailed(_ path: String, _ reason: String) {
        guard var scheduler, scheduleRules else { return }
        let now = scheduler.now()
        endContent(reason: "failed: " + OneLine.escape(String(reason.prefix(300))), now: now)
        scheduler = self.scheduler ?? scheduler
        scheduler.playID = nil
        scheduler.playing = nil
        scheduler.startedAt = nil
        scheduler.failures += 1
        scheduler.lastFailure = (path, reason)
        let wait = Scheduler.failureBackoff(scheduler.failures)
        scheduler.retry?.cancel()
        scheduler.retry = nil
        if wait > 0 {
            if scheduler.failures == Scheduler.failuresBeforeBackoff || scheduler.failures % 10 == 0 {
                log.error("schedule: \(scheduler.failures) items in a row could not be played (the last: \(path): \(reason)); "
                          + "trying the next every \(Int(wait)) s at most until one plays")
            }
            scheduler.retry = player.loop.schedule(after: wait) { [weak self] in
                guard let self, self.scheduler != nil, episode == nil else { return }
                self.scheduler?.retry = nil
                scheduleNext()
            }
            self.scheduler = scheduler
            return
        }
        self.scheduler = scheduler
        scheduleNext()
    }

    /// An item played (its first frame came): the failures in a row are over.
    func scheduleItemPlays() {
        guard let scheduler, scheduler.failures > 0 else { return }
        log.notice("schedule: \(scheduler.playing?.path ?? "an item") plays again after \(scheduler.failures) items that could not be played")
        self.scheduler?.failures = 0
        self.scheduler?.lastFailure = nil
    }

    /// After a pre-roll: a boundary came while it played and the item no longer rules — it is
    /// not loaded (it would be cut at once); the schedule moves on. True when it did.
    func scheduleCutsBeforeStart() -> Bool {
        guard let scheduler, let playing = scheduler.playing, scheduleRules, !scheduler.state.stillRules(playing, at: scheduler.now()) else { return false }
        log.info("schedule: \(playing.path) no longer rules after its pre-roll (a boundary came during it): not started")
        endContent(reason: "cut before it started (a boundary came during its pre-roll)", now: scheduler.now())
        self.scheduler?.playing = nil
        self.scheduler?.startedAt = nil
        self.scheduler?.linearWaitStarted = nil
        episode?.policy?.stop()
        episode = nil
        scheduleNext()
        return true
    }

    /// The configured schedule does not load (`problem`), and what plays instead; nil: it does.
    /// On the loop (the daemon says it at start and at each reload).
    public func setScheduleProblem(_ problem: String?) {
        player.loop.requireInLoop()
        scheduleLoadProblem = problem
    }

    /// For the health verdict: the schedule's items keep failing.
    var scheduleFailing: String? {
        guard let scheduler, scheduler.failures > 0, let last = scheduler.lastFailure else { return nil }
        return "schedule items failing: \(scheduler.failures) in a row, the last \(OneLine.escape(last.path)): \(OneLine.escape(String(last.reason.prefix(200))))"
    }

    /// The content play of the item that ends (`record-content-plays`).
    func endContent(reason: String, now: Date) {
        guard let scheduler, let onContent = scheduler.onContent, let playing = scheduler.playing, let started = scheduler.startedAt,
              let id = scheduler.playID else { return }
        self.scheduler?.playID = nil   // once: a content play ends once
        onContent(ContentPlay(id: id, path: playing.path, contentID: FilePath.stem(playing.path), rule: playing.rule, from: playing.start,
                              startedWall: started.timeIntervalSince1970, endedWall: now.timeIntervalSince1970,
                              seconds: max(0, now.timeIntervalSince(started)), reason: reason))
    }

    private func requestTimelineIfDue(_ scheduler: inout Scheduler, _ now: Date) {
        guard scheduler.state.needsTimeline(at: now), !scheduler.timelineAsked else { return }
        scheduler.timelineAsked = true
        let loop = player.loop
        scheduler.timeline(scheduler.state.schedule, now) { [weak self] timeline in
            _ = loop.execute { [weak self] in
                guard let self, var scheduler = self.scheduler else { return }
                scheduler.state.setTimeline(timeline)
                scheduler.timelineAsked = false
                self.scheduler = scheduler
                armScheduleTimer()
            }
        }
    }

    func armScheduleTimer() {
        guard var scheduler else { return }
        scheduler.timer?.cancel()
        let now = scheduler.now()
        let next = scheduler.state.nextBoundary(after: now).map { max(0.05, $0.timeIntervalSince(now)) } ?? Scheduler.recheck
        scheduler.timer = player.loop.schedule(after: min(next + 0.001, Scheduler.recheck)) { [weak self] in self?.scheduleBoundary() }
        self.scheduler = scheduler
    }

    /// A boundary of the schedule (or the periodic recheck): what plays is cut if it no longer
    /// rules — after a linear ad, never during it.
    func scheduleBoundary() {
        guard var scheduler else { return }
        let now = scheduler.now()
        requestTimelineIfDue(&scheduler, now)
        if let ended = scheduler.state.expireTakeover(at: now) { scheduler.audit(ended, "ended: its time ran out", at: now, log: log) }
        self.scheduler = scheduler
        let rule = scheduler.state.rule(at: now)
        if rule.kind == .manual { return armScheduleTimer() }
        if let playing = scheduler.playing, scheduler.state.stillRules(playing, at: now) {
            self.scheduler?.linearWaitStarted = nil
            return armScheduleTimer()
        }
        // A linear ad (or its break) keeps the screen to its end, within its budget.
        if linearAd != nil || adBreak != nil {
            let waited = scheduler.linearWaitStarted ?? now
            self.scheduler?.linearWaitStarted = waited
            if now.timeIntervalSince(waited) < Scheduler.linearWait {
                self.scheduler?.timer?.cancel()
                self.scheduler?.timer = player.loop.schedule(after: 0.25) { [weak self] in self?.scheduleBoundary() }
                return
            }
        }
        self.scheduler?.linearWaitStarted = nil
        if let playing = scheduler.playing, episode != nil {
            self.scheduler?.state.cut(playing, at: player.snapshot().position)
            endContent(reason: "cut", now: now)
            self.scheduler?.playing = nil
            self.scheduler?.startedAt = nil
        }
        scheduleNext()
    }

    /// A person's command overrides the schedule until its next boundary (at most
    /// `overrideMax`). On the loop.
    func scheduleOverridden(by request: Request) {
        guard let before = scheduler else { return }
        let now = before.now()
        endContent(reason: "cut", now: now)
        guard var scheduler else { return }
        scheduler.state.manual(at: now, atMost: Scheduler.overrideMax)
        scheduler.playing = nil
        scheduler.startedAt = nil
        scheduler.retry?.cancel()
        scheduler.retry = nil
        self.scheduler = scheduler
        log.notice("schedule: \(request.name) overrides the schedule until \(scheduler.state.manualUntil.map { ISO8601.format($0.timeIntervalSince1970) } ?? "?")")
        armScheduleTimer()
    }

    /// `schedule auto`.
    public func scheduleAutomatic() throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        guard var scheduler else { throw ControlError(.unavailable, "no schedule is configured (schedule = FILE)") }
        scheduler.state.automatic()
        self.scheduler = scheduler
        log.notice("schedule: the schedule rules again (schedule auto)")
        scheduleBoundaryNow()
        return scheduleJSON
    }

    /// The schedule decides now (after `schedule auto`, a takeover, its end).
    private func scheduleBoundaryNow() {
        guard let scheduler else { return }
        if let playing = scheduler.playing, scheduler.state.stillRules(playing, at: scheduler.now()) { return armScheduleTimer() }
        if let playing = scheduler.playing, episode != nil { self.scheduler?.state.cut(playing, at: player.snapshot().position) }
        endContent(reason: "cut", now: scheduler.now())
        self.scheduler?.playing = nil
        scheduleNext()
    }

    /// `takeover`: `files` (a file, or the schedule's playlist `target`), now. On the loop.
    public func takeover(target: String, files: [ResolvedSchedule.File]?, seconds: Double?, priority: Int?, by who: String?) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        guard var scheduler else { throw ControlError(.unavailable, "takeover needs a schedule (schedule = FILE)") }
        let items = files ?? scheduler.state.resolved.files[target]
        guard let items, !items.isEmpty else {
            throw ControlError(.badArgs, "takeover: \(target) is neither a file in the library nor one of the schedule's playlists")
        }
        let now = scheduler.now()
        let takeover = ScheduleTakeover(target: target, files: items, until: seconds.map { now.addingTimeInterval($0) },
                                        priority: priority ?? 1_000_000, who: who ?? "a control-socket client", at: now)
        if let playing = scheduler.playing, episode != nil { scheduler.state.cut(playing, at: player.snapshot().position) }
        endContent(reason: "cut", now: now)
        scheduler.state.startTakeover(takeover)
        scheduler.audit(takeover, "started", at: now, log: log)
        scheduler.playing = nil
        scheduler.startedAt = nil
        self.scheduler = scheduler
        // Immediate: what is on screen ends `interrupted` (a linear ad too: no completion).
        episode?.policy?.stop(endingShownAs: .interrupted)
        flushAdEvents()
        scheduleNext()
        return scheduleJSON
    }

    /// `takeover end`.
    public func takeoverEnd(by who: String?) throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        guard var scheduler else { throw ControlError(.unavailable, "no schedule is configured (schedule = FILE)") }
        guard let ended = scheduler.state.endTakeover() else { throw ControlError(.badArgs, "takeover end: no takeover is on") }
        scheduler.audit(ended, "ended by \(who ?? "a control-socket client")", at: scheduler.now(), log: log)
        self.scheduler = scheduler
        endContent(reason: "cut", now: scheduler.now())
        episode?.policy?.stop(endingShownAs: .interrupted)
        flushAdEvents()
        self.scheduler?.playing = nil
        scheduleNext()
        return scheduleJSON
    }

    /// `status.schedule` and the `schedule` command's reply.
    var scheduleJSON: JSONValue {
        guard let scheduler else { return scheduleLoadProblem.map { ["problem": .string($0)] } ?? .null }
        let now = scheduler.now()
        guard case .object(var fields) = scheduler.state.describe(at: now, playing: scheduler.playing) else { return .null }
        fields["audit"] = .array(scheduler.audit)
        if let waited = scheduler.linearWaitStarted {
            // A boundary came and waits for the linear ad on screen: what rules next is said.
            fields["waiting"] = ["for": .string(linearAd?.kind.protocolName ?? adBreak?.protocolName ?? "a linear ad"),
                                 "since": .string(ISO8601.format(waited.timeIntervalSince1970)), "next": scheduler.state.rule(at: now).json]
        }
        if let problem = scheduleFailing ?? scheduleLoadProblem { fields["problem"] = .string(problem) }
        return .object(fields)
    }

    /// `schedule`.
    public func scheduleStatus() throws(ControlError) -> JSONValue {
        player.loop.requireInLoop()
        guard scheduler != nil else {
            if let problem = scheduleLoadProblem { throw ControlError(.unavailable, "the schedule does not load: \(problem)") }
            throw ControlError(.unavailable, "no schedule is configured (schedule = FILE)")
        }
        return scheduleJSON
    }
}

extension Scheduler {
    /// A takeover's start or end, kept (the last 100) and logged: who, when, what, until.
    /// The takeover now and the audit, handed to `persist` (a restart finds them).
    func persisted() {
        persist?(state.takeover.map { $0.json.text }, JSONValue.array(audit).text)
    }

    mutating func audit(_ takeover: ScheduleTakeover, _ what: String, at now: Date, log: Logger) {
        let until = takeover.until.map { ISO8601.format($0.timeIntervalSince1970) } ?? "takeover end"
        log.notice("schedule: takeover of \(takeover.target) \(what) (by \(takeover.who), priority \(takeover.priority), until \(until))")
        audit.append(["event": .string(what), "target": .string(takeover.target), "by": .string(takeover.who),
                      "at": .string(ISO8601.format(now.timeIntervalSince1970)), "until": takeover.until.map { .string(ISO8601.format($0.timeIntervalSince1970)) } ?? .null,
                      "priority": .int(Int64(takeover.priority))])
        if audit.count > 100 { audit.removeFirst(audit.count - 100) }
        persisted()
    }
}

extension Request {
    /// A person's command that overrides the schedule until its next boundary.
    var overridesSchedule: Bool {
        switch self {
        case .open, .queue, .next, .previous, .jump, .stop, .clear: true
        default: false
        }
    }
}
