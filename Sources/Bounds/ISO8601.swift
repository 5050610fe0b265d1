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

    /// Seconds since 1970 as `2026-12-01T05:30:00.123Z`.
    public static func format(_ seconds: Double) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date(timeIntervalSince1970: seconds))
    }
}
