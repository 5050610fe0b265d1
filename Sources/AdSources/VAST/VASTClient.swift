import AdRuntime
import Foundation

/// An ad source speaking VAST 2.0–4.2 (SPEC §4.2): `InLine` and `Wrapper` chains (depth 5,
/// the wrappers' tracking merged in), `NonLinear` image `StaticResource`s for overlays and
/// pause ads (downloaded to a cache folder, because mpv draws local bitmaps), `Linear`
/// progressive `MediaFile`s for post-rolls. Timeouts: 8 s for the first document, 4 s per
/// wrapper. When it gives up it sends the chain's `Error` URLs with `[ERRORCODE]` (through
/// `onErrorURLs`, for the tracking layer to queue) and throws the `VASTError`.
///
/// Threading: any thread; each request is independent.
public final class VASTClient: AdSource {
    public struct Configuration: Sendable {
        public var firstTimeout = 8.0
        public var wrapperTimeout = 4.0
        public var maxWrapperDepth = 5
        public var maxDocumentBytes = 1024 * 1024
        public var maxCreativeBytes = 16 * 1024 * 1024
        public var creativeTimeout = 8.0
        public var defaultOverlayDuration = 10.0
        /// A post-roll's MediaFile must answer its first bytes within this (VAST 402 otherwise),
        /// so that a dead server costs seconds, not mpv's minute-long network timeout.
        public var mediaProbeTimeout = 5.0
        /// Downloaded creatives kept in the cache folder; older ones are deleted.
        public var maxCachedCreatives = 16
        public init() {}
    }

    /// What a request resolved to, for `ads-check` and the tests.
    public struct Resolution: Sendable, Equatable {
        public var creative: AdCreative
        /// Documents followed: the tag, then each wrapper's target.
        public var chain: [String]
    }

    public let tag: String
    private let configuration: Configuration
    private let fetcher: any BoundedFetcher
    private let cache: URL
    private let policy: MacroPolicy
    private let onErrorURLs: @Sendable ([String], MacroContext) -> Void

    /// `onErrorURLs` gets the chain's `Error` URLs (macros not yet filled) with what to fill them
    /// with (the VAST code in `errorCode`), for the tracking layer to queue.
    public init(tag: String, cacheDirectory: URL, configuration: Configuration = Configuration(),
                fetcher: any BoundedFetcher = BoundedHTTP(threads: 2), policy: MacroPolicy = MacroPolicy(),
                onErrorURLs: @escaping @Sendable ([String], MacroContext) -> Void = { _, _ in }) {
        self.tag = tag
        self.cache = cacheDirectory
        self.configuration = configuration
        self.fetcher = fetcher
        self.policy = policy
        self.onErrorURLs = onErrorURLs
    }

    public func ad(for request: AdRequest) async throws -> AdCreative? {
        try await resolve(request)?.creative
    }

    /// Deletes the cache folder of downloaded creatives (call when done with the client).
    public func removeCache() {
        try? FileManager.default.removeItem(at: cache)
    }

    /// Follows the chain from the tag (or from `document`, a VAST file already read).
    public func resolve(_ request: AdRequest, document: Data? = nil) async throws -> Resolution? {
        var errors: [String] = []
        var impressions: [String] = []
        var tracking: [String: [String]] = [:]
        var chain: [String] = []
        let values = MacroContext(contentID: request.content.id, kind: request.kind, contentPlayhead: request.position)
        do {
            var next: String? = Macros.expand(tag, values, policy)
            var data = document
            var depth = 0
            while true {
                if data == nil, let url = next {
                    chain.append(url)
                    data = try await fetchDocument(url, timeout: depth == 0 ? configuration.firstTimeout : configuration.wrapperTimeout,
                                                   wrapper: depth > 0)
                }
                let vast = try VASTDocument.parse(data!)
                data = nil
                errors += vast.errors
                guard let ad = vast.ads.first else {
                    if depth > 0 { throw VASTError(code: .noAdsAfterWrapper, message: "the wrapper chain ended in no ad") }
                    fire(errors, code: .noAdsAfterWrapper, values)
                    return nil   // no fill
                }
                errors += ad.errors
                impressions += ad.impressions
                for creative in ad.creatives where creative.isLinear == (request.kind == .postroll) {
                    tracking.merge(creative.tracking) { $0 + $1 }
                }
                if let uri = ad.wrapperURI {
                    depth += 1
                    guard depth <= configuration.maxWrapperDepth else {
                        throw VASTError(code: .wrapperLimit, message: "more than \(configuration.maxWrapperDepth) wrappers")
                    }
                    next = Macros.expand(uri, values, policy)
                    continue
                }
                var creative = try await choose(ad, for: request)
                creative.tracking.merge(tracking) { $0 + $1 }
                creative.tracking["impression", default: []] += impressions
                creative.tracking["error", default: []] += errors
                for (event, urls) in [("viewable", ad.viewable), ("notViewable", ad.notViewable), ("viewUndetermined", ad.viewUndetermined)]
                where !urls.isEmpty {
                    creative.tracking[event, default: []] += urls
                }
                creative.adServingID = ad.adServingID
                creative.universalAdID = ad.creatives.compactMap(\.universalAdID).first
                creative.source = "vast"
                creative.expires = ad.expires.flatMap { Double($0) }.flatMap { $0 > 0 && $0 < 366 * 86_400 ? Date().addingTimeInterval($0) : nil }
                return Resolution(creative: creative, chain: chain)
            }
        } catch let error as VASTError {
            fire(errors, code: error.code, values)
            throw error
        }
    }

    private func fetchDocument(_ url: String, timeout: Double, wrapper: Bool) async throws -> Data {
        do {
            return try await fetcher.fetch(url, limits: HTTPLimits(maxBytes: configuration.maxDocumentBytes, deadline: timeout))
        } catch let error as FetchError {
            switch error.kind {
            case .timeout: throw VASTError(code: .wrapperTimeout, message: error.description)
            case .tooLarge: throw VASTError(code: .xmlParsing, message: error.description)
            default: throw VASTError(code: wrapper ? .wrapperError : .undefined, message: error.description)
            }
        }
    }

    /// Types of MediaFile that are no video mpv plays: interactive units and images.
    private static let notPlayable = ["application/javascript", "application/x-javascript", "text/javascript",
                                      "application/x-shockwave-flash", "text/html"]

    private func choose(_ ad: VASTDocument.Ad, for request: AdRequest) async throws -> AdCreative {
        let id = ad.id ?? "vast"
        switch request.kind {
        case .postroll:
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
            try await probe(file.url)
            return AdCreative(id: id, kind: .postroll, content: .video(location: file.url))
        case .overlay, .pauseAd:
            let nonLinears = ad.creatives.filter(\.isNonLinear).flatMap(\.nonLinears)
            for nonLinear in nonLinears {
                guard let resource = nonLinear.staticResource else { continue }
                let lowered = resource.url.lowercased()
                let isImage = ["image/png", "image/jpeg", "image/jpg"].contains(resource.type.lowercased())
                    || (resource.type.isEmpty && (lowered.hasSuffix(".png") || lowered.hasSuffix(".jpg") || lowered.hasSuffix(".jpeg")))
                guard isImage else { continue }
                let duration = request.kind == .overlay ? try overlayDuration(nonLinear) : nil
                let path = try await download(resource.url)
                return AdCreative(id: id, kind: request.kind,
                                  content: .image(location: path, width: nonLinear.width, height: nonLinear.height),
                                  duration: duration)
            }
            if request.kind == .overlay, let html = nonLinears.compactMap(\.htmlOrIFrame).first(where: { $0.hasPrefix("http") }) {
                return AdCreative(id: id, kind: .overlay, content: .html(url: html),
                                  duration: try nonLinears.first.map(overlayDuration) ?? configuration.defaultOverlayDuration)
            }
            throw VASTError(code: .noSupportedNonLinear, message: "no NonLinear with a PNG or JPEG StaticResource")
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

    /// Downloads an image creative into the cache folder (http(s) only, size and time limits);
    /// the folder keeps the newest `maxCachedCreatives`.
    private func download(_ url: String) async throws -> String {
        let data: Data
        do {
            data = try await fetcher.fetch(url, limits: HTTPLimits(maxBytes: configuration.maxCreativeBytes,
                                                                   deadline: configuration.creativeTimeout))
        } catch {
            throw VASTError(code: .nonLinearFetchFailed, message: "the creative could not be fetched: \(error)")
        }
        let manager = FileManager.default
        try? manager.createDirectory(at: cache, withIntermediateDirectories: true)
        let suffix = URL(string: url).map(\.pathExtension).flatMap { ["png", "jpg", "jpeg"].contains($0.lowercased()) ? $0 : nil } ?? "img"
        let file = cache.appendingPathComponent(UUID().uuidString + "." + suffix)
        do {
            try data.write(to: file, options: .atomic)
        } catch {
            throw VASTError(code: .nonLinearFetchFailed, message: "cannot write \(file.path): \(error.localizedDescription)")
        }
        trimCache()
        return file.path
    }

    private func trimCache() {
        let manager = FileManager.default
        let files = (try? manager.contentsOfDirectory(at: cache, includingPropertiesForKeys: [.creationDateKey])) ?? []
        guard files.count > configuration.maxCachedCreatives else { return }
        let dated = files.map { ($0, (try? $0.resourceValues(forKeys: [.creationDateKey]).creationDate) ?? .distantPast) }
        for (file, _) in dated.sorted(by: { $0.1 < $1.1 }).prefix(files.count - configuration.maxCachedCreatives) {
            try? manager.removeItem(at: file)
        }
    }

    private func fire(_ urls: [String], code: VASTErrorCode, _ values: MacroContext) {
        guard !urls.isEmpty else { return }
        var values = values
        values.errorCode = code.rawValue
        onErrorURLs(urls, values)
    }
}
