import AdRuntime
import AdSources
import AdTestSupport
@testable import AdTracking
import Foundation
import XCTest

/// The ledger of proof of play (issue 33, docs/reporting.md "The ledger"): sequence numbers
/// that are never used twice, a chain stored when a play closes that names an edited row,
/// plays a kill left open closed at their last heartbeat, salvage that says what it lost, a
/// file locked at open that loses nothing, and numbers written as numbers.
final class PlayLedgerTests: XCTestCase {
    private var directory: URL!

    override func setUpWithError() throws {
        directory = FileManager.default.temporaryDirectory.appendingPathComponent("ledger-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: directory) }

    private var database: String { directory.appendingPathComponent("adplayerd.sqlite").path }

    private func outbox(owner: Bool = true, clock: any TrackingClock = SystemTrackingClock(), configure: (inout BeaconOutbox.Configuration) -> Void = { _ in },
                        events: Locked<[OutboxEvent]>? = nil, warnings: Locked<[String]>? = nil) throws -> BeaconOutbox {
        var configuration = BeaconOutbox.Configuration()
        configuration.ownsLedger = owner
        configure(&configuration)
        return try BeaconOutbox(path: database, configuration: configuration, clock: clock,
                                onEvent: { e in events?.withLock { $0.append(e) } }, onWarning: { w in warnings?.withLock { $0.append(w) } })
    }

    private func play(_ id: String, at wall: Double = 1_800_000_000) -> Play {
        var play = Play(id: id, adID: "ad-\(id)", kind: "overlay", source: "catalog", contentID: "ep", startedWall: wall)
        play.latLong = "40.712800,-74.006000"
        play.venue = "lobby"
        return play
    }

    private func show(_ outbox: BeaconOutbox, _ id: String, seconds: Double = 5) {
        outbox.recordPlayStart(play(id))
        outbox.recordPlayEnd(id: id, endedWall: 1_800_000_000 + seconds, seconds: seconds, reason: "completed", viewable: "viewable")
    }

    /// Sequence numbers only grow: across a reopen, after pruning, and after salvage
    /// (which keeps the ledger's id and says which plays it could not carry, in a new segment).
    func testASequenceNumberIsNeverUsedTwiceAcrossReopenPruningAndSalvage() throws {
        var ledger = ""
        do {
            let outbox = try outbox(configure: { $0.playsMaxRows = 20 })
            for n in 1...120 { show(outbox, "p\(n)") }
            XCTAssertEqual(outbox.ledger().lastSequence, 120)
            let kept = outbox.plays(afterSequence: 0, limit: 1000)
            XCTAssertEqual(kept.count, 40, "pruned to 20 at the 100th play, 20 more since")
            XCTAssertEqual(kept.first?.sequence, 81)
            XCTAssertEqual(kept.last?.sequence, 120)
            ledger = outbox.ledger().id
        }
        do {
            let outbox = try outbox(configure: { $0.playsMaxRows = 20 })
            XCTAssertEqual(outbox.ledger().id, ledger, "the same ledger after a reopen")
            show(outbox, "q1")
            XCTAssertEqual(outbox.plays(newest: true).last?.sequence, 121)
            XCTAssertEqual(try BeaconOutbox.verifyLedger(path: database).verdict.broken?.sequence, nil)
            let db = try SQLiteDatabase(path: database)
            try db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        }
        // The plays table destroyed: salvage carries the rest (the ledger's meta among it).
        let root = try SQLiteDatabase(path: database, readOnly: true)
            .execute("SELECT rootpage FROM sqlite_master WHERE type = 'table' AND name = 'plays'").first?.first?.integer ?? 0
        XCTAssertGreaterThan(root, 1)
        let handle = try FileHandle(forUpdating: URL(fileURLWithPath: database))
        try handle.seek(toOffset: UInt64(root - 1) * 4096)
        try handle.write(contentsOf: Data(repeating: 0x5A, count: 4096))
        try handle.close()
        let warnings = Locked<[String]>([])
        let salvaged = try outbox(warnings: warnings)
        XCTAssertTrue(warnings.withLock { $0 }.contains { $0.contains(".bad-") }, "\(warnings.withLock { $0 })")
        XCTAssertEqual(salvaged.ledger().id, ledger, "salvage keeps the ledger's id")
        show(salvaged, "after")
        let after = try XCTUnwrap(salvaged.plays(newest: true).last)
        XCTAssertEqual(after.sequence, 122, "numbered after every play the ledger ever numbered")
        XCTAssertTrue(after.segment?.contains("plays 81–121 could not be carried") == true, after.segment ?? "no segment")
        let verdict = try BeaconOutbox.verifyLedger(path: database).verdict
        XCTAssertNil(verdict.broken)
        XCTAssertEqual(verdict.segments.map(\.sequence), [122])
    }

    /// The chain is made when a play closes (in the order plays close, not start) and stored:
    /// `plays verify` finds it whole, and names the row an edit changed — and the play after a
    /// row whose hash was rewritten to match.
    func testTheChainIsStoredWhenAPlayClosesAndAnEditedRowIsNamed() throws {
        let outbox = try outbox()
        for n in 1...4 { show(outbox, "p\(n)") }
        outbox.recordPlayStart(play("long"))     // 5: starts before 6 and ends after it
        show(outbox, "p6")
        outbox.recordPlayEnd(id: "long", endedWall: 1_800_000_030, seconds: 30, reason: "completed", viewable: nil)
        outbox.recordViewability(id: "long", "viewable")   // a closed row is not changed
        let chained = outbox.plays(afterSequence: 0).sorted { ($0.chainPosition ?? 0) < ($1.chainPosition ?? 0) }
        XCTAssertEqual(chained.map(\.sequence), [1, 2, 3, 4, 6, 5], "chained in the order they closed")
        XCTAssertEqual(chained.first?.previousHash, PlayLedger.genesis(outbox.ledger().id))
        XCTAssertNil(chained.last?.viewable)
        var (_, verdict) = try BeaconOutbox.verifyLedger(path: database)
        XCTAssertNil(verdict.broken)
        XCTAssertEqual(verdict.rows, 6)

        let db = try SQLiteDatabase(path: database)
        try db.execute("UPDATE plays SET seconds = 50 WHERE seq = 3")
        verdict = try BeaconOutbox.verifyLedger(path: database).verdict
        XCTAssertEqual(verdict.broken?.sequence, 3)
        XCTAssertTrue(verdict.broken?.reason.contains("do not match its hash") == true)
        // Its hash rewritten to match its new fields: the play chained after it names the break.
        var row = try XCTUnwrap(outbox.plays(afterSequence: 2, limit: 1).first)
        try db.execute("UPDATE plays SET hash = ? WHERE seq = 3", [.text(PlayLedger.hash(row, previous: row.previousHash ?? ""))])
        verdict = try BeaconOutbox.verifyLedger(path: database).verdict
        XCTAssertEqual(verdict.broken?.sequence, 4)
        // A row removed from the middle: the next one names it too.
        try db.execute("UPDATE plays SET seconds = 5 WHERE seq = 3")
        row = try XCTUnwrap(outbox.plays(afterSequence: 2, limit: 1).first)
        try db.execute("UPDATE plays SET hash = ? WHERE seq = 3", [.text(PlayLedger.hash(row, previous: row.previousHash ?? ""))])
        XCTAssertNil(try BeaconOutbox.verifyLedger(path: database).verdict.broken, "as it was")
        try db.execute("DELETE FROM plays WHERE seq = 2")
        XCTAssertEqual(try BeaconOutbox.verifyLedger(path: database).verdict.broken?.sequence, 3)
    }

    /// A run-only outbox (a simulation's private state): no heartbeat (no kill to survive),
    /// nothing written to its file as the run goes, and the file written whole when the run
    /// lets go of it — the run's plays all there, chained and verifying; written again after
    /// more plays.
    func testARunOnlyLedgerHasNoHeartbeatAndIsWrittenWholeAtTheEnd() throws {
        let clock = TestTrackingClock()
        let outbox = try outbox(clock: clock) { $0.durability = .runOnly }
        outbox.recordPlayStart(play("open", at: clock.wallNow().timeIntervalSince1970))
        clock.advance(12)
        XCTAssertNil(outbox.keepAlive(), "a play open, and no heartbeat")
        XCTAssertEqual(outbox.heartbeatCount(), 0)
        outbox.recordPlayEnd(id: "open", endedWall: clock.wallNow().timeIntervalSince1970, seconds: 12, reason: "completed", viewable: nil)
        show(outbox, "done")
        XCTAssertFalse(FileManager.default.fileExists(atPath: database), "nothing written as the run goes")
        try outbox.writeOut()
        let verdict = try BeaconOutbox.verifyLedger(path: database).verdict
        XCTAssertNil(verdict.broken)
        XCTAssertEqual(verdict.rows, 2, "both plays, chained")
        show(outbox, "after")
        try outbox.writeOut()
        XCTAssertEqual(try BeaconOutbox.verifyLedger(path: database).verdict.rows, 3, "written again, whole")
        XCTAssertEqual(try outbox.plays(afterSequence: 0).count, 3, "and the run goes on in memory")
    }

    /// A play a kill left open is closed `interrupted` at the next start of the ledger's owner,
    /// ended at its last heartbeat (written every `heartbeat` seconds while it is on screen, on
    /// the run clock), its seconds counted to it; a tool that opens the file meanwhile leaves it
    /// open. The heartbeat writes nothing while no play is open.
    func testAPlayLeftOpenByAKillIsClosedInterruptedAtItsLastHeartbeat() throws {
        let clock = TestTrackingClock()
        do {
            let outbox = try outbox(clock: clock)
            XCTAssertNil(outbox.keepAlive(), "no play open: no heartbeat")
            show(outbox, "done")
            outbox.recordPlayStart(play("cut", at: clock.wallNow().timeIntervalSince1970))
            clock.advance(4)
            XCTAssertEqual(outbox.keepAlive() ?? 0, 1, accuracy: 1e-6, "not due yet")
            clock.advance(8)
            XCTAssertEqual(outbox.keepAlive(), 5, "written, due again in 5 s")
            clock.advance(3)
            outbox.keepAlive()
            XCTAssertEqual(outbox.heartbeatCount(), 1)
            // kill -9: nothing more is written.
        }
        do {
            let tool = try outbox(owner: false, clock: clock)
            XCTAssertNil(tool.plays(afterSequence: 0).first { $0.id == "cut" }?.ended, "a tool leaves it open")
        }
        let warnings = Locked<[String]>([])
        let restarted = try outbox(clock: clock, warnings: warnings)
        let cut = try XCTUnwrap(restarted.plays(afterSequence: 0).first { $0.id == "cut" })
        XCTAssertEqual(cut.reason, "interrupted")
        XCTAssertEqual(cut.seconds ?? 0, 12, accuracy: 1e-6, "counted to its last heartbeat")
        XCTAssertEqual((cut.ended ?? 0) - cut.started, 12, accuracy: 1e-6)
        XCTAssertNotNil(cut.hash, "chained")
        XCTAssertTrue(warnings.withLock { $0 }.contains { $0.contains("1 play left open") }, "\(warnings.withLock { $0 })")
        XCTAssertNil(try BeaconOutbox.verifyLedger(path: database).verdict.broken)
    }

    /// A file another process holds locked at open is "later", never "never": the ledger's owner
    /// works in memory (beacons, plays listed, the ledger marked waiting) and writes all of it
    /// into the file once it opens — the plays numbered and chained after the file's own.
    func testAFileLockedAtOpenLosesNothingAndTakesItAllOnceItOpens() throws {
        do {
            let before = try outbox()
            before.enqueue(urls: (0..<5).map { "http://127.0.0.1:9/before-\($0)" })
            show(before, "before")
        }
        let holder = try SQLiteDatabase(path: database)
        try holder.execute("PRAGMA journal_mode=DELETE")
        try holder.execute("BEGIN EXCLUSIVE")
        let events = Locked<[OutboxEvent]>([])
        let outbox = try outbox(events: events)
        XCTAssertTrue(events.withLock { $0 }.contains { if case .databaseLocked = $0 { true } else { false } })
        XCTAssertTrue(outbox.ledger().waiting)
        outbox.enqueue(urls: (0..<3).map { "http://127.0.0.1:9/during-\($0)" })
        show(outbox, "during")
        outbox.recordPlayStart(play("open"))
        XCTAssertEqual(outbox.plays(afterSequence: 0).map(\.id), ["during", "open"], "listed while the file is locked")
        XCTAssertNotNil(outbox.openIfWaiting(now: true), "still locked")
        try holder.execute("COMMIT")
        XCTAssertNil(outbox.openIfWaiting(now: true), "open now")
        XCTAssertFalse(outbox.ledger().waiting)
        XCTAssertTrue(events.withLock { $0 }.contains { $0 == .databaseOpened(beacons: 3, plays: 2, from: "memory") }, "\(events.withLock { $0 })")
        XCTAssertEqual(outbox.pendingCount(), 8, "every beacon, before and during")
        outbox.recordPlayEnd(id: "open", endedWall: 1_800_000_009, seconds: 9, reason: "completed", viewable: nil)
        let plays = outbox.plays(afterSequence: 0)
        XCTAssertEqual(plays.map(\.id), ["before", "during", "open"])
        XCTAssertEqual(plays.map(\.sequence), [1, 2, 3])
        XCTAssertEqual(plays.last?.reason, "completed")
        XCTAssertNil(try BeaconOutbox.verifyLedger(path: database).verdict.broken)
        XCTAssertEqual(try BeaconOutbox.verifyLedger(path: database).verdict.rows, 3)
    }

    /// A stop while the file is still locked writes what the memory holds beside it (synced);
    /// the next start imports it and removes it.
    func testAStopWhileLockedLeavesASideFileThatTheNextStartImports() throws {
        do { show(try outbox(), "before") }
        let holder = try SQLiteDatabase(path: database)
        try holder.execute("PRAGMA journal_mode=DELETE")
        try holder.execute("BEGIN EXCLUSIVE")
        do {
            let outbox = try outbox()
            outbox.enqueue(urls: ["http://127.0.0.1:9/kept"])
            show(outbox, "kept")
            XCTAssertTrue(outbox.finish())
        }
        var sides = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains("-pending-") }
        XCTAssertEqual(sides.count, 1, "\(sides)")
        try holder.execute("COMMIT")
        // A copy, to put back as a start that died between the import's commit and the removal leaves it.
        let side = directory.appendingPathComponent(sides[0]).path
        let copy = directory.appendingPathComponent("copy-of-the-side-file").path
        try FileManager.default.copyItem(atPath: side, toPath: copy)
        let events = Locked<[OutboxEvent]>([])
        do {
            let next = try outbox(events: events)
            XCTAssertEqual(next.pendingCount(), 1)
            XCTAssertEqual(next.plays(afterSequence: 0).map(\.id), ["before", "kept"])
            XCTAssertTrue(events.withLock { $0 }.contains { if case .databaseOpened(1, 1, _) = $0 { true } else { false } })
            sides = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.contains("-pending-") }
            XCTAssertEqual(sides, [], "imported, then removed")
            XCTAssertNil(try BeaconOutbox.verifyLedger(path: database).verdict.broken)
        }
        // Imported once (issue 45, 10): the file back as if the removal never happened.
        try FileManager.default.moveItem(atPath: copy, toPath: side)
        let warnings = Locked<[String]>([])
        let again = try outbox(warnings: warnings)
        XCTAssertEqual(again.pendingCount(), 1, "its beacon not taken twice")
        XCTAssertEqual(again.plays(afterSequence: 0).map(\.id), ["before", "kept"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: side), "removed now")
        XCTAssertTrue(warnings.withLock { $0 }.contains { $0.contains("already imported") }, "\(warnings.withLock { $0 })")
        XCTAssertNil(try BeaconOutbox.verifyLedger(path: database).verdict.broken)
    }

    /// Numbers are written as numbers (west of Greenwich, south of the equator), text alone is
    /// guarded against formulas; an exported log's chain is checked from its bytes.
    func testNumbersAreNumbersAndAnExportedChainIsCheckedFromItsBytes() throws {
        var record = PlayRecord(row: Array(repeating: .null, count: 31))
        record.sequence = 7
        record.id = "-1+1"
        record.adID = "=HYPERLINK(\"x\")"
        record.kind = "overlay"
        record.contentID = "ep,1"
        record.started = 1_800_000_000
        record.ended = 1_800_000_005.5
        record.seconds = 5.5
        record.latLong = "-33.868800,-151.209300"
        let cells = PlayLedger.cells(record)
        let column = { (name: String) in cells[PlayLedger.columns.firstIndex(of: name)!] }
        XCTAssertEqual(column("latitude"), "-33.868800")
        XCTAssertEqual(column("longitude"), "-151.209300")
        XCTAssertEqual(column("play_seconds"), "5.500")
        XCTAssertEqual(column("play_id"), "'-1+1", "text that starts like a formula is guarded")
        XCTAssertEqual(column("creative_id"), "\"'=HYPERLINK(\"\"x\"\")\"")
        XCTAssertEqual(column("content_id"), "\"ep,1\"")

        let header = (PlayLedger.columns + ["previous_hash", "row_hash", "screen_id"]).joined(separator: ",")
        var previous = PlayLedger.genesis("test"), lines = [header]
        for n in 1...3 {
            record.sequence = Int64(n)
            let hash = PlayLedger.hash(record, previous: previous)
            lines.append(PlayLedger.cells(record).joined(separator: ",") + ",\(previous),\(hash),screen-1")
            previous = hash
        }
        var verdict = try PlayLedger.verify(csv: lines.joined(separator: "\n") + "\n").get()
        XCTAssertNil(verdict.broken)
        XCTAssertEqual(verdict.rows, 3)
        XCTAssertEqual(verdict.anchor, PlayLedger.genesis("test"))
        lines[2] = lines[2].replacingOccurrences(of: "5.500", with: "9.500")
        verdict = try PlayLedger.verify(csv: lines.joined(separator: "\n")).get()
        XCTAssertEqual(verdict.broken?.sequence, 2)
        XCTAssertThrowsError(try PlayLedger.verify(csv: "a,b\n1,2\n").get())

        // Display evidence (issue 36): a play without it hashes its line as before the two
        // columns existed; with it, both are in the line — blanked, the row no longer verifies.
        let before = PlayLedger.cells(record).dropLast(2 + PlayRecord.loudnessColumns.count).joined(separator: ",")
        XCTAssertEqual(PlayLedger.hash(record, previous: "p"), PlayLedger.hash(line: before, previous: "p"))
        record.display = "verified"
        record.displayEvidence = #"{"checks":[{"at":"2027-01-15T08:00:00.000Z","said":"the ad is shown","what":"pixels"}]}"#
        XCTAssertEqual(PlayLedger.hash(record, previous: "p"),
                       PlayLedger.hash(line: PlayLedger.cells(record).dropLast(PlayRecord.loudnessColumns.count).joined(separator: ","), previous: "p"))
        previous = PlayLedger.genesis("test")
        lines = [header]
        for n in 1...3 {
            record.sequence = Int64(n)
            if n == 3 { record.display = nil; record.displayEvidence = nil }   // older plays and newer ones in one file
            let hash = PlayLedger.hash(record, previous: previous)
            lines.append(PlayLedger.cells(record).joined(separator: ",") + ",\(previous),\(hash),screen-1")
            previous = hash
        }
        verdict = try PlayLedger.verify(csv: lines.joined(separator: "\n") + "\n").get()
        XCTAssertNil(verdict.broken, "\(String(describing: verdict.broken))")
        XCTAssertEqual(verdict.rows, 3)
        let evidenceCell = CSV.field(#"{"checks":[{"at":"2027-01-15T08:00:00.000Z","said":"the ad is shown","what":"pixels"}]}"#)
        XCTAssertTrue(lines[1].contains(",verified,\(evidenceCell),"), lines[1])
        lines[2] = lines[2].replacingOccurrences(of: ",verified,\(evidenceCell),", with: ",,,")
        verdict = try PlayLedger.verify(csv: lines.joined(separator: "\n")).get()
        XCTAssertEqual(verdict.broken?.sequence, 2, "a play's evidence blanked does not verify")
    }

    /// Pruning goes by chain position (issue 45, 2; R21): plays overlap as the daemon's do — a
    /// content play around its ads, an overlay suspended across the mid-roll inside it, which
    /// closes first — and a ledger pruned hundreds of times at its row limit still verifies
    /// whole, from its stored anchor to its stored head; so does a full export, row by row from
    /// its bytes. Removing plays at either end of what is kept, or rewinding its head, is BROKEN
    /// (before: pruning by sequence left holes — "its previous_hash is not the row_hash above it"
    /// on an honest box; deleting the last plays verified whole until the next play).
    func testPruningOverlappingPlaysNeverBreaksTheChain() throws {
        let outbox = try outbox(configure: { $0.playsMaxRows = 40 })
        var clock = 1_800_000_000.0
        func start(_ id: String, _ kind: String) {
            var record = play(id, at: clock)
            record.kind = kind
            outbox.recordPlayStart(record)
            clock += 1
        }
        func end(_ id: String) {
            outbox.recordPlayEnd(id: id, endedWall: clock, seconds: 1, reason: "completed", viewable: "viewable")
            clock += 1
        }
        for round in 0..<1_500 {
            start("c\(round)", "content")
            start("o\(round)", "overlay")
            start("m\(round)", "midroll")
            end("m\(round)")
            end("o\(round)")
            start("p\(round)", "postroll")
            end("p\(round)")
            if round % 7 != 0 { end("c\(round)") }   // some content plays stay open across the next item's ads
            if round % 7 == 1 { end("c\(round - 1)") }
        }
        end("c1498")
        let verdict = try BeaconOutbox.verifyLedger(path: database).verdict
        XCTAssertNil(verdict.broken, "\(String(describing: verdict.broken))")
        XCTAssertLessThanOrEqual(verdict.rows, 40 + 100 * 4, "pruned every 100 plays to 40 rows")
        let chain = try PlayRecord.readChain(path: database, since: nil, afterSequence: nil)
        XCTAssertGreaterThan(chain.first?.chainPosition ?? 0, 5_000, "pruned many times")
        let csv = PlayLedger.doohLog(chain, screen: "s", ledger: "L").map { $0 + "\n" }.joined()
        let exported = try PlayLedger.verify(csv: csv).get()
        XCTAssertNil(exported.broken, "\(String(describing: exported.broken))")
        XCTAssertEqual(exported.anchor, chain.first?.previousHash)

        // Tampering at the ends of what is kept is named.
        let db = try SQLiteDatabase(path: database)
        let last = try XCTUnwrap(chain.last)
        try db.execute("DELETE FROM plays WHERE chain_pos = ?", [.integer(last.chainPosition!)])
        XCTAssertTrue(try BeaconOutbox.verifyLedger(path: database).verdict.broken?.reason.contains("removed") == true, "the last play deleted")
        // The head put back by hand to the row before: it verifies (only the signature and the
        // heads published off the box bind the chain against someone who can write the file).
        try db.execute("UPDATE outbox_meta SET value = ? WHERE key = 'chain_pos'", [.text(String(last.chainPosition! - 1))])
        try db.execute("UPDATE outbox_meta SET value = ? WHERE key = 'chain_head'", [.text(last.previousHash!)])
        XCTAssertNil(try BeaconOutbox.verifyLedger(path: database).verdict.broken)
        let first = try XCTUnwrap(chain.first)
        try db.execute("DELETE FROM plays WHERE chain_pos = ?", [.integer(first.chainPosition!)])
        XCTAssertTrue(try BeaconOutbox.verifyLedger(path: database).verdict.broken?.reason.contains("removed") == true, "the first kept play deleted")
    }

    /// An ad id with a line break in it (an ad server's) is one quoted CSV field: a signed log
    /// with such a row verifies row by row (issue 45, 5: the verifier split lines before it read
    /// the quotes and refused a correct log); two logs of one ledger link, of two do not.
    func testALogWithALineBreakInAnIdVerifiesAndTwoLogsLink() throws {
        var record = PlayRecord(row: Array(repeating: .null, count: 31))
        record.kind = "overlay"
        record.contentID = "ep"
        record.started = 1_800_000_000
        record.ended = 1_800_000_005
        var previous = PlayLedger.genesis("L")
        var plays: [PlayRecord] = []
        for n in 1...4 {
            record.sequence = Int64(n)
            record.id = "play-\(n)"
            record.adID = n == 2 ? "line one\nline two\r\n\"quoted\"" : "ad-\(n)"
            record.previousHash = previous
            record.hash = PlayLedger.hash(record, previous: previous)
            previous = record.hash!
            plays.append(record)
        }
        let whole = PlayLedger.doohLog(plays, screen: "s", ledger: "L").map { $0 + "\n" }.joined()
        let verdict = try PlayLedger.verify(csv: whole).get()
        XCTAssertNil(verdict.broken, "\(String(describing: verdict.broken))")
        XCTAssertEqual(verdict.rows, 4)
        let first = PlayLedger.doohLog(Array(plays.prefix(2)), screen: "s", ledger: "L").map { $0 + "\n" }.joined()
        let second = PlayLedger.doohLog(Array(plays.suffix(2)), screen: "s", ledger: "L").map { $0 + "\n" }.joined()
        let other = PlayLedger.doohLog(Array(plays.suffix(2)), screen: "s", ledger: "M").map { $0 + "\n" }.joined()
        let ends = { (text: String) in try PlayLedger.ends(csv: text).get() }
        XCTAssertNoThrow(try PlayLedger.continues(ends(second), after: ends(first)).get())
        XCTAssertNoThrow(try PlayLedger.continues(ends(whole), after: ends(first)).get(), "an export that overlaps the earlier one")
        XCTAssertThrowsError(try PlayLedger.continues(ends(other), after: ends(first)).get(), "another ledger")
        XCTAssertThrowsError(try PlayLedger.continues(ends(first), after: ends(second)).get(), "not after it")
    }

    /// R28: a play's loudness (how it was levelled, the ad's measured level and true peak, the
    /// content's, the target, the gain) is in its row, hashed with it, and in every export — a
    /// play without sound says `none`, so every play recorded now hashes its whole row (a buyer's
    /// `printf ROW | sha256sum` holds). A play recorded before the columns hashes its line as it
    /// did, so a ledger recorded by an earlier version — and a `dooh-csv` log exported before
    /// them (no loudness columns in its header) — still verifies; a play's loudness blanked or
    /// changed does not.
    func testR28APlaysLoudnessIsInItsRowHashedAndAnOlderLogStillVerifies() throws {
        let outbox = try outbox()
        var loud = play("loud")
        loud.loudness = LoudnessDecision(ad: Loudness(integrated: -14.03, truePeak: -10.5), content: -31, target: -31, gain: -16.97,
                                         rule: .matched)
        outbox.recordPlayStart(loud)
        outbox.recordPlayEnd(id: "loud", endedWall: 1_800_000_030, seconds: 30, reason: "completed", viewable: nil)
        show(outbox, "silent")
        var unmeasured = play("stream")
        unmeasured.loudness = LoudnessDecision(ad: nil, content: nil, target: -24, gain: nil, rule: .normalised)
        outbox.recordPlayStart(unmeasured)
        outbox.recordPlayEnd(id: "stream", endedWall: 1_800_000_040, seconds: 10, reason: "completed", viewable: nil)
        let plays = outbox.plays(afterSequence: 0)
        let first = try XCTUnwrap(plays.first { $0.id == "loud" })
        XCTAssertEqual(first.audio, "matched")
        XCTAssertEqual(first.adLoudness, -14.03)
        XCTAssertEqual(first.adTruePeak, -10.5)
        XCTAssertEqual(first.contentLoudness, -31)
        XCTAssertEqual(first.targetLoudness, -31)
        XCTAssertEqual(first.gain, -16.97)
        let silent = try XCTUnwrap(plays.first { $0.id == "silent" })
        XCTAssertEqual(silent.loudnessCells, ["none", "", "", "", "", ""])
        let stream = try XCTUnwrap(plays.first { $0.id == "stream" })
        XCTAssertEqual(stream.loudnessCells, ["normalised", "", "", "", "-24.00", ""], "normalised as it played: a target, no static gain")
        XCTAssertNil(try BeaconOutbox.verifyLedger(path: database).verdict.broken)

        // Recorded now, with or without sound: every cell, the empty ones included.
        for play in [first, silent, stream] {
            XCTAssertEqual(PlayLedger.hash(play, previous: "p"), PlayLedger.hash(line: PlayLedger.cells(play).joined(separator: ","), previous: "p"))
        }
        XCTAssertTrue(PlayLedger.cells(first).joined(separator: ",").hasSuffix(",,,matched,-14.03,-10.50,-31.00,-31.00,-16.97"))
        // Recorded before loudness (and display) existed: the line it was hashed with then.
        var older = silent
        older.audio = nil
        let old = PlayLedger.cells(older).dropLast(2 + PlayRecord.loudnessColumns.count).joined(separator: ",")
        XCTAssertEqual(PlayLedger.hash(older, previous: "p"), PlayLedger.hash(line: old, previous: "p"))

        // The export: whole, then with a play's gain changed, then blanked.
        let csv = PlayLedger.doohLog(plays.sorted { ($0.chainPosition ?? 0) < ($1.chainPosition ?? 0) }, screen: "s", ledger: outbox.ledger().id)
        XCTAssertTrue(csv[0].contains("ad_lufs,ad_peak_dbtp,content_lufs,target_lufs,gain_db,previous_hash"), csv[0])
        XCTAssertNil(try PlayLedger.verify(csv: csv.joined(separator: "\n")).get().broken)
        var edited = csv
        edited[1] = edited[1].replacingOccurrences(of: ",-16.97,", with: ",-6.97,")
        XCTAssertEqual(try PlayLedger.verify(csv: edited.joined(separator: "\n")).get().broken?.sequence, first.sequence, "a louder gain claimed")
        edited = csv
        edited[1] = edited[1].replacingOccurrences(of: ",matched,-14.03,-10.50,-31.00,-31.00,-16.97,", with: ",,,,,,,")
        XCTAssertEqual(try PlayLedger.verify(csv: edited.joined(separator: "\n")).get().broken?.sequence, first.sequence, "the loudness blanked")

        // A log exported before the columns (its header without them) verifies as it did.
        let oldColumns = Array(PlayLedger.columns.dropLast(PlayRecord.loudnessColumns.count))
        var previous = PlayLedger.genesis("old"), lines = [(oldColumns + ["previous_hash", "row_hash"]).joined(separator: ",")]
        for record in [older, older] {
            let line = PlayLedger.cells(record).dropLast(PlayRecord.loudnessColumns.count)
            let hash = PlayLedger.hash(record, previous: previous)
            lines.append((line + [previous, hash]).joined(separator: ","))
            previous = hash
        }
        let verdict = try PlayLedger.verify(csv: lines.joined(separator: "\n")).get()
        XCTAssertNil(verdict.broken)
        XCTAssertEqual(verdict.rows, 2)
    }

    /// The chain's SHA-256 (libcrypto's own implementation, without its provider set-up) gives
    /// FIPS 180-2's answers, and `hash(line:previous:)` hashes `LINE,PREVIOUS` as documented.
    func testTheChainsSHA256IsSHA256() {
        XCTAssertEqual(PlayLedger.sha256(Array("abc".utf8)), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        XCTAssertEqual(PlayLedger.sha256([]), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        XCTAssertEqual(PlayLedger.sha256(Array("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq".utf8)),
                       "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1")
        XCTAssertEqual(PlayLedger.hash(line: "a", previous: "b"), PlayLedger.sha256(Array("a,b".utf8)))
    }

    /// The ledger hashes times as `ISO8601.format` writes them, made by hand for speed: the
    /// same text as Foundation's formatter, rounding included, over random instants.
    func testTimesAreWrittenAsFoundationWritesThem() {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var generator = SystemRandomNumberGenerator()
        let fixed: [Double] = [0, -0.5, 1_800_000_000.9996, 1_800_000_000.0005, 951_782_400, 4_102_444_799.9994]
        for value in fixed + (0..<5000).map({ _ in Double.random(in: -1e9...4.1e9, using: &generator) }) {
            // Within a ten-thousandth of a millisecond of a half, which way a time rounds is
            // decided by its double's last bits, which Foundation reads after moving the time to
            // its own epoch (2001): both are right; a random time there is not a finding.
            let milliseconds = value * 1000
            if !fixed.contains(value), abs(milliseconds - milliseconds.rounded(.down) - 0.5) < 1e-4 { continue }
            XCTAssertEqual(ISO8601.format(value), formatter.string(from: Date(timeIntervalSince1970: value)), "\(value)")
        }
    }
}
