import ClientSupport
import ControlProtocol
import ProcessSupport
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Who may do what on the web (docs/web.md): a role per token, each role a tier of the
/// command table — `viewer` runs what is `read`, `operator` what is `read` or `control`,
/// `admin` everything.
public enum WebRole: String, Sendable, CaseIterable {
    case viewer, `operator`, admin

    public var tier: Tier {
        switch self {
        case .viewer: .read
        case .operator: .control
        case .admin: .admin
        }
    }
}

/// The tokens of `web-token-file`: lines `ROLE TOKEN` (`#` comments), the file the server's
/// own and 0600 (or 0400) or refused, each token at least 16 characters. A request presents
/// one as `Authorization: Bearer TOKEN` or as the password of Basic auth (any user name).
/// Without a token file (only allowed on loopback), requests need none and act as `operator`:
/// an admin's command needs a token.
public struct WebAuth: Sendable {
    public let tokens: [(token: [UInt8], role: WebRole)]
    /// True when a token is needed (a token file was given).
    public let required: Bool

    public static let open = WebAuth(tokens: [], required: false)

    init(tokens: [(token: [UInt8], role: WebRole)], required: Bool) {
        self.tokens = tokens
        self.required = required
    }

    /// Reads `path` (at most 64 KiB), checking its mode and each line.
    public static func load(_ path: String) throws(UsageError) -> WebAuth {
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { throw UsageError("web-token-file: \(path): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { throw UsageError("web-token-file: \(path): not a regular file") }
        guard info.st_mode & 0o077 == 0 else {
            throw UsageError("web-token-file: \(path) is readable by others (mode \(String(info.st_mode & 0o777, radix: 8))): chmod 600 it")
        }
        // Its owner is this user (or root): a file another user owns could be rewritten by them.
        guard info.st_uid == geteuid() || info.st_uid == 0 else {
            throw UsageError("web-token-file: \(path) is owned by another user (uid \(info.st_uid)): it must be this user's or root's")
        }
        guard info.st_size <= 65536 else { throw UsageError("web-token-file: \(path): over 64 KiB") }
        var bytes = [UInt8](repeating: 0, count: Int(info.st_size))
        var got = 0
        while got < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + got, $0.count - got) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            got += n
        }
        guard let text = String(validating: bytes[..<got], as: UTF8.self) else { throw UsageError("web-token-file: \(path): not UTF-8 text") }
        return try parse(text, source: path)
    }

    public static func parse(_ text: String, source: String) throws(UsageError) -> WebAuth {
        var tokens: [(token: [UInt8], role: WebRole)] = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmedSpaces()
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard words.count == 2, let role = WebRole(rawValue: String(words[0])) else {
                throw UsageError("web-token-file: \(source):\(index + 1): expected `ROLE TOKEN` (ROLE: viewer, operator or admin)")
            }
            let token = Array(words[1].utf8)
            guard token.count >= 16, token.count <= 256, token.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) else {
                throw UsageError("web-token-file: \(source):\(index + 1): a token is 16 to 256 printable characters")
            }
            guard !tokens.contains(where: { $0.token == token }) else { throw UsageError("web-token-file: \(source):\(index + 1): a token given twice") }
            tokens.append((token, role))
        }
        guard !tokens.isEmpty else { throw UsageError("web-token-file: \(source): no token in it") }
        return WebAuth(tokens: tokens, required: true)
    }

    public enum Outcome: Equatable {
        case role(WebRole)
        /// No token, or one this server does not know (401).
        case unauthorized(String)
    }

    /// The role of a request's `Authorization` header.
    public func role(authorization: String?) -> Outcome {
        guard required else { return .role(.operator) }
        guard let authorization else { return .unauthorized("a token is needed (Authorization: Bearer TOKEN, or Basic auth)") }
        var presented: [UInt8]?
        let parts = authorization.split(separator: " ", maxSplits: 1)
        if parts.count == 2 {
            switch parts[0].lowercased() {
            case "bearer":
                presented = Array(parts[1].trimmedSpaces().utf8)
            case "basic":
                if let data = Data(base64Encoded: String(parts[1]).trimmedSpaces()),
                   let colon = data.firstIndex(of: UInt8(ascii: ":")) {
                    presented = Array(data[data.index(after: colon)...])
                }
            default: break
            }
        }
        guard let presented else { return .unauthorized("Authorization must be Bearer TOKEN or Basic") }
        // Every token compared in full, whatever matches: no timing tells which bytes are right.
        var found: WebRole?
        for entry in tokens where Self.equal(entry.token, presented) { found = entry.role }
        return found.map { .role($0) } ?? .unauthorized("the token is not known")
    }

    static func equal(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(a.count == b.count ? 0 : 1)
        for i in 0..<max(a.count, b.count) { difference |= (i < a.count ? a[i] : 0) ^ (i < b.count ? b[i] : 0) }
        return difference == 0
    }
}
