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
let webUsage = "usage: adplayerd web …            the status page, health and metrics over HTTP (adplayerd-web --help; docs/web.md)"
let mqttUsage = "usage: adplayerd mqtt …           the fleet bridge to an MQTT broker (adplayerd-mqtt --help; docs/fleet.md)"
let tools: [String: ProcessSetup.Tool] = [
    "ads-check": .init(usage: AdsCheckCommand.usage) { try AdsCheckCommand(arguments: $0).run() },
    "beacons": .init(usage: BeaconsCommand.usage) { try BeaconsCommand(arguments: $0).run() },
    "plays": .init(usage: PlaysCommand.usage) { try PlaysCommand(arguments: $0).run() },
    "check-config": .init(usage: CheckConfigCommand.usage) { try CheckConfigCommand(arguments: $0).run() },
    "schedule-check": .init(usage: ScheduleCheckCommand.usage) { try ScheduleCheckCommand(arguments: $0).run() },
    "simulate": .init(usage: SimulateCommand.usage) { try SimulateCommand(arguments: $0).run() },
    "manual": .init(usage: ManualCommand.usage) { try ManualCommand(arguments: $0).run() },
    "web": .init(usage: webUsage) { try execSibling("adplayerd-web", $0) },
    "mqtt": .init(usage: mqttUsage) { try execSibling("adplayerd-mqtt", $0) },
]
let usage = [DaemonCommand.usage, CheckConfigCommand.usage, BeaconsCommand.usage, PlaysCommand.usage, AdsCheckCommand.usage, ScheduleCheckCommand.usage,
             SimulateCommand.usage, ManualCommand.usage, webUsage, mqttUsage,
             "  (The developer tools, play and bench-*, are adplayerd-dev's.)"].joined(separator: "\n")

/// `adplayerd web` and `adplayerd mqtt` are the programs beside this one (`adplayerd-web`,
/// `adplayerd-mqtt`), which do not carry the player: this process becomes that one (the same
/// pid, so that a unit or a script that started `adplayerd web` signals the page itself).
func execSibling(_ name: String, _ arguments: [String]) throws -> Int32 {
    var buffer = [CChar](repeating: 0, count: 4096)
    let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
    guard length > 0 else { throw UsageError("\(name): cannot find this program's folder (/proc/self/exe)") }
    let me = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    let path = String(me[..<(me.lastIndex(of: "/") ?? me.startIndex)]) + "/" + name
    let argv = ([path] + arguments).map { strdup($0) } + [nil]
    execv(path, argv)
    throw UsageError("\(name): \(path): \(String(cString: strerror(errno))) (it is installed beside adplayerd)")
}

ProcessSetup.runTools("adplayerd", arguments, tools: tools, usage: usage) { try DaemonCommand(arguments: $0).run() }
