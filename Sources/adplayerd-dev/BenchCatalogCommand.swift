import AdPlayerDaemon
import AdRuntime
import AdSources
import ControlProtocol
import Foundation

/// `adplayerd bench-catalog [--slots N]`: a catalog of N overlay slots (default 100,000) over
/// 1,000 entries, half of them for one episode each: how long it takes to load, how much
/// memory it holds, and what a request costs. Method in docs/benchmarks.md.
struct BenchCatalogCommand {
    static let usage = """
        usage: adplayerd-dev bench-catalog [--slots N]       load time, memory and request cost of a large catalog
        """

    let arguments: [String]

    func run() throws -> Int32 {
        let parsed = try CommandLineArguments(arguments, spec: ["slots": .value])
        guard parsed.positional.isEmpty else { throw UsageError("bench-catalog takes no files") }
        let slots = try parsed.integer("slots", in: 1...LocalCatalog.maxSlots) ?? 100_000
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("adplayerd-bench-catalog-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let entries = 1000
        let perEntry = max(1, slots / entries)
        var json = #"{"version": 1, "overlays": ["#
        for e in 0..<entries {
            if e > 0 { json += "," }
            let content = e % 2 == 0 ? "" : #", "content": ["episode-\#(e)"]"#
            json += #"{"id": "ov-\#(e)", "text": "Sponsored \#(e)", "slots": ["#
            json += (0..<perEntry).map { #"{"start": \#(Double($0 * 7 + e % 7)), "duration": 5}"# }.joined(separator: ",")
            json += "]\(content)}"
        }
        json += "]}"
        try Data(json.utf8).write(to: folder.appendingPathComponent("catalog.json"))
        let manifestBytes = json.utf8.count
        json = ""

        let rssBefore = Self.residentBytes()
        let start = MonotonicTime.now()
        let catalog = try LocalCatalog(folder: folder)
        let loaded = MonotonicTime.now()
        let rssAfter = Self.residentBytes()
        let peak = Self.peakBytes()

        let requests = 10_000
        var served = 0
        let requestStart = MonotonicTime.now()
        let outcome = Blocking.run {
            var count = 0
            for i in 0..<requests {
                let content = ContentInfo(id: "episode-\(i % entries)")
                let position = Double((i * 37) % (perEntry * 7))
                if try await catalog.ad(for: AdRequest(content: content, kind: .overlay, position: position)) != nil { count += 1 }
            }
            return count
        }
        served = try outcome.get()
        let perRequest = Double(MonotonicTime.now() - requestStart) / Double(requests) / 1000

        print("bench-catalog: \(entries * perEntry) slots over \(entries) entries, manifest \(manifestBytes / 1024) KiB")
        print("| measure | value |")
        print("|---|---|")
        print("| load and index (from reading the file to ready) | \(String(format: "%.2f", Double(loaded - start) / 1e9)) s |")
        print("| resident memory held after loading (RSS after − before) | \(String(format: "%.1f", Double(rssAfter - rssBefore) / 1_048_576)) MiB |")
        print("| peak RSS of the process | \(String(format: "%.1f", Double(peak) / 1_048_576)) MiB |")
        print("| one overlay request (mean of \(requests), \(served) served) | \(String(format: "%.1f", perRequest)) µs |")
        return 0
    }

    /// VmRSS and VmHWM of this process, in bytes (/proc/self/status).
    static func residentBytes() -> Int { statusField("VmRSS:") }
    static func peakBytes() -> Int { statusField("VmHWM:") }

    private static func statusField(_ name: String) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix(name) }) else { return 0 }
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }
}
