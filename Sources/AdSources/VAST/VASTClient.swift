import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import AdRuntime

/// VAST macros (IAB VAST 4.x §6): replaced in ad tag, tracking and error URLs.
public enum VASTMacros {
    /// Values for one expansion; unknown values are sent as -1, as VAST 4.1 asks.
    public struct Values: Sendable {
        public var errorCode: Int?
        public var contentPlayhead: Double?
        public var adPlayhead: Double?
        public var now: Date

        public init(errorCode: Int? = nil, contentPlayhead: Double? = nil, adPlayhead: Double? = nil, now: Date = Date()) {
            self.errorCode = errorCode
            self.contentPlayhead = contentPlayhead
            self.adPlayhead = adPlayhead
            self.now = now
        }
    }

    public static func expand(_ url: String, _ values: Values) -> String {
        var out = url
        let replacements: [(String, String)] = [
            ("[ERRORCODE]", values.errorCode.map(String.init) ?? "-1"),
            ("[TIMESTAMP]", timestamp(values.now)),
            ("[CACHEBUSTING]", String(format: "%08d", Int.random(in: 0..<100_000_000))),
            ("[CONTENTPLAYHEAD]", values.contentPlayhead.map(playhead) ?? "-1"),
            ("[MEDIAPLAYHEAD]", values.contentPlayhead.map(playhead) ?? "-1"),
            ("[ADPLAYHEAD]", values.adPlayhead.map(playhead) ?? "-1"),
        ]
        for (macro, value) in replacements where out.contains(macro) {
            out = out.replacingOccurrences(of: macro, with: value.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowed.subtracting(CharacterSet(charset: "+&=:"))) ?? value)
        }
        return out
    }

    /// `HH:MM:SS.mmm`.
    static func playhead(_ seconds: Double) -> String {
        let ms = Int((max(0, seconds) * 1000).rounded())
        return String(format: "%02d:%02d:%02d.%03d", ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000)
    }

    static func timestamp(_ date: Date) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: date)
    }
}

private extension CharacterSet {
    init(charset: String) { self.init(charactersIn: charset) }
}

/// An ad source speaking VAST 2.0–4.2 (SPEC §4.2): `InLine` and `Wrapper` chains (depth 5,
/// the wrappers' tracking merged in), `NonLinear` image `StaticResource`s for overlays and
/// pause ads (downloaded to a cache folder, because mpv draws local bitmaps), `Linear`
/// progressive `MediaFile`s for post-rolls. Timeouts: 8 s for the first document, 4 s per
/// wrapper. When it gives up it sends the chain's `Error` URLs with `[ERRORCODE]` (through
/// `onErrorBeacon`, for the outbox) and throws the `VASTError`.
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
    private let onErrorBeacon: @Sendable (String) -> Void

    public init(tag: String, cacheDirectory: URL, configuration: Configuration = Configuration(),
                fetcher: any BoundedFetcher = HTTPFetcher(), onErrorBeacon: @escaping @Sendable (String) -> Void = { _ in }) {
        self.tag = tag
        self.cache = cacheDirectory
        self.configuration = configuration
        self.fetcher = fetcher
        self.onErrorBeacon = onErrorBeacon
    }

    public func ad(for request: AdRequest) async throws -> AdCreative? {
        try await resolve(request)?.creative
    }

    /// Follows the chain from the tag (or from `document`, a VAST file already read).
    public func resolve(_ request: AdRequest, document: Data? = nil) async throws -> Resolution? {
        var errors: [String] = []
        var impressions: [String] = []
        var tracking: [String: [String]] = [:]
        var chain: [String] = []
        let values = VASTMacros.Values(contentPlayhead: request.position)
        do {
            var next: String? = VASTMacros.expand(tag, values)
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
                    next = VASTMacros.expand(uri, values)
                    continue
                }
                var creative = try await choose(ad, for: request)
                creative.tracking.merge(tracking) { $0 + $1 }
                creative.tracking["impression", default: []] += impressions
                creative.tracking["error", default: []] += errors
                return Resolution(creative: creative, chain: chain)
            }
        } catch let error as VASTError {
            fire(errors, code: error.code, values)
            throw error
        }
    }

    private func fetchDocument(_ url: String, timeout: Double, wrapper: Bool) async throws -> Data {
        guard let parsed = URL(string: url) else { throw VASTError(code: wrapper ? .wrapperError : .undefined, message: "bad URL \(url)") }
        do {
            return try await fetcher.fetch(parsed, timeout: timeout, maxBytes: configuration.maxDocumentBytes)
        } catch let error as FetchError {
            switch error.kind {
            case .timeout: throw VASTError(code: .wrapperTimeout, message: error.description)
            case .tooLarge: throw VASTError(code: .xmlParsing, message: error.description)
            default: throw VASTError(code: wrapper ? .wrapperError : .undefined, message: error.description)
            }
        }
    }

    private func choose(_ ad: VASTDocument.Ad, for request: AdRequest) async throws -> AdCreative {
        let id = ad.id ?? "vast"
        switch request.kind {
        case .postroll:
            let files = ad.creatives.filter(\.isLinear).flatMap(\.mediaFiles).filter { $0.delivery.lowercased() != "streaming" }
            let playable = ["video/mp4", "video/webm", "video/x-matroska", "video/quicktime", "video/3gpp"]
            guard let file = files.first(where: { $0.type == "video/mp4" }) ?? files.first(where: { playable.contains($0.type) }) else {
                throw VASTError(code: .noSupportedMedia, message: "no progressive MediaFile that mpv plays")
            }
            guard let url = URL(string: file.url), ["http", "https"].contains(url.scheme?.lowercased() ?? "") else {
                throw VASTError(code: .fileNotFound, message: "MediaFile is not an http(s) URL: \(file.url)")
            }
            return AdCreative(id: id, kind: .postroll, content: .video(location: file.url))
        case .overlay, .pauseAd:
            let nonLinears = ad.creatives.filter(\.isNonLinear).flatMap(\.nonLinears)
            for nonLinear in nonLinears {
                guard let resource = nonLinear.staticResource else { continue }
                let lowered = resource.url.lowercased()
                let isImage = ["image/png", "image/jpeg", "image/jpg"].contains(resource.type.lowercased())
                    || (resource.type.isEmpty && (lowered.hasSuffix(".png") || lowered.hasSuffix(".jpg") || lowered.hasSuffix(".jpeg")))
                guard isImage else { continue }
                let path = try await download(resource.url)
                return AdCreative(id: id, kind: request.kind,
                                  content: .image(location: path, width: nonLinear.width, height: nonLinear.height),
                                  duration: request.kind == .overlay ? (nonLinear.minSuggestedDuration ?? configuration.defaultOverlayDuration) : nil)
            }
            if request.kind == .overlay, let html = nonLinears.compactMap(\.htmlOrIFrame).first(where: { $0.hasPrefix("http") }) {
                return AdCreative(id: id, kind: .overlay, content: .html(url: html),
                                  duration: nonLinears.first?.minSuggestedDuration ?? configuration.defaultOverlayDuration)
            }
            throw VASTError(code: .noSupportedNonLinear, message: "no NonLinear with a PNG or JPEG StaticResource")
        }
    }

    /// Downloads an image creative into the cache folder (http(s) only, size and time limits).
    private func download(_ url: String) async throws -> String {
        guard let parsed = URL(string: url) else { throw VASTError(code: .nonLinearFetchFailed, message: "bad URL \(url)") }
        let data: Data
        do {
            data = try await fetcher.fetch(parsed, timeout: configuration.creativeTimeout, maxBytes: configuration.maxCreativeBytes)
        } catch {
            throw VASTError(code: .nonLinearFetchFailed, message: "the creative could not be fetched: \(error)")
        }
        try? FileManager.default.createDirectory(at: cache, withIntermediateDirectories: true)
        let name = String(UInt64(bitPattern: Int64(url.hashValue))) + "-" + UUID().uuidString + "." + (parsed.pathExtension.isEmpty ? "img" : parsed.pathExtension)
        let file = cache.appendingPathComponent(name)
        do {
            try data.write(to: file, options: .atomic)
        } catch {
            throw VASTError(code: .nonLinearFetchFailed, message: "cannot write \(file.path): \(error.localizedDescription)")
        }
        return file.path
    }

    private func fire(_ urls: [String], code: VASTErrorCode, _ values: VASTMacros.Values) {
        var values = values
        values.errorCode = code.rawValue
        for url in urls { onErrorBeacon(VASTMacros.expand(url, values)) }
    }
}
