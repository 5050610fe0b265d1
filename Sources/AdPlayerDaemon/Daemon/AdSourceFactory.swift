import AdRuntime
import AdSources
import ControlProtocol
import Foundation

/// `ads = SOURCE` (given once or more) as an ad source: each a catalog folder, a slots API URL
/// (…/v1/ads) or a VAST tag URL; several make a fallback chain (`FallbackSource`), asked in
/// order until one fills. One place, for the daemon, `play` and `ads-check`.
public enum AdSourceFactory {
    public struct Made: Sendable {
        public let source: any AdSource
        /// The chain, in order: what each `ads` is (`catalog /srv/ads`, `VAST https://…`).
        public let chain: [String]
        /// What to remove at exit (a private temporary creative cache).
        public let cleanup: @Sendable () -> Void
    }

    public struct Options: Sendable {
        public var token: String?
        public var fetcher: any BoundedFetcher
        public var counters: any FrequencyCounters
        public var policy = MacroPolicy()
        /// Where VAST creatives are kept (`CreativeCache`); nil: a private temporary folder,
        /// removed at `cleanup` (ads-check, `play` without a state folder).
        public var cacheFolder: String?
        public var cacheMaxBytes = CreativeCache.defaultMaxBytes
        public var vast = VASTClient.Configuration()
        /// The output's size, for `[PLAYERSIZE]` in VAST requests.
        public var outputSize: OutputSize?
        public var onProblem: @Sendable (String) -> Void = { _ in }
        /// `pop-deadline` and `pop-require-display` for every source without its own.
        public var popDeadline: Double?
        public var requireDisplay = false
        /// Why the screen is known dark now (the panel in standby, the output unplugged), nil
        /// otherwise: a source that requires display evidence is not asked meanwhile.
        public var screenDark: @Sendable () -> String? = { nil }
        /// The box's time zone (catalog dayparts and local flight times), competitive
        /// separation across every source, and who hears why a request found nothing.
        public var timeZone = TimeZone.current
        /// The box's clocks, for the catalog's flights, dayparts and caps (a simulation's are its own).
        public var clock: any ScheduleClock = SystemScheduleClock()
        public var separation: AdSeparation?
        public var onPassedOver: @Sendable (AdKind, String) -> Void = { _, _ in }
        /// A VAST ad fetched and never handed out: its `notUsed` URLs to queue.
        public var onNotUsed: (@Sendable ([String], MacroContext) -> Void)?
        public var onErrorURLs: @Sendable ([String], MacroContext) -> Void = { _, _ in }

        public init(fetcher: any BoundedFetcher, counters: any FrequencyCounters) {
            self.fetcher = fetcher
            self.counters = counters
        }
    }

    public static func make(_ specs: [String], _ options: Options) throws -> Made {
        guard !specs.isEmpty else { throw UsageError("--ads: no source") }
        var cache: CreativeCache?
        var temporary: String?
        func creativeCache() throws -> CreativeCache {
            if let cache { return cache }
            do {
                let made: CreativeCache
                if let folder = options.cacheFolder {
                    made = try CreativeCache(folder: folder, maxBytes: options.cacheMaxBytes, onProblem: options.onProblem)
                } else {
                    made = try CreativeCache.temporary(maxBytes: options.cacheMaxBytes, onProblem: options.onProblem)
                    temporary = made.folder
                }
                cache = made
                return made
            } catch {
                throw UsageError("the creative cache: \(error)")
            }
        }
        var members: [FallbackSource.Member] = []
        var chain: [String] = []
        do {
            for spec in specs {
                let (source, what) = try member(spec, options, creativeCache)
                members.append(FallbackSource.Member(name: spec, source: source))
                chain.append(what)
            }
        } catch {
            if let temporary { try? FileManager.default.removeItem(atPath: temporary) }
            throw error
        }
        let cleanup: @Sendable () -> Void = { [temporary, cache] in
            cache?.releaseMemory()
            if let temporary { try? FileManager.default.removeItem(atPath: temporary) }
        }
        let source: any AdSource = members.count == 1 ? members[0].source : FallbackSource(members, onProblem: options.onProblem)
        return Made(source: source, chain: chain, cleanup: cleanup)
    }

    /// A source's own terms: `SOURCE [pop-deadline=SECONDS] [pop-require-display=yes|no]`
    /// (`ads = https://… pop-deadline=900 pop-require-display=yes`).
    public struct Terms: Sendable, Equatable {
        public var source: String
        public var popDeadline: Double?
        public var requireDisplay: Bool?
    }

    public static func parse(_ line: String) throws -> Terms {
        let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        guard let source = words.first else { throw UsageError("--ads: empty") }
        var terms = Terms(source: source)
        for option in words.dropFirst() {
            let parts = option.split(separator: "=", maxSplits: 1).map(String.init)
            switch (parts.first, parts.count) {
            case ("pop-deadline", 2):
                do {
                    terms.popDeadline = try Seconds.parse(parts[1], .duration, field: "pop-deadline")
                } catch {
                    throw UsageError("--ads \(source): \(error)")
                }
            case ("pop-require-display", 2):
                guard let value = ["yes": true, "true": true, "no": false, "false": false][parts[1].lowercased()] else {
                    throw UsageError("--ads \(source): pop-require-display is yes or no, not \"\(OneLine.escape(String(parts[1].prefix(40))))\"")
                }
                terms.requireDisplay = value
            default:
                throw UsageError("--ads \(source): \"\(OneLine.escape(String(option.prefix(80))))\" is not an option of a source "
                                 + "(pop-deadline=SECONDS, pop-require-display=yes|no)")
            }
        }
        return terms
    }

    private static func member(_ line: String, _ options: Options, _ cache: () throws -> CreativeCache) throws -> (any AdSource, String) {
        let terms = try parse(line)
        let deadline = terms.popDeadline ?? options.popDeadline
        let requireDisplay = terms.requireDisplay ?? options.requireDisplay
        let (source, what) = try plainMember(terms.source, deadline, options, cache)
        guard deadline != nil || requireDisplay else { return (source, what) }
        var said: [String] = []
        if let deadline { said.append("pop-deadline \(String(format: "%g", deadline)) s") }
        if requireDisplay { said.append("pop-require-display") }
        return (TermsSource(source, deadline: deadline, requireDisplay: requireDisplay, screenDark: options.screenDark),
                what + " (" + said.joined(separator: ", ") + ")")
    }

    private static func plainMember(_ spec: String, _ deadline: Double?, _ options: Options,
                                    _ cache: () throws -> CreativeCache) throws -> (any AdSource, String) {
        if spec.hasPrefix("http://") || spec.hasPrefix("https://") {
            guard let url = URL(string: spec), url.host != nil else { throw UsageError("--ads: \(spec) is not a URL") }
            if url.path.hasSuffix("/v1/ads") {
                var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
                components.path = String(url.path.dropLast("/v1/ads".count))
                components.query = nil
                return (SlotsAPIClient(endpoint: components.url!, token: options.token ?? "", fetcher: options.fetcher,
                                       onProblem: options.onProblem), "slots API \(spec)")
            }
            var vast = options.vast
            vast.popDeadline = deadline
            vast.separation = options.separation
            let passedOver = options.onPassedOver
            vast.onSeparated = { kind in passedOver(kind, "separation") }
            vast.onNotUsed = options.onNotUsed
            let client = VASTClient(tag: spec, cache: try cache(), configuration: vast, fetcher: options.fetcher,
                                    policy: options.policy, outputSize: options.outputSize, onErrorURLs: options.onErrorURLs)
            return (client, "VAST \(spec) (creatives in \(client.cache.folder))")
        }
        let catalog = try LocalCatalog(folder: URL(fileURLWithPath: spec), counters: options.counters, timeZone: options.timeZone,
                                       clock: options.clock, separation: options.separation, onIneligible: options.onPassedOver)
        return (catalog, "catalog \(spec)" + (catalog.version == 2 ? " (version 2: schedules)" : ""))
    }
}

/// A source whose ads carry proof-of-play terms: a deadline (`pop-deadline`: their billable
/// beacons delivered within it after the ad showed, or dropped) and `pop-require-display`
/// (their impression waits for the screen's evidence; while the screen is known dark the
/// source is not asked at all: no request, no `notUsed` storm).
final class TermsSource: AdSource {
    private let base: any AdSource
    private let deadline: Double?
    private let requireDisplay: Bool
    private let screenDark: @Sendable () -> String?

    init(_ base: any AdSource, deadline: Double?, requireDisplay: Bool, screenDark: @escaping @Sendable () -> String?) {
        self.base = base
        self.deadline = deadline
        self.requireDisplay = requireDisplay
        self.screenDark = screenDark
    }

    func ad(for request: AdRequest) async throws -> AdCreative? {
        if requireDisplay, screenDark() != nil { return nil }
        guard var creative = try await base.ad(for: request) else { return nil }
        creative.popDeadline = creative.popDeadline ?? deadline
        creative.requireDisplay = creative.requireDisplay ?? requireDisplay
        return creative
    }

    func mayFill(_ kind: AdKind, content: ContentInfo, at position: Double) -> Bool {
        if requireDisplay, screenDark() != nil { return false }
        return base.mayFill(kind, content: content, at: position)
    }

    func prefetch(_ request: AdRequest) {
        if requireDisplay, screenDark() != nil { return }
        base.prefetch(request)
    }

    func didShow(_ creative: AdCreative, content: ContentInfo) { base.didShow(creative, content: content) }
    func midrollTimes(for content: ContentInfo) -> [Double] { base.midrollTimes(for: content) }
    func endViewing(_ content: ContentInfo) { base.endViewing(content) }
}
