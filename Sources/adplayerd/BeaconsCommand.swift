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
            case "--base-delay": configuration.baseDelay = try number(rest.popFirst(), arg)
            case "--max-delay": configuration.maxDelay = try number(rest.popFirst(), arg)
            case "--concurrency": configuration.concurrency = Int(try number(rest.popFirst(), arg))
            default:
                if arg.hasPrefix("-") { throw UsageError(message: "unknown option \(arg)") }
                urls.append(arg)
            }
        }
        guard let stateDir else { throw UsageError(message: "--state-dir is required") }
        try FileManager.default.createDirectory(atPath: stateDir, withIntermediateDirectories: true)
        let outbox = try BeaconOutbox(path: stateDir + "/adplayerd.sqlite", configuration: configuration, onEvent: { event in
            switch event {
            case .sent(let url, let attempts): print("sent \(url) (attempt \(attempts))")
            case .retrying(let url, let attempts, let reason, let delay):
                print("retry \(url) after attempt \(attempts): \(reason); next in \(String(format: "%.1f", delay)) s")
            case .dropped(let url, let age): print("dropped \(url): \(Int(age)) s old")
            }
        })
        switch action {
        case "add":
            guard !urls.isEmpty else { throw UsageError(message: "add needs at least one URL") }
            try outbox.enqueue(urls)
            print("queued \(urls.count); pending \(try outbox.pendingCount())")
        case "flush":
            try Blocking.run { try await outbox.deliverAll() }.get()
            print("pending 0")
        default:
            print("pending \(try outbox.pendingCount()), dropped \(try outbox.droppedCount())")
        }
        return 0
    }

    private func number(_ value: String?, _ option: String) throws -> Double {
        guard let value, let n = Double(value), n >= 0 else { throw UsageError(message: "\(option) needs a number") }
        return n
    }
}
