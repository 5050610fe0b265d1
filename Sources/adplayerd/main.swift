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
    "web": { try WebCommand(arguments: $0).run() },
    "mqtt": { try MqttCommand(arguments: $0).run() },
]
let usage = [DaemonCommand.usage, CheckConfigCommand.usage, BeaconsCommand.usage, PlaysCommand.usage, AdsCheckCommand.usage, WebCommand.usage, MqttCommand.usage,
             "  (The developer tools, play and bench-*, are adplayerd-dev's.)"].joined(separator: "\n")

ProcessSetup.runTools("adplayerd", arguments, tools: tools, usage: usage) { try DaemonCommand(arguments: $0).run() }
