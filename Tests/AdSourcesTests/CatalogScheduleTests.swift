import AdRuntime
import AdSources
import Foundation
import XCTest

/// A clock the test moves: the wall clock and the monotonic one advance together, unless the
/// test jumps the wall clock alone (NTP at boot, an operator).
final class VirtualScheduleClock: ScheduleClock, @unchecked Sendable {
    // @unchecked: its state is behind its lock.
    private let state: Locked<ShowTime>
    init(wall: Date) { state = Locked(ShowTime(wall: wall.timeIntervalSince1970, monotonic: 1000, boot: "test-boot")) }
    func now() -> ShowTime { state.withLock { $0 } }
    func advance(_ seconds: Double) { state.withLock { $0.wall += seconds; $0.monotonic += seconds } }
    func jumpWall(_ seconds: Double) { state.withLock { $0.wall += seconds } }
}

/// Catalog version 2 on virtual time (issue 26): four simulated days in Europe/Paris across the
/// night the clocks go forward (29 March 2026), a pause ad asked for every minute and each one
/// served shown. Flights, dayparts (local hours on every day, the DST day included), an hourly
/// cap spread over the hour, weights 3:1 as a smooth rotation, competitive separation; caps
/// and separation measured so that the wall clock jumping changes nothing.
final class CatalogScheduleTests: XCTestCase {
    private var folder: URL!
    private let paris = TimeZone(identifier: "Europe/Paris")!

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("catalog2-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        try Data([1, 2, 3]).write(to: folder.appendingPathComponent("pause.png"))
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: folder) }

    private func catalog(_ json: String, clock: VirtualScheduleClock, separation: AdSeparation? = nil,
                         passedOver: Locked<[String]> = Locked([])) throws -> LocalCatalog {
        try Data(json.utf8).write(to: folder.appendingPathComponent("catalog.json"))
        return try LocalCatalog(folder: folder, timeZone: paris, clock: clock, separation: separation,
                                onIneligible: { _, reason in passedOver.withLock { $0.append(reason) } })
    }

    private func local(_ wall: Double) -> DateComponents {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = paris
        return calendar.dateComponents([.year, .month, .day, .hour, .minute, .weekday], from: Date(timeIntervalSince1970: wall))
    }

    func testFourDaysAcrossADaylightSavingChange() async throws {
        let start = ISO8601DateFormatter().date(from: "2026-03-26T23:00:00Z")!   // Friday 27 March, 00:00 CET
        let clock = VirtualScheduleClock(wall: start)
        let separation = AdSeparation(seconds: 300, clock: clock)
        let passedOver = Locked<[String]>([])
        let catalog = try catalog("""
            {"version": 2, "pause_ads": [
              {"id": "flight", "image": "pause.png", "flight": {"start": "2026-03-28T00:00", "end": "2026-03-30T00:00:00+02:00"}},
              {"id": "office", "image": "pause.png", "daypart": [{"days": ["mon", "tue", "wed", "thu", "fri"], "from": "09:00", "to": "17:00"}]},
              {"id": "capped", "image": "pause.png", "cap": {"per_hour": 4}},
              {"id": "heavy", "image": "pause.png", "weight": 3},
              {"id": "light", "image": "pause.png", "weight": 1},
              {"id": "car-a", "image": "pause.png", "advertiser": "Autos", "categories": ["automotive"]},
              {"id": "car-b", "image": "pause.png", "categories": ["Automotive"]}
            ]}
            """, clock: clock, separation: separation, passedOver: passedOver)
        var shows: [String: [ShowTime]] = [:]
        let content = ContentInfo(id: "lobby-loop")
        for _ in 0..<(4 * 24 * 60) {
            if let creative = try await catalog.ad(for: AdRequest(content: content, kind: .pauseAd, position: 0)) {
                catalog.didShow(creative, content: content)
                separation.record(advertiser: creative.advertiser, categories: creative.categories)   // as the daemon does on screen
                shows[creative.id, default: []].append(clock.now())
            }
            clock.advance(60)
        }
        // The flight: Saturday 00:00 CET (23:00Z) to Monday 00:00 CEST (22:00Z on Sunday).
        let flight = try XCTUnwrap(shows["flight"])
        XCTAssertGreaterThanOrEqual(flight.map(\.wall).min()!, ISO8601DateFormatter().date(from: "2026-03-27T23:00:00Z")!.timeIntervalSince1970)
        XCTAssertLessThan(flight.map(\.wall).max()!, ISO8601DateFormatter().date(from: "2026-03-29T22:00:00Z")!.timeIntervalSince1970)
        // The daypart: 09:00 to 17:00 local on Friday and Monday (after the change: CEST), never at the weekend.
        let office = try XCTUnwrap(shows["office"])
        for show in office {
            let time = local(show.wall)
            XCTAssertTrue((9..<17).contains(time.hour!), "\(time)")
            XCTAssertTrue([2, 6].contains(time.weekday!), "Monday or Friday: \(time)")
        }
        XCTAssertTrue(office.contains { local($0.wall).weekday == 2 && local($0.wall).hour == 9 }, "09:00 local on the Monday after the change")
        // The hourly cap: at most 4 in any hour, 15 minutes apart at least (no burst).
        let capped = try XCTUnwrap(shows["capped"])
        for (i, show) in capped.enumerated() {
            XCTAssertLessThanOrEqual(capped[i...].prefix { $0.monotonic - show.monotonic < 3600 }.count, 4)
            if i > 0 { XCTAssertGreaterThanOrEqual(show.monotonic - capped[i - 1].monotonic, 900) }
        }
        XCTAssertGreaterThan(capped.count, 4 * 24 * 3, "it shows when it may: about 4 an hour")
        // Weights 3:1 within 10 %.
        let ratio = Double(shows["heavy"]?.count ?? 0) / Double(max(1, shows["light"]?.count ?? 0))
        XCTAssertEqual(ratio, 3, accuracy: 0.3, "heavy \(shows["heavy"]?.count ?? 0), light \(shows["light"]?.count ?? 0)")
        // Separation: the two automotive entries never within 300 s of each other.
        let cars = ((shows["car-a"] ?? []) + (shows["car-b"] ?? [])).sorted { $0.monotonic < $1.monotonic }
        XCTAssertGreaterThan(cars.count, 100)
        for (a, b) in zip(cars, cars.dropFirst()) { XCTAssertGreaterThanOrEqual(b.monotonic - a.monotonic, 300) }
        XCTAssertTrue(passedOver.withLock { $0 }.isEmpty, "there was always something eligible")
    }

    /// The wall clock set back an hour does not re-allow a capped entry, and set forward a day
    /// it does not hold one back; flights follow the wall clock as it is now. With nothing
    /// eligible the request is a no-fill, and why is said.
    func testAWallClockJumpNeitherReallowsNorBlocks() async throws {
        let clock = VirtualScheduleClock(wall: ISO8601DateFormatter().date(from: "2026-06-01T10:00:00Z")!)
        let passedOver = Locked<[String]>([])
        let catalog = try catalog("""
            {"version": 2, "pause_ads": [{"id": "once", "image": "pause.png", "cap": {"per_hour": 1}},
                                         {"id": "june", "image": "pause.png", "flight": {"end": "2026-06-02T00:00:00Z"}}]}
            """, clock: clock, passedOver: passedOver)
        let content = ContentInfo(id: "ep")
        func next() async throws -> String? {
            let creative = try await catalog.ad(for: AdRequest(content: content, kind: .pauseAd, position: 0))
            if let creative { catalog.didShow(creative, content: content) }
            return creative?.id
        }
        let first = try await next(), second = try await next()
        XCTAssertEqual(Set([first, second]), ["once", "june"])
        var got = try await next()
        XCTAssertEqual(got, "june", "capped for the hour")
        clock.jumpWall(-3600)   // set back an hour: still capped
        got = try await next()
        XCTAssertEqual(got, "june")
        clock.advance(3601)
        let third = try await next(), fourth = try await next()
        XCTAssertEqual(Set([third, fourth]), ["once", "june"], "an hour of the monotonic clock later")
        clock.jumpWall(2 * 86_400)   // forward two days: the flight is over; the cap holds only an hour
        got = try await next()
        XCTAssertNil(got, "capped, and past its flight")
        XCTAssertEqual(passedOver.withLock { $0 }.last, "cap")
        clock.advance(3601)
        got = try await next()
        XCTAssertEqual(got, "once")
    }

    /// Version 2 fields in a version 1 catalog, and bad values, are refused with the field.
    func testVersion2FieldsAreCheckedInWords() throws {
        let clock = VirtualScheduleClock(wall: Date())
        for (json, field, reason) in [
            (#"{"version": 1, "pause_ads": [{"id": "a", "image": "pause.png", "weight": 2}]}"#, "pause_ads[0]", "version\": 2"),
            (#"{"version": 2, "pause_ads": [{"id": "a", "image": "pause.png", "weight": 0}]}"#, "pause_ads[0].weight", "1 to 1000"),
            (#"{"version": 2, "pause_ads": [{"id": "a", "image": "pause.png", "flight": {"start": "tomorrow"}}]}"#, "pause_ads[0].flight.start", "ISO 8601"),
            (#"{"version": 2, "pause_ads": [{"id": "a", "image": "pause.png", "flight": {"start": "2026-02-01", "end": "2026-01-01"}}]}"#, "pause_ads[0].flight", "ends before"),
            (#"{"version": 2, "pause_ads": [{"id": "a", "image": "pause.png", "daypart": [{"days": ["funday"], "from": "09:00", "to": "17:00"}]}]}"#, "pause_ads[0].daypart", "not a day"),
            (#"{"version": 2, "pause_ads": [{"id": "a", "image": "pause.png", "cap": {"per_hour": 0}}]}"#, "pause_ads[0].cap.per_hour", "1 to"),
            (#"{"version": 3, "pause_ads": []}"#, "version", "not supported"),
            (#"{"version": 2, "pause_ads": [{"id": "a", "image": "pause.png", "weight": 1.5}]}"#, "pause_ads[0].weight", "whole number"),
            (#"{"version": 2, "pause_ads": [{"id": "a", "image": "pause.png", "cap": {"per_hour": 2.5}}]}"#, "pause_ads[0].cap.per_hour", "whole number"),
            (#"{"version": 1, "pause_ads": [{"id": "a", "image": "pause.png", "max_per_episode": 0.5}]}"#, "pause_ads[0].max_per_episode", "whole number"),
        ] {
            XCTAssertThrowsError(try catalog(json, clock: clock), json) { error in
                guard let error = error as? CatalogError else { return XCTFail("\(error)") }
                XCTAssertEqual(error.field, field, "\(error)")
                XCTAssertTrue(error.reason.contains(reason), "\(error)")
            }
        }
    }

    /// A catalog is checked whole (issue 34, 21): nine problems in nine entries are nine
    /// problems, each named by its JSON path — not the first alone.
    func testEveryProblemOfACatalogIsNamed() throws {
        let bad = (0..<9).map { #"{"id": "p\#($0)", "image": "pause.png", "weight": 0}"# }.joined(separator: ", ")
        XCTAssertThrowsError(try catalog(#"{"version": 2, "pause_ads": [\#(bad)]}"#, clock: VirtualScheduleClock(wall: Date()))) { error in
            guard let error = error as? CatalogError else { return XCTFail("\(error)") }
            XCTAssertEqual(error.problems.map(\.field), (0..<9).map { "pause_ads[\($0)].weight" })
            XCTAssertEqual("\(error)".split(separator: "\n").count, 9, "a line a problem")
        }
    }

    /// Weights share voice among overlays eligible at once too (issue 34, 20): two overlays with
    /// the same slots, weights 3 and 1, shown 3:1 across the slots of an episode — A A B A.
    func testOverlayWeightsShareVoiceAtTheSameSlot() async throws {
        try Data([1, 2, 3]).write(to: folder.appendingPathComponent("overlay.png"))
        let slots = (0..<40).map { #"{"start": \#(Double($0) * 10 + 1), "duration": 5}"# }.joined(separator: ", ")
        let catalog = try catalog("""
            {"version": 2, "overlays": [{"id": "heavy", "image": "overlay.png", "weight": 3, "slots": [\(slots)]},
                                        {"id": "light", "image": "overlay.png", "weight": 1, "slots": [\(slots)]}]}
            """, clock: VirtualScheduleClock(wall: Date()))
        let content = ContentInfo(id: "ep", duration: 500)
        var shown: [String] = []
        for slot in 0..<40 {
            let creative = try await catalog.ad(for: AdRequest(content: content, kind: .overlay, position: Double(slot) * 10))
            shown.append(try XCTUnwrap(creative).id)
        }
        XCTAssertEqual(shown.filter { $0 == "heavy" }.count, 30)
        XCTAssertEqual(shown.filter { $0 == "light" }.count, 10)
        XCTAssertEqual(Array(shown.prefix(4)), ["heavy", "heavy", "light", "heavy"], "a smooth rotation, never a streak of chance")
    }
}
