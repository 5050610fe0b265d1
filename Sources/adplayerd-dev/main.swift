import AdPlayerDaemon
import ControlProtocol
import Foundation

// adplayerd-dev: the developer's tools, kept out of the production executable — `play` (an
// episode with ads and a printed timeline, no socket), the benchmarks (`bench-*`:
// docs/benchmarks.md) and the loop-affinity probe (`off-loop`). Exit codes: 0 ok, 1 some
// input failed, 2 bad usage.

ProcessSetup.beforeAnyThread()

let arguments = Array(CommandLine.arguments.dropFirst())
let tools: [String: ProcessSetup.Tool] = [
    "play": .init(usage: PlayCommand.usage) { try PlayCommand(options: PlayCommand.Options.parse($0)).run() },
    "bench-latency": .init(usage: BenchCommand.usage) { try BenchCommand(arguments: $0).run() },
    "bench-catalog": .init(usage: BenchCatalogCommand.usage) { try BenchCatalogCommand(arguments: $0).run() },
    "bench-schedule": .init(usage: BenchScheduleCommand.usage) { try BenchScheduleCommand(arguments: $0).run() },
    "bench-outbox": .init(usage: BenchOutboxCommand.usage) { try BenchOutboxCommand(arguments: $0).run() },
    "bench-ledger": .init(usage: BenchLedgerCommand.usage) { try BenchLedgerCommand(arguments: $0).run() },
    "bench-loudness": .init(usage: BenchLoudnessCommand.usage) { try BenchLoudnessCommand(arguments: $0).run() },
    "off-loop": .init(usage: OffLoopCommand.usage) { try OffLoopCommand(arguments: $0).run() },
]
let usage = tools.values.map(\.usage).sorted().joined(separator: "\n")

ProcessSetup.runTools("adplayerd-dev", arguments, tools: tools, usage: usage, watchingSignals: ["play"], otherwise: nil)
