import AdPlayerDaemon
import AdRuntime
import AdTracking
import ControlProtocol
import Foundation

/// `adplayerd beacons add|flush|status --state-dir DIR …`: the tracking outbox (R17) by hand,
/// for people who operate ads (and for the kill -9 test).
struct BeaconsCommand {
    static let usage = """
        usage: adplayerd beacons add    --state-dir DIR URL...   write beacons to the outbox (each URL judged alone)
               adplayerd beacons flush  --state-dir DIR [--base-delay S] [--max-delay S] [--concurrency N]
                                                                  deliver until none is pending
               adplayerd beacons status --state-dir DIR [--json]  pending, sent, dropped by reason (read only)
        """

    let arguments: [String]

    func run() throws -> Int32 {
        let parsed = try CommandLineArguments(arguments, spec: ["state-dir": .value, "base-delay": .value, "max-delay": .value,
                                                                 "concurrency": .value, "json": .flag])
        guard let action = parsed.positional.first, ["add", "flush", "status"].contains(action) else {
            throw UsageError("beacons needs add, flush or status")
        }
        let urls = Array(parsed.positional.dropFirst())
        var configuration = BeaconOutbox.Configuration()
        if let text = parsed.value("base-delay") { configuration.baseDelay = try seconds(text, "--base-delay") }
        if let text = parsed.value("max-delay") { configuration.maxDelay = try seconds(text, "--max-delay") }
        if let n = try parsed.integer("concurrency", in: 1...64) { configuration.concurrency = n }
        guard let stateDir = parsed.value("state-dir") else { throw UsageError("--state-dir is required") }
        let path = stateDir + "/adplayerd.sqlite"
        if action == "status" {
            // Read only: works on a read-only state folder, and creates nothing.
            let status = try BeaconOutbox.status(path: path) ?? OutboxStatus()
            if parsed.flag("json") {
                let json: JSONValue = ["pending": .int(status.pending), "pending_bytes": .int(status.pendingBytes), "sent": .int(status.sent),
                                       "failed_attempts": .int(status.failedAttempts),
                                       "dropped": .object(status.dropped.mapValues { .int($0) })]
                print(json.text)
            } else {
                let dropped = status.dropped.values.reduce(0, +)
                print("pending \(status.pending), sent \(status.sent), dropped \(dropped)"
                      + (dropped == 0 ? "" : " (" + status.dropped.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", ") + ")"))
            }
            return 0
        }
        try FileManager.default.createDirectory(atPath: stateDir, withIntermediateDirectories: true)
        let outbox = try BeaconOutbox(path: path, configuration: configuration, onEvent: { event in
            switch event {
            case .sent(let url, let attempts): print("sent \(url) (attempt \(attempts))")
            case .retrying(let url, let attempts, let reason, let delay):
                print("retry \(url) after attempt \(attempts): \(reason); next in \(String(format: "%.1f", delay)) s")
            case .dropped(let url, let reason): print("dropped \(url): \(reason)")
            case .diskFailing(let why): print("the disk refuses writes (\(why)): beacons wait in memory")
            case .diskRecovered(let written): print("the disk takes writes again: \(written) written")
            case .databaseLocked(let why): print(why)   // (not for a tool: it does not own the ledger)
            case .databaseOpened(let beacons, let plays, _): print("the database took \(beacons) beacons and \(plays) plays kept meanwhile")
            }
        }, onWarning: { StandardError.write(priority: 4, "adplayerd beacons: \($0)", named: true) })
        switch action {
        case "add":
            guard !urls.isEmpty else { throw UsageError("add needs at least one URL") }
            let queued = outbox.enqueue(urls: urls)
            print("queued \(queued) of \(urls.count); pending \(outbox.pendingCount())")
            return queued == urls.count ? 0 : 1
        case "flush":
            _ = Blocking.run { await outbox.deliverAll() }
            print("pending \(outbox.pendingCount())")
        default:
            break
        }
        return 0
    }

    private func seconds(_ value: String, _ option: String) throws -> Double {
        do {
            return try Seconds.parse(value, .duration, field: option)
        } catch {
            throw UsageError("\(error)")
        }
    }
}
