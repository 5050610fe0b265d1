#if canImport(Glibc)
import Glibc
#endif

/// The one place where a number of seconds from outside — a catalog, a VAST document, the
/// slots API, a flag, the configuration, the control socket — becomes a value the runtime
/// schedules with: finite, within documented bounds, or a clear error naming where it came
/// from (SPEC §7). Nothing from outside reaches a timer without passing here.
public enum Seconds {
    /// What a value is, and so which values it may take.
    public struct Bounds: Sendable, Equatable {
        public let minimum: Double
        /// The minimum itself is allowed (a position of 0), or only values above it (a duration).
        public let includesMinimum: Bool
        public let maximum: Double
        public let what: String

        /// How long something lasts: an overlay's duration, a timeout. (0, 1 day].
        public static let duration = Bounds(minimum: 0, includesMinimum: false, maximum: 86_400, what: "a duration")
        /// A wait that may be none: a pause ad's activation delay. [0, 1 day].
        /// A span of wall-clock time to look ahead (a schedule's check, a simulation): up to a year.
        public static let span = Bounds(minimum: 0, includesMinimum: false, maximum: 366 * 86_400, what: "a span of time")
        public static let delay = Bounds(minimum: 0, includesMinimum: true, maximum: 86_400, what: "a delay")
        /// A time in the content: a slot's start, a seek target. [0, 30 days].
        public static let position = Bounds(minimum: 0, includesMinimum: true, maximum: 30 * 86_400, what: "a content time")
        /// A relative jump in the content: a seek by. [-30 days, 30 days].
        public static let offset = Bounds(minimum: -30 * 86_400, includesMinimum: true, maximum: 30 * 86_400, what: "a time offset")

        func contains(_ value: Double) -> Bool {
            value.isFinite && value <= maximum && (includesMinimum ? value >= minimum : value > minimum)
        }

        var range: String {
            "\(includesMinimum ? "[" : "(")\(format(minimum)), \(format(maximum))] s"
        }
    }

    /// `value` if it is within `bounds`; otherwise an error naming `field`.
    public static func check(_ value: Double, _ bounds: Bounds, field: String) throws(SecondsError) -> Double {
        guard bounds.contains(value) else {
            throw SecondsError(field: field, text: format(value), reason: "\(bounds.what) must be a finite number of seconds in \(bounds.range)")
        }
        return value
    }

    /// Parses seconds written as a number (`12.5`) or as `HH:MM:SS(.mmm)` (VAST's form), then
    /// checks them. Whitespace around is ignored; nothing else is.
    public static func parse(_ text: String, _ bounds: Bounds, field: String) throws(SecondsError) -> Double {
        let trimmed = text.trimmed()
        guard let value = number(trimmed) ?? clock(trimmed) else {
            throw SecondsError(field: field, text: trimmed, reason: "not a number of seconds or HH:MM:SS(.mmm)")
        }
        do {
            return try check(value, bounds, field: field)
        } catch {
            throw SecondsError(field: field, text: trimmed, reason: error.reason)
        }
    }

    /// A length of time as a person writes it on a command line: `3600s`, `90m`, `24h`, `2d`,
    /// or seconds as `parse` takes them; then checked.
    public static func parseLength(_ text: String, _ bounds: Bounds, field: String) throws(SecondsError) -> Double {
        let trimmed = text.trimmed()
        let units: [Character: Double] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        if let unit = trimmed.last, let scale = units[unit], let value = number(String(trimmed.dropLast())) {
            do {
                return try check(value * scale, bounds, field: field)
            } catch {
                throw SecondsError(field: field, text: trimmed, reason: error.reason)
            }
        }
        do {
            return try parse(trimmed, bounds, field: field)
        } catch {
            throw SecondsError(field: field, text: trimmed, reason: "not a length (3600s, 90m, 24h, 2d, or seconds)")
        }
    }

    /// A plain decimal number: digits, one optional point, an optional leading minus. No
    /// `inf`, `nan`, hex or exponents: what a person writes.
    private static func number(_ text: String) -> Double? {
        var digits = text[...]
        if digits.first == "-" { digits = digits.dropFirst() }
        guard !digits.isEmpty, digits.count <= 32,
              digits.allSatisfy({ $0.isASCII && ($0.isNumber || $0 == ".") }),
              digits.filter({ $0 == "." }).count <= 1, digits != "." else { return nil }
        return Double(text)
    }

    /// `HH:MM:SS` or `HH:MM:SS.mmm`, minutes and seconds below 60.
    private static func clock(_ text: String) -> Double? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3,
              let h = number(String(parts[0])), let m = number(String(parts[1])), let s = number(String(parts[2])),
              h >= 0, m >= 0, m < 60, s >= 0, s < 60, h == h.rounded(), m == m.rounded() else { return nil }
        return h * 3600 + m * 60 + s
    }

    static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}

/// A number of seconds from outside that cannot be used: which field, what it said, why.
public struct SecondsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Where it came from: `overlays[1].slots[0].start`, `NonLinear@minSuggestedDuration`, `--pause-ad-delay`.
    public let field: String
    /// What it said.
    public let text: String
    public let reason: String

    public var description: String { "\(field): \"\(text)\": \(reason)" }
}
