import AdRuntime
import AdSources
import Foundation

extension BeaconOutbox {
    // MARK: Proof of play

    /// An ad went on screen: its row, written (durably) before `record` returns.
    public func recordPlayStart(_ play: Play) {
        state.withLock { state in
            do {
                try Self.insertPlay(state.db, play, run: state.run.now())
                prunePlays(&state)
            } catch {
                state.diskFailing = true
                state.pendingPlays[play.id] = play
            }
        }
    }

    private static func insertPlay(_ db: SQLiteDatabase, _ play: Play, run: Double) throws {
        try db.execute("""
            INSERT OR IGNORE INTO plays (id, ad_id, kind, source, content_id, started_wall, started_run, venue, impressions, latlong, ad_duration)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """, [.text(play.id), .text(play.adID), .text(play.kind), play.source.map { .text($0) } ?? .null,
                  .text(play.contentID), .real(play.startedWall), .real(run),
                  play.venue.map { .text($0) } ?? .null, play.impressions.map { .real($0) } ?? .null,
                  play.latLong.map { .text($0) } ?? .null, play.adDuration.map { .real($0) } ?? .null])
    }

    /// It ended: when, why, how long it was on screen, whether it was viewable.
    public func recordPlayEnd(id: String, endedWall: Double, seconds: Double?, reason: String, viewable: String?) {
        state.withLock { state in
            if var waiting = state.pendingPlays[id] {
                waiting.ended = (endedWall, state.run.now(), seconds, reason, viewable)
                state.pendingPlays[id] = waiting
                return
            }
            let ended = (wall: endedWall, run: state.run.now(), seconds: seconds, reason: reason, viewable: viewable)
            do {
                guard state.pendingUpdates[id] == nil else { throw SQLiteError(code: 0, message: "an earlier update of this play waits") }
                try Self.writeEnd(state.db, id: id, ended)
            } catch {
                // Kept, and the disk marked failing: written with the plays when it takes writes.
                state.diskFailing = true
                state.pendingUpdates[id, default: PlayUpdate()].ended = ended
            }
        }
    }

    private static func writeEnd(_ db: SQLiteDatabase, id: String,
                                 _ ended: (wall: Double, run: Double, seconds: Double?, reason: String, viewable: String?)) throws {
        try db.execute("""
            UPDATE plays SET ended_wall = ?, ended_run = ?, seconds = ?, reason = ?, viewable = COALESCE(?, viewable) WHERE id = ?
            """, [.real(ended.wall), .real(ended.run), ended.seconds.map { .real($0) } ?? .null, .text(ended.reason),
                  ended.viewable.map { .text($0) } ?? .null, .text(id)])
    }

    /// Its viewability, when it was decided before the end.
    public func recordViewability(id: String, _ viewable: String) {
        state.withLock { state in
            if state.pendingPlays[id] != nil {
                state.pendingPlays[id]?.viewable = viewable
                return
            }
            do {
                guard state.pendingUpdates[id] == nil else { throw SQLiteError(code: 0, message: "an earlier update of this play waits") }
                try state.db.execute("UPDATE plays SET viewable = ? WHERE id = ?", [.text(viewable), .text(id)])
            } catch {
                // Kept, and the disk marked failing: written with the plays when it takes writes.
                state.diskFailing = true
                state.pendingUpdates[id, default: PlayUpdate()].viewable = viewable
            }
        }
    }

    /// Writes the plays the disk did not take. Under the lock.
    func flushPlays(_ state: inout State) {
        guard !state.pendingPlays.isEmpty || !state.pendingUpdates.isEmpty else { return }
        let waiting = state.pendingPlays, updates = state.pendingUpdates
        do {
            try state.db.transaction {
                for play in waiting.values {
                    try Self.insertPlay(state.db, play, run: state.run.now())
                    if let ended = play.ended {
                        try state.db.execute("""
                            UPDATE plays SET ended_wall = ?, ended_run = ?, seconds = ?, reason = ?, viewable = ? WHERE id = ?
                            """, [.real(ended.wall), .real(ended.run), ended.seconds.map { .real($0) } ?? .null, .text(ended.reason),
                                  (ended.viewable ?? play.viewable).map { .text($0) } ?? .null, .text(play.id)])
                    } else if let viewable = play.viewable {
                        try state.db.execute("UPDATE plays SET viewable = ? WHERE id = ?", [.text(viewable), .text(play.id)])
                    }
                }
                for (id, update) in updates {
                    if let viewable = update.viewable {
                        try state.db.execute("UPDATE plays SET viewable = ? WHERE id = ?", [.text(viewable), .text(id)])
                    }
                    if let ended = update.ended { try Self.writeEnd(state.db, id: id, ended) }
                }
            }
            state.pendingPlays = [:]
            state.pendingUpdates = [:]
        } catch {
            state.diskFailing = true
        }
    }

    /// Keeps proof of play within its bounds (rows, age in run time); now and then. Under the lock.
    func prunePlays(_ state: inout State) {
        state.playsSincePrune += 1
        guard state.playsSincePrune >= 100 else { return }
        state.playsSincePrune = 0
        _ = try? state.db.execute("DELETE FROM plays WHERE started_run < ?", [.real(state.run.now() - configuration.playsMaxAge)])
        _ = try? state.db.execute("DELETE FROM plays WHERE rowid IN (SELECT rowid FROM plays ORDER BY rowid DESC LIMIT -1 OFFSET ?)",
                                  [.integer(Int64(configuration.playsMaxRows))])
    }

    /// The plays that started at or after `since` (wall clock) and, with `afterRow`, whose row
    /// comes after it (in row order then: a cursor), oldest first, at most `limit` (`newest`:
    /// the last `limit` of them).
    public func plays(since: Double? = nil, afterRow: Int64? = nil, limit: Int = 10_000, newest: Bool = false) -> [PlayRecord] {
        state.withLock { state in
            flushPlays(&state)
            savePlays(&state)
            let order = newest ? "rowid DESC" : afterRow == nil ? "started_wall, rowid" : "rowid"
            let rows = (try? state.db.execute("""
                SELECT \(PlayRecord.columns) FROM plays WHERE started_wall >= ? AND rowid > ?
                       ORDER BY \(order) LIMIT ?
                """, [.real(since ?? -1e18), .integer(afterRow ?? -1), .integer(Int64(max(1, limit)))])) ?? []
            let plays = rows.map(PlayRecord.init(row:))
            return newest ? plays.reversed() : plays
        }
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
