/// A `VideoAds`' state and its decisions, owned by the player's loop (SPEC R18).
///
/// Threading contract: every method runs on `loop` (the `VideoAds` handle hands calls over),
/// and checks it at its entry. The lifecycles it runs are reached only through it.
/// Effects of the lifecycles are performed right where they are decided: surface calls and
/// timers in the same turn; callbacks and events are queued and handed out at the end of the
/// turn's entry point, in order, one at a time (a callback that calls back in runs its call
/// inline, and the callbacks that causes come after the current one).
final class AdSession: @unchecked Sendable {
    // @unchecked: every stored var is touched only on `loop`; the lets are immutable.
    let loop: any PlayerLoop
    let content: ContentInfo
    let source: any AdSource
    let surface: any AdSurface
    let configuration: VideoAdsConfiguration
    let onEvent: @Sendable (AdEvent) -> Void

    private var destroyed = false
    /// The tracked player, held weakly (R9).
    weak var player: (any TrackablePlayer)?
    private var observation: PlayerObservation?
    private var tracking = false
    /// The item bound at `track`; it follows the episode's own loops (R10, R14).
    private var bound: PlayerItem?
    /// The player's facts as last delivered.
    var view = PlayerSnapshot.empty
    /// Where the bound item ended, while nothing else came in since (post-roll time).
    private var endedAt: Double?
    /// The output is hidden (R13).
    var background = false
    var ads: [UInt64: AdRecord] = [:]
    /// Ads shown and not ended, in the order they were shown.
    private var shownAds: [UInt64] = []
    private var requests: [UInt64: PendingRequest] = [:]
    private var nextRequest: UInt64 = 1
    /// The episode's length and cue points, once the player knows them (when `content` does not say them).
    private var knownDuration: Double?
    private var knownCuePoints: [Double]?
    /// This viewing's number (R14): a new one at each pass of the episode; the source hears of
    /// each one's end (`AdSource.endViewing`).
    private var viewing = Viewings.next()

    /// What requests carry of the episode: with its length (`n%` breaks) and cue points (`#n`)
    /// once known, and the viewing they belong to.
    var requestContent: ContentInfo {
        var info = content
        if info.duration == nil { info.duration = knownDuration }
        if info.cuePoints == nil { info.cuePoints = knownCuePoints }
        info.viewing = viewing
        return info
    }

    /// The viewing is over (a loop into the next pass, or the end of this `VideoAds`): the
    /// source drops what it kept for it; `next` starts another.
    private func endViewing(next: Bool) {
        source.endViewing(requestContent)
        if next { viewing = Viewings.next() }
    }

    func setCuePoints(_ times: [Double]) {
        loop.requireInLoop()
        knownCuePoints = Array(times.filter { $0.isFinite && $0 >= 0 && $0 <= Seconds.Bounds.position.maximum }.sorted().prefix(1000))
    }

    func setDuration(_ seconds: Double?) {
        loop.requireInLoop()
        guard let seconds, seconds.isFinite, seconds > 0, seconds <= Seconds.Bounds.position.maximum else { return }
        knownDuration = seconds
    }

    /// The linear break open now: a pre-roll's (the episode waits), or a mid-roll's, with the
    /// item it holds and the content time it resumes at.
    var openBreak: (kind: AdKind, at: Double, held: PlayerItem?)?
    /// Ends an open break nobody ended (R16: the content plays on whatever happens).
    var breakTimer: LoopTimer?
    private var callbacks: [() -> Void] = []
    private var delivering = false
    private let follower = Follower()

    init(content: ContentInfo, source: any AdSource, surface: any AdSurface, loop: any PlayerLoop,
         configuration: VideoAdsConfiguration, onEvent: @escaping @Sendable (AdEvent) -> Void) {
        self.content = content
        self.source = source
        self.surface = surface
        self.loop = loop
        self.configuration = configuration
        self.onEvent = onEvent
        follower.session = self
    }

    var isTracking: Bool { tracking && player != nil }

    // MARK: Following the player

    func track(_ player: any TrackablePlayer) {
        loop.requireInLoop()
        defer { flush() }
        guard !destroyed else { return }
        // On the loop, the snapshot and the registration are one step: no change falls between.
        let snapshot = player.snapshot()
        // Ads of another item go first, then the old observation: a change delivered
        // meanwhile never finds one of them still up.
        for id in shownAds where ads[id]?.item != snapshot.item {
            run(id) { lifecycle, _ in lifecycle.stop(.contentChanged, cause: nil) }
        }
        observation?.cancel()
        self.player = player
        tracking = true
        bound = snapshot.item
        view = snapshot
        endedAt = nil
        observation = player.addObserver(follower)
    }

    func destroy(endingShownAs reason: AdEndReason = .destroyed) {
        loop.requireInLoop()
        defer { flush() }
        guard !destroyed else { return }
        // What is on screen goes first, then the observation (see `track`).
        for id in shownAds {
            run(id) { lifecycle, _ in lifecycle.stop(reason, cause: nil) }
        }
        // An open break ends; a held item is not resumed: whoever destroys the ads is replacing
        // or stopping the item (a player's next load or stop lets the held item go).
        endBreak(resume: false)
        destroyed = true
        observation?.cancel()
        observation = nil
        player = nil
        tracking = false
        for (_, pending) in requests.sorted(by: { $0.key < $1.key }) {
            pending.timer?.cancel()
            pending.task?.cancel()
            let completion = pending.completion
            callbacks.append { completion(.failure(.destroyed)) }
        }
        requests = [:]
        ads = [:]
        shownAds = []
        endViewing(next: false)
    }

    func setBackground(_ hidden: Bool) {
        loop.requireInLoop()
        defer { flush() }
        guard !destroyed, background != hidden else { return }
        background = hidden
        for id in shownAds {
            run(id) { lifecycle, context in lifecycle.backgroundChanged(context) }
            updateExposure(id)
        }
    }

    fileprivate func playerChanged(_ player: any TrackablePlayer, _ event: PlayerEvent) {
        loop.assertInLoop()
        defer { flush() }
        // A change from a player we let go of (already queued for delivery) is dropped.
        guard !destroyed, let tracked = self.player, tracked === player else { return }
        view = event.snapshot
        switch event.change {
        case .item(let item?):
            if let bound, item.entry == bound.entry, item.loop > bound.loop {
                self.bound = item   // our own episode's next pass (R14): a new viewing for the source
                endViewing(next: true)
            }
            endedAt = nil
            if let held = openBreak?.held, held != item { endBreak(resume: false) }   // its item is gone
        case .ended(let item):
            if item == bound {
                endedAt = event.snapshot.position
                emit(.contentEnded(contentID: content.id))
            }
        default:
            break
        }
        for id in shownAds {
            run(id) { lifecycle, context in lifecycle.playerChanged(event, context) }
        }
    }

    // MARK: Requests

    func prefetch(_ kind: AdKind, at position: Double?) {
        loop.requireInLoop()
        guard !destroyed else { return }
        source.prefetch(AdRequest(content: requestContent, kind: kind, position: position ?? requestPosition()))
    }

    func request(_ kind: AdKind, podPosition: Int = 0, breakTime: Double? = nil, completion: @escaping @Sendable (Result<Ad, AdError>) -> Void) {
        loop.requireInLoop()
        defer { flush() }
        guard !destroyed else {
            callbacks.append { completion(.failure(.destroyed)) }
            return
        }
        let position = requestPosition()
        let request = AdRequest(content: requestContent, kind: kind, position: position, podPosition: max(0, podPosition), breakTime: breakTime)
        let id = nextRequest
        nextRequest += 1
        var pending = PendingRequest(kind: kind, item: boundItemIfCurrent, position: position, completion: completion)
        emit(.requested(kind: kind, contentID: content.id, position: position))
        let timeout = configuration.requestTimeout
        pending.timer = loop.schedule(after: timeout) { [weak self] in
            self?.finishRequest(id, .failure(.timeout(seconds: timeout)))
        }
        // The source and the surface's preparation run off the loop; the answer comes back to it.
        let source = self.source, surface = self.surface, loop = self.loop, meter = configuration.loudnessSource
        pending.task = Task(executorPreference: configuration.executor) { [weak self] in
            let outcome: Result<LoadedCreative?, AdError>
            do {
                if var creative = try await source.ad(for: request) {
                    // Every source's ids pass one bound here, whatever the source checked.
                    creative.id = AdIdentifier.bounded(creative.id)
                    creative.adServingID = creative.adServingID.map(AdIdentifier.bounded)
                    creative.universalAdID = creative.universalAdID.map(AdIdentifier.bounded)
                    if let refusal = Self.refusal(of: creative, for: kind) {
                        outcome = .failure(refusal)
                    } else {
                        let prepared = await surface.prepare(creative)
                        // A video's loudness, measured once per file off the loop (R28).
                        var loudness: Loudness?
                        if let meter, case .video(let location) = creative.content, !location.contains("://") {
                            loudness = await meter.measure(location)
                        }
                        outcome = .success(LoadedCreative(creative: creative, prepared: prepared, loudness: loudness))
                    }
                } else {
                    outcome = .success(nil)
                }
            } catch {
                outcome = .failure(.loadFailed(String(describing: error), vastCode: (error as? any VASTCoded)?.vastErrorCode))
            }
            loop.execute { [weak self] in self?.finishRequest(id, outcome) }
        }
        requests[id] = pending
    }

    private static func refusal(of creative: AdCreative, for kind: AdKind) -> AdError? {
        guard creative.kind.answers(kind), creative.content.fits.contains(creative.kind) else {
            return .loadFailed("the source answered a \(kind.rawValue) request with a \(creative.kind.rawValue) creative")
        }
        if let duration = creative.duration, !(duration > 0 && duration <= Seconds.Bounds.duration.maximum) {
            return .loadFailed("the creative's duration \(duration) s is not in (0, \(Seconds.Bounds.duration.maximum)] s")
        }
        if let start = creative.slotStart, !(start >= 0 && start <= Seconds.Bounds.position.maximum) {
            return .loadFailed("the creative's start \(start) s is not in [0, \(Seconds.Bounds.position.maximum)] s")
        }
        return nil
    }

    private func finishRequest(_ id: UInt64, _ result: Result<LoadedCreative?, AdError>) {
        loop.assertInLoop()
        defer { flush() }
        guard let pending = requests.removeValue(forKey: id) else { return }   // timed out, destroyed
        pending.timer?.cancel()
        pending.task?.cancel()
        let outcome: Result<Ad, AdError> = result.flatMap { loaded in
            guard let loaded else { return .failure(.noFill) }
            // The creative's kind: the overlay chain's slot may hold a squeezeback.
            let ad = Ad(kind: loaded.creative.kind, creative: loaded.creative, session: self)
            ads[ad.id] = AdRecord(presentation: AdPresentation(id: ad.id, kind: loaded.creative.kind, creative: loaded.creative,
                                                               prepared: loaded.prepared, measuredLoudness: loaded.loudness),
                                  item: pending.item)
            return .success(ad)
        }
        switch outcome {
        case .success(let ad): emit(.loaded(info(ad.id, ad.kind, ad.creative.id), ad.creative))
        case .failure(.noFill): emit(.noFill(kind: pending.kind, contentID: content.id, position: pending.position))
        case .failure(let error): emit(.error(kind: pending.kind, creativeID: nil, error: error))
        }
        let completion = pending.completion
        callbacks.append { completion(outcome) }
    }

    // MARK: Ads

    func show(_ id: UInt64, options: ShowOptions, didEnd: @escaping @Sendable (AdEndReason) -> Void) -> Result<Void, AdError> {
        loop.requireInLoop()
        defer { flush() }
        do throws(AdError) {
            guard !destroyed else { throw .destroyed }
            guard var record = ads[id] else { throw .alreadyShown }
            guard record.lifecycle == nil else { throw .alreadyShown }
            // A pre-roll shows before the episode is tracked (its content not in yet); the
            // others follow a tracked player.
            if record.presentation.kind != .preroll { guard tracking, player != nil else { throw .notTracking } }
            try checkBinding(of: record)
            let lifecycle = try makeLifecycle(record.presentation, options)
            let shownEffects = try lifecycle.show(context())
            if lifecycle is LinearLifecycle, record.presentation.kind != .postroll {
                breakTimer?.cancel()   // the break goes on with this ad
                breakTimer = nil
            }
            record.item = bound
            record.lifecycle = lifecycle
            record.didEnd = didEnd
            ads[id] = record
            shownAds.append(id)
            perform(shownEffects, for: id)
            return .success(())
        } catch {
            if let record = ads[id] {
                emit(.error(kind: record.presentation.kind, creativeID: record.presentation.creative.id, error: error))
            }
            return .failure(error)
        }
    }

    private func makeLifecycle(_ presentation: AdPresentation, _ options: ShowOptions) throws(AdError) -> any AdLifecycle {
        switch (presentation.kind, options) {
        case (.overlay, .now), (.overlay, .atContentTime), (.overlay, .whenPlaying),
             (.squeezeback, .now), (.squeezeback, .atContentTime), (.squeezeback, .whenPlaying):
            let duration = presentation.creative.duration ?? configuration.defaultOverlayDuration
            let overlay = presentation.kind == .squeezeback
                ? OverlayLifecycle(duration: duration, transition: (presentation.creative.squeezeback ?? .standard).transition,
                                   tellsQuartiles: true)
                : OverlayLifecycle(duration: duration)
            overlay.waitsForPlay = options == .whenPlaying
            if case .atContentTime(let start) = options {
                guard start >= 0, start <= Seconds.Bounds.position.maximum else { throw .invalidTime(start) }
                overlay.slotStart = start
            }
            return overlay
        case (.screensaver, .now):
            let screensaver = PauseAdLifecycle()
            screensaver.maxShowing = configuration.screensaverRotation
            screensaver.endsWhenHidden = true
            return screensaver
        case (.pauseAd, .now), (.pauseAd, .afterPausedFor):
            let pauseAd = PauseAdLifecycle()
            pauseAd.maxShowing = configuration.pauseAdMaxShowing
            if case .afterPausedFor(let delay) = options {
                guard delay >= 0, delay <= Seconds.Bounds.duration.maximum else { throw .invalidTime(delay) }
                pauseAd.activationDelay = delay
            }
            return pauseAd
        case (.postroll, .now), (.preroll, .now), (.midroll, .now), (.midroll, .atContentTime):
            let linear = LinearLifecycle(kind: presentation.kind, declaredDuration: presentation.creative.duration)
            if presentation.kind != .postroll { linear.startTimeout = configuration.linearStartTimeout }
            if case .atContentTime(let at) = options {
                guard at >= 0, at <= Seconds.Bounds.position.maximum else { throw .invalidTime(at) }
                linear.breakTime = at
            }
            return linear
        case (let kind, _):
            throw .wrongKind(kind)
        }
    }

    func close(_ id: UInt64) {
        loop.requireInLoop()
        defer { flush() }
        run(id) { lifecycle, _ in lifecycle.stop(.closed, cause: nil) }
    }

    /// `Ad.withdraw()`: a waiting overlay or mid-roll ends as `seeked`; anything else is left alone.
    func withdraw(_ id: UInt64) {
        loop.requireInLoop()
        defer { flush() }
        run(id) { lifecycle, _ in
            if let overlay = lifecycle as? OverlayLifecycle, overlay.isWaiting { return overlay.stop(.seeked, cause: nil) }
            if let linear = lifecycle as? LinearLifecycle, linear.isWaiting { return linear.stop(.seeked, cause: nil) }
            return []
        }
    }

    func playAtLanding(_ id: UInt64) {
        loop.requireInLoop()
        defer { flush() }
        run(id) { lifecycle, context in (lifecycle as? LinearLifecycle)?.moveToLanding(context) ?? [] }
    }

    /// An ad object was released: if it was never shown, nothing will ever refer to it.
    func forget(_ id: UInt64) {
        loop.requireInLoop()
        if ads[id]?.lifecycle == nil { ads[id] = nil }
    }

    /// The ad is on the output: `started` told (its impression), its exposure counted from
    /// now. Once: an overlay when it is drawn, a linear ad at its first frame.
    func announceStarted(_ id: UInt64) {
        guard let record = ads[id], !record.exposure.started else { return }
        let presentation = record.presentation
        var started = info(id, presentation.kind, presentation.creative.id)
        started.contentPosition = record.linearPosition ?? currentPosition()
        started.loudness = presentation.loudness
        emit(.started(started))
        ads[id]?.exposure.started = true
        ads[id]?.exposure.onOutput = true
        if !exposureMeasurable(presentation) { decideViewability(id, .undetermined) }
        updateExposure(id)
    }

    private func timerFired(_ id: UInt64) {
        loop.assertInLoop()
        defer { flush() }
        ads[id]?.timer = nil
        if let linear = ads[id]?.lifecycle as? LinearLifecycle, let presentation = ads[id]?.presentation {
            let creative = presentation.creative
            let effects = linear.timerFired(context())
            if linear.overran {
                // VAST 202: the video's duration was not what the ad said.
                emit(.error(kind: presentation.kind, creativeID: creative.id,
                            error: .loadFailed("it played past its budget of \(Int(linear.budget)) s (its declared duration "
                                               + "\(creative.duration.map { "\($0) s" } ?? "none") and a margin): stopped", vastCode: 202)))
            } else if linear.neverStarted {
                // VAST 402: the media file did not play in time; the content goes on (R16).
                emit(.error(kind: presentation.kind, creativeID: creative.id,
                            error: .loadFailed("its video did not start within \(Int(linear.startTimeout ?? 0)) s: the content plays", vastCode: 402)))
            }
            return perform(effects, for: id)
        }
        run(id) { lifecycle, context in lifecycle.timerFired(context) }
    }

    // MARK: Facts

    /// The bound item, if it is still the one in the player; nil otherwise.
    private var boundItemIfCurrent: PlayerItem? {
        guard tracking, let bound, view.item == bound else { return nil }
        return bound
    }

    /// The position to send with a request (R11): the content's while the bound item is in
    /// the player; where it ended once it played to its end; 0 before `track` and after
    /// another item came in.
    private func requestPosition() -> Double {
        if tracking, let endedAt { return endedAt }
        guard boundItemIfCurrent != nil else { return 0 }
        return currentPosition()
    }

    /// The player's position if it still holds the bound item, else 0. Read on demand (R4).
    func currentPosition() -> Double {
        guard let bound, let snapshot = player?.snapshot(), snapshot.item == bound else { return 0 }
        return snapshot.position
    }

    /// R10, R14: an ad shows only for the item it belongs to, while that item is in.
    private func checkBinding(of record: AdRecord) throws(AdError) {
        switch record.presentation.kind {
        case .overlay, .pauseAd, .squeezeback, .screensaver:
            guard let current = view.item, current == bound else { throw .invalidated(.contentChanged) }
            // Requested for another item (another episode, an earlier loop): refused. One
            // requested before `track` (a prefetch, `item == nil`) binds now.
            if let item = record.item, item != current { throw .invalidated(.contentChanged) }
        case .midroll:
            guard let current = view.item, current == bound else { throw .invalidated(.contentChanged) }
            if let item = record.item, item != current { throw .invalidated(.contentChanged) }
        case .postroll:
            if let current = view.item, current != bound { throw .invalidated(.contentChanged) }
            if let item = record.item, item != bound { throw .invalidated(.contentChanged) }
        case .preroll:
            break   // before the episode's item: `LinearLifecycle.show` checks the content has not started
        }
    }

    func context() -> LifecycleContext {
        LifecycleContext(now: loop.now(), playing: view.playing, rate: view.rate, background: background,
                         contentEnded: tracking && endedAt != nil, contentStarted: tracking,
                         heldItem: openBreak?.held, session: self)
    }

    /// A screensaver takes the place of the pause ad (R27): one on screen ends `replaced`, down
    /// before the screensaver goes up; one still waiting for its delay ends too, never to go up
    /// over it.
    private func replacePauseAds() {
        for (other, record) in ads where record.presentation.kind == .pauseAd && record.lifecycle?.isEnded == false {
            run(other) { lifecycle, _ in lifecycle.stop(.replaced, cause: nil) }
        }
    }

    /// The level a video ad plays at (R28): its measured loudness against the content's — what
    /// is known of the episode now, on the loop, without waiting for it.
    func loudnessDecision(for presentation: AdPresentation) -> LoudnessDecision? {
        // An ad is measured with its preparation (`measuredLoudness`), off the loop.
        guard case .video = presentation.creative.content else { return nil }
        let contentLoudness = content.mediaPath.flatMap { $0.contains("://") ? nil : configuration.loudnessSource?.known($0) }
        return LoudnessDecision.decide(configuration.loudness, ad: presentation.measuredLoudness, content: contentLoudness)
    }

    func info(_ id: UInt64, _ kind: AdKind, _ creativeID: String) -> AdInfo {
        AdInfo(id: id, kind: kind, creativeID: creativeID, contentID: content.id, at: loop.now())
    }

    // MARK: Effects

    /// Lets ad `id`'s lifecycle decide, then performs what it decided.
    func run(_ id: UInt64, _ body: (any AdLifecycle, LifecycleContext) -> [AdEffect]) {
        guard let lifecycle = ads[id]?.lifecycle else { return }
        perform(body(lifecycle, context()), for: id)
    }

    /// Performs `effects` for ad `id`, in order. A surface that cannot show the creative
    /// ends the ad as `failed` (R16).
    func perform(_ effects: [AdEffect], for id: UInt64) {
        guard let presentation = ads[id]?.presentation else { return }
        for effect in effects {
            switch effect {
            case .holdContent(let at):
                guard openBreak == nil else { continue }   // a pod's next ad: the content is held already
                guard let held = boundItemIfCurrent, let breakable = player as? any BreakablePlayer else {
                    emit(.error(kind: presentation.kind, creativeID: presentation.creative.id, error: .cannotHold))
                    run(id) { lifecycle, _ in lifecycle.stop(.failed, cause: nil) }
                    return
                }
                openBreak = (.midroll, at, held)
                emit(.breakStarted(kind: .midroll, contentID: content.id, position: at))
                // Its `.held` reaches the observers (the overlays go down, suspended) now, or
                // after the change being delivered: either way before the ad's start is told.
                breakable.holdForBreak(at: at)
            case .restore:
                do {
                    try surface.present(presentation)
                    ads[id]?.exposure.onOutput = true
                    updateExposure(id)
                } catch {
                    return fail(id, presentation, error)
                }
            case .enter:
                do {
                    try surface.present(presentation)   // its start is told when it is out
                } catch {
                    return fail(id, presentation, error)
                }
            case .out:
                surface.squeeze(id, .out)
                announceStarted(id)
                ads[id]?.exposure.onOutput = true
                updateExposure(id)
            case .leave:
                surface.squeeze(id, .back)
                ads[id]?.exposure.onOutput = false
                updateExposure(id)
            case .quartile(let quartile):
                emit(.quartile(info(id, presentation.kind, presentation.creative.id), quartile))
            case .present, .playVideo:
                if effect == .playVideo, presentation.kind == .preroll, openBreak == nil {
                    openBreak = (.preroll, 0, nil)
                    emit(.breakStarted(kind: .preroll, contentID: content.id, position: 0))
                }
                do {
                    if effect == .present {
                        if presentation.kind == .screensaver { replacePauseAds() }
                        try surface.present(presentation)
                        announceStarted(id)
                    } else {
                        // A linear ad starts at its first frame (`PostrollReporter.began`).
                        ads[id]?.linearPosition = endedAt ?? currentPosition()
                        ads[id]?.presentation.loudness = loudnessDecision(for: presentation)
                        try surface.playPostroll(ads[id]?.presentation ?? presentation, reporter: PostrollReporter(session: self, id: id))
                    }
                } catch {
                    return fail(id, presentation, error)
                }
            case .dismiss:
                do {
                    try surface.dismiss(id)
                    ads[id]?.removedAt = loop.now()   // the removal returned: out of the output's state
                } catch {
                    // Not known to be off the output: no latency is claimed, and it is said.
                    ads[id]?.removalFailed = true
                    emit(.error(kind: presentation.kind, creativeID: presentation.creative.id,
                                error: .renderFailed("the ad could not be taken down: \(error)")))
                }
                ads[id]?.exposure.onOutput = false
                updateExposure(id)
            case .stopVideo:
                surface.stopPostroll(id)
                ads[id]?.removedAt = loop.now()
                ads[id]?.exposure.onOutput = false
                updateExposure(id)
            case .setTimer(let seconds):
                ads[id]?.timer?.cancel()
                ads[id]?.timer = loop.schedule(after: seconds) { [weak self] in self?.timerFired(id) }
            case .cancelTimer:
                if let timer = ads[id]?.timer {
                    timer.cancel()
                    ads[id]?.timer = nil
                }
            case .end(let reason, let cause):
                let removedAt = ads[id]?.removedAt ?? loop.now()
                ads[id]?.exposure.onOutput = false
                updateExposure(id)
                var ended = info(id, presentation.kind, presentation.creative.id)
                ended.contentPosition = currentPosition()
                if let exposure = ads[id]?.exposure, exposure.started {
                    if !exposure.decided { decideViewability(id, exposureMeasurable(presentation) ? .notViewable : .undetermined) }
                    ended.onScreenSeconds = exposure.seconds
                }
                let latency = ads[id]?.removalFailed == true ? nil : cause.map { (removedAt &- $0) / 1000 }
                emit(.ended(ended, reason: reason, latencyMicroseconds: latency))
                if let didEnd = ads[id]?.didEnd {
                    callbacks.append { didEnd(reason) }
                }
                ads[id]?.timer?.cancel()
                ads[id]?.exposure.viewTimer?.cancel()
                ads[id] = nil   // ended exactly once (R15)
                shownAds.removeAll { $0 == id }
                if openBreak != nil, presentation.kind == .preroll || presentation.kind == .midroll {
                    // The app ends the break (or shows its pod's next ad); if it does neither, the
                    // content plays on after a request's time.
                    breakTimer?.cancel()
                    breakTimer = loop.schedule(after: configuration.requestTimeout + 1) { [weak self] in self?.endBreak() }
                }
            }
        }
    }

    /// The surface could not show ad `id`: said, and it ends `failed` (R16).
    private func fail(_ id: UInt64, _ presentation: AdPresentation, _ error: any Error) {
        emit(.error(kind: presentation.kind, creativeID: presentation.creative.id, error: .renderFailed(String(describing: error))))
        run(id) { lifecycle, _ in lifecycle.stop(.failed, cause: nil) }
    }

    /// Queues an event, in the order of the state.
    func emit(_ event: AdEvent) {
        let onEvent = self.onEvent
        callbacks.append { onEvent(event) }
    }

    /// Hands out queued callbacks, one at a time, unless this is a callback calling back in.
    func flush() {
        guard !delivering, !callbacks.isEmpty else { return }
        delivering = true
        defer { delivering = false }
        var next = 0
        while next < callbacks.count {   // a callback may queue more: they come after it
            let callback = callbacks[next]
            next += 1
            callback()
        }
        callbacks.removeAll(keepingCapacity: true)
    }
}

/// An ad the source delivered, and once shown, its lifecycle. Loop-only.
struct AdRecord {
    var presentation: AdPresentation
    /// The item it belongs to; nil until shown when requested with no bound item (a prefetch).
    var item: PlayerItem?
    var lifecycle: (any AdLifecycle)?
    var didEnd: (@Sendable (AdEndReason) -> Void)?
    var timer: LoopTimer?
    /// Post-roll quartiles reported so far.
    var quartile = 0
    /// Post-roll progress offsets reported so far.
    var progressed: Set<String> = []
    /// Its icons up now, and those told seen (R27: a view is tracked once).
    var iconsUp: Set<Int> = []
    var iconsSeen: Set<Int> = []
    /// When the surface's removal returned, on the loop's clock.
    var removedAt: UInt64?
    /// A linear ad's content position when its video was asked for (the break's time, the
    /// episode's end): what its start says, once its first frame comes.
    var linearPosition: Double?
    /// The output refused the removal: no latency is claimed for the end.
    var removalFailed = false
    var exposure = Exposure()
}

/// An ad's time on a visible output. Loop-only, in its `AdRecord`.
struct Exposure {
    /// It started (went on the output, or its video started).
    var started = false
    /// It is on the output now.
    var onOutput = false
    /// A post-roll paused by the viewer.
    var videoPaused = false
    /// Counting since (loop ns), while it is on a visible output.
    var visibleSince: UInt64?
    /// Seconds counted before `visibleSince`.
    var seconds = 0.0
    /// Its viewability was said (`AdEvent.viewability`).
    var decided = false
    var viewTimer: LoopTimer?
}

struct PendingRequest {
    let kind: AdKind
    let item: PlayerItem?
    /// The position the request carried (R11).
    let position: Double
    let completion: @Sendable (Result<Ad, AdError>) -> Void
    var timer: LoopTimer?
    var task: Task<Void, Never>?
}

/// A creative from the source with what the surface prepared for it.
struct LoadedCreative: Sendable {
    let creative: AdCreative
    let prepared: PreparedCreative
    var loudness: Loudness?
}

/// Observes the player on behalf of a session, which it does not keep alive. Loop-only.
private final class Follower: PlayerObserver, @unchecked Sendable {
    // @unchecked: `session` is set before the first observation and read on the loop only.
    weak var session: AdSession?

    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) {
        session?.playerChanged(player, event)
    }
}
