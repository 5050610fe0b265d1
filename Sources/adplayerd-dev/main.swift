import AdPlayerDaemon
import ControlProtocol
import Foundation

// adplayerd-dev: the developer's tools, kept out of the production executable — `play` (an
// episode with ads and a printed timeline, no socket), the benchmarks (`bench-*`:
// docs/benchmarks.md) and the loop-affinity probe (`off-loop`). Exit codes: 0 ok, 1 some
// input failed, 2 bad usage.

ProcessSetup.beforeAnyThread()

let arguments = Array(CommandLine.arguments.dropFirst())
let tools: [String: ([String]) throws -> Int32] = [
    "play": { try PlayCommand(options: PlayCommand.Options.parse($0)).run() },
    "bench-latency": { try BenchCommand(arguments: $0).run() },
    "bench-catalog": { try BenchCatalogCommand(arguments: $0).run() },
    "bench-schedule": { try BenchScheduleCommand(arguments: $0).run() },
    "bench-outbox": { try BenchOutboxCommand(arguments: $0).run() },
    "bench-ledger": { try BenchLedgerCommand(arguments: $0).run() },
    "off-loop": { try OffLoopCommand(arguments: $0).run() },
]
let usage = [PlayCommand.usage, BenchCommand.usage, BenchCatalogCommand.usage, BenchScheduleCommand.usage, BenchOutboxCommand.usage, BenchLedgerCommand.usage,
             OffLoopCommand.usage]
    .joined(separator: "\n")

ProcessSetup.runTools("adplayerd-dev", arguments, tools: tools, usage: usage, watchingSignals: ["play"], otherwise: nil)
