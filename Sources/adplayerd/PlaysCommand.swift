import AdPlayerDaemon
import AdRuntime
import AdSources
import AdTracking
import CSign
import ControlProtocol
import Foundation

/// `adplayerd plays export --state-dir DIR --format csv|jsonl|dooh-csv [--since TIME]
/// [--output FILE] [--sign KEY.pem] [--screen-id ID]`: proof of play, read from the state
/// database read only — a live daemon's too, without stopping it (SQLite's WAL lets a reader in
/// while the daemon writes).
///
/// `dooh-csv` is the ad log digital-out-of-home buyers take (docs/reporting.md): one row a
/// play with the screen, its place, the start in UTC, the seconds played, the ad's length, the
/// creative and its line, the venue and the audience, and a hash chained to the row before
/// (SHA-256 of the previous hash and the row): a row edited, removed or inserted breaks the
/// chain from there on. `--sign KEY.pem` (an Ed25519 key; with `--output`) writes `FILE.sig`,
/// a detached signature of the file's bytes that `openssl pkeyutl -verify -rawin` checks.
struct PlaysCommand {
    static let usage = """
        usage: adplayerd plays export --state-dir DIR [--format csv|jsonl|dooh-csv] [--since TIME]
                                      [--output FILE [--sign KEY.pem]] [--screen-id ID]
                                                                  every ad shown (proof of play), oldest first
        """

    let arguments: [String]

    func run() throws -> Int32 {
        let parsed = try CommandLineArguments(arguments, spec: ["state-dir": .value, "format": .value, "since": .value, "output": .value,
                                                                 "sign": .value, "screen-id": .value])
        guard parsed.positional == ["export"] else { throw UsageError("plays needs export") }
        guard let stateDir = parsed.value("state-dir") else { throw UsageError("--state-dir is required") }
        let format = parsed.value("format") ?? "csv"
        guard ["csv", "jsonl", "dooh-csv"].contains(format) else { throw UsageError("--format is csv, jsonl or dooh-csv") }
        var since: Double?
        if let text = parsed.value("since") {
            guard let seconds = Double(text) ?? ISO8601.parse(text) else { throw UsageError("--since: \(text) is not seconds since 1970 or ISO 8601") }
            since = seconds
        }
        let output = parsed.value("output")
        let key = parsed.value("sign")
        if key != nil, output == nil { throw UsageError("--sign needs --output FILE (the signature goes to FILE.sig)") }
        let path = stateDir + "/adplayerd.sqlite"
        guard FileManager.default.fileExists(atPath: path) else { throw UsageError("\(path): no state database") }
        let plays = try PlayRecord.read(path: path, since: since)
        var lines: [String] = []
        switch format {
        case "csv":
            lines.append("id,ad_id,kind,source,content_id,started,ended,seconds,reason,viewable,beacons_sent,beacons_pending,beacons_failed,"
                         + "beacons_deadline,venue_id,impressions")
            for play in plays {
                let fields = [play.id, play.adID, play.kind, play.source ?? "", play.contentID, ISO8601.format(play.started),
                              play.ended.map(ISO8601.format) ?? "", play.seconds.map { String(format: "%.3f", $0) } ?? "", play.reason ?? "",
                              play.viewable ?? "", String(play.beaconsSent), String(play.beaconsPending), String(play.beaconsFailed),
                              String(play.beaconsDeadline), play.venue ?? "", play.impressions.map { String(format: "%g", $0) } ?? ""]
                lines.append(fields.map(Self.csv).joined(separator: ","))
            }
        case "dooh-csv":
            lines = Self.doohLog(plays, screen: try parsed.value("screen-id") ?? Self.machineID())
        default:
            lines = plays.map { CommandRouter.describe($0).text }
        }
        let text = lines.map { $0 + "\n" }.joined()
        guard let output else {
            FileHandle.standardOutput.write(Data(text.utf8))
            return 0
        }
        let data = Data(text.utf8)
        do {
            try data.write(to: URL(fileURLWithPath: output), options: .atomic)
        } catch {
            throw UsageError("--output \(output): \(error.localizedDescription)")
        }
        if let key {
            let signature = try Self.sign(data, key: key)
            do {
                try signature.write(to: URL(fileURLWithPath: output + ".sig"), options: .atomic)
            } catch {
                throw UsageError("\(output).sig: \(error.localizedDescription)")
            }
        }
        return 0
    }

    /// The columns of `dooh-csv`, in order.
    static let doohColumns = ["screen_id", "latitude", "longitude", "ad_start_utc", "play_seconds", "ad_duration_seconds", "creative_id",
                              "line_id", "venue_id", "impressions", "play_id", "kind", "content_id", "beacons_deadline", "previous_hash", "row_hash"]

    /// The DOOH ad log: a header, then a row a play with its hash chained to the row before
    /// (the header's hash starts the chain). Plays still on screen are left out (no length yet).
    static func doohLog(_ plays: [PlayRecord], screen: String) -> [String] {
        let header = doohColumns.joined(separator: ",")
        var lines = [header]
        var previous = CreativeCache.sha256(Data(header.utf8))
        for play in plays where play.ended != nil {
            let place: [String] = (play.latLong ?? "").split(separator: ",").map(String.init)
            let latitude: String = place.count == 2 ? place[0] : ""
            let longitude: String = place.count == 2 ? place[1] : ""
            let seconds: String = play.seconds.map { String(format: "%.3f", $0) } ?? "0.000"
            let duration: String = play.adDuration.map { String(format: "%.3f", $0) } ?? ""
            let line: String = play.source.map { "\($0):\(play.adID)" } ?? play.adID
            let audience: String = play.impressions.map { String(format: "%g", $0) } ?? "1"
            var fields: [String] = [screen, latitude, longitude, ISO8601.format(play.started), seconds, duration, play.adID, line]
            fields += [play.venue ?? "", audience, play.id, play.kind, play.contentID, String(play.beaconsDeadline), previous]
            let body = fields.map(Self.csv).joined(separator: ",")
            let hash = CreativeCache.sha256(Data(body.utf8))
            lines.append(body + "," + hash)
            previous = hash
        }
        return lines
    }

    /// The detached Ed25519 signature of `data` with the PEM key at `key`.
    static func sign(_ data: Data, key: String) throws -> Data {
        var signature = [UInt8](repeating: 0, count: 64)
        var error = [CChar](repeating: 0, count: 256)
        let rc = data.withUnsafeBytes { bytes in
            csign_ed25519(key, bytes.bindMemory(to: UInt8.self).baseAddress, bytes.count, &signature, &error, error.count)
        }
        guard rc == 0 else { throw UsageError("--sign \(key): \(String(cString: error))") }
        return Data(signature)
    }

    /// The box's id as systemd has it (/etc/machine-id), unless `--screen-id` names the screen.
    static func machineID() throws -> String {
        guard let data = try? SafeFile.read("/etc/machine-id", maxBytes: 256),
              let id = String(data: data, encoding: .utf8)?.trimmingCharacters(in: .whitespacesAndNewlines), !id.isEmpty else {
            throw UsageError("no /etc/machine-id: give the screen's id with --screen-id")
        }
        return id
    }

    /// A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break.
    static func csv(_ field: String) -> String { CSV.field(field) }
}
