import Foundation

/// Times as proof of play, the protocol and the logs write them: ISO 8601, UTC, milliseconds.
public enum ISO8601 {
    /// `2026-12-01T05:30:00Z`, `2026-12-01T05:30:00.123+01:00`, `2026-12-01` (midnight UTC): seconds since 1970.
    public static func parse(_ text: String) -> Double? {
        let trimmed = text.trimmingCharacters(in: .whitespaces)
        guard trimmed.utf8.count <= 40 else { return nil }
        for options: ISO8601DateFormatter.Options in [[.withInternetDateTime, .withFractionalSeconds], [.withInternetDateTime], [.withFullDate]] {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = options
            if let date = formatter.date(from: trimmed) { return date.timeIntervalSince1970 }
        }
        return nil
    }

    /// Seconds since 1970 as `2026-12-01T05:30:00.123Z` (rounded to the millisecond, as
    /// Foundation's ISO8601DateFormatter rounds). Made by hand with `gmtime_r`: the ledger
    /// hashes two of these a play, and a formatter made for each cost a third of a millisecond.
    public static func format(_ seconds: Double) -> String {
        let milliseconds = (seconds * 1000).rounded()
        guard milliseconds.isFinite, abs(milliseconds) < 2.5e14 else {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            return formatter.string(from: Date(timeIntervalSince1970: seconds))
        }
        let total = Int64(milliseconds)
        var whole = time_t(total >= 0 ? total / 1000 : (total - 999) / 1000)
        let fraction = Int(total - Int64(whole) * 1000)
        var parts = tm()
        gmtime_r(&whole, &parts)
        return Digits.timestamp(year: Int(parts.tm_year) + 1900, month: Int(parts.tm_mon) + 1, day: Int(parts.tm_mday), hour: Int(parts.tm_hour),
                                minute: Int(parts.tm_min), second: Int(parts.tm_sec), millisecond: fraction)
    }
}
