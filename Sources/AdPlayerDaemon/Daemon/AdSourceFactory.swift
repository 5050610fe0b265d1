import AdRuntime
import AdSources
import ControlProtocol
import Foundation

/// `--ads SOURCE` as an ad source: a catalog folder, a slots API URL (…/v1/ads) or a VAST tag
/// URL. One place, for the daemon and `play`.
public enum AdSourceFactory {
    public struct Made: Sendable {
        public let source: any AdSource
        /// What to remove at exit (a VAST client's folder of downloaded creatives).
        public let cleanup: @Sendable () -> Void
    }

    public static func make(_ spec: String, token: String?, fetcher: any BoundedFetcher, counters: any FrequencyCounters,
                            policy: MacroPolicy = MacroPolicy(), onProblem: @escaping @Sendable (String) -> Void,
                            onErrorURLs: @escaping @Sendable ([String], MacroContext) -> Void) throws -> Made {
        if spec.hasPrefix("http://") || spec.hasPrefix("https://") {
            guard let url = URL(string: spec), url.host != nil else { throw UsageError("--ads: \(spec) is not a URL") }
            if url.path.hasSuffix("/v1/ads") {
                var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
                components.path = String(url.path.dropLast("/v1/ads".count))
                components.query = nil
                return Made(source: SlotsAPIClient(endpoint: components.url!, token: token ?? "", fetcher: fetcher, onProblem: onProblem),
                            cleanup: {})
            }
            let cache = FileManager.default.temporaryDirectory.appendingPathComponent("adplayerd-creatives-\(getpid())")
            let client = VASTClient(tag: spec, cacheDirectory: cache, fetcher: fetcher, policy: policy, onErrorURLs: onErrorURLs)
            return Made(source: client, cleanup: { client.removeCache() })
        }
        return Made(source: try LocalCatalog(folder: URL(fileURLWithPath: spec), counters: counters), cleanup: {})
    }
}
