import AdRuntime
import AdSources
import CSign
import Foundation

/// The ledger of proof of play (docs/reporting.md, "The ledger"): what a buyer reconciles
/// against, made so that the box cannot quietly rewrite it.
///
/// - Every play gets a **sequence number** when it starts: one more than the ledger's last,
///   kept in `outbox_meta` (`ledger_seq`) beside the ledger's random **id** (`ledger_id`), so
///   neither pruning, a restart nor salvage (which carries `outbox_meta` and the rows' own
///   `seq`) ever hands one out twice. A file found empty or damaged beyond reading starts a new
///   ledger with a new id: readers see the id change and start over.
/// - When a play **closes** (it ended, or a later start found it open: `interrupted`), its
///   final fields and the hash of the play closed before it are hashed into its row, in the
///   transaction that writes its end: `hash = SHA-256(line + "," + previous)`, `line` the
///   ledger's columns of the play as `dooh-csv` writes them (`columns`). The chain runs in
///   the order plays closed (`chain_pos`); its first link is `genesis(id)`.
/// - A **segment** starts where the chain cannot go on from what the box holds (after
///   salvage lost rows; rows recorded before the ledger existed): the next play closed
///   carries the reason in its `segment` column — hashed with it — so a verifier says so.
public enum PlayLedger {
    /// The columns a play's hash covers, in order: the first columns of `dooh-csv`, before
    /// `previous_hash` and `row_hash`.
    public static let columns = ["sequence", "play_id", "kind", "creative_id", "line_id", "content_id", "ad_start_utc", "ad_end_utc",
                                 "play_seconds", "ad_duration_seconds", "reason", "viewable", "venue_id", "impressions",
                                 "latitude", "longitude", "segment", "display", "display_evidence"] + PlayRecord.loudnessColumns

    /// Column groups added to the ledger since it began, in the order they were: a play whose
    /// last groups are all empty hashes without them, as it did before they existed — a play
    /// recorded earlier verifies as it was recorded, and blanking a group that was filled
    /// changes the line.
    static let laterGroups: [[String]] = [["display", "display_evidence"], PlayRecord.loudnessColumns]

    /// How many leading fields of a row with columns `names` its hash covers; `empty(i)`:
    /// whether field `i` is empty.
    static func hashedCount(_ names: [String], empty: (Int) -> Bool) -> Int {
        var end = names.count
        for group in laterGroups.reversed() {
            let start = end - group.count
            guard start >= 0, Array(names[start..<end]) == group else { continue }   // a log made before the group
            guard (start..<end).allSatisfy(empty) else { break }
            end = start
        }
        return end
    }

    /// The columns of `dooh-csv`, in order: the ledger's (hashed), the chain, then the
    /// export's own (covered by the signature, not the chain).
    public static let doohColumns = columns + ["previous_hash", "row_hash", "screen_id", "beacons_deadline", "ledger_id"]

    /// The DOOH ad log (`plays export --format dooh-csv`): a header, then a row a closed play
    /// (chain order) with its stored hashes, and the ledger's id (`plays verify NEW --after OLD`
    /// checks that two exports are of one ledger).
    public static func doohLog(_ plays: [PlayRecord], screen: String, ledger: String) -> [String] {
        [doohColumns.joined(separator: ",")] + plays.map { play in
            (cells(play) + [play.previousHash ?? "", play.hash ?? "", CSV.field(screen), CSV.number(Int64(play.beaconsDeadline)), CSV.field(ledger)])
                .joined(separator: ",")
        }
    }

    /// What a `dooh-csv` log's rows say of its chain, for linking two exports: its ledger's id
    /// (nil for a log made before the column), and its first and last rows.
    public struct LogEnds: Sendable, Equatable {
        public var ledger: String?
        public var firstSequence: Int64
        public var firstPrevious: String
        public var firstSegment: String
        public var lastSequence: Int64
        public var lastHash: String
        /// Every row's hash, to find where an export that overlaps another takes it up.
        public var hashes: Set<String>
    }

    /// The ends of an exported log; nil when it has no rows.
    public static func ends(csv text: String) -> Result<LogEnds?, LedgerFileError> {
        let lines = CSV.records(text[...])
        guard let header = lines.first.flatMap({ CSV.split($0) })?.text, let previousColumn = header.firstIndex(of: "previous_hash"),
              header.indices.contains(previousColumn + 1), let sequenceColumn = header.firstIndex(of: "sequence") else {
            return .failure(LedgerFileError("not a dooh-csv ad log: its header has no sequence, previous_hash, row_hash"))
        }
        let ledgerColumn = header.firstIndex(of: "ledger_id"), segmentColumn = header.firstIndex(of: "segment")
        var ends: LogEnds?
        for (number, line) in lines.dropFirst().enumerated() {
            guard let fields = CSV.split(line)?.text, fields.count == header.count else {
                return .failure(LedgerFileError("line \(number + 2): not \(header.count) fields"))
            }
            let sequence = Int64(fields[sequenceColumn]) ?? 0
            if ends == nil {
                ends = LogEnds(ledger: ledgerColumn.map { fields[$0] }, firstSequence: sequence, firstPrevious: fields[previousColumn],
                               firstSegment: segmentColumn.map { fields[$0] } ?? "", lastSequence: sequence, lastHash: "", hashes: [])
            }
            if let ledgerColumn, fields[ledgerColumn] != ends?.ledger {
                return .failure(LedgerFileError("line \(number + 2): another ledger (\(fields[ledgerColumn])) than the rows above (\(ends?.ledger ?? ""))"))
            }
            ends?.lastSequence = sequence
            ends?.lastHash = fields[previousColumn + 1]
            ends?.hashes.insert(fields[previousColumn + 1])
        }
        return .success(ends)
    }

    /// Whether the log `new` continues the log `old` (`plays verify NEW --after OLD`): one
    /// ledger, and the chain unbroken between them — `new`'s first row chains from `old`'s last,
    /// or `new` holds `old`'s last row (an export that overlaps it) — or a segment at `new`'s
    /// start that says why it starts again. Returns what links them, or why they do not.
    public static func continues(_ new: LogEnds?, after old: LogEnds?) -> Result<String, LedgerFileError> {
        guard let old else { return .success("the earlier log has no plays: nothing to link to") }
        guard let new else { return .success("the new log has no plays since the earlier one") }
        var said = ""
        switch (old.ledger, new.ledger) {
        case (let a?, let b?) where a != b:
            return .failure(LedgerFileError("another ledger: the earlier log is of ledger \(a), this one of \(b) (a new state file): it starts a new chain"))
        case (let a?, _?): said = "ledger \(a): "
        default: said = "(a log without its ledger id: only the chain links them) "
        }
        if new.firstPrevious == old.lastHash {
            return .success(said + "play \(new.firstSequence) chains from play \(old.lastSequence), the earlier log's last")
        }
        if new.hashes.contains(old.lastHash) {
            return .success(said + "this log holds the earlier log's last play (\(old.lastSequence)) and goes on from it")
        }
        if !new.firstSegment.isEmpty {
            return .success(said + "a new segment starts at play \(new.firstSequence): \(new.firstSegment)")
        }
        return .failure(LedgerFileError("play \(new.firstSequence) does not chain from the earlier log's last play (\(old.lastSequence)), "
                                        + "and no segment says why: plays between them are missing"))
    }

    /// The play's ledger cells, in `columns` order: numbers as numbers, text guarded.
    public static func cells(_ play: PlayRecord) -> [String] {
        let place = (play.latLong ?? "").split(separator: ",").compactMap { Double($0.trimmingCharacters(in: .whitespaces)) }
        let line = play.source.map { "\($0):\(play.adID)" } ?? play.adID
        return [CSV.number(play.sequence), CSV.field(play.id), CSV.field(play.kind), CSV.field(play.adID), CSV.field(line),
                CSV.field(play.contentID), CSV.field(ISO8601.format(play.started)), CSV.field(play.ended.map(ISO8601.format) ?? ""),
                CSV.number(play.seconds ?? 0, "%.3f"), CSV.number(play.adDuration, "%.3f"), CSV.field(play.reason ?? ""),
                CSV.field(play.viewable ?? ""), CSV.field(play.venue ?? ""), CSV.number(play.impressions ?? 1),
                CSV.number(place.count == 2 ? place[0] : nil, "%.6f"), CSV.number(place.count == 2 ? place[1] : nil, "%.6f"),
                CSV.field(play.segment ?? ""), CSV.field(play.display ?? ""), CSV.field(play.displayEvidence ?? "")]
            + play.loudnessCells
    }

    /// The text a play's hash covers: its ledger cells, the groups added later (`laterGroups`)
    /// left out at the end while all empty.
    public static func hashedLine(_ cells: [String]) -> String {
        let names = cells.count == columns.count ? columns : Array(columns.prefix(cells.count))
        return cells.prefix(hashedCount(names) { cells[$0].isEmpty }).joined(separator: ",")
    }

    /// SHA-256 (hex) of a play's ledger line and the hash before it: its `row_hash`.
    public static func hash(line: String, previous: String) -> String {
        sha256(Array((line + "," + previous).utf8))
    }

    /// SHA-256 (hex) by OpenSSL's libcrypto: one library for the chain and the exports'
    /// signatures (CSign).
    static func sha256(_ bytes: [UInt8]) -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        // libcrypto's SHA-256 of bytes in memory does not fail; were it to, no stored hash
        // would match this word: the row would not verify, never pass.
        guard bytes.withUnsafeBufferPointer({ csign_sha256($0.baseAddress, $0.count, &digest) }) == 0 else { return "sha256-failed" }
        return digest.map { hexDigits[Int($0 >> 4)] + hexDigits[Int($0 & 15)] }.joined()
    }

    private static let hexDigits = (0..<16).map { String($0, radix: 16) }

    public static func hash(_ play: PlayRecord, previous: String) -> String {
        hash(line: hashedLine(cells(play)), previous: previous)
    }

    /// The hash the ledger's first play chains from.
    public static func genesis(_ ledgerID: String) -> String { sha256(Array("adplayerd ledger \(ledgerID)".utf8)) }

    /// What a verification found.
    public struct Verdict: Sendable, Equatable {
        /// Rows checked, and those that start a segment (sequence, reason).
        public var rows = 0
        public var segments: [(sequence: Int64, reason: String)] = []
        /// The hash the first row chained from.
        public var anchor: String?
        /// The first row that breaks the chain, and why; nil when it is whole.
        public var broken: (sequence: Int64, reason: String)?

        public static func == (a: Verdict, b: Verdict) -> Bool {
            a.rows == b.rows && a.anchor == b.anchor && a.broken?.sequence == b.broken?.sequence && a.segments.map(\.sequence) == b.segments.map(\.sequence)
        }
    }

    /// Checks chained plays in chain order: each row's hash against its fields and the hash
    /// before it, each `previous_hash` against the row before (a segment's first row excepted,
    /// and said). `genesis`: what the ledger's first play (chain position 1) must chain from.
    public static func verify(_ plays: [PlayRecord], genesis: String?) -> Verdict {
        var verdict = Verdict()
        var previous: String?
        for play in plays {
            verdict.rows += 1
            guard let stored = play.hash, let before = play.previousHash else {
                verdict.broken = (play.sequence, "it has no hash although it was chained")
                return verdict
            }
            if let previous, before != previous {
                if let segment = play.segment, !segment.isEmpty {
                    verdict.segments.append((play.sequence, segment))
                } else {
                    verdict.broken = (play.sequence, "its previous_hash is not the hash of the play chained before it "
                                      + "(a play was removed, inserted or rewritten before it)")
                    return verdict
                }
            } else if previous == nil {
                verdict.anchor = before
                if play.chainPosition == 1, let genesis, before != genesis, (play.segment ?? "").isEmpty {
                    verdict.broken = (play.sequence, "the ledger's first play does not chain from the ledger's start")
                    return verdict
                }
                if let segment = play.segment, !segment.isEmpty { verdict.segments.append((play.sequence, segment)) }
            }
            guard hash(play, previous: before) == stored else {
                verdict.broken = (play.sequence, "its fields do not match its hash (the row was changed after it was recorded)")
                return verdict
            }
            previous = stored
        }
        return verdict
    }

    /// What the ledger's own meta says beside its rows: the anchor (the hash the first kept play
    /// chains from and its chain position: the ledger's start, or the last play pruned), the
    /// head (the last play chained and its hash), the last sequence number handed out and the
    /// highest one pruned. A row removed at either end of the chain, or the head rewound, shows
    /// here even when the links between the rows that are left hold. Nil: they agree.
    static func checkStored(_ plays: [PlayRecord], _ stored: LedgerHead.Stored, maxSequence: Int64?, genesis: String) -> (sequence: Int64, reason: String)? {
        let anchorPosition = stored.anchorPosition ?? 0
        let anchor = stored.anchor ?? genesis
        if let first = plays.first {
            if (first.segment ?? "").isEmpty {
                if first.chainPosition != anchorPosition + 1 {
                    return (first.sequence, "the chain starts at position \(first.chainPosition ?? 0); the ledger kept plays from position \(anchorPosition + 1) "
                            + "(plays at its start were removed)")
                }
                if first.previousHash != anchor {
                    return (first.sequence, "its previous_hash is not the ledger's stored anchor (the play before it was removed or changed)")
                }
            }
            var position = first.chainPosition ?? 0
            for play in plays.dropFirst() {
                position += 1
                if play.chainPosition != position, (play.segment ?? "").isEmpty {
                    return (play.sequence, "chain position \(position) is missing (a play was removed before it)")
                }
                position = play.chainPosition ?? position
            }
        }
        let lastPosition = plays.last?.chainPosition ?? anchorPosition
        let lastHash = plays.last?.hash ?? anchor
        if let head = stored.headPosition, head != lastPosition {
            return (plays.last?.sequence ?? 0, "the ledger's head is at chain position \(head); its rows end at \(lastPosition) "
                    + "(the last \(head - lastPosition) plays were removed)")
        }
        if let hash = stored.headHash, hash != lastHash {
            return (plays.last?.sequence ?? 0, "the ledger's stored head is not the hash of its last play (its last plays were removed or changed)")
        }
        if let last = stored.lastSequence, max(maxSequence ?? 0, stored.prunedSequence ?? 0) < last {
            return (last, "the ledger handed out sequence numbers up to \(last); its rows end at \(max(maxSequence ?? 0, stored.prunedSequence ?? 0)) "
                    + "(its last plays were removed)")
        }
        return nil
    }

    /// Checks an exported `dooh-csv` file's chain row by row, from its bytes: each row's
    /// `row_hash` is SHA-256 of the row's raw text up to and with its `previous_hash`, and each
    /// `previous_hash` the `row_hash` above it (a segment's first row excepted, and said).
    public static func verify(csv text: String) -> Result<Verdict, LedgerFileError> {
        // Records, not lines: a quoted field may hold a line break (an ad server's id).
        let lines = CSV.records(text[...])
        guard let header = lines.first.flatMap({ CSV.split($0) })?.text,
              let previousColumn = header.firstIndex(of: "previous_hash"), header.indices.contains(previousColumn + 1),
              header[previousColumn + 1] == "row_hash" else {
            return .failure(LedgerFileError("not a dooh-csv ad log: its header has no previous_hash, row_hash"))
        }
        let sequenceColumn = header.firstIndex(of: "sequence"), segmentColumn = header.firstIndex(of: "segment")
        var verdict = Verdict()
        var previous: String?
        for (number, line) in lines.dropFirst().enumerated() {
            let lineNumber = number + 2
            guard let fields = CSV.split(line), fields.raw.count == header.count else {
                return .failure(LedgerFileError("line \(lineNumber): not \(header.count) fields"))
            }
            verdict.rows += 1
            let sequence = sequenceColumn.flatMap { Int64(fields.text[$0]) } ?? Int64(lineNumber)
            let before = fields.text[previousColumn], stored = fields.text[previousColumn + 1]
            let segment = segmentColumn.map { fields.text[$0] } ?? ""
            if let previous, before != previous {
                guard !segment.isEmpty else {
                    verdict.broken = (sequence, "line \(lineNumber): its previous_hash is not the row_hash above it")
                    return .success(verdict)
                }
                verdict.segments.append((sequence, segment))
            } else if previous == nil {
                verdict.anchor = before
                if !segment.isEmpty { verdict.segments.append((sequence, segment)) }
            }
            // The groups added later just before `previous_hash`, all empty: out of the line
            // (`hashedLine`).
            let kept = hashedCount(Array(header[..<previousColumn])) { fields.raw[$0].isEmpty }
            let hashed = (Array(fields.raw[..<kept]) + [fields.raw[previousColumn]]).joined(separator: ",")
            guard sha256(Array(hashed.utf8)) == stored else {
                verdict.broken = (sequence, "line \(lineNumber): its fields do not match its row_hash")
                return .success(verdict)
            }
            previous = stored
        }
        return .success(verdict)
    }
}

public struct LedgerFileError: Error, CustomStringConvertible, Sendable {
    public let description: String
    init(_ description: String) { self.description = description }
}

/// The ledger's running values: cached in the outbox's state, on disk in `outbox_meta`, both
/// changed only by a transaction that committed.
struct LedgerHead: Sendable {
    var id: String
    var lastSequence: Int64
    var chainPosition: Int64
    var chainHash: String
    /// The reason of a segment that starts with the next play closed.
    var segment: String?

    /// The ledger of `db`, made (with a new id) when it has none; rows numbered before the
    /// ledger existed (by SQLite's rowid) get their sequence from it. Inside a transaction.
    static func load(_ db: SQLiteDatabase, environment: AdEnvironment = .system) throws -> LedgerHead {
        var meta: [String: String] = [:]
        for row in try db.execute("SELECT key, value FROM outbox_meta WHERE key LIKE 'ledger_%' OR key LIKE 'chain_%'") {
            if let key = row[0].text, let value = row[1].text { meta[key] = value }
        }
        // Rows of an earlier version: numbered as they were (their rowid), once.
        let base = try db.execute("SELECT COALESCE(MAX(seq), 0) FROM plays").first?.first?.integer ?? 0
        try db.execute("UPDATE plays SET seq = rowid + ? WHERE seq IS NULL", [.integer(base)])
        let maxSequence = try db.execute("SELECT COALESCE(MAX(seq), 0), COALESCE(MAX(chain_pos), 0) FROM plays").first
        let rowsSequence = maxSequence?[0].integer ?? 0, rowsChain = maxSequence?[1].integer ?? 0
        var head: LedgerHead
        if let id = meta["ledger_id"] {
            head = LedgerHead(id: id, lastSequence: max(Int64(meta["ledger_seq"] ?? "") ?? 0, rowsSequence),
                              chainPosition: max(Int64(meta["chain_pos"] ?? "") ?? 0, rowsChain),
                              chainHash: meta["chain_head"] ?? PlayLedger.genesis(id), segment: meta["chain_segment"])
            // The head on disk says less than the rows do (only a hand could do that): go on
            // from the rows, in a segment that says so.
            if (Int64(meta["chain_pos"] ?? "") ?? 0) < rowsChain,
               let last = try db.execute("SELECT hash FROM plays WHERE chain_pos = ?", [.integer(rowsChain)]).first?.first?.text {
                head.chainHash = last
                head.segment = head.segment ?? "the ledger's head was behind its rows"
            }
        } else {
            let id = environment.uuid()
            head = LedgerHead(id: id, lastSequence: rowsSequence, chainPosition: rowsChain, chainHash: PlayLedger.genesis(id), segment: nil)
            if rowsSequence > 0 { head.segment = "plays recorded before this ledger began (ledger \(id))" }
        }
        try head.save(db)
        return head
    }

    func save(_ db: SQLiteDatabase) throws {
        for (key, value) in [("ledger_id", id), ("ledger_seq", String(lastSequence)), ("chain_pos", String(chainPosition)),
                             ("chain_head", chainHash)] {
            try db.execute("INSERT OR REPLACE INTO outbox_meta (key, value) VALUES (?, ?)", [.text(key), .text(value)])
        }
        if let segment {
            try db.execute("INSERT OR REPLACE INTO outbox_meta (key, value) VALUES ('chain_segment', ?)", [.text(segment)])
        } else {
            try db.execute("DELETE FROM outbox_meta WHERE key = 'chain_segment'")
        }
    }

    /// Closes the open play `id` (its end written) and chains it. False when there is no such
    /// open play (already closed, or never written). Inside a transaction.
    @discardableResult
    mutating func close(_ db: SQLiteDatabase, id: String, _ ended: PlayEnd) throws -> Bool {
        guard var play = try db.execute("SELECT \(PlayRecord.columns) FROM plays WHERE id = ? AND chain_pos IS NULL", [.text(id)])
            .first.map(PlayRecord.init(row:)) else { return false }
        play.ended = ended.wall
        play.seconds = ended.seconds
        play.reason = ended.reason
        play.viewable = ended.viewable ?? play.viewable
        play.segment = segment
        let hash = PlayLedger.hash(play, previous: chainHash)
        try db.execute("""
            UPDATE plays SET ended_wall = ?, ended_run = ?, seconds = ?, reason = ?, viewable = ?, chain_pos = ?, prev_hash = ?, hash = ?,
                             segment = ?, display = ?, display_evidence = ? WHERE id = ?
            """, [.real(ended.wall), .real(ended.run), ended.seconds.map { .real($0) } ?? .null, .text(ended.reason),
                  play.viewable.map { .text($0) } ?? .null, .integer(chainPosition + 1), .text(chainHash), .text(hash),
                  segment.map { .text($0) } ?? .null, play.display.map { .text($0) } ?? .null,
                  play.displayEvidence.map { .text($0) } ?? .null, .text(id)])
        chainPosition += 1
        chainHash = hash
        segment = nil
        try save(db)
        return true
    }

    /// At start (before any play of this run): plays recorded as ended but not chained (by a
    /// version before the ledger) are chained in their order, and plays a previous run left
    /// open — a `kill -9`, a power cut — are closed `interrupted`, ended at the last moment that
    /// run knew it was on screen (`lastAlive`, the run clock it saved; never before the play's
    /// start), `seconds` counted to it. Returns how many were closed. Inside a transaction.
    mutating func closeLeftOpen(_ db: SQLiteDatabase, lastAlive: Double) throws -> Int {
        let unchained = try db.execute("""
            SELECT id, ended_wall, ended_run, seconds, reason, viewable FROM plays WHERE chain_pos IS NULL AND ended_wall IS NOT NULL ORDER BY seq
            """)
        for row in unchained {
            guard let id = row[0].text else { continue }
            try close(db, id: id, PlayEnd(wall: row[1].real ?? 0, run: row[2].real ?? 0, seconds: row[3].real,
                                          reason: row[4].text ?? "ended", viewable: row[5].text))
        }
        var closed = 0
        for row in try db.execute("SELECT id, started_wall, started_run FROM plays WHERE ended_wall IS NULL ORDER BY seq") {
            guard let id = row[0].text, let startedWall = row[1].real, let startedRun = row[2].real else { continue }
            let seconds = max(0, lastAlive - startedRun)
            if try close(db, id: id, PlayEnd(wall: startedWall + seconds, run: startedRun + seconds, seconds: seconds,
                                             reason: "interrupted", viewable: nil)) {
                closed += 1
            }
        }
        return closed
    }

    /// Plays a salvage could not carry: the sequence numbers from the lowest the ledger still
    /// kept (`ledger_low`, moved up by pruning) to its last that no row has, as ranges:
    /// `12–15, 40`.
    static func missing(_ db: SQLiteDatabase, lastSequence: Int64) throws -> String {
        let low = try db.execute("SELECT value FROM outbox_meta WHERE key = 'ledger_low'").first?.first?.text.flatMap { Int64($0) } ?? 1
        // Pruning goes by chain position: below the highest play it removed, a gap in the
        // sequence numbers may be a play pruned (one closed before an older play still kept).
        let pruned = try db.execute("SELECT value FROM outbox_meta WHERE key = 'ledger_pruned_seq'").first?.first?.text.flatMap { Int64($0) } ?? 0
        var ranges: [String] = []
        func add(_ from: Int64, _ to: Int64) {
            let from = max(from, pruned + 1)
            if from <= to { ranges.append(from == to ? "\(from)" : "\(from)–\(to)") }
        }
        let bounds = try db.execute("SELECT MIN(seq), MAX(seq) FROM plays").first
        guard let first = bounds?[0].integer, let last = bounds?[1].integer else {
            add(low, lastSequence)
            return ranges.joined(separator: ", ")
        }
        add(low, first - 1)
        for row in try db.execute("""
            SELECT seq + 1, next - 1 FROM (SELECT seq, LEAD(seq) OVER (ORDER BY seq) AS next FROM plays) WHERE next > seq + 1
            """) {
            if let from = row[0].integer, let to = row[1].integer { add(from, to) }
        }
        add(last + 1, lastSequence)
        return ranges.prefix(20).joined(separator: ", ") + (ranges.count > 20 ? " and \(ranges.count - 20) more ranges" : "")
    }
}

extension LedgerHead {
    /// The ledger's meta as `verify` reads it.
    struct Stored: Sendable {
        var anchor: String?
        var anchorPosition: Int64?
        var headHash: String?
        var headPosition: Int64?
        var lastSequence: Int64?
        var prunedSequence: Int64?

        init(_ meta: [String: String]) {
            anchor = meta["chain_anchor"]
            anchorPosition = meta["chain_anchor_pos"].flatMap { Int64($0) }
            headHash = meta["chain_head"]
            headPosition = meta["chain_pos"].flatMap { Int64($0) }
            lastSequence = meta["ledger_seq"].flatMap { Int64($0) }
            prunedSequence = meta["ledger_pruned_seq"].flatMap { Int64($0) }
        }
    }

    /// Prunes proof of play to its bounds **by chain position** (R21: pruning never breaks what
    /// is kept): the oldest plays of the chain go — past `maxRows` rows, or whose chain prefix
    /// started before `olderThan` (run time) — never a play still open, never one in the middle
    /// of the chain (plays overlap: an overlay closes after the mid-roll inside it, a content
    /// play after its ads; pruning by sequence or by start time left holes). The hash of the
    /// last play pruned is kept as the ledger's **anchor** (`chain_anchor`, `chain_anchor_pos`),
    /// which the first kept play chains from and `verify` checks. Inside a transaction.
    static func prune(_ db: SQLiteDatabase, maxRows: Int, olderThan cutoff: Double, lastSequence: Int64) throws {
        let rows = try db.execute("SELECT COUNT(*) FROM plays").first?.first?.integer ?? 0
        var through: Int64 = 0
        if rows > Int64(maxRows), let position = try db.execute("""
            SELECT chain_pos FROM plays WHERE chain_pos IS NOT NULL ORDER BY chain_pos LIMIT 1 OFFSET ?
            """, [.integer(rows - Int64(maxRows) - 1)]).first?.first?.integer {
            through = position
        }
        // By age: the chain's prefix up to its first play that is young enough.
        let young = try db.execute("SELECT MIN(chain_pos) FROM plays WHERE chain_pos IS NOT NULL AND started_run >= ?", [.real(cutoff)]).first?.first?.integer
        let oldest = try db.execute("SELECT MAX(chain_pos) FROM plays WHERE chain_pos IS NOT NULL AND started_run < ?", [.real(cutoff)]).first?.first?.integer
        if let oldest { through = max(through, min(oldest, (young ?? Int64.max) - 1)) }
        guard through > 0, let last = try db.execute("SELECT hash, chain_pos FROM plays WHERE chain_pos = ?", [.integer(through)]).first,
              let anchor = last[0].text else { return }
        let prunedSequence = try db.execute("SELECT MAX(seq) FROM plays WHERE chain_pos <= ?", [.integer(through)]).first?.first?.integer ?? 0
        let before = try db.execute("SELECT value FROM outbox_meta WHERE key = 'ledger_pruned_seq'").first?.first?.text.flatMap { Int64($0) } ?? 0
        try db.execute("DELETE FROM plays WHERE chain_pos IS NOT NULL AND chain_pos <= ?", [.integer(through)])
        for (key, value) in [("chain_anchor", anchor), ("chain_anchor_pos", String(through)), ("ledger_pruned_seq", String(max(before, prunedSequence)))] {
            try db.execute("INSERT OR REPLACE INTO outbox_meta (key, value) VALUES (?, ?)", [.text(key), .text(value)])
        }
        // The lowest play the ledger still keeps: what salvage counts missing plays from.
        try db.execute("INSERT OR REPLACE INTO outbox_meta (key, value) VALUES ('ledger_low', (SELECT COALESCE(MIN(seq), ?) FROM plays))",
                       [.integer(lastSequence + 1)])
    }
}

/// How a play ended, as its row records it.
struct PlayEnd: Sendable {
    var wall: Double
    var run: Double
    var seconds: Double?
    var reason: String
    var viewable: String?
}

extension OutboxSchema {
    /// The ledger of `db` at open, in one transaction: its head (made if new); a segment for
    /// each salvage not yet said (`repairs`, written by `SQLiteDatabase.openRepairing`: the
    /// rows it could not carry named); with `closingLeftOpen`, the plays a previous run left
    /// open closed `interrupted` at `lastAlive`. Returns the head and how many it closed.
    static func openLedger(_ db: SQLiteDatabase, lastAlive: Double, closingLeftOpen: Bool, environment: AdEnvironment = .system) throws -> (LedgerHead, Int) {
        try db.transaction {
            var head = try LedgerHead.load(db, environment: environment)
            let repairs = (try? db.execute("SELECT rowid, aside, summary FROM repairs WHERE seen = 0 ORDER BY rowid")) ?? []
            for repair in repairs {
                let missing = try LedgerHead.missing(db, lastSequence: head.lastSequence)
                let lost = missing.isEmpty ? "every play carried" : "plays \(missing) could not be carried"
                let reason = "salvaged from \(repair[1].text ?? "?"): \(lost)"
                head.segment = head.segment.map { $0 + "; " + reason } ?? reason
                try db.execute("UPDATE repairs SET seen = 1 WHERE rowid = ?", [repair[0]])
            }
            let closed = closingLeftOpen ? try head.closeLeftOpen(db, lastAlive: lastAlive) : 0
            try head.save(db)
            return (head, closed)
        }
    }
}
