import AdRuntime
import Foundation

/// A database locked by another process at open (a backup, an operator's `sqlite3` holding
/// `BEGIN EXCLUSIVE` on a rollback-journal file) is "later", never "never":
///
/// - the outbox opens an in-memory database instead and works on it as on the file — beacons
///   queued and sent, plays recorded and listed — within the same bounds (each drop counted);
/// - the courier tries the file again every `Waiting.retry` seconds (`openIfWaiting`); once it
///   opens, everything the memory held is written into it in one transaction (`absorb`):
///   beacons not yet delivered, the counters, and the plays, numbered in the file's ledger and
///   chained in the order they closed — and the outbox goes on with the file;
/// - at a stop while still locked (`finish`), the memory database is written beside the file
///   (`adplayerd.sqlite-pending-<ms>`, synced, then renamed into place), and the next start
///   imports it the same way (`importSideFile`). Nothing billable is lost on any of these paths.
///
/// Both ways are said once (`OutboxEvent.databaseLocked`, `.databaseOpened`).
extension BeaconOutbox {
    struct Waiting {
        let path: String
        /// When the file was last tried (monotonic seconds).
        var lastTry: Double
        static let retry = 2.0
    }

    /// While the file is locked: tries it again, once `Waiting.retry` seconds have passed, and
    /// when it opens moves what the memory held into it. Returns the seconds until the next
    /// try, nil when the outbox is on its file. The courier calls it.
    @discardableResult
    public func openIfWaiting(now force: Bool = false) -> Double? {
        var event: OutboxEvent?
        let next: Double? = state.withLock { state in
            guard var waiting = state.waiting else { return nil }
            let now = clock.monotonicNow()
            let due = waiting.lastTry + Waiting.retry - now
            guard force || due <= 0 else { return due }
            waiting.lastTry = now
            state.waiting = waiting
            // A beacon of the memory database in flight keeps its id until it is answered.
            guard state.inFlight.isEmpty, state.memory.isEmpty, state.delivered.isEmpty, state.schedule.isEmpty else { return Waiting.retry }
            do {
                let file = try SQLiteDatabase.openRepairing(path: waiting.path, durability: configuration.durability, onWarning: onWarning)
                var (saved, ledger) = try Self.prepare(file, clock: clock, configuration: configuration, onWarning: onWarning)
                let memoryRun = state.run.now()
                let moved = try file.transaction {
                    let moved = try Self.absorb(state.db, offset: saved, into: file, ledger: &ledger)
                    saved += memoryRun
                    try file.execute("INSERT OR REPLACE INTO outbox_meta (key, value) VALUES ('run_seconds', ?)", [.text(String(saved))])
                    return moved
                }
                state.db = file
                state.ledger = ledger
                state.run = RunClock(saved: saved, clock: clock)
                state.lastAliveSaved = state.run.now()
                state.waiting = nil
                let unsaved = state.unsaved
                try Self.count(&state)
                for (name, value) in unsaved { state.counters[name, default: 0] += value }
                event = .databaseOpened(beacons: moved.beacons, plays: moved.plays, from: "memory")
                return nil
            } catch {
                return Waiting.retry
            }
        }
        if let event {
            onEvent(event)
            enqueued(())   // what was kept is due on the file now
        }
        return next
    }

    /// At a stop: a database still locked is tried once more; if it still is, what the memory
    /// holds goes to a side file beside it that the next start imports. False when that could
    /// not be written either (said: nothing else can keep it).
    @discardableResult
    public func finish() -> Bool {
        guard openIfWaiting(now: true) != nil else { return true }
        return state.withLock { state in
            guard let waiting = state.waiting else { return true }
            let side = "\(waiting.path)-pending-\(Int64(clock.wallNow().timeIntervalSince1970 * 1000))"
            let temporary = side + ".tmp"
            do {
                try state.db.execute("INSERT OR REPLACE INTO outbox_meta (key, value) VALUES ('run_seconds', ?)", [.text(String(state.run.now()))])
                unlink(temporary)
                try state.db.execute("VACUUM INTO ?", [.text(temporary)])
                let fd = open(temporary, O_RDONLY | O_CLOEXEC)
                guard fd >= 0, fsync(fd) == 0 else {
                    if fd >= 0 { close(fd) }
                    throw SQLiteError(code: -1, message: "\(temporary): cannot be synced (\(String(cString: strerror(errno))))")
                }
                close(fd)
                guard rename(temporary, side) == 0 else {
                    throw SQLiteError(code: -1, message: "\(side): \(String(cString: strerror(errno)))")
                }
                // SQLite wrote the file (VACUUM INTO); its new name is made durable as every
                // durable write's is (AtomicFile).
                let folder = (waiting.path as NSString).deletingLastPathComponent
                AtomicFile.syncFolder(folder.isEmpty ? "." : folder)
                onWarning("\(waiting.path) was still locked at the stop: what this run kept (beacons, proof of play) is in \(side); "
                          + "the next start imports it")
                return true
            } catch {
                unlink(temporary)
                onWarning("\(waiting.path) was still locked at the stop and \(side) cannot be written (\(error)): "
                          + "the beacons and plays of this run that were kept in memory are lost")
                return false
            }
        }
    }

    /// At start, on the file: imports the side files a stop left while the file was locked
    /// (oldest first), then removes them. One that cannot be read is left where it is, said.
    func importSideFile() {
        let waitingPath = state.withLock { $0.db.path }
        guard waitingPath != ":memory:" else { return }
        let folder = (waitingPath as NSString).deletingLastPathComponent
        let prefix = (waitingPath as NSString).lastPathComponent + "-pending-"
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder.isEmpty ? "." : folder)) ?? [])
            .filter { $0.hasPrefix(prefix) && !$0.hasSuffix(".tmp") && !$0.hasSuffix("-wal") && !$0.hasSuffix("-shm") && !$0.hasSuffix("-journal") }
            .sorted()
        for name in names {
            let side = (folder.isEmpty ? "." : folder) + "/" + name
            var event: OutboxEvent?
            state.withLock { state in
                do {
                    // Imported once: its name is recorded in the transaction that takes it in, so a
                    // start that dies between that commit and the file's removal does not take
                    // its beacons and plays a second time at the next.
                    try state.db.execute("CREATE TABLE IF NOT EXISTS imported_side_files (name TEXT PRIMARY KEY, at REAL NOT NULL)")
                    if try !state.db.execute("SELECT 1 FROM imported_side_files WHERE name = ?", [.text(name)]).isEmpty {
                        for suffix in ["", "-wal", "-shm", "-journal"] { unlink(side + suffix) }
                        onWarning("\(side): already imported (a start died before it could remove it); removed")
                        return
                    }
                    let source = try SQLiteDatabase(path: side, readOnly: true)
                    let sideRun = (try source.execute("SELECT value FROM outbox_meta WHERE key = 'run_seconds'")).first?.first?.text.flatMap(Double.init) ?? 0
                    var ledger = state.ledger
                    let base = state.run.now()
                    let moved = try state.db.transaction {
                        try state.db.execute("INSERT INTO imported_side_files (name, at) VALUES (?, ?)", [.text(name), .real(clock.wallNow().timeIntervalSince1970)])
                        try state.db.execute("DELETE FROM imported_side_files WHERE name NOT IN (SELECT name FROM imported_side_files ORDER BY at DESC LIMIT 100)")
                        let moved = try Self.absorb(source, offset: base, into: state.db, ledger: &ledger)
                        try state.db.execute("INSERT OR REPLACE INTO outbox_meta (key, value) VALUES ('run_seconds', ?)",
                                             [.text(String(base + sideRun))])
                        return moved
                    }
                    state.ledger = ledger
                    state.run = RunClock(saved: base + sideRun, clock: clock)
                    let unsaved = state.unsaved
                    try Self.count(&state)
                    for (name, value) in unsaved { state.counters[name, default: 0] += value }
                    for suffix in ["", "-wal", "-shm", "-journal"] { unlink(side + suffix) }
                    event = .databaseOpened(beacons: moved.beacons, plays: moved.plays, from: side)
                } catch {
                    onWarning("\(side): what a stop kept while the database was locked cannot be imported (\(error)); it is left where it is")
                }
            }
            if let event { onEvent(event) }
        }
    }

    /// Writes every beacon, counter and play of `source` into `db` (inside the caller's
    /// transaction), run times shifted by `offset`: plays numbered in `db`'s ledger, the
    /// closed ones chained in the order they closed in `source`. Returns what it moved.
    static func absorb(_ source: SQLiteDatabase, offset: Double, into db: SQLiteDatabase,
                       ledger: inout LedgerHead) throws -> (beacons: Int, plays: Int) {
        func shifted(_ value: SQLiteValue) -> SQLiteValue { value.real.map { .real($0 + offset) } ?? .null }
        let beacons = try source.execute("""
            SELECT url, event, play, billable, created_run, wall, mono, boot, synced, attempts, next_run, last_error, deadline_run
            FROM beacons ORDER BY id
            """)
        for row in beacons {
            try db.execute("""
                INSERT INTO beacons (url, event, play, billable, created_run, wall, mono, boot, synced, attempts, next_run, last_error, deadline_run)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, [row[0], row[1], row[2], row[3], shifted(row[4]), row[5], row[6], row[7], row[8], row[9], shifted(row[10]), row[11],
                      shifted(row[12])])
        }
        for row in try source.execute("SELECT name, value FROM outbox_counters") {
            try db.execute("""
                INSERT INTO outbox_counters (name, value) VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET value = value + excluded.value
                """, [row[0], row[1]])
        }
        // A side file an earlier version wrote has no loudness columns: NULL for them.
        let sourceColumns = Set(try source.execute("PRAGMA table_info(plays)").compactMap { $0.count > 1 ? $0[1].text : nil })
        let loudness = PlayRecord.loudnessColumns.map { sourceColumns.contains($0) ? $0 : "NULL" }.joined(separator: ", ")
        let plays = try source.execute("""
            SELECT id, ad_id, kind, source, content_id, started_wall, started_run, venue, impressions, latlong, ad_duration,
                   beacons_total, beacons_sent, beacons_dropped, beacons_deadline, viewable, display, display_evidence, \(loudness)
            FROM plays ORDER BY seq
            """)
        var moved = 0
        for row in plays {
            guard try db.execute("SELECT 1 FROM plays WHERE id = ?", [row[0]]).isEmpty else { continue }
            try db.execute("""
                INSERT INTO plays (id, ad_id, kind, source, content_id, started_wall, started_run, venue, impressions, latlong, ad_duration,
                                   beacons_total, beacons_sent, beacons_dropped, beacons_deadline, viewable, display, display_evidence,
                                   audio, ad_lufs, ad_peak_dbtp, content_lufs, target_lufs, gain_db, seq)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, Array(row[0..<6]) + [shifted(row[6])] + Array(row[7..<24]) + [.integer(ledger.lastSequence + 1)])
            ledger.lastSequence += 1
            moved += 1
        }
        for row in try source.execute("""
            SELECT id, ended_wall, ended_run, seconds, reason, viewable FROM plays WHERE ended_wall IS NOT NULL ORDER BY chain_pos, ended_run
            """) {
            guard let id = row[0].text, let wall = row[1].real else { continue }
            try ledger.close(db, id: id, PlayEnd(wall: wall, run: (row[2].real ?? 0) + offset, seconds: row[3].real,
                                                 reason: row[4].text ?? "ended", viewable: row[5].text))
        }
        try ledger.save(db)
        return (beacons.count, moved)
    }
}
