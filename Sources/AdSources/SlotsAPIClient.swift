import AdRuntime
import Foundation

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
    private let limits: HTTPLimits
    private let onProblem: @Sendable (String) -> Void

    /// `onProblem` hears of each slot the API sent that could not be used (it is dropped).
    public init(endpoint: URL, token: String, fetcher: any BoundedFetcher = BoundedHTTP(threads: 2), timeout: Double = 8,
                onProblem: @escaping @Sendable (String) -> Void = { _ in }) {
        self.endpoint = endpoint
        self.token = token
        self.fetcher = fetcher
        self.limits = HTTPLimits(maxBytes: 1024 * 1024, deadline: timeout)
        self.onProblem = onProblem
    }

    /// Overlays only; pause ads and post-rolls are asked and get no fill (as always), linear
    /// breaks are not asked at all.
    public func mayFill(_ kind: AdKind, content: ContentInfo, at position: Double) -> Bool { kind != .preroll && kind != .midroll }

    public func ad(for request: AdRequest) async throws -> AdCreative? {
        guard request.kind == .overlay else { return nil }
        let slots = try await fetchSlots(titleID: request.content.id)
        guard let slot = slots.filter({ $0.start >= request.position - 0.001 }).min(by: { $0.start < $1.start }) else { return nil }
        return AdCreative(id: slot.id, kind: .overlay, content: .html(url: slot.iframeURL), duration: slot.duration, slotStart: slot.start, source: "slots")
    }

    /// The slots for a title (empty: no overlays). A slot that cannot be used is dropped and
    /// reported to `onProblem`; if none of the slots sent can be used, the first reason is thrown.
    public func fetchSlots(titleID: String) async throws -> [Slot] {
        let url = endpoint.appendingPathComponent(String(Fields.requestPath.dropFirst())).absoluteString
        let body = try JSONSerialization.data(withJSONObject: [Fields.titleID: titleID])
        let data: Data
        do {
            data = try await fetcher.fetch(HTTPRequest(url: url, method: "POST",
                                                       headers: ["Authorization": "Bearer \(token)", "Content-Type": "application/json"],
                                                       body: body), limits: limits)
        } catch let error as FetchError {
            throw APIError(message: error.description)
        }
        guard let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else {
            throw APIError(message: "\(url): the answer is not a JSON object")
        }
        guard let list = object[Fields.slots] as? [Any] else {
            throw APIError(message: "\(url): the answer has no \"\(Fields.slots)\" array")
        }
        var slots: [Slot] = []
        var problems: [String] = []
        for (index, element) in list.enumerated() {
            do {
                slots.append(try Self.slot(element, index: index))
            } catch {
                problems.append("\(url): \(error)")
            }
        }
        problems.forEach(onProblem)
        if slots.isEmpty, let first = problems.first { throw APIError(message: first) }
        return slots
    }

    /// One slot of the answer, its times through `Seconds`.
    private static func slot(_ element: Any, index: Int) throws -> Slot {
        let field = "\(Fields.slots)[\(index)]"
        guard let slot = element as? [String: Any] else { throw APIError(message: "\(field) is not an object") }
        func first(_ keys: [String]) -> (key: String, value: Any)? {
            keys.lazy.compactMap { key in slot[key].map { (key, $0) } }.first
        }
        func seconds(_ keys: [String], _ bounds: Seconds.Bounds) throws -> Double? {
            guard let (key, value) = first(keys) else { return nil }
            // JSON's true and false arrive as booleans that also cast to NSNumber: not seconds.
            guard let number = value as? NSNumber, !String(describing: type(of: value)).contains("Bool") else {
                throw APIError(message: "\(field).\(key) is not a number of seconds")
            }
            do {
                return try Seconds.check(number.doubleValue, bounds, field: "\(field).\(key)")
            } catch {
                throw APIError(message: "\(error)")
            }
        }
        guard let id = first(Fields.slotID).map({ "\($0.value)" }), !id.isEmpty, id.count <= 256 else {
            throw APIError(message: "\(field) has no id")
        }
        guard let start = try seconds(Fields.start, .position) else { throw APIError(message: "\(field) has no start") }
        let duration: Double
        if let given = try seconds(Fields.duration, .duration) {
            duration = given
        } else if let end = try seconds(Fields.end, .position) {
            do {
                duration = try Seconds.check(end - start, .duration, field: "\(field): end − start")
            } catch {
                throw APIError(message: "\(error)")
            }
        } else {
            throw APIError(message: "\(field) has no end or duration")
        }
        guard let url = slot[Fields.iframeURL] as? String, url.utf8.count <= 8192, let parsed = URL(string: url),
              ["http", "https"].contains(parsed.scheme?.lowercased() ?? "") else {
            throw APIError(message: "\(field).\(Fields.iframeURL) is not an http(s) URL")
        }
        return Slot(id: AdIdentifier.bounded(id), start: start, duration: duration, iframeURL: url)
    }
}
