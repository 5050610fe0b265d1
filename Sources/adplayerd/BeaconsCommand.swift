import AdRuntime
import AdTracking
import ControlProtocol
import Foundation

/// `adplayerd beacons add|flush|status --state-dir DIR …`: the tracking outbox (R17) by hand,
/// for people who operate ads (and for the kill -9 test).
struct BeaconsCommand {
    static let usage = """
        usage: adplayerd beacons add    --state-dir DIR URL...   write beacons to the outbox
               adplayerd beacons flush  --state-dir DIR [--base-delay S] [--max-delay S] [--concurrency N]
                                                                  deliver until none is pending
               adplayerd beacons status --state-dir DIR           pending and dropped counts
        """

    let arguments: [String]

    func run() throws -> Int32 {
        let parsed = try CommandLineArguments(arguments, spec: ["state-dir": .value, "base-delay": .value, "max-delay": .value,
                                                                 "concurrency": .value])
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
            guard let counts = try BeaconOutbox.status(path: path) else {
                print("no outbox in \(stateDir): pending 0, dropped 0")
                return 0
            }
            print("pending \(counts.pending), dropped \(counts.dropped)")
            return 0
        }
        try FileManager.default.createDirectory(atPath: stateDir, withIntermediateDirectories: true)
        let outbox = try BeaconOutbox(path: path, configuration: configuration, onEvent: { event in
            switch event {
            case .sent(let url, let attempts): print("sent \(url) (attempt \(attempts))")
            case .retrying(let url, let attempts, let reason, let delay):
                print("retry \(url) after attempt \(attempts): \(reason); next in \(String(format: "%.1f", delay)) s")
            case .dropped(let url, let age): print("dropped \(url): \(Int(age)) s old")
            }
        }, onWarning: { FileHandle.standardError.write(Data("<4>adplayerd: \($0)\n".utf8)) })
        switch action {
        case "add":
            guard !urls.isEmpty else { throw UsageError("add needs at least one URL") }
            try outbox.enqueue(urls)
            print("queued \(urls.count); pending \(try outbox.pendingCount())")
        case "flush":
            try Blocking.run { try await outbox.deliverAll() }.get()
            print("pending 0")
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
