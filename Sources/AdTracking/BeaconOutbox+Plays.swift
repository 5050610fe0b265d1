import AdRuntime
import AdSources
import Foundation

extension BeaconOutbox {
    // MARK: Proof of play

    /// An ad went on screen: its row, with the next sequence number, written (durably) before
    /// `record` returns — and with it the run clock, the first heartbeat of its time on screen.
    public func recordPlayStart(_ play: Play) {
        state.withLock { state in
            state.openPlays.insert(play.id)
            do {
                var ledger = state.ledger
                try state.db.transaction {
                    try Self.insertPlay(state.db, play, run: state.run.now(), &ledger)
                    try saveRun(&state)
                }
                state.ledger = ledger
                state.lastAliveSaved = state.run.now()
                prunePlays(&state)
            } catch {
                state.diskFailing = true
                var kept = play
                kept.startedRun = state.run.now()
                state.pendingPlays[play.id] = kept
            }
        }
        enqueued(())   // the courier's heartbeat runs while it is on screen
    }

    /// A play's loudness columns (`PlayRecord.loudnessColumns`): its rule (`none` without
    /// sound: never NULL for a play recorded now), then each level a finite number or NULL.
    static func loudnessValues(_ loudness: LoudnessDecision?) -> [SQLiteValue] {
        [.text(loudness?.rule.rawValue ?? "none")]
            + [loudness?.ad?.integrated, loudness?.ad?.truePeak, loudness?.content, loudness?.target, loudness?.gain]
                .map { value in value.flatMap { $0.isFinite ? SQLiteValue.real(($0 * 100).rounded() / 100) : nil } ?? .null }
    }

    /// Writes a play's row with the ledger's next sequence number. Inside a transaction.
    private static func insertPlay(_ db: SQLiteDatabase, _ play: Play, run: Double, _ ledger: inout LedgerHead) throws {
        guard try db.execute("SELECT 1 FROM plays WHERE id = ?", [.text(play.id)]).isEmpty else { return }
        try db.execute("""
            INSERT INTO plays (id, ad_id, kind, source, content_id, started_wall, started_run, venue, impressions, latlong, ad_duration, seq,
                               audio, ad_lufs, ad_peak_dbtp, content_lufs, target_lufs, gain_db)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, [.text(play.id), .text(play.adID), .text(play.kind), play.source.map { .text($0) } ?? .null,
                  .text(play.contentID), .real(play.startedWall), .real(play.startedRun ?? run),
                  play.venue.map { .text($0) } ?? .null, play.impressions.map { .real($0) } ?? .null,
                  play.latLong.map { .text($0) } ?? .null, play.adDuration.map { .real($0) } ?? .null, .integer(ledger.lastSequence + 1)]
                + Self.loudnessValues(play.loudness))
        ledger.lastSequence += 1
        try db.execute("INSERT OR REPLACE INTO outbox_meta (key, value) VALUES ('ledger_seq', ?)", [.text(String(ledger.lastSequence))])
    }

    /// It ended: when, why, how long it was on screen, whether it was viewable. The end is
    /// chained into the ledger in the same transaction (`LedgerHead.close`).
    public func recordPlayEnd(id: String, endedWall: Double, seconds: Double?, reason: String, viewable: String?) {
        state.withLock { state in
            state.openPlays.remove(id)
            let ended = PlayEnd(wall: endedWall, run: state.run.now(), seconds: seconds, reason: reason, viewable: viewable)
            if var waiting = state.pendingPlays[id] {
                waiting.ended = ended
                state.pendingPlays[id] = waiting
                return
            }
            do {
                guard state.pendingUpdates[id] == nil else { throw SQLiteError(code: 0, message: "an earlier update of this play waits") }
                var ledger = state.ledger
                try state.db.transaction { try ledger.close(state.db, id: id, ended) }
                state.ledger = ledger
            } catch {
                // Kept, and the disk marked failing: written with the plays when it takes writes.
                state.diskFailing = true
                state.pendingUpdates[id, default: PlayUpdate()].ended = ended
            }
        }
    }

    /// Its viewability, when it was decided before the end (a closed play's row is not changed).
    public func recordViewability(id: String, _ viewable: String) {
        mark(id) { $0.viewable = viewable } update: { $0.viewable = viewable }
    }

    /// What the screen showed while it was up (issue 36), judged before the end (a closed
    /// play's row is not changed: the chain holds it as it closed).
    public func recordDisplay(id: String, _ display: DisplayEvidence) {
        mark(id) { $0.display = display } update: { $0.display = display }
    }

    /// Its impression was withheld (`pop-require-display`, not verified: `notUsed` went instead):
    /// it counts no audience — `impressions` 0 in its row and every export (before it closes).
    public func recordNoAudience(id: String) {
        mark(id) { $0.impressions = 0 } update: { $0.impressions = 0 }
    }

    /// Writes what was decided of an open play (`viewable`, `display`), or keeps it with the
    /// play or its waiting update while the disk refuses writes.
    private func mark(_ id: String, play: (inout Play) -> Void, update: (inout PlayUpdate) -> Void) {
        state.withLock { state in
            if state.pendingPlays[id] != nil {
                play(&state.pendingPlays[id]!)
                return
            }
            do {
                guard state.pendingUpdates[id] == nil else { throw SQLiteError(code: 0, message: "an earlier update of this play waits") }
                var marks = PlayUpdate()
                update(&marks)
                try Self.writeMarks(state.db, id: id, viewable: marks.viewable, display: marks.display, impressions: marks.impressions)
            } catch {
                // Kept, and the disk marked failing: written with the plays when it takes writes.
                state.diskFailing = true
                update(&state.pendingUpdates[id, default: PlayUpdate()])
            }
        }
    }

    /// Sets an open play's viewability, display evidence and audience (those given).
    private static func writeMarks(_ db: SQLiteDatabase, id: String, viewable: String?, display: DisplayEvidence?, impressions: Double? = nil) throws {
        if let impressions {
            try db.execute("UPDATE plays SET impressions = ? WHERE id = ? AND chain_pos IS NULL", [.real(impressions), .text(id)])
        }
        if let viewable {
            try db.execute("UPDATE plays SET viewable = ? WHERE id = ? AND chain_pos IS NULL", [.text(viewable), .text(id)])
        }
        if let display {
            try db.execute("UPDATE plays SET display = ?, display_evidence = ? WHERE id = ? AND chain_pos IS NULL",
                           [.text(display.verdict.rawValue), .text(display.recorded), .text(id)])
        }
    }

    /// Writes the plays the disk did not take. Under the lock.
    func flushPlays(_ state: inout State) {
        guard !state.pendingPlays.isEmpty || !state.pendingUpdates.isEmpty else { return }
        let waiting = state.pendingPlays.values.sorted { ($0.startedRun ?? 0, $0.id) < ($1.startedRun ?? 0, $1.id) }
        let updates = state.pendingUpdates
        var ledger = state.ledger
        do {
            try state.db.transaction {
                for play in waiting {
                    try Self.insertPlay(state.db, play, run: state.run.now(), &ledger)
                    try Self.writeMarks(state.db, id: play.id, viewable: play.viewable, display: play.display)
                }
                for (id, update) in updates {
                    try Self.writeMarks(state.db, id: id, viewable: update.viewable, display: update.display, impressions: update.impressions)
                }
                // The ends, in the order they happened: the chain's order.
                let ends = waiting.compactMap { play in play.ended.map { (play.id, $0) } } + updates.compactMap { id, update in update.ended.map { (id, $0) } }
                for (id, ended) in ends.sorted(by: { $0.1.run < $1.1.run }) {
                    try ledger.close(state.db, id: id, ended)
                }
                try saveRun(&state)
            }
            state.ledger = ledger
            state.pendingPlays = [:]
            state.pendingUpdates = [:]
        } catch {
            state.diskFailing = true
        }
    }

    /// A run-only outbox (`StateDurability.runOnly`, in memory) written whole to its file: after
    /// the run, a reader of its own (a simulation's plays.csv, `plays verify --state-dir`)
    /// opens it. Nothing to do for any other.
    public func writeOut() throws {
        try state.withLock { try $0.db.writeOut() }
    }

    /// While a play of this run is on screen, the run clock — the last moment the daemon knew
    /// it was — is saved every `heartbeat` seconds (one small transaction), so that a start
    /// after a kill closes it there (`LedgerHead.closeLeftOpen`). Returns the seconds until it
    /// is due again, nil while no play is open (and always for a `.runOnly` file: no kill to
    /// survive). The courier calls it.
    @discardableResult
    public func keepAlive() -> Double? {
        state.withLock { state in
            guard configuration.ownsLedger, configuration.durability == .crashSafe, !state.openPlays.isEmpty else { return nil }
            let now = state.run.now()
            let due = state.lastAliveSaved + configuration.heartbeat - now
            guard due <= 0.001 else { return due }   // a millisecond early is on time (no wake for a rounding's remainder)
            guard !state.diskFailing else { return configuration.heartbeat }
            do {
                try state.db.transaction { try saveRun(&state) }
                state.lastAliveSaved = now
                state.heartbeats += 1
            } catch {
                // The next write that works saves it; a failing disk is handled by the beacons' path.
                state.lastAliveSaved = now
            }
            return configuration.heartbeat
        }
    }

    /// The ledger: its id and its last sequence number (what readers page up to); `waiting`
    /// while the file is locked and plays are numbered in memory for now (renumbered in the
    /// file's ledger once it opens: readers wait for it).
    public func ledger() -> (id: String, lastSequence: Int64, chainPosition: Int64, waiting: Bool) {
        state.withLock { ($0.ledger.id, $0.ledger.lastSequence, $0.ledger.chainPosition, $0.waiting != nil) }
    }

    /// The plays closed after chain position `position`, in chain order, at most `limit`: each
    /// once it closed, with its link (a feed that publishes plays as they close).
    public func chainedPlays(after position: Int64, limit: Int = 10_000) -> [PlayRecord] {
        state.withLock { state in
            flushPlays(&state)
            savePlays(&state)
            let rows = (try? state.db.execute("""
                SELECT \(PlayRecord.columns) FROM plays WHERE chain_pos > ? ORDER BY chain_pos LIMIT ?
                """, [.integer(position), .integer(Int64(max(1, limit)))])) ?? []
            return rows.map(PlayRecord.init(row:))
        }
    }

    /// Heartbeats written since the outbox opened (for the benchmarks and the docs' figure).
    public func heartbeatCount() -> Int { state.withLock { $0.heartbeats } }

    /// Keeps proof of play within its bounds (rows, age in run time); now and then. Under the lock.
    func prunePlays(_ state: inout State) {
        state.playsSincePrune += 1
        guard state.playsSincePrune >= 100 else { return }
        state.playsSincePrune = 0
        _ = try? state.db.transaction {
            try LedgerHead.prune(state.db, maxRows: configuration.playsMaxRows, olderThan: state.run.now() - configuration.playsMaxAge,
                                 lastSequence: state.ledger.lastSequence)
        }
    }

    /// The plays that started at or after `since` (wall clock) and, with `afterSequence`, whose
    /// sequence number comes after it (in sequence order then: a cursor), oldest first, at most
    /// `limit` (`newest`: the last `limit` of them).
    public func plays(since: Double? = nil, afterSequence: Int64? = nil, limit: Int = 10_000, newest: Bool = false) -> [PlayRecord] {
        state.withLock { state in
            flushPlays(&state)
            savePlays(&state)
            let order = newest ? "seq DESC" : afterSequence == nil ? "started_wall, seq" : "seq"
            let rows = (try? state.db.execute("""
                SELECT \(PlayRecord.columns) FROM plays WHERE started_wall >= ? AND seq > ?
                       ORDER BY \(order) LIMIT ?
                """, [.real(since ?? -1e18), .integer(afterSequence ?? -1), .integer(Int64(max(1, limit)))])) ?? []
            let plays = rows.map(PlayRecord.init(row:))
            return newest ? plays.reversed() : plays
        }
    }

    /// The ledger's chained plays in chain order, and its verdict (`adplayerd plays verify`):
    /// the chain from its stored anchor (the ledger's start, or the last play pruned) to its
    /// stored head, every link, and the last sequence number the ledger handed out.
    public static func verifyLedger(path: String) throws -> (ledger: String, verdict: PlayLedger.Verdict) {
        let db = try SQLiteDatabase(path: path, readOnly: true)
        var meta: [String: String] = [:]
        for row in try db.execute("SELECT key, value FROM outbox_meta") {
            if let key = row[0].text, let value = row[1].text { meta[key] = value }
        }
        let id = meta["ledger_id"] ?? ""
        let plays = try db.execute("SELECT \(PlayRecord.columns) FROM plays WHERE chain_pos IS NOT NULL ORDER BY chain_pos").map(PlayRecord.init(row:))
        var verdict = PlayLedger.verify(plays, genesis: id.isEmpty ? nil : PlayLedger.genesis(id))
        guard verdict.broken == nil, !id.isEmpty else { return (id, verdict) }
        let maxSequence = try db.execute("SELECT MAX(seq) FROM plays").first?.first?.integer
        verdict.broken = PlayLedger.checkStored(plays, LedgerHead.Stored(meta), maxSequence: maxSequence, genesis: PlayLedger.genesis(id))
        return (id, verdict)
    }

    /// Seconds the oldest beacon not yet delivered has waited (run time), nil if none waits.
    public func oldestPendingAge() -> Double? {
        state.withLock { state in
            let now = state.run.now()
            var oldest: Double?
            // Delivered rows whose deletion the disk refused are not waiting: skipped.
            let rows = (try? state.db.execute("SELECT id, created_run FROM beacons ORDER BY id LIMIT ?",
                                              [.integer(Int64(state.delivered.count + 1))])) ?? []
            if let row = rows.first(where: { !state.delivered.contains($0[0].integer ?? -1) }) { oldest = row[1].real }
            for beacon in state.memory {
                oldest = min(oldest ?? beacon.createdRun, beacon.createdRun)
            }
            return oldest.map { max(0, now - $0) }
        }
    }
}
