import AdRuntime
import Foundation

/// The VAST 4.x macros (IAB's list; VAST 4.3 §6.1) this player fills, in one table for ad
/// requests and tracking URLs alike. docs/ads.md shows the table to ad-ops readers.
///
/// Every `[NAME]` in a URL is replaced: by its value, percent-encoded once for the URL
/// (RFC 3986's unreserved characters stay, everything else is `%XX`: right in a path, a query
/// and a fragment alike, and nothing re-encodes the URL after); by `-1` when the value is
/// unknown or the macro is not one this player supports; by `-2` when policy withholds it
/// (`limit-ad-tracking`). No `[`…`]` leaves the box.
public enum Macro: String, CaseIterable, Sendable {
    case contentID = "CONTENTID"
    case placementType = "PLACEMENTTYPE"
    case breakPosition = "BREAKPOSITION"
    case contentPlayhead = "CONTENTPLAYHEAD"
    case mediaPlayhead = "MEDIAPLAYHEAD"
    case adPlayhead = "ADPLAYHEAD"
    case timestamp = "TIMESTAMP"
    case cacheBusting = "CACHEBUSTING"
    case errorCode = "ERRORCODE"
    case adServingID = "ADSERVINGID"
    case universalAdID = "UNIVERSALADID"
    case limitAdTracking = "LIMITADTRACKING"
    case gdprConsent = "GDPRCONSENT"
    case gppString = "GPPSTRING"
    case gppSectionID = "GPPSECTIONID"
    case ifa = "IFA"
    case ifaType = "IFATYPE"
    case playerSize = "PLAYERSIZE"
    case clientUA = "CLIENTUA"
    case deviceUA = "DEVICEUA"
    case appBundle = "APPBUNDLE"
    case latLong = "LATLONG"
    case transactionID = "TRANSACTIONID"
    case adCount = "ADCOUNT"

    /// What it is, for the documentation and `ads-check`.
    public var meaning: String {
        switch self {
        case .contentID: "the episode's content id (the file name without its extension, or open's content_id)"
        case .placementType: "1: in-stream (IAB's video placement subtypes) — overlays, pause ads and post-rolls alike"
        case .breakPosition: "2 for an overlay (over the content, mid-roll), 4 for a pause ad (standalone), 3 for a post-roll"
        case .contentPlayhead, .mediaPlayhead: "the content's position, HH:MM:SS.mmm (a post-roll's: where the episode ended)"
        case .adPlayhead: "the position in the ad's video, HH:MM:SS.mmm (post-roll progress and quartiles)"
        case .timestamp: "when the event happened, ISO 8601 with milliseconds (UTC); a beacon recorded before the clock was synchronised gets the corrected time"
        case .cacheBusting: "8 random digits"
        case .errorCode: "the VAST error code (Error URLs)"
        case .adServingID: "the VAST response's AdServingId"
        case .universalAdID: "the creative's UniversalAdId, as `registry value`"
        case .limitAdTracking: "1 with limit-ad-tracking, else 0"
        case .gdprConsent: "the configured TCF consent string (gdpr-consent)"
        case .gppString: "the configured GPP string (gpp-string)"
        case .gppSectionID: "the configured applicable GPP section ids (gpp-section-id)"
        case .ifa: "the configured advertising id (ifa); -2 with limit-ad-tracking"
        case .ifaType: "the configured advertising id's type (ifa-type); -2 with limit-ad-tracking"
        case .playerSize: "the output's width,height in pixels"
        case .clientUA, .deviceUA: "the player's User-Agent (adplayerd, its version, the OS)"
        case .appBundle: "the configured app-bundle"
        case .latLong: "the screen's latitude,longitude (latlong; a screen's fixed place, kept with limit-ad-tracking)"
        case .transactionID: "a UUID for the request chain: the same in the first request, its wrappers and the ad's tracking URLs"
        case .adCount: "in a request, 1 (the ads this request may fill); in tracking URLs, the ads the answer held for the break"
        }
    }
}

/// What the configuration says of privacy and identity, for every URL the player fills.
public struct MacroPolicy: Sendable, Equatable {
    public var limitAdTracking = false
    public var gdprConsent: String?
    public var gppString: String?
    public var gppSectionIDs: String?
    public var ifa: String?
    public var ifaType: String?
    public var appBundle: String?
    public var userAgent = UserAgent.string
    /// The screen's place, `lat,long` as configured (`latlong`).
    public var latLong: String?
    /// Where `[TIMESTAMP]` (when no event time is given) and `[CACHEBUSTING]` come from: the
    /// box's clocks and randomness (a simulation's are its own).
    public var environment = AdEnvironment.system

    public init() {}

    public static func == (a: MacroPolicy, b: MacroPolicy) -> Bool {
        a.limitAdTracking == b.limitAdTracking && a.gdprConsent == b.gdprConsent && a.gppString == b.gppString
            && a.gppSectionIDs == b.gppSectionIDs && a.ifa == b.ifa && a.ifaType == b.ifaType && a.appBundle == b.appBundle
            && a.userAgent == b.userAgent && a.latLong == b.latLong && a.environment === b.environment
    }
}

/// What is known about the request or the event a URL is filled for.
public struct MacroContext: Sendable, Equatable {
    public var contentID: String?
    public var kind: AdKind?
    public var contentPlayhead: Double?
    public var adPlayhead: Double?
    public var errorCode: Int?
    public var adServingID: String?
    public var universalAdID: String?
    public var playerSize: PlayerSize?
    /// When the event happened; nil: now.
    public var timestamp: Date?
    /// `[TRANSACTIONID]`, `[ADCOUNT]`.
    public var transactionID: String?
    public var adCount: Int?

    public struct PlayerSize: Sendable, Equatable {
        public var width: Int
        public var height: Int
        public init(width: Int, height: Int) {
            self.width = width
            self.height = height
        }
    }

    public init(contentID: String? = nil, kind: AdKind? = nil, contentPlayhead: Double? = nil, adPlayhead: Double? = nil,
                errorCode: Int? = nil, adServingID: String? = nil, universalAdID: String? = nil, playerSize: PlayerSize? = nil,
                timestamp: Date? = nil, transactionID: String? = nil, adCount: Int? = nil) {
        self.transactionID = transactionID
        self.adCount = adCount
        self.contentID = contentID
        self.kind = kind
        self.contentPlayhead = contentPlayhead
        self.adPlayhead = adPlayhead
        self.errorCode = errorCode
        self.adServingID = adServingID
        self.universalAdID = universalAdID
        self.playerSize = playerSize
        self.timestamp = timestamp
    }
}

/// The output's size as it changes, read whenever a URL is filled (`[PLAYERSIZE]`).
public final class OutputSize: Sendable {
    private let size = Locked<MacroContext.PlayerSize?>(nil)

    public init() {}

    public func set(width: Int, height: Int) {
        size.withLock { $0 = width > 0 && height > 0 ? MacroContext.PlayerSize(width: width, height: height) : nil }
    }

    public var current: MacroContext.PlayerSize? { size.withLock { $0 } }
}

public enum Macros {
    /// `template` with every macro filled (see `Macro`). With `keepingTimestamp`, `[TIMESTAMP]`
    /// stays for the outbox to fill when it sends (the event's time, corrected if the clock was
    /// wrong when it was recorded): every other macro is filled now.
    public static func expand(_ template: String, _ context: MacroContext, _ policy: MacroPolicy,
                              keepingTimestamp: Bool = false) -> String {
        replace(template) { name in
            if keepingTimestamp, name == Macro.timestamp.rawValue { return nil }
            return encode(value(Macro(rawValue: name), context, policy))
        }
    }

    /// Fills a `[TIMESTAMP]` left by `expand(keepingTimestamp:)` (nil: unknown, -1).
    public static func fillTimestamp(_ url: String, _ date: Date?) -> String {
        replace(url) { name in name == Macro.timestamp.rawValue ? encode(date.map { .value(timestamp($0)) } ?? .unknown) : nil }
    }

    /// Whether `url` still holds `[TIMESTAMP]`.
    public static func wantsTimestamp(_ url: String) -> Bool { url.contains("[\(Macro.timestamp.rawValue)]") }

    enum Value {
        case value(String)
        case unknown
        case withheld
    }

    static func value(_ macro: Macro?, _ c: MacroContext, _ p: MacroPolicy) -> Value {
        func known(_ text: String?) -> Value { text.map { .value($0) } ?? .unknown }
        guard let macro else { return .unknown }
        switch macro {
        case .contentID: return known(c.contentID)
        case .placementType: return c.kind == nil ? .unknown : .value("1")
        case .breakPosition:
            switch c.kind {
            case .overlay?, .squeezeback?: return .value("2")
            case .pauseAd?, .screensaver?: return .value("4")
            case .postroll?: return .value("3")
            case .preroll?: return .value("1")
            case .midroll?: return .value("2")
            case nil: return .unknown
            }
        case .contentPlayhead, .mediaPlayhead: return known(c.contentPlayhead.map(playhead))
        case .adPlayhead: return known(c.adPlayhead.map(playhead))
        case .timestamp: return .value(timestamp(c.timestamp ?? p.environment.date()))
        case .cacheBusting: return .value(Digits.padded(p.environment.int(in: 0..<100_000_000), 8))
        case .errorCode: return known(c.errorCode.map(String.init))
        case .adServingID: return known(c.adServingID)
        case .universalAdID: return known(c.universalAdID)
        case .limitAdTracking: return .value(p.limitAdTracking ? "1" : "0")
        case .gdprConsent: return known(p.gdprConsent)
        case .gppString: return known(p.gppString)
        case .gppSectionID: return known(p.gppSectionIDs)
        case .ifa: return p.limitAdTracking ? .withheld : known(p.ifa)
        case .ifaType: return p.limitAdTracking ? .withheld : known(p.ifaType)
        case .playerSize: return known(c.playerSize.map { "\($0.width),\($0.height)" })
        case .clientUA, .deviceUA: return .value(p.userAgent)
        case .appBundle: return known(p.appBundle)
        case .latLong: return known(p.latLong)
        case .transactionID: return known(c.transactionID)
        case .adCount: return known(c.adCount.map(String.init))
        }
    }

    /// Replaces each `[NAME]` (letters, digits, underscores: a macro's shape; an IPv6 host like
    /// `[::1]` is left alone) by what `fill` returns for it, or leaves it when `fill` says nil.
    static func replace(_ text: String, _ fill: (String) -> String?) -> String {
        guard text.contains("[") else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count)
        var rest = Substring(text)
        while let open = rest.firstIndex(of: "[") {
            out += rest[..<open]
            let after = rest[rest.index(after: open)...]
            let name = after.prefix { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
            let end = name.endIndex
            if !name.isEmpty, name.count <= 64, end < after.endIndex, after[end] == "]", let value = fill(name.uppercased()) {
                out += value
                rest = after[after.index(after: end)...]
            } else {
                out += "["
                rest = after
            }
        }
        return out + rest
    }

    /// A value as it goes into a URL: RFC 3986's unreserved characters as they are, the rest
    /// percent-encoded (UTF-8), once.
    static func encode(_ value: Value) -> String {
        switch value {
        case .unknown: return "-1"
        case .withheld: return "-2"
        case .value(let text):
            var out = ""
            for byte in text.utf8 {
                switch byte {
                case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
                     UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                    out.unicodeScalars.append(Unicode.Scalar(byte))
                default:
                    out += "%" + Digits.hex(CollectionOfOne(byte), uppercase: true)
                }
            }
            return out
        }
    }

    /// `HH:MM:SS.mmm`.
    public static func playhead(_ seconds: Double) -> String {
        let ms = Int((max(0, seconds.isFinite ? seconds : 0) * 1000).rounded())
        var bytes: [UInt8] = []
        Digits.append(ms / 3_600_000, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        Digits.append(ms / 60_000 % 60, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        Digits.append(ms / 1000 % 60, width: 2, to: &bytes)
        bytes.append(UInt8(ascii: "."))
        Digits.append(ms % 1000, width: 3, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// ISO 8601 with milliseconds, UTC: `2026-12-01T05:30:00.123Z`.
    public static func timestamp(_ date: Date) -> String {
        var seconds = date.timeIntervalSince1970
        if !seconds.isFinite { seconds = 0 }
        let whole = floor(seconds)
        var time = time_t(whole)
        var parts = tm()
        gmtime_r(&time, &parts)
        let ms = min(999, Int(((seconds - whole) * 1000).rounded(.down)))
        return Digits.timestamp(year: Int(parts.tm_year) + 1900, month: Int(parts.tm_mon) + 1, day: Int(parts.tm_mday), hour: Int(parts.tm_hour),
                                minute: Int(parts.tm_min), second: Int(parts.tm_sec), millisecond: ms)
    }
}

/// The player's `User-Agent` for every HTTP request (ad servers, creatives, beacons) and the
/// `[CLIENTUA]`/`[DEVICEUA]` macros: `adplayerd/VERSION (Linux RELEASE; MACHINE) libmpv`.
public enum UserAgent {
    public static var version: String { Product.version }

    public static let string: String = {
        var name = utsname()
        uname(&name)
        func text<T>(_ field: T) -> String {
            withUnsafeBytes(of: field) { raw in String(decoding: raw.prefix { $0 != 0 }, as: UTF8.self) }
        }
        return "adplayerd/\(version) (Linux \(text(name.release)); \(text(name.machine))) libmpv"
    }()
}
