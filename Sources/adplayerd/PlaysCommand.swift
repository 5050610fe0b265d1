import AdPlayerDaemon
import AdRuntime
import AdSources
import AdTracking
import CSign
import ControlProtocol
import Foundation

/// `adplayerd plays export|verify`: proof of play, read from the state database read only — a
/// live daemon's too, without stopping it (SQLite's WAL lets a reader in while the daemon
/// writes) — and checked, on the box or by a buyer.
///
/// `dooh-csv` is the ad log digital-out-of-home buyers take (docs/reporting.md): one row a
/// closed play, in the ledger's chain order, its ledger columns (`PlayLedger.columns`) then
/// the hash of the play chained before it and its own — **as the daemon stored them when the
/// play closed**, not recomputed: an export after a row was edited does not verify. An export
/// that starts later (`--since`, `--after-sequence`) starts from the stored hash of the play
/// before its first, so it links to the export before it. `--sign KEY.pem` (an Ed25519 key
/// readable by its owner alone; with `--output`) writes `FILE.sig`, a detached signature of the
/// file's bytes that `openssl pkeyutl -verify -rawin` and `plays verify FILE --public-key`
/// check. FILE and FILE.sig are written to temporary names, synced, then renamed: a failure at
/// any step leaves the previous pair as it was.
struct PlaysCommand {
    static let usage = """
        usage: adplayerd plays export --state-dir DIR [--format csv|jsonl|dooh-csv] [--since TIME | --after-sequence N]
                                      [--output FILE [--sign KEY.pem]] [--screen-id ID]
                                                                  every ad shown (proof of play), oldest first
               adplayerd plays verify --state-dir DIR             the ledger's chain on the box (exit 0 whole, 1 broken)
               adplayerd plays verify FILE [--public-key PUB.pem [--signature FILE.sig]] [--after EARLIER.csv]
                                                                  an exported dooh-csv log: its chain row by row, its signature,
                                                                  and that it continues the log exported before it
        """

    let arguments: [String]

    /// A failure that is not a usage error: one line, exit 1.
    struct Failure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    func run() throws -> Int32 {
        let parsed = try CommandLineArguments(arguments, spec: ["state-dir": .value, "format": .value, "since": .value, "output": .value,
                                                                 "sign": .value, "screen-id": .value, "after-sequence": .value,
                                                                 "public-key": .value, "signature": .value, "after": .value])
        switch parsed.positional.first {
        case "export" where parsed.positional.count == 1: return try export(parsed)
        case "verify": return try verify(parsed)
        default: throw UsageError("plays needs export or verify")
        }
    }

    private func database(_ parsed: CommandLineArguments) throws -> String {
        guard let stateDir = parsed.value("state-dir") else { throw UsageError("--state-dir is required") }
        let path = stateDir + "/adplayerd.sqlite"
        guard FileManager.default.fileExists(atPath: path) else { throw Failure("\(path): no state database") }
        return path
    }

    private func export(_ parsed: CommandLineArguments) throws -> Int32 {
        let format = parsed.value("format") ?? "csv"
        guard ["csv", "jsonl", "dooh-csv"].contains(format) else { throw UsageError("--format is csv, jsonl or dooh-csv") }
        var since: Double?
        if let text = parsed.value("since") {
            guard let seconds = Double(text) ?? ISO8601.parse(text) else { throw UsageError("--since: \(text) is not seconds since 1970 or ISO 8601") }
            since = seconds
        }
        var afterSequence: Int64?
        if let text = parsed.value("after-sequence") {
            guard let n = Int64(text), n >= 0 else { throw UsageError("--after-sequence: \(text) is not a play's sequence number") }
            guard since == nil else { throw UsageError("--since and --after-sequence: one or the other") }
            guard format == "dooh-csv" else { throw UsageError("--after-sequence is for --format dooh-csv (the ledger's chain)") }
            afterSequence = n
        }
        let output = parsed.value("output")
        let key = parsed.value("sign")
        if key != nil, output == nil { throw UsageError("--sign needs --output FILE (the signature goes to FILE.sig)") }
        let path = try database(parsed)
        // The key is checked before anything is read or written.
        if let key {
            do { try SafeFile.requirePrivate(key) } catch { throw Failure("--sign \(error.description)") }
        }
        var lines: [String] = []
        switch format {
        case "csv":
            lines.append("sequence,id,ad_id,kind,source,content_id,started,ended,seconds,reason,viewable,beacons_sent,beacons_pending,beacons_failed,"
                         + "beacons_deadline,venue_id,impressions,display,display_evidence," + PlayRecord.loudnessColumns.joined(separator: ","))
            for play in try PlayRecord.read(path: path, since: since) {
                let fields = [CSV.number(play.sequence), CSV.field(play.id), CSV.field(play.adID), CSV.field(play.kind), CSV.field(play.source ?? ""),
                              CSV.field(play.contentID), CSV.field(ISO8601.format(play.started)), CSV.field(play.ended.map(ISO8601.format) ?? ""),
                              CSV.number(play.seconds, "%.3f"), CSV.field(play.reason ?? ""), CSV.field(play.viewable ?? ""),
                              CSV.number(Int64(play.beaconsSent)), CSV.number(Int64(play.beaconsPending)), CSV.number(Int64(play.beaconsFailed)),
                              CSV.number(Int64(play.beaconsDeadline)), CSV.field(play.venue ?? ""), CSV.number(play.impressions),
                              CSV.field(play.display ?? ""), CSV.field(play.displayEvidence ?? "")]
                    + play.loudnessCells
                lines.append(fields.joined(separator: ","))
            }
        case "dooh-csv":
            let plays = try PlayRecord.readChain(path: path, since: since, afterSequence: afterSequence)
            lines = PlayLedger.doohLog(plays, screen: try parsed.value("screen-id") ?? Self.machineID(), ledger: try PlayRecord.ledgerID(path: path) ?? "")
        default:
            lines = try PlayRecord.read(path: path, since: since).map { CommandRouter.describe($0).text }
        }
        let data = Data(lines.map { $0 + "\n" }.joined().utf8)
        guard let output else {
            FileHandle.standardOutput.write(data)
            return 0
        }
        let signature = try key.map { try Self.sign(data, key: $0) }
        try Self.replace([(output, data)] + (signature.map { [(output + ".sig", $0)] } ?? []))
        return 0
    }

    /// Writes each file to a temporary name beside it, syncs it, then renames them all over
    /// the old ones (and syncs the folder): until the renames nothing old is touched, so any
    /// failure before them leaves the previous files as they were (the temporaries removed).
    static func replace(_ files: [(path: String, data: Data)]) throws {
        do {
            try AtomicFile.replace(files, mode: 0o644, durable: true)
        } catch {
            throw Failure("\(error.path): \(error.reason); the previous file is kept")
        }
    }

    // MARK: Verifying

    private func verify(_ parsed: CommandLineArguments) throws -> Int32 {
        if parsed.positional.count == 1 {
            let path = try database(parsed)
            let (ledger, verdict) = try BeaconOutbox.verifyLedger(path: path)
            return Self.report(verdict, "ledger \(ledger)")
        }
        guard parsed.positional.count == 2 else { throw UsageError("plays verify takes one FILE, or --state-dir DIR") }
        let file = parsed.positional[1]
        // A log of 100,000 plays is about 40 MiB: a file past 1 GiB is not one of ours.
        let data: Data
        do { data = try SafeFile.read(file, maxBytes: 1 << 30) } catch { throw Failure("\(error)") }
        var signed = true
        if let key = parsed.value("public-key") {
            let signatureFile = parsed.value("signature") ?? file + ".sig"
            let signature: Data
            do { signature = try SafeFile.read(signatureFile, maxBytes: 4096) } catch { throw Failure("\(error)") }
            var error = [CChar](repeating: 0, count: 256)
            let rc = data.withUnsafeBytes { bytes in
                signature.withUnsafeBytes { sig in
                    csign_ed25519_verify(key, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count,
                                         sig.bindMemory(to: UInt8.self).baseAddress, sig.count, &error, error.count)
                }
            }
            let message = String(nulTerminated: error)
            if rc < 0 { throw Failure("--public-key \(key): \(message)") }
            signed = rc == 0
            print(signed ? "signature: verified with \(key)" : "signature: BAD — \(message) (\(signatureFile))")
        }
        guard let text = String(data: data, encoding: .utf8) else { throw Failure("\(file): not UTF-8 text") }
        var status: Int32
        switch PlayLedger.verify(csv: text) {
        case .failure(let error): throw Failure("\(file): \(error)")
        case .success(let verdict):
            status = Self.report(verdict, file)
            if !signed { status = 1 }
        }
        if parsed.value("public-key") == nil {
            // The chain alone proves that the rows agree with each other: anyone can write a
            // file whose chain agrees. Only the box's signature (or heads published off the box)
            // vouch that it is the box's.
            print("unsigned: nothing vouches for \(file) — a chain anyone can recompute; check its signature with --public-key, "
                  + "or its rows against the heads the box published (docs/reporting.md, \"What the chain proves\")")
        }
        if let earlier = parsed.value("after") {
            let before: Data
            do { before = try SafeFile.read(earlier, maxBytes: 1 << 30) } catch { throw Failure("--after \(error)") }
            guard let beforeText = String(data: before, encoding: .utf8) else { throw Failure("--after \(earlier): not UTF-8 text") }
            let link: Result<String, LedgerFileError>
            switch (PlayLedger.ends(csv: beforeText), PlayLedger.ends(csv: text)) {
            case (.failure(let error), _): throw Failure("--after \(earlier): \(error)")
            case (_, .failure(let error)): throw Failure("\(file): \(error)")
            case (.success(let old), .success(let new)): link = PlayLedger.continues(new, after: old)
            }
            switch link {
            case .success(let how): print("\(file) continues \(earlier): \(how)")
            case .failure(let why):
                print("\(file) does NOT continue \(earlier): \(why)")
                status = 1
            }
        }
        return status
    }

    /// Prints a verdict: exit 0 when the chain is whole, 1 when broken.
    static func report(_ verdict: PlayLedger.Verdict, _ what: String) -> Int32 {
        for segment in verdict.segments { print("segment: a new chain starts at play \(segment.sequence): \(segment.reason)") }
        if let broken = verdict.broken {
            print("\(what): BROKEN at play \(broken.sequence): \(broken.reason)")
            return 1
        }
        print("\(what): \(verdict.rows) play\(verdict.rows == 1 ? "" : "s") chained, whole" + (verdict.anchor.map { " (from \($0))" } ?? ""))
        return 0
    }

    /// The detached Ed25519 signature of `data` with the PEM key at `key`.
    static func sign(_ data: Data, key: String) throws -> Data {
        var signature = [UInt8](repeating: 0, count: 64)
        var error = [CChar](repeating: 0, count: 256)
        let rc = data.withUnsafeBytes { bytes in
            csign_ed25519(key, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count, &signature, &error, error.count)
        }
        guard rc == 0 else { throw Failure("--sign \(key): \(String(nulTerminated: error))") }
        return Data(signature)
    }

    /// The box's id as systemd has it (/etc/machine-id), unless `--screen-id` names the screen.
    static func machineID() throws -> String {
        guard let data = try? SafeFile.read("/etc/machine-id", maxBytes: 256),
              let id = String(data: data, encoding: .utf8)?.trimmingCharacters(in: .whitespacesAndNewlines), !id.isEmpty else {
            throw Failure("no /etc/machine-id: give the screen's id with --screen-id")
        }
        return id
    }
}
