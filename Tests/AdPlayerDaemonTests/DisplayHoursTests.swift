import AdPlayerDaemon
import AdRuntime
import Foundation
import XCTest

/// `display-hours`: the grammar, and the hours as local wall-clock times on every day —
/// across both of 2026's daylight-saving changes in Europe/Paris (29 March: 02:00 → 03:00;
/// 25 October: 03:00 → 02:00).
final class DisplayHoursTests: XCTestCase {
    private let paris = TimeZone(identifier: "Europe/Paris")!

    private func date(_ text: String) -> Date { ISO8601DateFormatter().date(from: text)! }

    private func local(_ date: Date) -> String {
        let formatter = DateFormatter()
        formatter.timeZone = paris
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.dateFormat = "EEE yyyy-MM-dd HH:mm:ss"
        return formatter.string(from: date)
    }

    func testEachBadFormIsRefusedInWords() {
        let bad: [(String, String)] = [
            ("", "empty"), ("mon", "no hours"), ("funday 08:00-10:00", "not a day"), ("mon 8:00-10:00", "not a time"),
            ("mon 08:00", "not a range"), ("mon 08:60-10:00", "not a time"), ("mon 25:00-26:00", "not a time of day"),
            ("mon 08:00-08:00", "is empty"), ("mon 24:00-02:00", "starts at 24:00"), ("mon-tue-wed 08:00-09:00", "range of days"),
            ("mon 08:00-10:00,, tue 08:00-09:00", "empty group"), (String(repeating: "mon 08:00-09:00, ", count: 100), "1024"),
        ]
        for (text, expected) in bad {
            XCTAssertThrowsError(try WeeklyHours(text, timeZone: paris), text) { error in
                XCTAssertTrue("\(error)".contains(expected), "\(text): \(error)")
                XCTAssertTrue("\(error)".hasPrefix("display-hours:"), "\(error)")
            }
        }
    }

    /// The example of docs/configuration.md, on an ordinary week (CET, UTC+1).
    func testTheDocumentedExample() throws {
        let hours = try WeeklyHours("mon-fri 08:00-20:00, sat 10:00-18:00", timeZone: paris)
        XCTAssertFalse(hours.isOpen(at: date("2026-01-05T06:59:59Z")), "Monday 07:59:59")
        XCTAssertTrue(hours.isOpen(at: date("2026-01-05T07:00:00Z")), "Monday 08:00")
        XCTAssertTrue(hours.isOpen(at: date("2026-01-09T18:59:59Z")), "Friday 19:59:59")
        XCTAssertFalse(hours.isOpen(at: date("2026-01-09T19:00:00Z")), "Friday 20:00")
        XCTAssertEqual(hours.nextChange(after: date("2026-01-09T19:00:00Z")), date("2026-01-10T09:00:00Z"), "Saturday 10:00")
        XCTAssertEqual(hours.nextChange(after: date("2026-01-10T17:00:00Z")), date("2026-01-12T07:00:00Z"), "Sunday closed: Monday 08:00")
        let always = try WeeklyHours("daily 00:00-24:00", timeZone: paris)
        XCTAssertTrue(always.isOpen(at: date("2026-03-29T01:30:00Z")))
        XCTAssertNil(always.nextChange(after: date("2026-03-29T01:30:00Z")), "never changes")
    }

    /// Every edge over 10 days around each change falls at 09:00 or 17:00 local time, the
    /// days alternate open and closed as the hours say, and the UTC instants move by the hour.
    func testNineToFiveIsNineToFiveLocalAcrossBothDaylightSavingChanges() throws {
        let hours = try WeeklyHours("daily 09:00-17:00", timeZone: paris)
        for start in ["2026-03-25T00:00:00Z", "2026-10-21T00:00:00Z"] {
            var at = date(start)
            var edges: [Date] = []
            for _ in 0..<20 {
                guard let next = hours.nextChange(after: at) else { return XCTFail("no next change after \(at)") }
                XCTAssertGreaterThan(next, at)
                edges.append(next)
                at = next
            }
            for (index, edge) in edges.enumerated() {
                XCTAssertTrue(local(edge).hasSuffix(index % 2 == 0 ? "09:00:00" : "17:00:00"), "edge \(index): \(local(edge))")
                XCTAssertEqual(hours.isOpen(at: edge), index % 2 == 0, local(edge))
                XCTAssertEqual(hours.isOpen(at: edge.addingTimeInterval(-1)), index % 2 == 1, local(edge))
            }
        }
        XCTAssertEqual(hours.nextChange(after: date("2026-03-28T12:00:00Z")), date("2026-03-28T16:00:00Z"), "CET: 17:00 is 16:00 UTC")
        XCTAssertEqual(hours.nextChange(after: date("2026-03-28T20:00:00Z")), date("2026-03-29T07:00:00Z"), "CEST from 29 March: 09:00 is 07:00 UTC")
        XCTAssertEqual(hours.nextChange(after: date("2026-10-24T20:00:00Z")), date("2026-10-25T08:00:00Z"), "CET again on 25 October")
    }

    /// A night range belongs to the day it starts on; a range of days wraps past Sunday; on
    /// the night the clocks go forward the night is an hour shorter in UTC, and where they go
    /// back, an hour longer.
    func testNightsWrapAndFollowTheClocks() throws {
        let hours = try WeeklyHours("fri-mon 22:00-02:00", timeZone: paris)
        XCTAssertTrue(hours.isOpen(at: date("2026-03-27T21:30:00Z")), "Friday 22:30 CET")
        XCTAssertTrue(hours.isOpen(at: date("2026-03-28T00:30:00Z")), "Saturday 01:30: Friday's night")
        XCTAssertFalse(hours.isOpen(at: date("2026-03-28T01:00:00Z")), "Saturday 02:00")
        XCTAssertFalse(hours.isOpen(at: date("2026-03-31T20:30:00Z")), "Tuesday 22:30: not in fri-mon")
        // Saturday 22:00 CET (21:00Z) to Sunday 02:00 — which does not exist that night (it is 03:00 CEST, 01:00Z).
        XCTAssertEqual(hours.nextChange(after: date("2026-03-28T21:00:00Z")), date("2026-03-29T01:00:00Z"))
        // Saturday 24 October 22:00 CEST (20:00Z) to Sunday 02:00, the first of the two (CEST: 00:00Z).
        XCTAssertEqual(hours.nextChange(after: date("2026-10-24T20:00:00Z")), date("2026-10-25T00:00:00Z"))
        let other = try WeeklyHours("daily 08:00-12:00 13:00-18:00, sat 10:00-12:00", timeZone: TimeZone(identifier: "UTC")!)
        XCTAssertFalse(other.isOpen(at: date("2026-01-05T12:30:00Z")), "the lunch break")
        XCTAssertEqual(other.nextChange(after: date("2026-01-05T12:30:00Z")), date("2026-01-05T13:00:00Z"))
        XCTAssertEqual(other.nextChange(after: date("2026-01-10T07:00:00Z")), date("2026-01-10T08:00:00Z"), "Saturday: daily and sat together")
    }

    /// A time inside the spring-forward gap (28 March 2027 in Paris: 02:00 CET → 03:00 CEST) is
    /// the first instant after the gap — 03:00 CEST (01:00Z), not 03:30 — whether it opens the
    /// hours (`02:30-23:00` opens at 03:00, not 30 minutes dark inside them) or closes them
    /// (`08:00-02:30` closes at 03:00, not 30 minutes of ads after closing).
    func testATimeInTheSpringForwardGapIsTheFirstInstantAfterIt() throws {
        let opens = try WeeklyHours("daily 02:30-23:00", timeZone: paris)
        XCTAssertFalse(opens.isOpen(at: date("2027-03-28T00:59:59Z")), "01:59:59 CET: before the gap")
        XCTAssertTrue(opens.isOpen(at: date("2027-03-28T01:00:00Z")), "03:00 CEST: the first instant after the gap")
        XCTAssertTrue(opens.isOpen(at: date("2027-03-28T01:15:00Z")), "03:15 CEST")
        XCTAssertEqual(opens.nextChange(after: date("2027-03-27T22:30:00Z")), date("2027-03-28T01:00:00Z"))
        let closes = try WeeklyHours("daily 08:00-02:30", timeZone: paris)
        XCTAssertTrue(closes.isOpen(at: date("2027-03-28T00:59:59Z")), "Saturday's night, 01:59:59 CET")
        XCTAssertFalse(closes.isOpen(at: date("2027-03-28T01:00:00Z")), "closed at 03:00 CEST")
        XCTAssertFalse(closes.isOpen(at: date("2027-03-28T01:15:00Z")), "not open until 03:30")
        XCTAssertEqual(closes.nextChange(after: date("2027-03-27T22:30:00Z")), date("2027-03-28T01:00:00Z"))
        // An ordinary night is untouched: 02:30 CET is 01:30Z.
        XCTAssertEqual(closes.nextChange(after: date("2027-03-20T22:30:00Z")), date("2027-03-21T01:30:00Z"))
    }
}
