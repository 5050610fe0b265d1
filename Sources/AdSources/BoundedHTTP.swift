import AdRuntime
import CCurl
import Foundation

/// What a fetch may cost at most: every limit is enforced while the exchange runs, not
/// after — bytes as they arrive, time as a deadline for the whole exchange.
public struct HTTPLimits: Sendable, Equatable {
    /// The body's size; more is refused as it arrives (an endless chunked answer stops here).
    public var maxBytes: Int
    /// The whole exchange: connect, redirects, headers and body (1 byte/s stops here).
    public var deadline: Double
    /// Redirects followed, http(s) only.
    public var maxRedirects = 5

    public init(maxBytes: Int, deadline: Double, maxRedirects: Int = 5) {
        self.maxBytes = maxBytes
        self.deadline = deadline
        self.maxRedirects = maxRedirects
    }
}

public struct HTTPRequest: Sendable, Equatable {
    public var url: String
    public var method: String
    public var headers: [String: String]
    public var body: Data?

    public init(url: String, method: String = "GET", headers: [String: String] = [:], body: Data? = nil) {
        self.url = url
        self.method = method
        self.headers = headers
        self.body = body
    }
}

public struct HTTPResponse: Sendable, Equatable {
    public var status: Int
    public var body: Data

    public init(status: Int, body: Data) {
        self.status = status
        self.body = body
    }
}

/// Why a fetch gave nothing usable, naming the URL once.
public struct FetchError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: Sendable, Equatable {
        case timeout, tooLarge, http(Int), network(String), notHTTP, tooManyRedirects, cancelled
        /// The answer arrived but the box could not store it (a full disk, a read-only or
        /// over-quota file system): `errno` as the file system gave it.
        case cannotStore(path: String, errno: Int32)
    }
    public let kind: Kind
    public let url: String

    public init(kind: Kind, url: String) {
        self.kind = kind
        self.url = url
    }

    public var description: String {
        switch kind {
        case .timeout: "\(url): no complete answer in time"
        case .tooLarge: "\(url): the answer is larger than allowed"
        case .http(let status): "\(url): HTTP \(status)"
        case .network(let why): "\(url): \(why)"
        case .notHTTP: "\(url): only http(s) URLs are fetched (also when redirected)"
        case .tooManyRedirects: "\(url): too many redirects"
        case .cancelled: "\(url): cancelled"
        case .cannotStore(let path, let code): "\(url): cannot write \(path): \(String(cString: strerror(code)))"
        }
    }
}

/// Fetches over http(s) within limits. The ad sources, the post-roll probe and the beacons
/// all go through one (`BoundedHTTP`).
public protocol BoundedFetcher: Sendable {
    /// Sends `request` and returns the answer, whatever its status, or throws `FetchError`
    /// (never a partial body over the limits).
    func exchange(_ request: HTTPRequest, limits: HTTPLimits) async throws -> HTTPResponse
}

extension BoundedFetcher {
    /// A 2xx answer's body written to `path` (created, or truncated), its size returned; or
    /// `FetchError` (the file then holds whatever arrived: the caller removes it). A fetcher
    /// that streams (`BoundedHTTP`) never holds the body in memory; this default does.
    public func download(_ request: HTTPRequest, to path: String, limits: HTTPLimits) async throws -> Int {
        let body = try await fetch(request, limits: limits)
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw FetchError(kind: .cannotStore(path: path, errno: errno), url: request.url) }
        defer { close(fd) }
        let code = body.withUnsafeBytes { writeAll(fd, $0.baseAddress, $0.count) }
        if code != 0 { throw FetchError(kind: .cannotStore(path: path, errno: code), url: request.url) }
        return body.count
    }

    /// A 2xx answer's body, or `FetchError`.
    public func fetch(_ request: HTTPRequest, limits: HTTPLimits) async throws -> Data {
        let response = try await exchange(request, limits: limits)
        guard (200..<300).contains(response.status) else { throw FetchError(kind: .http(response.status), url: request.url) }
        return response.body
    }

    public func fetch(_ url: String, limits: HTTPLimits) async throws -> Data {
        try await fetch(HTTPRequest(url: url), limits: limits)
    }
}

/// The one bounded HTTP reader: libcurl's easy interface on threads of its own (`Workers`),
/// http and https only — for the first URL and every redirect (no `file://`, `ftp://`, …) —
/// with the body's size enforced as bytes arrive and a deadline for the whole exchange.
/// No compressed answers are asked for (a small body that inflates is no way around the
/// limit). Cancelling the awaiting task aborts the transfer.
///
/// Threading: any thread; at most `threads` exchanges at once, the rest wait their turn.
public final class BoundedHTTP: BoundedFetcher {
    private let workers: Workers

    public init(threads: Int = 4) {
        workers = Workers(name: "adplayerd-http", threads: threads)
    }

    /// libcurl's (and OpenSSL's) set-up, at the first exchange: a box whose ads are all local
    /// never pays its ~3 MiB (docs/benchmarks.md, memory).
    private static let globalInit: Void = { curl_global_init(Int(CURL_GLOBAL_DEFAULT)) }()

    public func exchange(_ request: HTTPRequest, limits: HTTPLimits) async throws -> HTTPResponse {
        guard let parsed = URL(string: request.url), let scheme = parsed.scheme?.lowercased(),
              scheme == "http" || scheme == "https", parsed.host != nil else {
            throw FetchError(kind: .notHTTP, url: request.url)
        }
        return try await run(Transfer(request: request, limits: limits, sink: nil))
    }

    /// Streams the body to `path` as it arrives (a post-roll of tens of MiB never sits in memory).
    public func download(_ request: HTTPRequest, to path: String, limits: HTTPLimits) async throws -> Int {
        guard let parsed = URL(string: request.url), let scheme = parsed.scheme?.lowercased(),
              scheme == "http" || scheme == "https", parsed.host != nil else {
            throw FetchError(kind: .notHTTP, url: request.url)
        }
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { throw FetchError(kind: .cannotStore(path: path, errno: errno), url: request.url) }
        defer { close(fd) }
        let transfer = Transfer(request: request, limits: limits, sink: fd)
        let response: HTTPResponse
        do {
            response = try await run(transfer)
        } catch let error as FetchError where transfer.sinkErrno != 0 {
            _ = error
            throw FetchError(kind: .cannotStore(path: path, errno: transfer.sinkErrno), url: request.url)
        }
        guard (200..<300).contains(response.status) else { throw FetchError(kind: .http(response.status), url: request.url) }
        if transfer.sinkErrno != 0 { throw FetchError(kind: .cannotStore(path: path, errno: transfer.sinkErrno), url: request.url) }
        return transfer.received
    }

    private func run(_ transfer: Transfer) async throws -> HTTPResponse {
        _ = Self.globalInit
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                workers.execute { continuation.resume(with: transfer.perform()) }
            }
        } onCancel: {
            transfer.cancel()
        }
    }
}

/// One exchange: its limits, its body so far, and whether it was cancelled.
private final class Transfer: @unchecked Sendable {
    // @unchecked: `body` and `overflow` are touched only by the worker running `perform` (and
    // libcurl's callbacks it calls on that thread); `cancelled` is behind its lock.
    let request: HTTPRequest
    let limits: HTTPLimits
    /// Where the body goes when it is not kept in memory: an open file.
    let sink: Int32?
    var body = Data()
    var received = 0
    var overflow = false
    /// Why the body could not be written to `sink` (0: it could).
    var sinkErrno: Int32 = 0
    private let cancelled = Locked(false)

    init(request: HTTPRequest, limits: HTTPLimits, sink: Int32?) {
        self.request = request
        self.limits = limits
        self.sink = sink
    }

    func cancel() { cancelled.withLock { $0 = true } }
    var isCancelled: Bool { cancelled.withLock { $0 } }

    func perform() -> Result<HTTPResponse, any Error> {
        let url = request.url
        func fail(_ kind: FetchError.Kind) -> Result<HTTPResponse, any Error> { .failure(FetchError(kind: kind, url: url)) }
        if isCancelled { return fail(.cancelled) }
        guard let curl = curl_easy_init() else { return fail(.network("cannot start a transfer")) }
        defer { curl_easy_cleanup(curl) }
        let deadline = Int(LoopTime.nanoseconds(limits.deadline) / 1_000_000)
        var headers: UnsafeMutablePointer<curl_slist>?
        defer { curl_slist_free_all(headers) }
        for (name, value) in request.headers.sorted(by: { $0.key < $1.key }) {
            // A header from outside must not smuggle another one.
            guard !(name + value).contains(where: { $0 == "\r" || $0 == "\n" }) else { return fail(.network("bad header \(name)")) }
            headers = curl_slist_append(headers, "\(name): \(value)")
        }
        let context = Unmanaged.passUnretained(self).toOpaque()
        ccurl_set_string(curl, CURLOPT_URL, url)
        ccurl_set_string(curl, CURLOPT_PROTOCOLS_STR, "http,https")
        ccurl_set_string(curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        ccurl_set_long(curl, CURLOPT_FOLLOWLOCATION, 1)
        ccurl_set_long(curl, CURLOPT_MAXREDIRS, limits.maxRedirects)
        ccurl_set_long(curl, CURLOPT_TIMEOUT_MS, max(1, deadline))
        ccurl_set_long(curl, CURLOPT_CONNECTTIMEOUT_MS, max(1, min(deadline, 5_000)))
        ccurl_set_long(curl, CURLOPT_NOSIGNAL, 1)
        ccurl_set_off(curl, CURLOPT_MAXFILESIZE_LARGE, curl_off_t(limits.maxBytes))
        ccurl_set_string(curl, CURLOPT_USERAGENT, UserAgent.string)
        ccurl_set_list(curl, CURLOPT_HTTPHEADER, headers)
        ccurl_set_write(curl, transferWrite)
        ccurl_set_pointer(curl, CURLOPT_WRITEDATA, context)
        ccurl_set_progress(curl, transferProgress)
        ccurl_set_pointer(curl, CURLOPT_XFERINFODATA, context)
        ccurl_set_long(curl, CURLOPT_NOPROGRESS, 0)
        if let data = request.body {
            ccurl_set_off(curl, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(data.count))
            let copied = data.withUnsafeBytes { ccurl_set_pointer(curl, CURLOPT_COPYPOSTFIELDS, UnsafeMutableRawPointer(mutating: $0.baseAddress)) }
            if copied != CURLE_OK { return fail(.network("cannot send the request's body")) }
        }
        if request.method != "GET" && !(request.method == "POST" && request.body != nil) {
            ccurl_set_string(curl, CURLOPT_CUSTOMREQUEST, request.method)
        }
        let code = curl_easy_perform(curl)
        switch code {
        case CURLE_OK:
            return .success(HTTPResponse(status: Int(ccurl_response_code(curl)), body: body))
        case CURLE_OPERATION_TIMEDOUT:
            return fail(.timeout)
        case CURLE_FILESIZE_EXCEEDED:
            return fail(.tooLarge)
        case CURLE_WRITE_ERROR where overflow:
            return fail(.tooLarge)
        case CURLE_WRITE_ERROR where sinkErrno != 0:
            return fail(.network("the body could not be written to its file"))
        case CURLE_ABORTED_BY_CALLBACK:
            return fail(.cancelled)
        case CURLE_UNSUPPORTED_PROTOCOL:
            return fail(.notHTTP)
        case CURLE_TOO_MANY_REDIRECTS:
            return fail(.tooManyRedirects)
        default:
            return fail(.network(String(cString: curl_easy_strerror(code))))
        }
    }
}

/// libcurl's body callback: appends, or stops the transfer at the limit.
private let transferWrite: ccurl_write_fn = { data, size, count, context in
    guard let data, let context else { return 0 }
    let transfer = Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue()
    let length = size * count
    guard transfer.received + length <= transfer.limits.maxBytes else {
        transfer.overflow = true
        return 0   // fewer bytes than given: libcurl stops with CURLE_WRITE_ERROR
    }
    transfer.received += length
    if let sink = transfer.sink {
        let code = writeAll(sink, data, length)
        guard code == 0 else {
            transfer.sinkErrno = code
            return 0
        }
        return length
    }
    transfer.body.append(UnsafeRawPointer(data).assumingMemoryBound(to: UInt8.self), count: length)
    return length
}

/// libcurl's progress callback: a cancelled task aborts its transfer.
private let transferProgress: ccurl_progress_fn = { context, _, _, _, _ in
    guard let context else { return 0 }
    return Unmanaged<Transfer>.fromOpaque(context).takeUnretainedValue().isCancelled ? 1 : 0
}

/// Writes all `count` bytes to `fd` (short writes and EINTR retried): 0, or the errno that
/// stopped it (ENOSPC for a write that made no progress).
func writeAll(_ fd: Int32, _ bytes: UnsafeRawPointer?, _ count: Int) -> Int32 {
    guard let bytes, count > 0 else { return 0 }
    var offset = 0
    while offset < count {
        let n = write(fd, bytes + offset, count - offset)
        if n < 0, errno == EINTR { continue }
        guard n > 0 else { return n == 0 ? ENOSPC : errno }
        offset += n
    }
    return 0
}
