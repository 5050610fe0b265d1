import Bounds
import Foundation
import XCTest

/// BoundsCore's stand-ins for the Foundation the protocol, adplayerctl, the page and the bridge
/// no longer link (issue 47, 5), held to Foundation's own answers, which the tests still link.
final class TextTests: XCTestCase {
    /// `ISO8601.parse` reads what Foundation's ISO8601DateFormatter read with the options it
    /// was used with, the same instant; it refuses what that formatter misread.
    func testISO8601ParseAgreesWithFoundationsFormatter() {
        func foundation(_ text: String) -> Double? {
            let trimmed = text.trimmingCharacters(in: .whitespaces)
            for options: ISO8601DateFormatter.Options in [[.withInternetDateTime, .withFractionalSeconds], [.withInternetDateTime], [.withFullDate]] {
                let formatter = ISO8601DateFormatter()
                formatter.formatOptions = options
                if let date = formatter.date(from: trimmed) { return date.timeIntervalSince1970 }
            }
            return nil
        }
        let accepted = ["2026-12-01T05:30:00Z", "2026-12-01T05:30:00.123Z", "2026-12-01T05:30:00.5+01:00", "2026-12-01T05:30:00-0930",
                        "2024-02-29T23:59:59Z", "1970-01-01T00:00:00Z", "2026-12-01", "  2026-12-07T00:00:00Z ", "2026-03-29T02:30:00+02:00",
                        "1999-12-31T23:59:59.999Z"]
        for text in accepted {
            let ours = ISO8601.parse(text)
            XCTAssertNotNil(ours, text)
            XCTAssertEqual(ours ?? .nan, foundation(text) ?? .infinity, accuracy: 0.0005, text)
        }
        for text in ["", "2026-13-01T00:00:00Z", "2026-02-30", "2026-12-01T24:00:00Z", "2026-12-01T05:30Z", "2026-12-01T05:30:00",
                     "2026-12-01T05:30:00.Z", "2026-12-01 05:30:00Z", "20261201", "2026-12-01T05:30:00Z trailing", "2023-02-29"] {
            // Foundation's formatter read some of these (its full-date fallback took the date and
            // dropped the rest: `2026-12-01T05:30:00` was midnight; `2026-02-30` was 2 March):
            // refused here, with the reason a person can act on.
            XCTAssertNil(ISO8601.parse(text), text)
        }
        // And the formatter reads back what `format` writes.
        for seconds in [0, 1_733_030_400.123, 1_800_000_000.5, -86_400.25] {
            XCTAssertEqual(ISO8601.parse(ISO8601.format(seconds)) ?? .nan, seconds, accuracy: 0.0005)
        }
    }

    func testTextHelpersAgreeWithFoundation() {
        for text in ["", "  a b \t", "\n\u{2028} x\r\n", "\u{00A0}nbsp\u{3000}", "plain", " \n "] {
            XCTAssertEqual(text.trimmed(), text.trimmingCharacters(in: .whitespacesAndNewlines), text.debugDescription)
            XCTAssertEqual(text.trimmedSpaces(), text.trimmingCharacters(in: .whitespaces), text.debugDescription)
            XCTAssertEqual(text.trimmingLineBreaks(), text.trimmingCharacters(in: .newlines), text.debugDescription)
        }
        for (text, width) in [("paused", 9), ("a much longer word", 8), ("", 3), ("é", 2)] {
            XCTAssertEqual(text.padded(to: width), text.padding(toLength: width, withPad: " ", startingAt: 0))
        }
        for (text, separator) in [("a\r\nb\r\n", "\r\n"), ("no separator", ";"), (";a;;b;", ";"), ("", "x"), ("aaa", "aa")] {
            XCTAssertEqual(text.pieces(separatedBy: separator), text.components(separatedBy: separator), text.debugDescription)
            XCTAssertEqual(text.replacingAll(separator, with: "+"), text.replacingOccurrences(of: separator, with: "+"), text.debugDescription)
        }
        for value in [0, 7, 255, 0x2028, 0x1F600] {
            XCTAssertEqual(hex(value, width: 4), String(format: "%04x", value))
            XCTAssertEqual(hex(UInt8(truncatingIfNeeded: value), width: 2), String(format: "%02x", UInt8(truncatingIfNeeded: value)))
        }
        for value in [0.0, -74.006, 1e-7, 123_456_789.123, 0.5] {
            for format in ["%g", "%.3f", "%.6f", "%.1f s"] { XCTAssertEqual(CFormat.format(format, value), String(format: format, value)) }
        }
        // NSString.deletingLastPathComponent's answers (Foundation's own traps on some paths here).
        for (path, folder) in [("/a/b/c", "/a/b"), ("/a/b/", "/a"), ("c", ""), ("/", "/"), ("/top", "/"), ("a/b", "a")] {
            XCTAssertEqual(folderOf(path), folder, path)
        }
        XCTAssertEqual(ThisProcess.currentDirectory, FileManager.default.currentDirectoryPath)
        XCTAssertEqual(ThisProcess.environment, ProcessInfo.processInfo.environment)
        XCTAssertEqual(ThisProcess.wallClock, Date().timeIntervalSince1970, accuracy: 5)
    }
}
