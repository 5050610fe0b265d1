import AdRuntime
import Foundation

/// An ad that went on screen, as proof of play records it (docs/reporting.md, "Proof of play").
public struct Play: Sendable, Equatable {
    /// The showing's id: the ad's instance (as `ad.started` names it).
    public var id: String
    public var adID: String
    /// `overlay`, `pause`, `postroll`.
    public var kind: String
    /// Which source served it.
    public var source: String?
    public var contentID: String
    /// Wall-clock seconds since 1970 when it went on screen.
    public var startedWall: Double
    /// Where and to whom (digital out of home): the venue's id, the audience a play counts
    /// for (`impressions-per-play`), the screen's `lat,long`; the ad's declared length.
    public var venue: String?
    public var impressions: Double?
    public var latLong: String?
    public var adDuration: Double?
    /// An ad with sound: its measured loudness, the content's, the target and the gain it
    /// played with (R28).
    public var loudness: LoudnessDecision?
    /// Set while the disk refuses writes: when it started by the run clock, and its end,
    /// waiting to be written with the start.
    var startedRun: Double?
    var ended: PlayEnd?
    var viewable: String?
    var display: DisplayEvidence?

    public init(id: String, adID: String, kind: String, source: String?, contentID: String, startedWall: Double) {
        self.id = id
        self.adID = adID
        self.kind = kind
        self.source = source
        self.contentID = contentID
        self.startedWall = startedWall
    }

    public static func == (a: Play, b: Play) -> Bool {
        a.id == b.id && a.adID == b.adID && a.kind == b.kind && a.source == b.source && a.contentID == b.contentID
            && a.startedWall == b.startedWall
    }
}

/// One row of proof of play, as exported.
public struct PlayRecord: Sendable, Equatable {
    public var id: String
    public var adID: String
    public var kind: String
    public var source: String?
    public var contentID: String
    public var started: Double
    public var ended: Double?
    /// Seconds on a visible output.
    public var seconds: Double?
    public var reason: String?
    /// `viewable`, `notViewable`, `undetermined`; nil: not decided (it has not ended).
    public var viewable: String?
    public var beaconsSent: Int
    public var beaconsFailed: Int
    public var beaconsPending: Int
    /// Billable beacons dropped at their `pop-deadline` (not sent late).
    public var beaconsDeadline: Int
    /// The play's sequence number in its ledger: it only grows and is never used again, across
    /// restarts, salvage and a re-created file (a new file is a new ledger, with a new id). A
    /// cursor: `plays` after it. 0 where not read.
    public var sequence: Int64
    public var venue: String?
    public var impressions: Double?
    public var latLong: String?
    public var adDuration: Double?
    /// Its place in the ledger's chain (the order plays were closed in), the hash of the play
    /// chained before it and its own (docs/reporting.md, "The ledger"): nil while it is open.
    public var chainPosition: Int64?
    public var previousHash: String?
    public var hash: String?
    /// Set on the first play of a new chain segment: why the chain starts again there.
    public var segment: String?
    /// What the screen showed (issue 36): `verified`, `unverified` or `off`, and the evidence
    /// (`DisplayEvidence.recorded`: the reason and each check with its time); nil for a play
    /// recorded without it (before display evidence, or still open and not yet judged).
    public var display: String?
    public var displayEvidence: String?
    /// An ad with sound (R28): its measured integrated loudness (LUFS) and true peak (dBTP),
    /// the content's loudness (LUFS, when measured), the loudness aimed at (LUFS; nil: `off`)
    /// and the static gain applied (dB; nil with a target: normalised dynamically, the ad could
    /// not be measured). All nil: a play without sound, or recorded before loudness.
    /// How its level was chosen (`LoudnessDecision.Rule`), or `none`: no ad sound to level (an
    /// image, a text, a content play). Set on every play recorded since loudness, so that its
    /// loudness columns are always in its hashed line; nil for a play recorded before.
    public var audio: String?
    public var adLoudness: Double?
    public var adTruePeak: Double?
    public var contentLoudness: Double?
    public var targetLoudness: Double?
    public var gain: Double?

    /// The columns `init(row:)` reads, in order.
    static let columns = """
        id, ad_id, kind, source, content_id, started_wall, ended_wall, seconds, reason, viewable,
        beacons_total, beacons_sent, beacons_dropped, seq, beacons_deadline, venue, impressions, latlong, ad_duration,
        chain_pos, prev_hash, hash, segment, display, display_evidence, audio, ad_lufs, ad_peak_dbtp, content_lufs, target_lufs, gain_db
        """

    /// Its loudness as CSV cells, in `loudnessColumns`' order (two decimals; empty for none).
    public var loudnessCells: [String] {
        [CSV.field(audio ?? "")] + [adLoudness, adTruePeak, contentLoudness, targetLoudness, gain].map { CSV.number($0, "%.2f") }
    }

    /// The loudness columns of `plays`, in `columns`' order.
    public static let loudnessColumns = ["audio", "ad_lufs", "ad_peak_dbtp", "content_lufs", "target_lufs", "gain_db"]

    init(row: [SQLiteValue]) {
        id = row[0].text ?? ""
        adID = row[1].text ?? ""
        kind = row[2].text ?? ""
        source = row[3].text
        contentID = row[4].text ?? ""
        started = row[5].real ?? 0
        ended = row[6].real
        seconds = row[7].real
        reason = row[8].text
        viewable = row[9].text
        let total = Int(row[10].integer ?? 0)
        beaconsSent = Int(row[11].integer ?? 0)
        beaconsFailed = Int(row[12].integer ?? 0)
        beaconsPending = max(0, total - beaconsSent - beaconsFailed)
        sequence = row[13].integer ?? 0
        beaconsDeadline = Int(row[14].integer ?? 0)
        venue = row[15].text
        impressions = row[16].real
        latLong = row[17].text
        adDuration = row[18].real
        chainPosition = row[19].integer
        previousHash = row[20].text
        hash = row[21].text
        segment = row[22].text
        display = row[23].text
        displayEvidence = row[24].text
        audio = row[25].text
        adLoudness = row[26].real
        adTruePeak = row[27].real
        contentLoudness = row[28].real
        targetLoudness = row[29].real
        gain = row[30].real
    }

    /// Reads a live daemon's database read only (a WAL reader: it does not stop or block the
    /// daemon): the plays since `since`, oldest first.
    public static func read(path: String, since: Double?, limit: Int = 1_000_000) throws -> [PlayRecord] {
        let db = try SQLiteDatabase(path: path, readOnly: true)
        let rows = try db.execute("""
            SELECT \(columns) FROM plays WHERE started_wall >= ? ORDER BY started_wall, seq LIMIT ?
            """, [.real(since ?? -1e18), .integer(Int64(limit))])
        return rows.map(PlayRecord.init(row:))
    }
}

extension PlayRecord {
    /// The closed plays of the ledger in chain order (what `dooh-csv` exports), read only:
    /// from the first play that started at or after `since` (plays closed after it that started
    /// a little before are kept: the chain has no gap), or after the play numbered
    /// `afterSequence` in the chain (an export continuing one that ended with it).
    /// The ledger's id (`outbox_meta`'s `ledger_id`), nil when the file has no ledger yet.
    public static func ledgerID(path: String) throws -> String? {
        try SQLiteDatabase(path: path, readOnly: true).execute("SELECT value FROM outbox_meta WHERE key = 'ledger_id'").first?.first?.text
    }

    /// A page of the chain: at most `limit` plays after chain position `position`, in chain order.
    public static func readChain(path: String, afterChain position: Int64, limit: Int) throws -> [PlayRecord] {
        try SQLiteDatabase(path: path, readOnly: true)
            .execute("SELECT \(columns) FROM plays WHERE chain_pos > ? ORDER BY chain_pos LIMIT ?", [.integer(position), .integer(Int64(max(1, limit)))])
            .map(PlayRecord.init(row:))
    }

    public static func readChain(path: String, since: Double?, afterSequence: Int64?) throws -> [PlayRecord] {
        let db = try SQLiteDatabase(path: path, readOnly: true)
        var from: Int64 = 0
        if let since {
            guard let first = try db.execute("SELECT MIN(chain_pos) FROM plays WHERE chain_pos IS NOT NULL AND started_wall >= ?",
                                             [.real(since)]).first?.first?.integer else { return [] }
            from = first
        } else if let afterSequence, afterSequence > 0 {
            if let position = try db.execute("SELECT chain_pos FROM plays WHERE seq = ?", [.integer(afterSequence)]).first?.first {
                guard let position = position.integer else {
                    throw LedgerFileError("play \(afterSequence) is still open: it is not in the chain yet")
                }
                from = position + 1
            } else {
                let lowest = try db.execute("SELECT MIN(seq) FROM plays").first?.first?.integer ?? 0
                guard afterSequence < lowest else { throw LedgerFileError("there is no play \(afterSequence) in this ledger") }
            }
        }
        return try db.execute("SELECT \(columns) FROM plays WHERE chain_pos >= ? ORDER BY chain_pos", [.integer(from)])
            .map(PlayRecord.init(row:))
    }
}

/// The outbox's tables and their migrations.
enum OutboxSchema {
    static func create(_ db: SQLiteDatabase) throws {
        try db.execute("CREATE TABLE IF NOT EXISTS outbox_counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL)")
        try db.execute("CREATE TABLE IF NOT EXISTS outbox_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
        try db.execute("""
            CREATE TABLE IF NOT EXISTS plays (
                id TEXT PRIMARY KEY, ad_id TEXT NOT NULL, kind TEXT NOT NULL, source TEXT, content_id TEXT NOT NULL,
                started_wall REAL NOT NULL, started_run REAL NOT NULL, ended_wall REAL, ended_run REAL, seconds REAL,
                reason TEXT, viewable TEXT, beacons_total INTEGER NOT NULL DEFAULT 0, beacons_sent INTEGER NOT NULL DEFAULT 0,
                beacons_dropped INTEGER NOT NULL DEFAULT 0)
            """)
        try db.execute("CREATE INDEX IF NOT EXISTS plays_started ON plays(started_wall)")
        // Added since: the screen's place and audience, the ad's declared length, beacons
        // dropped at their deadline (issue 27). Older files gain them, empty.
        let columns = Set(try db.execute("PRAGMA table_info(plays)").compactMap { $0.count > 1 ? $0[1].text : nil })
        // And the ledger (docs/reporting.md, "The ledger"): the sequence, the chain.
        for (name, type) in [("venue", "TEXT"), ("impressions", "REAL"), ("ad_duration", "REAL"), ("latlong", "TEXT"),
                             ("beacons_deadline", "INTEGER NOT NULL DEFAULT 0"), ("seq", "INTEGER"), ("chain_pos", "INTEGER"),
                             ("prev_hash", "TEXT"), ("hash", "TEXT"), ("segment", "TEXT"),
                             ("display", "TEXT"), ("display_evidence", "TEXT"),
                             ("audio", "TEXT"), ("ad_lufs", "REAL"), ("ad_peak_dbtp", "REAL"), ("content_lufs", "REAL"), ("target_lufs", "REAL"),
                             ("gain_db", "REAL")] where !columns.contains(name) {
            try db.execute("ALTER TABLE plays ADD COLUMN \(name) \(type)")
        }
        try db.execute("CREATE INDEX IF NOT EXISTS plays_seq ON plays(seq)")
        try db.execute("CREATE INDEX IF NOT EXISTS plays_chain ON plays(chain_pos) WHERE chain_pos IS NOT NULL")
        try db.execute("CREATE INDEX IF NOT EXISTS plays_open ON plays(seq) WHERE ended_wall IS NULL")
    }

    static let beaconsTable = """
        CREATE TABLE IF NOT EXISTS beacons (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            url TEXT NOT NULL,
            event TEXT NOT NULL DEFAULT '',
            play TEXT,
            billable INTEGER NOT NULL DEFAULT 0,
            created_run REAL NOT NULL,
            wall REAL NOT NULL,
            mono REAL NOT NULL,
            boot TEXT NOT NULL,
            synced INTEGER NOT NULL,
            attempts INTEGER NOT NULL DEFAULT 0,
            next_run REAL NOT NULL,
            last_error TEXT,
            deadline_run REAL)
        """

    /// The beacons table, from an earlier version's (URL, wall-clock creation time) if there is
    /// one: those beacons are kept, aged from now (their age in run time is not known).
    static func migrate(_ db: SQLiteDatabase, runNow: Double, clock: any TrackingClock) throws {
        let columns = try db.execute("PRAGMA table_info(beacons)").compactMap { $0.count > 1 ? $0[1].text : nil }
        if !columns.isEmpty, !columns.contains("created_run") {
            try db.transaction {
                try db.execute("ALTER TABLE beacons RENAME TO beacons_v1")
                try db.execute(beaconsTable)
                try db.execute("""
                    INSERT INTO beacons (url, event, created_run, wall, mono, boot, synced, attempts, next_run)
                    SELECT url, 'carried-over', ?, created_at, 0, '', 1, attempts, ? FROM beacons_v1 ORDER BY id
                    """, [.real(runNow), .real(runNow)])
                try db.execute("DROP TABLE beacons_v1")
                try db.execute("DROP INDEX IF EXISTS beacons_due")
            }
        }
        try db.execute(beaconsTable)
        if !(try db.execute("PRAGMA table_info(beacons)").contains { $0.count > 1 && $0[1].text == "deadline_run" }) {
            try db.execute("ALTER TABLE beacons ADD COLUMN deadline_run REAL")
        }
        try db.execute("CREATE INDEX IF NOT EXISTS beacons_next ON beacons(next_run)")
        try db.execute("CREATE INDEX IF NOT EXISTS beacons_deadline ON beacons(deadline_run) WHERE deadline_run IS NOT NULL")
        try db.execute("CREATE INDEX IF NOT EXISTS beacons_billable ON beacons(billable, id)")
    }
}
