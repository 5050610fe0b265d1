import Bounds
import AdPlayerDaemon
import AdSources
import ControlProtocol
import Foundation

/// One HTTP exchange of a simulation: an ad request (a tag, a wrapper, a VMAP, a creative's
/// file) or a beacon — what `requests.har` holds, one entry each.
public struct RecordedExchange: Sendable, Equatable {
    public enum Kind: String, Sendable { case request, beacon }
    public var kind: Kind
    /// Simulated wall time it was made (a beacon: when it was delivered), seconds since 1970.
    public var started: Double
    public var method = "GET"
    public var url: String
    public var requestHeaders: [String: String] = [:]
    public var requestBody: Data?
    /// The HTTP status; 0: no answer (not sent, or the network failed: `failure`).
    public var status = 0
    public var body = Data()
    public var failure: String?
    /// A beacon's event (`impression`, `firstQuartile`, …) and play (the ad's instance, hex),
    /// and when its event happened (what `[TIMESTAMP]` says).
    public var event: String?
    public var play: String?
    public var recordedAt: Double?
    /// How long the box would have waited for it (a request that did not answer: its deadline).
    public var waited: Double?
    public var comment: String?

    public init(kind: Kind, started: Double, url: String) {
        self.kind = kind
        self.started = started
        self.url = url
    }
}

/// The fetcher of a simulation's ad sources: each exchange through the real reader (`live`), or
/// answered from a recording (`replay`), and recorded either way.
///
/// Replay: a request takes the first recorded answer not yet used with the same method and URL;
/// failing that (a URL with a new cache-buster, after one's own changes), the first unused one
/// with the same method, host and path; failing that, the request fails as a network failure
/// would — and says so in its entry's comment.
///
/// A server that accepts and never answers costs the run a bounded real time (`realWait`, 1 s
/// by default): the request fails as its timeout (the box would have waited its deadline —
/// recorded in the entry), and the host is not asked again for `quietAfterTimeout` seconds of
/// simulated time (its requests fail at once, said in their entries), then tried once more.
/// So a day against a dead server costs at most a second every ten simulated minutes.
public final class SimulationHTTP: BoundedFetcher {
    public enum Source: Sendable {
        case live(any BoundedFetcher)
        case replay([RecordedExchange])
    }

    private let source: Source
    private let environment: AdEnvironment
    private let replayUsed = Locked<Set<Int>>([])
    private let listener = Hook<RecordedExchange>()
    private let counted = Locked(0)
    /// Hosts that did not answer, and until when (simulated wall time) they are not asked.
    private let quiet = Locked<[String: Double]>([:])
    /// The longest real wait for an answer.
    public let realWait: Double
    public static let quietAfterTimeout = 600.0
    /// Bodies kept in the recording (and `requests.har`) at most this long each; a longer one is
    /// cut, and its entry says so (a replay of it then fails).
    public static let maxKeptBody = 32 << 20

    public init(_ source: Source, environment: AdEnvironment, realWait: Double = 1) {
        self.source = source
        self.environment = environment
        self.realWait = realWait
    }

    /// Hears each exchange once it is made (the run writes them out as it goes).
    public func listen(_ listener: @escaping @Sendable (RecordedExchange) -> Void) { self.listener.set(listener) }

    /// Requests made so far.
    public var count: Int { counted.withLock { $0 } }

    /// The exchange, made while the asking task waits without giving up its thread: a
    /// simulation's tasks run on one thread, so nothing else moves meanwhile and the run goes
    /// the same way whatever the network's timing — and the same live or replayed.
    public func exchange(_ request: HTTPRequest, limits: HTTPLimits) async throws -> HTTPResponse {
        var entry = RecordedExchange(kind: .request, started: environment.wall(), url: request.url)
        entry.method = request.method
        entry.requestHeaders = request.headers
        entry.requestBody = request.body
        let result: Result<HTTPResponse, any Error>
        switch source {
        case .live(let fetcher):
            let host = URLComponents(string: request.url)?.host ?? ""
            if let until = quiet.withLock({ $0[host] }), environment.wall() < until {
                entry.failure = "\(request.url): no answer (the host did not answer at its last request; not asked again until \(ISO8601.format(until)))"
                entry.waited = limits.deadline
                entry.comment = "not asked: the host did not answer lately"
                result = .failure(FetchError(kind: .timeout, url: request.url))
                break
            }
            var shortened = limits
            shortened.deadline = min(limits.deadline, realWait)
            let bounded = shortened
            do {
                let response = try Blocking.run { try await fetcher.exchange(request, limits: bounded) }.get()
                entry.status = response.status
                keep(response.body, in: &entry)
                result = .success(response)
            } catch let error as FetchError where error.kind == .timeout {
                entry.failure = String(describing: error)
                entry.waited = limits.deadline
                entry.comment = "no answer within \(String(format: "%g", realWait)) s of real time: the box waits \(String(format: "%g", limits.deadline)) s"
                let until = environment.wall() + Self.quietAfterTimeout
                quiet.withLock { $0[host] = until }
                result = .failure(error)
            } catch {
                entry.failure = String(describing: error)
                result = .failure(error)
            }
        case .replay(let recording):
            result = answer(request, limits: limits, from: recording, &entry)
        }
        counted.withLock { $0 += 1 }
        listener(entry)
        return try result.get()
    }
    private func answer(_ request: HTTPRequest, limits: HTTPLimits, from recording: [RecordedExchange],
                        _ entry: inout RecordedExchange) -> Result<HTTPResponse, any Error> {
        guard let index = replayIndex(request, recording) else {
            entry.failure = "no answer recorded for it"
            entry.comment = "replay: no answer recorded for \(request.method) \(request.url)"
            return .failure(FetchError(kind: .network("no answer recorded for it (--replay)"), url: request.url))
        }
        let answer = recording[index]
        if let failure = answer.failure {
            entry.failure = failure
            // Told as it was live ("URL: why"), as a network failure.
            let why = failure.hasPrefix(request.url + ": ") ? String(failure.dropFirst(request.url.count + 2)) : failure
            return .failure(FetchError(kind: .network(why), url: request.url))
        }
        entry.status = answer.status
        entry.body = answer.body
        guard answer.body.count <= limits.maxBytes else { return .failure(FetchError(kind: .tooLarge, url: request.url)) }
        return .success(HTTPResponse(status: answer.status, body: answer.body))
    }

    private func keep(_ body: Data, in entry: inout RecordedExchange) {
        if body.count > Self.maxKeptBody {
            entry.body = body.prefix(Self.maxKeptBody)
            entry.comment = "body cut at \(Self.maxKeptBody) bytes of \(body.count)"
        } else {
            entry.body = body
        }
    }

    private func replayIndex(_ request: HTTPRequest, _ recording: [RecordedExchange]) -> Int? {
        replayUsed.withLock { used in
            func take(_ matches: (RecordedExchange) -> Bool) -> Int? {
                guard let index = recording.indices.first(where: { !used.contains($0) && recording[$0].kind == .request && matches(recording[$0]) })
                else { return nil }
                used.insert(index)
                return index
            }
            if let exact = take({ $0.method == request.method && $0.url == request.url }) { return exact }
            let place = Self.place(request.url)
            return take { $0.method == request.method && Self.place($0.url) == place }
        }
    }

    /// Scheme, host and path: a URL without its query.
    static func place(_ url: String) -> String {
        String(url.prefix { $0 != "?" && $0 != "#" })
    }
}

/// HAR 1.2 (http://www.softwareishard.com/blog/har-12-spec/): written from, and read back into,
/// `RecordedExchange`s. Times are the simulation's; `time` and `timings` are 0 in `--virtual`
/// (a request takes no simulated time). Our own fields start with `_`, as HAR allows.
public enum HAR {
    public static func document(_ exchanges: [RecordedExchange], creator: String) -> JSONValue {
        let entries = exchanges.map(entry)
        return ["log": ["version": "1.2", "creator": ["name": "adplayerd simulate", "version": .string(creator)],
                        "pages": [], "entries": .array(entries)]]
    }

    static func entry(_ exchange: RecordedExchange) -> JSONValue {
        let query: [JSONValue] = (URLComponents(string: exchange.url)?.queryItems ?? []).map {
            ["name": .string($0.name), "value": .string($0.value ?? "")]
        }
        let headers: [JSONValue] = exchange.requestHeaders.keys.sorted().map { ["name": .string($0), "value": .string(exchange.requestHeaders[$0]!)] }
        var request: [String: JSONValue] = ["method": .string(exchange.method), "url": .string(exchange.url), "httpVersion": "HTTP/1.1",
                                            "cookies": [], "headers": .array(headers), "queryString": .array(query),
                                            "headersSize": -1, "bodySize": .int(Int64(exchange.requestBody?.count ?? 0))]
        if let body = exchange.requestBody {
            request["postData"] = ["mimeType": .string(exchange.requestHeaders["Content-Type"] ?? "application/octet-stream"),
                                   "text": .string(String(decoding: body, as: UTF8.self))]
        }
        var content: [String: JSONValue] = ["size": .int(Int64(exchange.body.count)), "mimeType": .string(mimeType(exchange))]
        if !exchange.body.isEmpty {
            if let text = String(data: exchange.body, encoding: .utf8), !text.contains("\0") {
                content["text"] = .string(text)
            } else {
                content["text"] = .string(exchange.body.base64EncodedString())
                content["encoding"] = "base64"
            }
        }
        let response: JSONValue = ["status": .int(Int64(exchange.status)), "statusText": .string(statusText(exchange)),
                                   "httpVersion": exchange.status == 0 ? "" : "HTTP/1.1", "cookies": [], "headers": [],
                                   "content": .object(content), "redirectURL": "", "headersSize": -1,
                                   "bodySize": exchange.status == 0 ? -1 : .int(Int64(exchange.body.count))]
        let waited = exchange.waited.map { JSONValue.number(($0 * 1000).rounded()) } ?? 0
        var object: [String: JSONValue] = ["startedDateTime": .string(ISO8601.format(exchange.started)), "time": waited,
                                           "request": .object(request), "response": response, "cache": [:],
                                           "timings": ["send": 0, "wait": 0, "receive": 0], "_kind": .string(exchange.kind.rawValue)]
        if let comment = exchange.comment { object["comment"] = .string(comment) }
        if let failure = exchange.failure { object["_error"] = .string(failure) }
        if let event = exchange.event { object["_event"] = .string(event) }
        if let play = exchange.play { object["_play"] = .string(play) }
        if let recorded = exchange.recordedAt { object["_recorded"] = .string(ISO8601.format(recorded)) }
        return .object(object)
    }

    /// A HAR file written as the run goes (nothing kept in memory): the document's head, each
    /// entry as it comes, the tail at `close`.
    public final class Writer: @unchecked Sendable {
        // @unchecked: the handle behind the lock.
        private let file = Locked<(handle: FileHandle, first: Bool)?>(nil)

        public init(path: String, creator: String) throws {
            FileManager.default.createFile(atPath: path, contents: nil)
            guard let handle = FileHandle(forWritingAtPath: path) else { throw UsageError("\(path): cannot be written") }
            let head = "{\"log\":{\"version\":\"1.2\",\"creator\":{\"name\":\"adplayerd simulate\",\"version\":" + JSONValue.string(creator).text
                + "},\"pages\":[],\"entries\":[\n"
            handle.write(Data(head.utf8))
            file.withLock { $0 = (handle, true) }
        }

        public func add(_ exchange: RecordedExchange) {
            let text = HAR.entry(exchange).text
            file.withLock { file in
                guard let current = file else { return }
                current.handle.write(Data(((current.first ? "" : ",\n") + text).utf8))
                file?.first = false
            }
        }

        public func close() {
            file.withLock { file in
                file?.handle.write(Data("\n]}}\n".utf8))
                try? file?.handle.close()
                file = nil
            }
        }
    }

    private static func statusText(_ exchange: RecordedExchange) -> String {
        if exchange.status == 0 { return exchange.failure ?? "" }
        let names = [200: "OK", 201: "Created", 204: "No Content", 301: "Moved Permanently", 302: "Found", 304: "Not Modified",
                     400: "Bad Request", 403: "Forbidden", 404: "Not Found", 410: "Gone", 429: "Too Many Requests",
                     500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"]
        return names[exchange.status] ?? "HTTP \(exchange.status)"
    }

    private static func mimeType(_ exchange: RecordedExchange) -> String {
        guard !exchange.body.isEmpty else { return "" }
        if exchange.body.starts(with: Array("<?xml".utf8)) || exchange.body.starts(with: Array("<VAST".utf8))
            || exchange.body.starts(with: Array("<vmap".utf8)) { return "application/xml" }
        if exchange.body.starts(with: Array("{".utf8)) { return "application/json" }
        return "application/octet-stream"
    }

    /// The exchanges of a HAR file (ours or any tool's: what it lacks is taken as empty).
    public static func read(_ data: Data) throws -> [RecordedExchange] {
        let json: JSONValue
        do {
            json = try JSONValue.parse(data)
        } catch {
            throw UsageError("--replay: not JSON: \(error)")
        }
        guard case .object(let top) = json, case .object(let log)? = top["log"], case .array(let entries)? = log["entries"] else {
            throw UsageError("--replay: not a HAR file (no log.entries)")
        }
        return try entries.enumerated().map { index, value in
            guard case .object(let entry) = value, case .object(let request)? = entry["request"], case .string(let url)? = request["url"]
            else { throw UsageError("--replay: log.entries[\(index)]: no request.url") }
            let started = entry["startedDateTime"].flatMap { if case .string(let t) = $0 { ISO8601.parse(t) } else { nil } } ?? 0
            var exchange = RecordedExchange(kind: entry["_kind"] == .string("beacon") ? .beacon : .request, started: started, url: url)
            if case .string(let method)? = request["method"] { exchange.method = method }
            if case .object(let response)? = entry["response"] {
                if case .int(let status)? = response["status"] { exchange.status = Int(status) }
                if case .object(let content)? = response["content"], case .string(let text)? = content["text"] {
                    exchange.body = content["encoding"] == .string("base64") ? (Data(base64Encoded: text) ?? Data()) : Data(text.utf8)
                }
            }
            if case .string(let failure)? = entry["_error"] { exchange.failure = failure }
            if exchange.status == 0, exchange.failure == nil, exchange.kind == .request { exchange.failure = "no answer" }
            return exchange
        }
    }
}
