import AdRuntime
import AdTracking
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
        var rest = arguments[...]
        guard let action = rest.popFirst(), ["add", "flush", "status"].contains(action) else {
            throw UsageError(message: "beacons needs add, flush or status")
        }
        var stateDir: String?
        var urls: [String] = []
        var configuration = BeaconOutbox.Configuration()
        while let arg = rest.popFirst() {
            switch arg {
            case "--state-dir": stateDir = rest.popFirst()
            case "--base-delay": configuration.baseDelay = try seconds(rest.popFirst(), arg)
            case "--max-delay": configuration.maxDelay = try seconds(rest.popFirst(), arg)
            case "--concurrency":
                guard let text = rest.popFirst(), let n = Int(text), (1...64).contains(n) else {
                    throw UsageError(message: "--concurrency needs a whole number from 1 to 64")
                }
                configuration.concurrency = n
            default:
                if arg.hasPrefix("-") { throw UsageError(message: "unknown option \(arg)") }
                urls.append(arg)
            }
        }
        guard let stateDir else { throw UsageError(message: "--state-dir is required") }
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
            guard !urls.isEmpty else { throw UsageError(message: "add needs at least one URL") }
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

    private func seconds(_ value: String?, _ option: String) throws -> Double {
        guard let value else { throw UsageError(message: "\(option) needs a number of seconds") }
        do {
            return try Seconds.parse(value, .duration, field: option)
        } catch {
            throw UsageError(message: "\(error)")
        }
    }
}
