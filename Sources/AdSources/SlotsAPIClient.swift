import AdRuntime
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// The seed vendor's Video Ads API (SPEC §4.3): `POST /v1/ads` with a bearer token and a
/// JSON body naming the video by `title_id`; the answer's `slots` (empty = no overlays) are
/// time windows, each with a stable `iframe_url` for an HTML creative that a UI shell
/// renders (`GET /overlay/{slotId}`); a CTA click there posts
/// `{type: "kontext.ad.click", version: 1, slot_id, cta_url}` to its parent, whose origin the
/// shell checks before opening `cta_url`.
///
/// Only overlays come from this API; other kinds get no fill. A request at position p gets
/// the earliest slot starting at or after p.
public final class SlotsAPIClient: AdSource {
    /// Every field of the API's JSON that this client reads or writes, in one place: only
    /// this much of the schema is public.
    public enum Fields {
        public static let requestPath = "/v1/ads"
        public static let titleID = "title_id"
        public static let slots = "slots"
        public static let slotID = ["id", "slot_id"]
        public static let start = ["start", "start_time", "starts_at"]
        public static let end = ["end", "end_time", "ends_at"]
        public static let duration = ["duration"]
        public static let iframeURL = "iframe_url"
        public static let clickMessageType = "kontext.ad.click"
    }

    /// One slot as the API gives it.
    public struct Slot: Sendable, Equatable {
        public var id: String
        public var start: Double
        public var duration: Double
        public var iframeURL: String
    }

    public struct APIError: Error, Sendable, Equatable, CustomStringConvertible {
        public let message: String
        public var description: String { "slots API: \(message)" }
    }

    private let endpoint: URL
    private let token: String
    private let fetcher: any BoundedFetcher
    private let timeout: Double

    public init(endpoint: URL, token: String, fetcher: any BoundedFetcher = HTTPFetcher(), timeout: Double = 8) {
        self.endpoint = endpoint
        self.token = token
        self.fetcher = fetcher
        self.timeout = timeout
    }

    public func ad(for request: AdRequest) async throws -> AdCreative? {
        guard request.kind == .overlay else { return nil }
        let slots = try await fetchSlots(titleID: request.content.id)
        guard let slot = slots.filter({ $0.start >= request.position - 0.001 }).min(by: { $0.start < $1.start }) else { return nil }
        return AdCreative(id: slot.id, kind: .overlay, content: .html(url: slot.iframeURL), duration: slot.duration, slotStart: slot.start)
    }

    /// The slots for a title (empty: no overlays).
    public func fetchSlots(titleID: String) async throws -> [Slot] {
        var http = URLRequest(url: endpoint.appendingPathComponent(String(Fields.requestPath.dropFirst())))
        http.httpMethod = "POST"
        http.setValue("Bearer \(token)", forHTTPHeaderField: "Authorization")
        http.setValue("application/json", forHTTPHeaderField: "Content-Type")
        http.httpBody = try JSONSerialization.data(withJSONObject: [Fields.titleID: titleID])
        let data: Data
        do {
            data = try await fetcher.send(http, timeout: timeout, maxBytes: 1024 * 1024)
        } catch let error as FetchError {
            throw APIError(message: error.description)
        }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw APIError(message: "the answer is not a JSON object")
        }
        guard let list = object[Fields.slots] as? [[String: Any]] else {
            throw APIError(message: "the answer has no \"\(Fields.slots)\" array")
        }
        return try list.enumerated().map { index, slot in
            func first(_ keys: [String]) -> Any? { keys.lazy.compactMap { slot[$0] }.first }
            func seconds(_ keys: [String]) -> Double? { (first(keys) as? NSNumber)?.doubleValue }
            guard let id = first(Fields.slotID).map({ "\($0)" }), !id.isEmpty else { throw APIError(message: "slots[\(index)] has no id") }
            guard let start = seconds(Fields.start), start >= 0 else { throw APIError(message: "slots[\(index)] has no start") }
            let duration = seconds(Fields.duration) ?? seconds(Fields.end).map { $0 - start } ?? 0
            guard duration > 0 else { throw APIError(message: "slots[\(index)] has no end or duration after its start") }
            guard let url = slot[Fields.iframeURL] as? String, let parsed = URL(string: url),
                  ["http", "https"].contains(parsed.scheme?.lowercased() ?? "") else {
                throw APIError(message: "slots[\(index)].\(Fields.iframeURL) is not an http(s) URL")
            }
            return Slot(id: id, start: start, duration: duration, iframeURL: url)
        }
    }
}
