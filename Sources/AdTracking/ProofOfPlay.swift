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
    /// Set while the disk refuses writes: the end, waiting to be written with the start.
    var ended: (wall: Double, run: Double, seconds: Double?, reason: String, viewable: String?)?
    var viewable: String?

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
    /// The play's row number: it only grows (a cursor: `plays` after it). 0 where not read.
    public var row: Int64
    public var venue: String?
    public var impressions: Double?
    public var latLong: String?
    public var adDuration: Double?

    /// The columns `init(row:)` reads, in order.
    static let columns = """
        id, ad_id, kind, source, content_id, started_wall, ended_wall, seconds, reason, viewable,
        beacons_total, beacons_sent, beacons_dropped, rowid, beacons_deadline, venue, impressions, latlong, ad_duration
        """

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
        self.row = row.count > 13 ? row[13].integer ?? 0 : 0
        beaconsDeadline = row.count > 14 ? Int(row[14].integer ?? 0) : 0
        venue = row.count > 15 ? row[15].text : nil
        impressions = row.count > 16 ? row[16].real : nil
        latLong = row.count > 17 ? row[17].text : nil
        adDuration = row.count > 18 ? row[18].real : nil
    }

    /// Reads a live daemon's database read only (a WAL reader: it does not stop or block the
    /// daemon): the plays since `since`, oldest first.
    public static func read(path: String, since: Double?, limit: Int = 1_000_000) throws -> [PlayRecord] {
        let db = try SQLiteDatabase(path: path, readOnly: true)
        let rows = try db.execute("""
            SELECT \(columns) FROM plays WHERE started_wall >= ? ORDER BY started_wall, rowid LIMIT ?
            """, [.real(since ?? -1e18), .integer(Int64(limit))])
        return rows.map(PlayRecord.init(row:))
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
        for (name, type) in [("venue", "TEXT"), ("impressions", "REAL"), ("ad_duration", "REAL"), ("latlong", "TEXT"),
                             ("beacons_deadline", "INTEGER NOT NULL DEFAULT 0")] where !columns.contains(name) {
            try db.execute("ALTER TABLE plays ADD COLUMN \(name) \(type)")
        }
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
