import Foundation

/// Why one tracking URL is refused: it alone, never the others of its event.
public enum BeaconRefusal: String, Sendable, CaseIterable {
    /// Not http or https (`ftp://`, `javascript:`, a relative URL).
    case notHTTP = "not_http"
    /// No host.
    case noHost = "no_host"
    /// Longer than `BeaconURL.maxBytes`.
    case tooLong = "too_long"
    /// Characters a URL cannot hold (spaces, control characters, quotes), which no server would
    /// parse as sent — refused rather than re-encoded (a value is encoded once, by the macros).
    case malformed
    /// Past the bound of URLs for one event or one ad.
    case tooMany = "too_many"
}

/// One tracking URL, judged alone (R17): http(s), a host, at most 16 KiB, only characters a
/// URL may hold. What passes is sent exactly as it is — nothing re-encodes it.
public enum BeaconURL {
    public static let maxBytes = 16 * 1024

    /// Nil when `url` may be sent; else why not.
    public static func refusal(_ url: String) -> BeaconRefusal? {
        let bytes = Array(url.utf8)
        guard bytes.count <= maxBytes else { return .tooLong }
        let lower = url.prefix(8).lowercased()
        let schemeLength: Int
        if lower.hasPrefix("https://") { schemeLength = 8 } else if lower.hasPrefix("http://") { schemeLength = 7 } else { return .notHTTP }
        for byte in bytes {
            // RFC 3986's characters (unreserved, reserved, '%'); no space, control, quote, brace,
            // backslash, caret, backtick or '|', nothing outside ASCII.
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): continue
            default:
                guard Array("-._~:/?#[]@!$&'()*+,;=%".utf8).contains(byte) else { return .malformed }
            }
        }
        let afterScheme = bytes[schemeLength...]
        let authority = afterScheme.prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        let host = authority.split(separator: UInt8(ascii: "@"), omittingEmptySubsequences: false).last ?? []
        guard !host.isEmpty, host.first != UInt8(ascii: ":") else { return .noHost }
        return nil
    }
}
