import AdPlayerDaemon
import AdRuntime
import ControlProtocol
import CSystem
import Foundation

// adplayerd: the daemon (no subcommand), or one of the tools below. Exit codes everywhere:
// 0 ok, 1 some input failed (one line naming it and why), 2 bad usage.

// Before any thread exists (mpv's included): signals wait for the signal thread (Signals).
Signals.blockForProcess()
// Two malloc arenas, not glibc's default of 8 per core: mpv starts demuxer and decoder
// threads for every file, each new thread may take an arena of its own, and memory freed
// into an arena stays resident. Measured over 150 one-second episodes with ads
// (docs/reliability.md): RSS climbs in steps to 266 MiB with the default, stays at 120 MiB
// with two. An environment's MALLOC_ARENA_MAX still wins (glibc reads it first).
if ProcessInfo.processInfo.environment["MALLOC_ARENA_MAX"] == nil { _ = csystem_limit_malloc_arenas(2) }
// Blocks of 128 KiB and more (mpv's demuxer packets and decoder buffers, a creative's pixels)
// are mapped, and given back when freed, at a fixed threshold: glibc's moving threshold
// (raised to the size of each large block freed, up to 32 MiB) lets them fragment the heap
// from one file to the next — mpv opens three or four files an episode with ads. Peak RSS
// playing the two sample episodes with ads: 109 → 97 MiB (docs/benchmarks.md §2).
if ProcessInfo.processInfo.environment["MALLOC_MMAP_THRESHOLD_"] == nil { _ = csystem_fix_malloc_mmap_threshold(128 * 1024) }

let arguments = Array(CommandLine.arguments.dropFirst())
let tools: [String: ([String]) throws -> Int32] = [
    "play": { try PlayCommand(options: PlayCommand.Options.parse($0)).run() },
    "ads-check": { try AdsCheckCommand(arguments: $0).run() },
    "beacons": { try BeaconsCommand(arguments: $0).run() },
    "plays": { try PlaysCommand(arguments: $0).run() },
    "check-config": { try CheckConfigCommand(arguments: $0).run() },
    "bench-latency": { try BenchCommand(arguments: $0).run() },
    "bench-catalog": { try BenchCatalogCommand(arguments: $0).run() },
    "bench-outbox": { try BenchOutboxCommand(arguments: $0).run() },
]
let usage = [DaemonCommand.usage, CheckConfigCommand.usage, PlayCommand.usage, BeaconsCommand.usage, PlaysCommand.usage, AdsCheckCommand.usage,
             BenchCommand.usage,
             BenchCatalogCommand.usage, BenchOutboxCommand.usage].joined(separator: "\n")

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
