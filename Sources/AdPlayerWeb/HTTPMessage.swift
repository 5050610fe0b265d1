import Bounds
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// A request as the server took it: its head parsed and checked, its body read (bounded).
public struct HTTPRequest: Sendable, Equatable {
    public var method: String
    /// The path, percent-decoded, without the query.
    public var path: String
    /// The query's parameters, percent-decoded (the first of each name).
    public var query: [String: String]
    public var version: String
    /// Header names in lower case; a repeated header's values joined with ", ".
    public var headers: [String: String]
    public var body: [UInt8] = []

    public func header(_ name: String) -> String? { headers[name.lowercased()] }

    /// HTTP/1.1 keeps the connection unless told to close; HTTP/1.0 closes unless told to keep it.
    public var keepAlive: Bool {
        let connection = header("connection")?.lowercased() ?? ""
        return version == "HTTP/1.1" ? !connection.contains("close") : connection.contains("keep-alive")
    }
}

/// A refusal with its HTTP status: what the client sent cannot be taken.
public struct HTTPError: Error, Sendable, Equatable, CustomStringConvertible {
    public let status: Int
    public let message: String
    public init(_ status: Int, _ message: String) {
        self.status = status
        self.message = message
    }
    public var description: String { "\(status) \(message)" }
}

/// A response: its status, headers and body, or a stream of Server-Sent Events.
public struct HTTPResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: [UInt8]
    /// Server-Sent Events: the connection stays open and the stream's messages are written.
    public var stream: EventStream?
    /// Runs when a stream's connection ends.
    public var closeAction: (@Sendable () -> Void)?

    public init(status: Int, headers: [(String, String)] = [], body: [UInt8] = [], stream: EventStream? = nil) {
        self.status = status
        self.headers = headers
        self.body = body
        self.stream = stream
    }

    public static func text(_ status: Int, _ text: String, type: String = "text/plain; charset=utf-8") -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", type)], body: Array(text.utf8))
    }

    /// A JSON error body: `{"error": {"status", "message"}}` (never a stack trace).
    public static func error(_ status: Int, _ message: String, headers: [(String, String)] = []) -> HTTPResponse {
        let body = "{\"error\":{\"status\":\(status),\"message\":\(HTTPResponse.jsonString(message))}}\n"
        return HTTPResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: Array(body.utf8))
    }

    static func jsonString(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F || scalar == "<" || scalar == ">" || scalar == "&" {
                    out += "\\u" + hex(scalar.value, width: 4)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out + "\""
    }

    public static let reasons: [Int: String] = [
        200: "OK", 204: "No Content", 304: "Not Modified", 400: "Bad Request", 401: "Unauthorized", 403: "Forbidden", 404: "Not Found",
        405: "Method Not Allowed", 408: "Request Timeout", 411: "Length Required", 413: "Content Too Large", 414: "URI Too Long",
        415: "Unsupported Media Type", 421: "Misdirected Request", 422: "Unprocessable Content", 429: "Too Many Requests",
        431: "Request Header Fields Too Large", 500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway",
        503: "Service Unavailable", 504: "Gateway Timeout", 505: "HTTP Version Not Supported",
    ]

    /// The status line and headers (the body follows). Every response says what it is, how
    /// long it is, and that nothing from elsewhere may run in it.
    func head(keepAlive: Bool, method: String) -> [UInt8] {
        var text = "HTTP/1.1 \(status) \(Self.reasons[status] ?? "Status")\r\n"
        var names = Set<String>()
        for (name, value) in headers {
            names.insert(name.lowercased())
            text += "\(name): \(value)\r\n"
        }
        if stream == nil {
            text += "Content-Length: \(body.count)\r\n"
        }
        if !names.contains("cache-control") { text += "Cache-Control: no-store\r\n" }
        text += "X-Content-Type-Options: nosniff\r\nX-Frame-Options: DENY\r\nReferrer-Policy: no-referrer\r\n"
        text += "Content-Security-Policy: default-src 'self'; frame-ancestors 'none'\r\n"
        text += keepAlive && stream == nil ? "Connection: keep-alive\r\n" : "Connection: close\r\n"
        text += "\r\n"
        return Array(text.utf8)
    }
}

/// Reads a request's head from bytes, by the limits (docs/web.md): at most `maxHeadBytes`
/// (431 beyond), at most `maxHeaders` lines, methods GET, HEAD and POST only, HTTP/1.0 and 1.1,
/// no NUL or control bytes, no `..` in a path, one length at most and never with
/// Transfer-Encoding (request smuggling): a clear 4xx or 5xx for each, never a crash.
public enum HTTPParser {
    public static let maxHeadBytes = 8 * 1024
    public static let maxBodyBytes = 64 * 1024
    public static let maxHeaders = 100
    static let methods: Set<String> = ["GET", "HEAD", "POST"]
    static let knownMethods: Set<String> = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "TRACE", "CONNECT"]

    /// Where the head ends in `bytes` (the index after `\r\n\r\n`), nil if it has not yet.
    public static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 3..<bytes.count where bytes[i] == 10 && bytes[i - 1] == 13 && bytes[i - 2] == 10 && bytes[i - 3] == 13 {
            return i + 1
        }
        return nil
    }

    /// Parses a head (the bytes up to and including the blank line). The body's length
    /// follows from it (`bodyLength`).
    public static func parse(head bytes: ArraySlice<UInt8>) throws(HTTPError) -> HTTPRequest {
        guard bytes.count <= maxHeadBytes else { throw HTTPError(431, "the request's head is over \(maxHeadBytes) bytes") }
        guard !bytes.contains(0) else { throw HTTPError(400, "a NUL byte in the request's head") }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw HTTPError(400, "the request's head is not UTF-8") }
        var lines = text.pieces(separatedBy: "\r\n")
        while lines.last == "" { lines.removeLast() }
        guard let requestLine = lines.first, !requestLine.isEmpty else { throw HTTPError(400, "no request line") }
        guard lines.count - 1 <= maxHeaders else { throw HTTPError(431, "more than \(maxHeaders) header lines") }
        let parts = requestLine.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3 else { throw HTTPError(400, "the request line is not METHOD TARGET VERSION") }
        let method = String(parts[0]), target = String(parts[1]), version = String(parts[2])
        guard version == "HTTP/1.1" || version == "HTTP/1.0" else {
            throw version.hasPrefix("HTTP/") ? HTTPError(505, "only HTTP/1.0 and HTTP/1.1") : HTTPError(400, "not an HTTP request")
        }
        guard methods.contains(method) else {
            throw knownMethods.contains(method) ? HTTPError(405, "\(method) is not taken here (GET, HEAD, POST)")
                : HTTPError(501, "\(method.prefix(32)) is not a method this server knows")
        }
        var headers: [String: String] = [:]
        for line in lines.dropFirst() {
            guard !line.isEmpty else { continue }
            // Obsolete line folding and whitespace before the colon are smuggling tools: refused.
            guard let first = line.unicodeScalars.first, first != " ", first != "\t" else { throw HTTPError(400, "a folded header line") }
            guard let colon = line.firstIndex(of: ":") else { throw HTTPError(400, "a header line without a colon") }
            let name = String(line[..<colon])
            guard !name.isEmpty, name.unicodeScalars.allSatisfy(isTokenCharacter) else { throw HTTPError(400, "a header name that is not a token") }
            let value = line[line.index(after: colon)...].trimmedSpaces()
            guard value.unicodeScalars.allSatisfy({ $0 == "\t" || ($0.value >= 0x20 && $0.value != 0x7F) }) else {
                throw HTTPError(400, "a control character in header \(name.prefix(64))")
            }
            let key = name.lowercased()
            if key == "content-length" || key == "host" || key == "transfer-encoding" || key == "authorization", headers[key] != nil {
                throw HTTPError(400, "two \(name) headers")
            }
            headers[key] = headers[key].map { $0 + ", " + value } ?? value
        }
        if version == "HTTP/1.1", headers["host"] == nil { throw HTTPError(400, "HTTP/1.1 needs a Host header") }
        let (path, query) = try parseTarget(target)
        return HTTPRequest(method: method, path: path, query: query, version: version, headers: headers)
    }

    /// The body's length: none, or a Content-Length within `maxBodyBytes`. Transfer-Encoding
    /// is refused (this server takes no chunked bodies), and with a length it is smuggling.
    public static func bodyLength(_ request: HTTPRequest) throws(HTTPError) -> Int {
        let length = request.header("content-length")
        if request.header("transfer-encoding") != nil {
            throw length != nil ? HTTPError(400, "both Content-Length and Transfer-Encoding") : HTTPError(411, "chunked bodies are not taken: send Content-Length")
        }
        guard let length else { return 0 }
        guard !length.isEmpty, length.utf8.count <= 12, length.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), let n = Int(length) else {
            throw HTTPError(400, "Content-Length is not a number")
        }
        guard n <= maxBodyBytes else { throw HTTPError(413, "the body is over \(maxBodyBytes) bytes") }
        return n
    }

    static func isTokenCharacter(_ c: Unicode.Scalar) -> Bool {
        c.isASCII && (c.properties.isAlphabetic || ("0"..."9").contains(c) || "!#$%&'*+-.^_`|~".unicodeScalars.contains(c))
    }

    /// An origin-form target: `/path?query`. Percent-decoding that gives a NUL, a control
    /// character, a backslash or a `..` segment is refused.
    static func parseTarget(_ target: String) throws(HTTPError) -> (String, [String: String]) {
        guard target.hasPrefix("/") else { throw HTTPError(400, "the target must be a path (origin form)") }
        guard target.utf8.count <= 2048 else { throw HTTPError(414, "the target is over 2048 bytes") }
        let pieces = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard let path = decode(String(pieces[0])) else { throw HTTPError(400, "the path is not percent-encoded UTF-8") }
        guard !path.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F || $0 == "\\" }) else {
            throw HTTPError(400, "a control character or a backslash in the path")
        }
        guard !path.split(separator: "/", omittingEmptySubsequences: false).contains(where: { $0 == ".." || $0 == "." }) else {
            throw HTTPError(400, "a . or .. segment in the path")
        }
        var query: [String: String] = [:]
        if pieces.count == 2 {
            for pair in pieces[1].split(separator: "&") where !pair.isEmpty {
                let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                guard let name = decode(String(kv[0]).replacingAll("+", with: " ")),
                      let value = decode(kv.count > 1 ? String(kv[1]).replacingAll("+", with: " ") : ""),
                      !name.unicodeScalars.contains(where: { $0.value < 0x20 }), !value.unicodeScalars.contains(where: { $0.value < 0x20 }) else {
                    throw HTTPError(400, "the query is not percent-encoded UTF-8 text")
                }
                if query[name] == nil { query[name] = value }
            }
        }
        return (path, query)
    }

    /// Percent-decoding; nil for a bad escape or bytes that are not UTF-8.
    static func decode(_ text: String) -> String? {
        var bytes: [UInt8] = []
        var iterator = Array(text.utf8)[...]
        while let byte = iterator.popFirst() {
            if byte == UInt8(ascii: "%") {
                guard iterator.count >= 2, let value = UInt8(String(decoding: iterator.prefix(2), as: UTF8.self), radix: 16) else { return nil }
                bytes.append(value)
                iterator = iterator.dropFirst(2)
            } else {
                bytes.append(byte)
            }
        }
        return String(validating: bytes, as: UTF8.self)
    }
}

/// A response can be thrown where a handler refuses early (`Result<_, HTTPResponse>`).
extension HTTPResponse: Error {}
