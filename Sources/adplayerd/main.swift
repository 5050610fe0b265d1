import AdPlayerDaemon
import AdRuntime
import ControlProtocol
import CSystem
import Foundation

// adplayerd: the daemon (no subcommand), or one of the tools below. Exit codes everywhere:
// 0 ok, 1 some input failed (one line naming it and why), 2 bad usage.

// Before any thread exists (mpv's included): signals and malloc (ProcessSetup).
ProcessSetup.beforeAnyThread()

let arguments = Array(CommandLine.arguments.dropFirst())
let tools: [String: ([String]) throws -> Int32] = [
    "ads-check": { try AdsCheckCommand(arguments: $0).run() },
    "beacons": { try BeaconsCommand(arguments: $0).run() },
    "plays": { try PlaysCommand(arguments: $0).run() },
    "check-config": { try CheckConfigCommand(arguments: $0).run() },
]
let usage = [DaemonCommand.usage, CheckConfigCommand.usage, BeaconsCommand.usage, PlaysCommand.usage, AdsCheckCommand.usage,
             "  (The developer tools, play and bench-*, are adplayerd-dev's.)"].joined(separator: "\n")

do {
    if let first = arguments.first, let tool = tools[first] {
        exit(try tool(Array(arguments.dropFirst())))
    }
    if arguments.first == "-h" || arguments.first == "--help" || arguments.first == "help" {
        print(usage)
        exit(0)
    }
    exit(try DaemonCommand(arguments: arguments).run())
} catch let error as UsageError {
    FileHandle.standardError.write(Data("adplayerd: \(error.message)\n\n\(usage)\n".utf8))
    exit(2)
} catch let error as ConfigurationError {
    FileHandle.standardError.write(Data("<3>adplayerd: \(error)\n".utf8))
    exit(2)
} catch {
    FileHandle.standardError.write(Data("<3>adplayerd: \(Logger.escape(String(describing: error)))\n".utf8))
    exit(1)
}
