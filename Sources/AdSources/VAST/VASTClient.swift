import AdRuntime
import Foundation

/// An ad source speaking VAST 2.0–4.3 (SPEC §4.2), as ad servers count it:
///
/// - **Every `<Ad>` of a response**: an ad pod (`sequence`) plays in order as a post-roll break
///   (`AdCreative.podRemaining`, then `AdRequest.podPosition`); an ad that fails (no creative
///   this player can show, a file missing or too large) has its `Error` URLs sent with the code
///   and is replaced by a stand-alone ad of the same response (the buffet). Overlays and pause
///   ads take the first ad that works. A wrapper is followed to the first ad of what it wraps
///   (depth 5, its tracking merged in).
/// - **Creatives from the box's disk** (`CreativeCache`): images are downloaded into it;
///   post-roll videos too (streamed to disk, bounded) — one not cached yet plays from the
///   network this time and is cached for the next.
/// - **Prefetch**: `prefetch` resolves a request ahead of time and downloads its creatives; the
///   request, when it comes, takes that answer (for `prefetchLifetime`, within `<Expires>`).
/// - **Offline**: the ads served lately are kept (`OfflineAds`); while the server cannot be
///   reached, one of them is served again from the cache until its `<Expires>` (or
///   `offlineLifetime`).
///
/// Timeouts: 8 s for the first document, 4 s per wrapper. When a request gives nothing, the
/// chain's `Error` URLs go out with `[ERRORCODE]` (through `onErrorURLs`, for the tracking
/// layer to queue).
///
/// Threading: any thread; each request is independent; prefetched answers, pods and
/// downloads in flight behind their locks.
public final class VASTClient: AdSource {
    public struct Configuration: Sendable {
        public var firstTimeout = 8.0
        public var wrapperTimeout = 4.0
        public var maxWrapperDepth = 5
        public var maxDocumentBytes = 1024 * 1024
        public var maxCreativeBytes = 16 * 1024 * 1024
        public var creativeTimeout = 8.0
        /// A post-roll video downloaded into the cache: at most this large, this long.
        public var maxVideoBytes = 256 * 1024 * 1024
        public var videoTimeout = 600.0
        public var defaultOverlayDuration = 10.0
        /// A post-roll's MediaFile must answer its first bytes within this (VAST 402 otherwise),
        /// so that a dead server costs seconds, not mpv's minute-long network timeout.
        public var mediaProbeTimeout = 5.0
        /// How long an ad with no `<Expires>` may be shown from the cache while its server
        /// cannot be reached (0: never).
        public var offlineLifetime = 86_400.0
        /// How long a prefetched answer is used (at most its `<Expires>`).
        public var prefetchLifetime = 600.0
        /// Proof of play on time or not at all (`pop-deadline`): an ad's billable beacons are
        /// delivered within this many seconds of its showing or dropped, and an ad fetched from
        /// this source is not shown (prefetched, or from the cache) once that long has passed
        /// since it was fetched. Nil: none.
        public var popDeadline: Double?
        /// Competitive separation across every source: an ad that would break it is passed
        /// over like a failed buffet ad (the next stand-alone ad is tried).
        public var separation: AdSeparation?
        /// Hears an ad passed over for separation (the metrics count it).
        public var onSeparated: (@Sendable (AdKind) -> Void)?
        /// Gets the `notUsed` URLs (macros not yet filled) of an ad fetched and never handed
        /// out — a prefetched answer for another episode, expired, or separated — to queue.
        public var onNotUsed: (@Sendable ([String], MacroContext) -> Void)?
        /// The box's offline lists (one per file across reloads); nil: a list of this source's own.
        public var offlineLists: OfflineLists?
        public init() {}
    }

    /// What a request resolved to, for `ads-check` and the tests.
    public struct Resolution: Sendable, Equatable {
        public var creative: AdCreative
        /// Documents followed: the tag, then each wrapper's target.
        public var chain: [String]
        /// The creative's file as the server named it (the cache's key).
        public var media: String?
        /// Served from the cache because the server could not be reached.
        public var offline = false
    }

    /// What the wrappers above an ad handed down to it.
    struct Inherited {
        var errors: [String] = []
        var impressions: [String] = []
        var tracking: [String: [String]] = [:]
        var chain: [String] = []
    }

    /// The rest of a post-roll pod, for the requests that follow its first ad.
    struct Pod {
        var ads: [VASTDocument.Ad]
        var buffet: [VASTDocument.Ad]
        var chain: [String]
        var served: Int
        var values: MacroContext
    }

    struct Prefetched {
        var content: String
        var task: Task<Resolution?, any Error>
        var until: Double
    }

    public let tag: String
    let configuration: Configuration
    /// The box's clocks, randomness and work (the macro policy's): a simulation's are its own.
    var environment: AdEnvironment { policy.environment }
    let fetcher: any BoundedFetcher
    public let cache: CreativeCache
    private let offline: OfflineAds
    let policy: MacroPolicy
    private let outputSize: OutputSize?
    let onErrorURLs: @Sendable ([String], MacroContext) -> Void
    private let prefetched = Locked<[AdKind: Prefetched]>([:])
    let pods = Locked<[String: Pod]>([:])
    /// VMAP: a viewing's breaks (requested once a viewing, R14), by `ContentInfo.viewingKey`,
    /// with the break instances already served; and a post-roll pod's `breakEnd`, for its last
    /// ad. Dropped at the viewing's end (`endViewing`), and bounded (`maxViewings`).
    let schedules = Locked<[String: Schedule]>([:])
    let pendingBreakEnd = Locked<[String: [String]]>([:])
    let loadOrder = Locked<UInt64>(0)
    /// The tag has answered with VMAP: an episode's first requests then share one fetch of it.
    let answersVMAP = Locked(false)
    /// The tag answered plain VAST (no schedule): no pre-roll is asked of it again.
    private let answersPlainVAST = Locked(false)
    /// The tag's server could not be reached at its last request: no episode waits for a
    /// pre-roll from it until it answers again (a blackholed server would hold each start for
    /// the request's whole deadline).
    private let tagUnreachable = Locked(false)

    /// The tag itself (not a wrapper, not a break's own tag): whether its server answers is noted.
    private func fetchTag(_ url: String) async throws -> Data {
        do {
            let data = try await fetcher.fetch(url, limits: HTTPLimits(maxBytes: configuration.maxDocumentBytes, deadline: configuration.firstTimeout))
            tagUnreachable.withLock { $0 = false }
            return data
        } catch let error as FetchError {
            if error.serverUnreachable { tagUnreachable.withLock { $0 = true } }
            throw error
        }
    }
    /// An episode's first request of the tag goes alone: those made meanwhile (the prefetches
    /// at its start) wait for it, and use its schedule if it was VMAP (asked for once).
    private let firstFetches = Locked<[String: FirstFetch]>([:])
    private let scheduleLoads = Locked<[String: Task<Void, any Error>]>([:])

    struct Schedule {
        var breaks: [VMAPDocument.Break]
        var served: Set<String> = []
        var values: MacroContext
        /// When it was loaded (an order): the oldest goes first past `maxViewings`.
        var loaded: UInt64 = 0
        /// The `#n` breaks past the episode's cue points were told (once).
        var cuesReported = false
    }
    private let downloads = Locked<Set<String>>([])

    /// `onErrorURLs` gets the chain's `Error` URLs (macros not yet filled) with what to fill them
    /// with (the VAST code in `errorCode`), for the tracking layer to queue.
    public init(tag: String, cache: CreativeCache, configuration: Configuration = Configuration(),
                fetcher: any BoundedFetcher = BoundedHTTP(threads: 2), policy: MacroPolicy = MacroPolicy(), outputSize: OutputSize? = nil,
                onErrorURLs: @escaping @Sendable ([String], MacroContext) -> Void = { _, _ in }) {
        self.outputSize = outputSize
        self.tag = tag
        self.cache = cache
        self.offline = configuration.offlineLists?.list(cache: cache, tag: tag, environment: policy.environment)
            ?? OfflineAds(cache: cache, tag: tag, environment: policy.environment)
        self.configuration = configuration
        self.fetcher = fetcher
        self.policy = policy
        self.onErrorURLs = onErrorURLs
    }

    public func ad(for request: AdRequest) async throws -> AdCreative? {
        if request.podPosition > 0 {
            var creative = try await nextInPod(request)?.creative
            if creative?.podRemaining == 0, let urls = pendingBreakEnd.withLock({ $0.removeValue(forKey: request.content.viewingKey) }) {
                creative?.tracking["breakEnd", default: []] += urls
            }
            return creative
        }
        // A VMAP episode: its schedule answers, the tag is not asked again.
        if schedules.withLock({ $0[request.content.viewingKey] != nil }) { return try await fromSchedule(request, prefetching: false)?.creative }
        if let kept = takePrefetched(request) {
            // A prefetch that failed is forgotten: the request asks the server itself — and so is
            // one whose advertiser has shown since, within the separation.
            if let resolution = try? await kept.value {
                let creative = resolution.creative
                if let separation = configuration.separation, !separation.allows(advertiser: creative.advertiser, categories: creative.categories) {
                    configuration.onSeparated?(request.kind)
                    notUsed(kept)
                } else {
                    return creative
                }
            }
        }
        return try await resolve(request)?.creative
    }

    /// Pre-rolls while the tag may answer VMAP: each episode's schedule is asked for before its
    /// first frame (the pre-roll's request is the schedule's). A tag that answered plain VAST is
    /// not asked for pre-rolls again (its linear ads are the post-roll's, never played twice):
    /// the first episode after start learns it, with one request that fills nothing. Not while
    /// the tag's server cannot be reached (until it answers again). Mid-rolls while the
    /// episode's schedule has a linear break after the position.
    /// The viewing is over: its schedule, its served breaks, its pod and its loads go; the next
    /// viewing of the same episode asks the tag again (R14).
    public func endViewing(_ content: ContentInfo) {
        let key = content.viewingKey
        _ = schedules.withLock { $0.removeValue(forKey: key) }
        _ = pods.withLock { $0.removeValue(forKey: key) }
        _ = pendingBreakEnd.withLock { $0.removeValue(forKey: key) }
        _ = scheduleLoads.withLock { $0.removeValue(forKey: key) }
        _ = firstFetches.withLock { $0.removeValue(forKey: key) }
    }

    /// Viewings whose state is kept at once: a box has one or two (the one that ends, the one
    /// that starts); a viewing never ended (an app that never destroys) cannot grow the maps.
    static let maxViewings = 64

    public func mayFill(_ kind: AdKind, content: ContentInfo, at position: Double) -> Bool {
        switch kind {
        case .preroll: !tagUnreachable.withLock { $0 } && (answersVMAP.withLock { $0 } || !answersPlainVAST.withLock { $0 })
        case .midroll: midrollTimes(for: content).contains { $0 >= position - 0.001 }
        default: true
        }
    }

    public func prefetch(_ request: AdRequest) {
        guard request.podPosition == 0, !schedules.withLock({ $0[request.content.viewingKey] != nil }) else { return }
        let now = environment.wall()
        prefetched.withLock { kept in
            if let current = kept[request.kind], current.content == request.content.id, current.until > now { return }
            let task = Task.counted(in: environment) { [self] in try await resolve(request, prefetching: true) }
            kept[request.kind] = Prefetched(content: request.content.id, task: task,
                                            until: now + min(configuration.prefetchLifetime, configuration.popDeadline ?? .infinity))
        }
    }

    /// A prefetched answer that will not be handed out: its `notUsed` URLs, once it has one (a
    /// fetch still under way is cancelled and has none).
    private func notUsed(_ task: Task<Resolution?, any Error>) {
        guard let onNotUsed = configuration.onNotUsed else { return task.cancel() }
        Task.counted(in: environment) {
            guard let resolution = try? await task.value else { return }
            let creative = resolution.creative
            guard let urls = creative.tracking["notUsed"], !urls.isEmpty else { return }
            onNotUsed(urls, MacroContext(kind: creative.kind, adServingID: creative.adServingID, universalAdID: creative.universalAdID,
                                         transactionID: creative.transactionID, adCount: creative.adCount))
        }
    }

    /// The prefetched answer for `request`, taken (each serves one request), if it is for this
    /// content and still fresh.
    private func takePrefetched(_ request: AdRequest) -> Task<Resolution?, any Error>? {
        prefetched.withLock { kept in
            guard let current = kept.removeValue(forKey: request.kind) else { return nil }
            guard current.content == request.content.id, current.until > environment.wall() else {
                notUsed(current.task)
                return nil
            }
            return current.task
        }
    }

    /// Follows the tag to an ad (or from `document`, a VAST file already read).
    public func resolve(_ request: AdRequest, document: Data? = nil, prefetching: Bool = false) async throws -> Resolution? {
        // One id for the chain: this request, its wrappers, the ad's tracking URLs.
        var values = MacroContext(contentID: request.content.id, kind: request.kind, contentPlayhead: request.position,
                                  playerSize: outputSize?.current, transactionID: environment.uuid(), adCount: 1)
        let url = Macros.expand(tag, values, policy)
        if document == nil, answersVMAP.withLock({ $0 }) {
            // One request of the schedule an episode, whatever asks first.
            let loadValues = values
            let load: Task<Void, any Error> = scheduleLoads.withLock { loads in
                if let running = loads[request.content.viewingKey] { return running }
                let task = Task.counted(in: environment) { [self, loadValues, request, url] in
                    let data = try await fetchTag(url)
                    guard VMAPDocument.looksLikeVMAP(data) else { throw VASTError(code: .schemaValidation, message: "the tag no longer answers VMAP") }
                    do {
                        loadSchedule(try VMAPDocument.parse(data), for: request, loadValues)
                    } catch {
                        throw VASTError(code: .xmlParsing, message: "\(error)")
                    }
                }
                loads[request.content.viewingKey] = task
                return task
            }
            do {
                try await load.value
            } catch let error as FetchError {
                scheduleLoads.withLock { _ = $0.removeValue(forKey: request.content.viewingKey) }
                throw Self.vastError(error, wrapper: false)
            } catch {
                scheduleLoads.withLock { _ = $0.removeValue(forKey: request.content.viewingKey) }
                throw error
            }
            return try await fromSchedule(request, prefetching: prefetching)
        }
        var opened: FirstFetch?
        if document == nil, !answersVMAP.withLock({ $0 }) {
            let (latch, first) = firstFetches.withLock { fetches -> (FirstFetch, Bool) in
                if let running = fetches[request.content.viewingKey] { return (running, false) }
                let latch = FirstFetch()
                fetches[request.content.viewingKey] = latch
                return (latch, true)
            }
            if first {
                opened = latch
            } else {
                await latch.wait()
                if schedules.withLock({ $0[request.content.viewingKey] != nil }) { return try await fromSchedule(request, prefetching: prefetching) }
            }
        }
        defer {
            if let opened {
                firstFetches.withLock { fetches in if fetches[request.content.viewingKey] === opened { fetches[request.content.viewingKey] = nil } }
                Task.counted(in: environment) { await opened.open() }
            }
        }
        let data: Data
        if let document {
            data = document
        } else {
            do {
                data = try await fetchTag(url)
            } catch let error as FetchError {
                if error.serverUnreachable, !prefetching, var creative = offline.take(request.kind) {
                    // Separation holds for a kept ad too: its advertiser is remembered with it.
                    if let separation = configuration.separation,
                       !separation.allows(advertiser: creative.advertiser, categories: creative.categories) {
                        configuration.onSeparated?(request.kind)
                        throw Self.vastError(error, wrapper: false)
                    }
                    creative.podRemaining = 0
                    creative.popDeadline = configuration.popDeadline
                    return Resolution(creative: creative, chain: [url], media: nil, offline: true)
                }
                throw Self.vastError(error, wrapper: false)
            }
        }
        if document == nil, VMAPDocument.looksLikeVMAP(data) {
            // A schedule for the episode (VMAP 1.0): kept, and this request answered from it.
            let vmap: VMAPDocument
            do {
                vmap = try VMAPDocument.parse(data)
            } catch {
                throw VASTError(code: .xmlParsing, message: "\(error)")
            }
            loadSchedule(vmap, for: request, values)
            return try await fromSchedule(request, prefetching: prefetching)
        }
        let vast = try VASTDocument.parse(data)
        if document == nil {
            answersPlainVAST.withLock { $0 = true }
            // Asked for a pre-roll, the tag answered plain VAST: no schedule, so no pre-roll.
            if request.kind == .preroll { return nil }
        }
        // A pod (ads with a sequence, in order), and the buffet (stand-alone ads, in order).
        let pod = vast.ads.filter { $0.sequence != nil }.sorted { $0.sequence! < $1.sequence! }
        var buffet = vast.ads.filter { $0.sequence == nil }
        guard !pod.isEmpty || !buffet.isEmpty else {
            fire(vast.errors, code: .noAdsAfterWrapper, values)
            return nil   // no fill
        }
        values.adCount = request.kind.isLinear && !pod.isEmpty ? pod.count : 1
        if request.kind.isLinear, !pod.isEmpty {
            var rest = pod
            let first = rest.removeFirst()
            let resolution = try await resolveSlot(first, buffet: &buffet, chain: [url], request, values, prefetching: prefetching)
            pods.withLock { $0[request.content.viewingKey] = Pod(ads: rest, buffet: buffet, chain: [url], served: 1, values: values) }
            var answer = resolution
            answer.creative.podRemaining = rest.count
            return answer
        }
        let candidates = pod + buffet
        var others = Array(candidates.dropFirst())
        return try await resolveSlot(candidates[0], buffet: &others, chain: [url], request, values, prefetching: prefetching)
    }

    /// The next ad of the content's post-roll pod (its place taken by a buffet ad if it fails);
    /// nil when the pod is done.
    private func nextInPod(_ request: AdRequest) async throws -> Resolution? {
        guard var pod = pods.withLock({ $0.removeValue(forKey: request.content.viewingKey) }), !pod.ads.isEmpty else { return nil }
        var values = pod.values
        values.contentPlayhead = request.position
        values.playerSize = outputSize?.current
        let next = pod.ads.removeFirst()
        let resolution = try await resolveSlot(next, buffet: &pod.buffet, chain: pod.chain, request, values, prefetching: false)
        pod.served += 1
        let remaining = pod.ads.count
        if remaining > 0 { pods.withLock { $0[request.content.viewingKey] = pod } }
        var answer = resolution
        answer.creative.podRemaining = remaining
        return answer
    }

    /// `primary`, or in its place the first stand-alone ad of `buffet` that works (each one
    /// tried is taken out of it); the last failure when none works.
    private func resolveSlot(_ primary: VASTDocument.Ad, buffet: inout [VASTDocument.Ad], chain: [String], _ request: AdRequest,
                             _ values: MacroContext, prefetching: Bool) async throws -> Resolution {
        var candidate = primary
        while true {
            do {
                let resolution = try await resolveAd(candidate, Inherited(chain: chain), depth: 0, request, values, prefetching: prefetching)
                remember(resolution)
                return resolution
            } catch let error as VASTError {
                guard !buffet.isEmpty else { throw error }
                candidate = buffet.removeFirst()
            }
        }
    }

    /// One ad: a wrapper followed to the first ad of what it wraps, an inline ad's creative
    /// chosen. A failure sends the `Error` URLs of the ad and of its wrappers with the code.
    private func resolveAd(_ ad: VASTDocument.Ad, _ inherited: Inherited, depth: Int, _ request: AdRequest, _ values: MacroContext,
                           prefetching: Bool) async throws -> Resolution {
        var inherited = inherited
        inherited.errors += ad.errors
        inherited.impressions += ad.impressions
        for creative in ad.creatives where creative.isLinear == request.kind.isLinear {
            inherited.tracking.merge(creative.tracking) { $0 + $1 }
        }
        do {
            if let uri = ad.wrapperURI {
                guard depth < configuration.maxWrapperDepth else {
                    throw VASTError(code: .wrapperLimit, message: "more than \(configuration.maxWrapperDepth) wrappers")
                }
                let url = Macros.expand(uri, values, policy)
                inherited.chain.append(url)
                let data = try await fetchDocument(url, timeout: configuration.wrapperTimeout, wrapper: true)
                let wrapped = try VASTDocument.parse(data)
                inherited.errors += wrapped.errors
                guard let inner = wrapped.ads.first(where: { $0.sequence != nil }) ?? wrapped.ads.first else {
                    throw VASTError(code: .noAdsAfterWrapper, message: "the wrapper chain ended in no ad")
                }
                return try await resolveAd(inner, inherited, depth: depth + 1, request, values, prefetching: prefetching)
            }
            if let separation = configuration.separation, !separation.allows(advertiser: ad.advertiser, categories: ad.categories) {
                configuration.onSeparated?(request.kind)
                throw VASTError(code: .undefined, message: "passed over: \(ad.advertiser ?? ad.categories.joined(separator: ", ")) "
                                + "showed less than \(String(format: "%g", separation.seconds)) s ago (ad-separation)").markedReported()
            }
            var (creative, media) = try await choose(ad, for: request, prefetching: prefetching)
            creative.advertiser = ad.advertiser
            creative.categories = ad.categories
            if request.kind.isLinear, let linear = ad.creatives.first(where: \.isLinear) {
                let duration = linear.linearDuration.flatMap { try? Seconds.parse($0, .duration, field: "Linear/Duration") }
                creative.duration = duration
                creative.skipOffset = linear.skipOffset.flatMap { Self.skipOffset($0, duration: duration) }
                for (index, (icon, views)) in await icons(of: linear).enumerated() {
                    creative.icons.append(icon)
                    if !views.isEmpty { creative.tracking[AdIcon.viewEvent(index)] = views }
                }
            }
            creative.tracking.merge(inherited.tracking) { $0 + $1 }
            creative.tracking["impression", default: []] += inherited.impressions
            creative.tracking["error", default: []] += inherited.errors
            for (event, urls) in [("viewable", ad.viewable), ("notViewable", ad.notViewable), ("viewUndetermined", ad.viewUndetermined)]
            where !urls.isEmpty {
                creative.tracking[event, default: []] += urls
            }
            creative.adServingID = ad.adServingID
            creative.universalAdID = ad.creatives.compactMap(\.universalAdID).first
            creative.source = "vast"
            creative.expires = ad.expires.flatMap { Double($0) }.flatMap { $0 > 0 && $0 < 366 * 86_400 ? environment.date().addingTimeInterval($0) : nil }
            creative.transactionID = values.transactionID
            creative.adCount = values.adCount
            if let deadline = configuration.popDeadline {
                creative.popDeadline = deadline
                // Fetched now: not to be shown once the deadline has passed since.
                let limit = environment.date().addingTimeInterval(deadline)
                creative.expires = min(creative.expires ?? limit, limit)
            }
            return Resolution(creative: creative, chain: inherited.chain, media: media)
        } catch let error as VASTError {
            // Errors deeper down were reported there, with their wrappers' URLs.
            if !error.reported { fire(inherited.errors, code: error.code, values) }
            throw error.markedReported()
        }
    }

    /// A resolved ad whose file is in the cache, kept for when the server cannot be reached.
    private func remember(_ resolution: Resolution) {
        let creative = resolution.creative
        guard let media = resolution.media else { return }
        var expires = creative.expires?.timeIntervalSince1970
            ?? (configuration.offlineLifetime > 0 ? environment.wall() + configuration.offlineLifetime : nil)
        if configuration.popDeadline != nil, let limit = creative.expires?.timeIntervalSince1970 { expires = min(expires ?? limit, limit) }
        guard let expires else { return }
        var size: (Int?, Int?) = (nil, nil)
        var video = false
        switch creative.content {
        case .image(_, let width, let height): size = (width, height)
        case .video: video = true
        case .text, .html: return
        }
        offline.remember(OfflineAds.Entry(kind: creative.kind.rawValue, id: creative.id, media: media, video: video, width: size.0,
                                          height: size.1, duration: creative.duration, tracking: creative.tracking,
                                          adServingID: creative.adServingID, universalAdID: creative.universalAdID,
                                          advertiser: creative.advertiser, categories: creative.categories.isEmpty ? nil : creative.categories,
                                          skipOffset: creative.skipOffset, expires: expires))
    }

    static func vastError(_ error: FetchError, wrapper: Bool) -> VASTError {
        switch error.kind {
        case .timeout: VASTError(code: .wrapperTimeout, message: error.description)
        case .tooLarge: VASTError(code: .xmlParsing, message: error.description)
        default: VASTError(code: wrapper ? .wrapperError : .undefined, message: error.description)
        }
    }

    private func fetchDocument(_ url: String, timeout: Double, wrapper: Bool) async throws -> Data {
        do {
            return try await fetcher.fetch(url, limits: HTTPLimits(maxBytes: configuration.maxDocumentBytes, deadline: timeout))
        } catch let error as FetchError {
            throw Self.vastError(error, wrapper: wrapper)
        }
    }

    /// A `skipoffset` in seconds: `HH:MM:SS(.mmm)`, or `n%` of the declared duration; nil when
    /// it is neither (the ad is then not skippable: an unreadable offset grants nothing).
    static func skipOffset(_ text: String, duration: Double?) -> Double? {
        let text = text.trimmingCharacters(in: .whitespaces)
        if text.hasSuffix("%") {
            guard let percent = Double(text.dropLast()), percent >= 0, percent <= 100, let duration else { return nil }
            return duration * percent / 100
        }
        return try? Seconds.parse(text, .position, field: "skipoffset")
    }

    /// Types of MediaFile that are no video mpv plays: interactive units and images.
    private static let notPlayable = ["application/javascript", "application/x-javascript", "text/javascript",
                                      "application/x-shockwave-flash", "text/html"]

    /// The creative of an inline ad this player can show, with its file's URL; its file in the
    /// cache (an image always; a post-roll's video when cached, or when prefetching).
    private func choose(_ ad: VASTDocument.Ad, for request: AdRequest, prefetching: Bool) async throws -> (AdCreative, String?) {
        let id = ad.id ?? "vast"
        switch request.kind {
        case .postroll, .preroll, .midroll:
            // Every progressive file whose type is a container mpv demuxes: any video/ or audio/
            // type (FLV, WebM, MP4, Matroska, Ogg, QuickTime, 3GPP, …); MP4 first, then the order given.
            let files = ad.creatives.filter(\.isLinear).flatMap(\.mediaFiles).filter { file in
                let type = file.type.lowercased()
                return file.delivery.lowercased() != "streaming" && !Self.notPlayable.contains(type)
                    && (type.isEmpty || type.hasPrefix("video/") || type.hasPrefix("audio/"))
            }
            guard let file = files.first(where: { $0.type.lowercased() == "video/mp4" }) ?? files.first else {
                throw VASTError(code: .noSupportedMedia, message: "no progressive MediaFile that mpv plays")
            }
            guard let url = URL(string: file.url), ["http", "https"].contains(url.scheme?.lowercased() ?? "") else {
                throw VASTError(code: .fileNotFound, message: "MediaFile is not an http(s) URL: \(file.url)")
            }
            if let path = cache.file(for: file.url) {
                return (AdCreative(id: id, kind: request.kind, content: .video(location: path)), file.url)
            }
            // A mid-roll is asked for ahead of its break (the policy's lead): its file is fetched
            // now, so that it plays from the disk at its time.
            if prefetching || request.kind == .midroll, let path = try? await cache.fetch(file.url, with: fetcher, limits: videoLimits) {
                return (AdCreative(id: id, kind: request.kind, content: .video(location: path)), file.url)
            }
            // Not cached yet: played from the server this time (if it answers), cached for the next.
            try await probe(file.url)
            cacheInBackground(file.url)
            return (AdCreative(id: id, kind: request.kind, content: .video(location: file.url)), file.url)
        case .overlay, .pauseAd, .squeezeback, .screensaver:
            let nonLinears = ad.creatives.filter(\.isNonLinear).flatMap(\.nonLinears)
            // A NonLinear its creative marks as a squeezeback fills the overlay chain's slot as one (R26).
            let marked = request.kind == .pauseAd || request.kind == .screensaver ? nil : ad.creatives.first(where: \.isNonLinear)?.squeezeback
            var layout: SqueezebackLayout?
            if let marked {
                do {
                    layout = try SqueezebackLayout.checked(attributes: marked)
                } catch {
                    throw VASTError(code: .schemaValidation, message: "the squeezeback extension's \(error.field) \(error.reason)")
                }
            }
            for nonLinear in nonLinears {
                guard let resource = nonLinear.staticResource else { continue }
                guard Self.isImage(resource.url, type: resource.type) else { continue }
                let duration = request.kind == .pauseAd || request.kind == .screensaver ? nil : try overlayDuration(nonLinear)
                let path = try await download(resource.url)
                var made = AdCreative(id: id, kind: layout == nil ? request.kind : .squeezeback,
                                      content: .image(location: path, width: nonLinear.width, height: nonLinear.height), duration: duration)
                made.squeezeback = layout
                return (made, resource.url)
            }
            if request.kind == .overlay, let html = nonLinears.compactMap(\.htmlOrIFrame).first(where: { $0.hasPrefix("http") }) {
                return (AdCreative(id: id, kind: .overlay, content: .html(url: html),
                                   duration: try nonLinears.first.map(overlayDuration) ?? configuration.defaultOverlayDuration), nil)
            }
            throw VASTError(code: .noSupportedNonLinear, message: "no NonLinear with a PNG or JPEG StaticResource")
        }
    }

    /// A PNG or JPEG by its `creativeType`, or by its name when none is given.
    private static func isImage(_ url: String, type: String) -> Bool {
        let lowered = url.lowercased()
        return ["image/png", "image/jpeg", "image/jpg"].contains(type.lowercased())
            || (type.isEmpty && (lowered.hasSuffix(".png") || lowered.hasSuffix(".jpg") || lowered.hasSuffix(".jpeg")))
    }

    /// A linear creative's icons this player can draw (R27), AdChoices first, each with its
    /// `IconViewTracking`: a PNG or JPEG image fetched as every creative is (bounded), at a
    /// position and time that are ones. An icon that is not is left out — the ad plays without
    /// it (`ads-check` lists the icons kept); it is never an error of the ad.
    private func icons(of linear: VASTDocument.Creative) async -> [(AdIcon, [String])] {
        let ordered = linear.icons.filter { $0.program?.lowercased() == "adchoices" } + linear.icons.filter { $0.program?.lowercased() != "adchoices" }
        var kept: [(AdIcon, [String])] = []
        for icon in ordered where kept.count < AdIcon.maxPerCreative {
            guard let url = icon.staticResource, Self.isImage(url, type: icon.staticType),
                  let x = AdIcon.position(icon.xPosition, start: "left", end: "right"),
                  let y = AdIcon.position(icon.yPosition, start: "top", end: "bottom") else { continue }
            let offset = icon.offset.map { try? Seconds.parse($0, .position, field: "Icon@offset") } ?? 0
            let duration = icon.duration.map { try? Seconds.parse($0, .duration, field: "Icon@duration") }
            guard let offset, duration.map({ $0 != nil }) ?? true, let image = try? await download(url) else { continue }
            kept.append((AdIcon(program: icon.program, image: image, width: icon.width, height: icon.height, x: x, y: y,
                                offset: offset, duration: duration ?? nil, clickThrough: icon.clickThrough), icon.viewTracking))
        }
        return kept
    }

    private var videoLimits: HTTPLimits { HTTPLimits(maxBytes: configuration.maxVideoBytes, deadline: configuration.videoTimeout) }

    /// Downloads a post-roll's video into the cache while it plays from the network (once at a
    /// time a URL; a failure only means it streams again next time).
    private func cacheInBackground(_ url: String) {
        guard downloads.withLock({ $0.insert(url).inserted }) else { return }
        Task.counted(in: environment) { [self] in
            _ = try? await cache.fetch(url, with: fetcher, limits: videoLimits)
            downloads.withLock { _ = $0.remove(url) }
        }
    }

    /// `minSuggestedDuration` through `Seconds` (a day at most); none: the default.
    private func overlayDuration(_ nonLinear: VASTDocument.NonLinear) throws -> Double {
        guard let text = nonLinear.minSuggestedDuration else { return configuration.defaultOverlayDuration }
        do {
            return try Seconds.parse(text, .duration, field: "NonLinear@minSuggestedDuration")
        } catch {
            throw VASTError(code: .schemaValidation, message: "\(error)")
        }
    }

    /// The post-roll's first bytes answer in time, or it is no ad (401 file not found, 402
    /// timeout): mpv would otherwise stall up to its network timeout between episodes.
    private func probe(_ url: String) async throws {
        do {
            _ = try await fetcher.fetch(HTTPRequest(url: url, headers: ["Range": "bytes=0-65535"]),
                                        limits: HTTPLimits(maxBytes: 64 * 1024 + 1, deadline: configuration.mediaProbeTimeout))
        } catch let error as FetchError {
            switch error.kind {
            case .timeout: throw VASTError(code: .mediaTimeout, message: error.description)
            case .tooLarge: return   // a server that ignores Range: it answers, which is what counts
            default: throw VASTError(code: .fileNotFound, message: error.description)
            }
        }
    }

    /// An image creative in the cache (fetched if it is not there, http(s) only, size and time
    /// limits).
    private func download(_ url: String) async throws -> String {
        do {
            // A disk that refuses it (full, read-only) does not keep the ad off the screen: held in memory.
            return try await cache.fetch(url, with: fetcher, limits: HTTPLimits(maxBytes: configuration.maxCreativeBytes,
                                                                                deadline: configuration.creativeTimeout), inMemory: true)
        } catch {
            throw VASTError(code: .nonLinearFetchFailed, message: "the creative could not be fetched: \(error)")
        }
    }
}

extension FetchError {
    /// The server could not be reached or did not answer (no network, refused, a timeout, a
    /// 5xx): what an ad from the cache stands in for. A 4xx or a bad answer is not.
    var serverUnreachable: Bool {
        switch kind {
        case .timeout, .network: true
        case .http(let status): status >= 500
        default: false
        }
    }
}

/// A one-time signal for tasks: `wait` until `open` (at once if it was).
private actor FirstFetch {
    private var isOpen = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    func wait() async {
        if isOpen { return }
        await withCheckedContinuation { waiters.append($0) }
    }

    func open() {
        isOpen = true
        for waiter in waiters { waiter.resume() }
        waiters = []
    }
}
