import AdPlayerDaemon
import AdRuntime
import AdTracking
import ControlProtocol
import Foundation

/// `adplayerd plays export --state-dir DIR --format csv|jsonl [--since TIME]`: proof of play,
/// read from the state database read only — a live daemon's too, without stopping it (SQLite's
/// WAL lets a reader in while the daemon writes).
struct PlaysCommand {
    static let usage = """
        usage: adplayerd plays export --state-dir DIR [--format csv|jsonl] [--since TIME]
                                                                  every ad shown (proof of play), oldest first
        """

    let arguments: [String]

    func run() throws -> Int32 {
        let parsed = try CommandLineArguments(arguments, spec: ["state-dir": .value, "format": .value, "since": .value])
        guard parsed.positional == ["export"] else { throw UsageError("plays needs export") }
        guard let stateDir = parsed.value("state-dir") else { throw UsageError("--state-dir is required") }
        let format = parsed.value("format") ?? "csv"
        guard ["csv", "jsonl"].contains(format) else { throw UsageError("--format is csv or jsonl") }
        var since: Double?
        if let text = parsed.value("since") {
            guard let seconds = Double(text) ?? ISO8601.parse(text) else { throw UsageError("--since: \(text) is not seconds since 1970 or ISO 8601") }
            since = seconds
        }
        let path = stateDir + "/adplayerd.sqlite"
        guard FileManager.default.fileExists(atPath: path) else { throw UsageError("\(path): no state database") }
        let plays = try PlayRecord.read(path: path, since: since)
        if format == "csv" {
            print("id,ad_id,kind,source,content_id,started,ended,seconds,reason,viewable,beacons_sent,beacons_pending,beacons_failed")
            for play in plays {
                let fields = [play.id, play.adID, play.kind, play.source ?? "", play.contentID, ISO8601.format(play.started),
                              play.ended.map(ISO8601.format) ?? "", play.seconds.map { String(format: "%.3f", $0) } ?? "", play.reason ?? "",
                              play.viewable ?? "", String(play.beaconsSent), String(play.beaconsPending), String(play.beaconsFailed)]
                print(fields.map(Self.csv).joined(separator: ","))
            }
        } else {
            for play in plays { print(CommandRouter.describe(play).text) }
        }
        return 0
    }

    /// A CSV field (RFC 4180): quoted when it holds a comma, a quote or a line break.
    static func csv(_ field: String) -> String { CSV.field(field) }
}
