import AdRuntime
import Foundation

/// Whether the output the box drives is connected, as the graphics card says it (DRM/KMS).
public enum ConnectorState: String, Sendable, Equatable {
    case connected, disconnected, unknown
}

/// What a play's screen evidence concludes (issue 36, docs/reporting.md "What the screen
/// showed"): `verified` needs a connected output where the box can know it, a panel not
/// reported off, and pixels that show the ad; `off` when the panel or the connector says so;
/// anything else `unverified`, with the reason. Each check is kept with what it said and when,
/// for the play's `display_evidence`.
public struct DisplayEvidence: Sendable, Equatable {
    public enum Verdict: String, Sendable, Equatable {
        case verified, unverified, off
    }

    /// One thing checked: `connector`, `panel` or `pixels`, what it said, when (wall-clock
    /// seconds since 1970).
    public struct Check: Sendable, Equatable {
        public let what: String
        public let said: String
        public let at: Double

        public init(what: String, said: String, at: Double) {
            self.what = what
            self.said = said
            self.at = at
        }
    }

    /// What the grabs of the composed output found while the ad was up.
    public enum Pixels: Sendable, Equatable {
        /// The ad's region matches the creative as drawn (an image or text), or the output is
        /// neither black nor frozen across two grabs (a video).
        case showTheAd
        /// Grabbed, and the ad is not there: why (covered, black, frozen).
        case doNotShowTheAd(String)
        /// No grab could be made: why (`no output` headless, a window system that cannot grab).
        case unavailable(String)
    }

    /// The panel's power as read (HDMI-CEC): what it said, and whether that means off (nil:
    /// it could not be read).
    public struct Panel: Sendable, Equatable {
        public let said: String
        public let off: Bool?
        public init(said: String, off: Bool?) {
            self.said = said
            self.off = off
        }
    }

    public let verdict: Verdict
    /// Why it is `unverified` or `off`; nil when verified.
    public let reason: String?
    /// The reason as a metric label: `no_output`, `no_grab`, `pixels`, `panel_off`,
    /// `disconnected`, `connector_unknown`, `no_evidence`; nil when verified.
    public let code: String?
    public let checks: [Check]

    public init(verdict: Verdict, reason: String?, code: String?, checks: [Check]) {
        self.verdict = verdict
        self.reason = reason
        self.code = code
        self.checks = checks
    }

    /// Judges the evidence: `connector` nil where the box cannot know its output (no DRM/KMS
    /// connector for this output), `panel` nil where no `cec-command` is configured.
    /// The connector's `identity`: its name and the panel's EDID (`card0-HDMI-A-1: SAM 0x…`).
    public static func judge(connector: (ConnectorState, identity: String?, at: Double)?, panel: (Panel, at: Double)?,
                             pixels: (Pixels, at: Double)) -> DisplayEvidence {
        var checks: [Check] = []
        if let connector {
            checks.append(Check(what: "connector", said: connector.0.rawValue + (connector.identity.map { " (\($0))" } ?? ""), at: connector.at))
        }
        if let panel { checks.append(Check(what: "panel", said: panel.0.said, at: panel.at)) }
        let pixelsSaid = switch pixels.0 {
        case .showTheAd: "the ad is shown"
        case .doNotShowTheAd(let why): "the ad is not shown: \(why)"
        case .unavailable(let why): "no grab: \(why)"
        }
        checks.append(Check(what: "pixels", said: pixelsSaid, at: pixels.at))
        func result(_ verdict: Verdict, _ reason: String?, _ code: String?) -> DisplayEvidence {
            DisplayEvidence(verdict: verdict, reason: reason, code: code, checks: checks)
        }

        if connector?.0 == .disconnected { return result(.off, "the output is not connected", "disconnected") }
        if panel?.0.off == true { return result(.off, "the panel reports standby", "panel_off") }
        switch pixels.0 {
        case .unavailable(let why): return result(.unverified, why, why == noOutput ? "no_output" : "no_grab")
        case .doNotShowTheAd(let why): return result(.unverified, "the pixels do not show the ad: \(why)", "pixels")
        case .showTheAd: break
        }
        if connector?.0 == .unknown { return result(.unverified, "the connector's state is unknown", "connector_unknown") }
        return result(.verified, nil, nil)
    }

    /// Headless (`vo=null`): nothing is drawn anywhere.
    public static let noOutput = "no output"

    /// No evidence arrived in time (the ad left the screen first, or the wait ran out).
    public static func missing(_ why: String, at: Double) -> DisplayEvidence {
        DisplayEvidence(verdict: .unverified, reason: why, code: "no_evidence", checks: [Check(what: "pixels", said: "no grab: \(why)", at: at)])
    }

    /// The play's `display_evidence` as recorded (one line of JSON): the reason, then each
    /// check with its time (ISO 8601, UTC, milliseconds).
    /// Written out (as `JSONSerialization` with sorted keys and unescaped slashes writes it, byte
    /// for byte: a test holds it to that): one per play, and Foundation's writer was a few per
    /// cent of a simulated month.
    public var recorded: String {
        var text = "{\"checks\":["
        for (index, check) in checks.enumerated() {
            if index > 0 { text += "," }
            text += "{\"at\":" + Self.quoted(ISO8601.format(check.at)) + ",\"said\":" + Self.quoted(check.said) + ",\"what\":" + Self.quoted(check.what) + "}"
        }
        text += "]"
        if let reason { text += ",\"reason\":" + Self.quoted(reason) }
        return text + "}"
    }

    /// A JSON string as Foundation's writer quotes it: `"` and `\\` escaped, the control
    /// characters as `\\b \\f \\n \\r \\t` or `\\u00XX` (lower-case hex), everything else as it is.
    static func quoted(_ text: String) -> String {
        var bytes: [UInt8] = [0x22]
        bytes.reserveCapacity(text.utf8.count + 2)
        for byte in text.utf8 {
            switch byte {
            case 0x22: bytes += [0x5C, 0x22]
            case 0x5C: bytes += [0x5C, 0x5C]
            case 0x08: bytes += [0x5C, UInt8(ascii: "b")]
            case 0x0C: bytes += [0x5C, UInt8(ascii: "f")]
            case 0x0A: bytes += [0x5C, UInt8(ascii: "n")]
            case 0x0D: bytes += [0x5C, UInt8(ascii: "r")]
            case 0x09: bytes += [0x5C, UInt8(ascii: "t")]
            case 0x00..<0x20:
                let hex = Array("0123456789abcdef".utf8)
                bytes += [0x5C, UInt8(ascii: "u"), 0x30, 0x30, hex[Int(byte >> 4)], hex[Int(byte & 0xF)]]
            default: bytes.append(byte)
            }
        }
        bytes.append(0x22)
        return String(decoding: bytes, as: UTF8.self)
    }
}
