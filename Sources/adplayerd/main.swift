import AdRuntime
import Foundation
import MpvPlayerAdapter

// adplayerd — at this stage: `play` episodes through the mpv adapter with ads from a local
// catalog, printing a timeline; `beacons` operates the tracking outbox. The daemon proper
// (control socket, systemd) comes next.

let arguments = Array(CommandLine.arguments.dropFirst())
do {
    if arguments.first == "bench-catalog" {
        exit(try BenchCatalogCommand(arguments: Array(arguments.dropFirst())).run())
    }
    if arguments.first == "bench-latency" {
        exit(try BenchCommand(arguments: Array(arguments.dropFirst())).run())
    }
    if arguments.first == "ads-check" {
        exit(try AdsCheckCommand(arguments: Array(arguments.dropFirst())).run())
    }
    if arguments.first == "beacons" {
        exit(try BeaconsCommand(arguments: Array(arguments.dropFirst())).run())
    }
    let options = try PlayCommand.Options.parse(arguments)
    exit(try PlayCommand(options: options).run())
} catch let error as UsageError {
    FileHandle.standardError.write(Data("adplayerd: \(error.message)\n\n\(PlayCommand.usage)\n\(BeaconsCommand.usage)\n\(AdsCheckCommand.usage)\n\(BenchCommand.usage)\n".utf8))
    exit(2)
} catch {
    FileHandle.standardError.write(Data("<3>adplayerd: \(error)\n".utf8))
    exit(1)
}
