#if canImport(Glibc)
import Glibc
#endif

/// Times as proof of play, the protocol and the logs write them: ISO 8601, UTC, milliseconds.
public enum ISO8601 {
    /// `2026-12-01T05:30:00Z`, `2026-12-01T05:30:00.123+01:00`, `2026-12-01` (midnight UTC): seconds since 1970.
    /// RFC 3339's internet date-time (`T`, seconds, an optional fraction, `Z` or `±HH:MM`/`±HHMM`)
    /// or a full date — what Foundation's ISO8601DateFormatter took with those options — read
    /// by hand: FoundationEssentials (the clients' Foundation, no ICU) has no such formatter.
    public static func parse(_ text: String) -> Double? {
        let trimmed = text.trimmedSpaces()
        guard trimmed.utf8.count <= 40 else { return nil }
        var bytes = Array(trimmed.utf8)[...]
        func digits(_ count: Int) -> Int? {
            guard bytes.count >= count else { return nil }
            var value = 0
            for byte in bytes.prefix(count) {
                guard (48...57).contains(byte) else { return nil }
                value = value * 10 + Int(byte - 48)
            }
            bytes = bytes.dropFirst(count)
            return value
        }
        func take(_ character: Character) -> Bool {
            guard bytes.first == character.asciiValue else { return false }
            bytes = bytes.dropFirst()
            return true
        }
        guard let year = digits(4), take("-"), let month = digits(2), take("-"), let day = digits(2),
              (1...12).contains(month), (1...daysIn(month, of: year)).contains(day) else { return nil }
        let date = Double(daysFromCivil(year, month, day)) * 86_400
        if bytes.isEmpty { return date }
        guard take("T"), let hour = digits(2), take(":"), let minute = digits(2), take(":"), let second = digits(2),
              hour < 24, minute < 60, second < 60 else { return nil }
        var fraction = 0.0
        if take(".") {
            var scale = 0.1
            var any = false
            while let byte = bytes.first, (48...57).contains(byte) {
                fraction += Double(byte - 48) * scale
                scale /= 10
                any = true
                bytes = bytes.dropFirst()
            }
            guard any else { return nil }
        }
        var offset = 0
        if take("Z") {
        } else if let sign = bytes.first, sign == UInt8(ascii: "+") || sign == UInt8(ascii: "-") {
            bytes = bytes.dropFirst()
            guard let hours = digits(2) else { return nil }
            _ = take(":")
            guard let minutes = digits(2), hours < 24, minutes < 60 else { return nil }
            offset = (hours * 3600 + minutes * 60) * (sign == UInt8(ascii: "-") ? -1 : 1)
        } else {
            return nil
        }
        guard bytes.isEmpty else { return nil }
        return date + Double(hour * 3600 + minute * 60 + second - offset) + fraction
    }

    static func isLeap(_ year: Int) -> Bool { year % 4 == 0 && (year % 100 != 0 || year % 400 == 0) }

    static func daysIn(_ month: Int, of year: Int) -> Int {
        month == 2 ? (isLeap(year) ? 29 : 28) : [4, 6, 9, 11].contains(month) ? 30 : 31
    }

    /// Days from 1970-01-01 to a date of the proleptic Gregorian calendar (Howard Hinnant's
    /// `days_from_civil`).
    static func daysFromCivil(_ year: Int, _ month: Int, _ day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month + (month > 2 ? -3 : 9)) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }

    /// Seconds since 1970 as `2026-12-01T05:30:00.123Z` (rounded to the millisecond, as
    /// Foundation's ISO8601DateFormatter rounds; outside years 1–9999, the nearest end). Made by hand with `gmtime_r`: the ledger
    /// hashes two of these a play, and a formatter made for each cost a third of a millisecond.
    public static func format(_ seconds: Double) -> String {
        // Outside years 0001–9999 (no time the box reads): the nearest end of them.
        let milliseconds = seconds.isNaN ? 0 : min(max((seconds * 1000).rounded(), -62_135_596_800_000), 253_402_300_799_999)
        let total = Int64(milliseconds)
        var whole = time_t(total >= 0 ? total / 1000 : (total - 999) / 1000)
        let fraction = Int(total - Int64(whole) * 1000)
        var parts = tm()
        gmtime_r(&whole, &parts)
        return Digits.timestamp(year: Int(parts.tm_year) + 1900, month: Int(parts.tm_mon) + 1, day: Int(parts.tm_mday), hour: Int(parts.tm_hour),
                                minute: Int(parts.tm_min), second: Int(parts.tm_sec), millisecond: fraction)
    }
}
