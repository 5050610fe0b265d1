import AdPlayerDaemon
import AdPlayerMpv
import AdRuntime
import AdSources
import ControlProtocol
import Foundation
import MpvPlayerAdapter

/// `adplayerd ads-check SOURCE... [--json] [--content ID]` (or `--config FILE`: the `ads` of
/// a configuration): resolves each ad source of the chain, in order, as the daemon would and
/// prints what would be shown (kind, creative, size, duration, tracking events) or why nothing
/// would be (with the VAST error code). Exit 0 when at least one ad resolved, 1 when none, 2
/// on bad usage.
struct AdsCheckCommand {
    static let usage = """
        usage: adplayerd ads-check SOURCE... [--json] [--content ID]
               adplayerd ads-check --config FILE [--json] [--content ID]
          SOURCE: a catalog folder (catalog.json), a VAST file, or an http(s) VAST URL; several are
          a fallback chain, asked in order (as `ads` given more than once)
        """

    struct Found: Encodable {
        var kind: String
        var id: String
        var creative: String
        var width: Int?
        var height: Int?
        var duration: Double?
        var slots: [[Double]]?
        var tracking: [String: Int]
        var chain: [String]?
        /// Linear ads: ads of its pod after it.
        var podRemaining: Int?
        /// Mid-rolls: the break's content time (seconds), or its share of the episode (%).
        var at: Double?
        var atPercent: Double?
        /// Squeezebacks: how the screen is shared (`l-right 0.66 1s`).
        var layout: String?
        /// Linear ads: their VAST icons kept (R27), `AdChoices right,top 0s–5s`.
        var icons: [String]?
    }

    struct Problem: Encodable {
        var kind: String
        var id: String?
        var code: String
        var message: String
    }

    struct Report: Encodable {
        var source: String
        var type: String
        var ads: [Found] = []
        var problems: [Problem] = []
    }

    let arguments: [String]

    func run() throws -> Int32 {
        let parsed = try CommandLineArguments(arguments, spec: ["json": .flag, "content": .value, "config": .value])
        let json = parsed.flag("json")
        let content = parsed.value("content") ?? "episode"
        var sources = parsed.positional
        if let file = parsed.value("config") {
            guard sources.isEmpty else { throw UsageError("SOURCE or --config, not both") }
            var configuration = Configuration()
            do {
                try configuration.read(file: file)
            } catch {
                throw UsageError("\(error)")
            }
            sources = configuration.ads
            guard !sources.isEmpty else { throw UsageError("\(file) names no ad source (ads = …)") }
        }
        guard !sources.isEmpty else { throw UsageError("ads-check needs a SOURCE") }
        let reports = try sources.map { try report(for: $0, content: content) }
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
            // One source: its report; a chain: the reports in order.
            let data = reports.count == 1 ? try encoder.encode(reports[0]) : try encoder.encode(["chain": reports])
            print(String(decoding: data, as: UTF8.self))
        } else {
            for (index, report) in reports.enumerated() {
                print((reports.count > 1 ? "\(index + 1). " : "") + "\(report.source) (\(report.type))"
                      + (reports.count > 1 && index > 0 ? ", asked when the sources before it fill nothing" : ""))
                for ad in report.ads {
                    var line = "  \(ad.kind.padding(toLength: max(9, ad.kind.count), withPad: " ", startingAt: 0)) \(ad.id): \(ad.creative)"
                    if let w = ad.width, let h = ad.height { line += ", \(w)×\(h)" }
                    if let d = ad.duration { line += ", \(d) s" }
                    if let slots = ad.slots { line += ", slots " + slots.map { "\($0[0])s+\($0[1])s" }.joined(separator: " ") }
                    if let pod = ad.podRemaining, pod > 0 { line += ", first of a pod of \(pod + 1)" }
                    if let at = ad.at { line += ", at \(at)s" }
                    if let share = ad.atPercent { line += ", at \(share)% of the episode" }
                    if let layout = ad.layout { line += ", layout \(layout)" }
                    if let icons = ad.icons { line += ", icons " + icons.joined(separator: "; ") }
                    if !ad.tracking.isEmpty { line += ", tracking " + ad.tracking.sorted { $0.key < $1.key }.map { "\($0.key)×\($0.value)" }.joined(separator: " ") }
                    print(OneLine.escape(line))   // ids and text are the ad servers' and the catalog's
                }
                for problem in report.problems {
                    print(OneLine.escape("  \(problem.kind.padding(toLength: 9, withPad: " ", startingAt: 0)) \(problem.id.map { "\($0): " } ?? "")nothing: \(problem.message) [\(problem.code)]"))
                }
            }
        }
        return reports.allSatisfy(\.ads.isEmpty) ? 1 : 0
    }

    /// What `source` would serve for a content id, or why not.
    func report(for line: String, content: String) throws -> Report {
        let source: String
        do {
            source = try AdSourceFactory.parse(line).source   // `SOURCE pop-deadline=…`: the source
        } catch {
            throw UsageError("\(error)")
        }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: source, isDirectory: &isDirectory), isDirectory.boolValue {
            return checkCatalog(source)
        } else if source.hasPrefix("http://") || source.hasPrefix("https://") || FileManager.default.fileExists(atPath: source) {
            return checkVAST(source, content: content)
        }
        throw UsageError("\(source) is neither a folder, a file nor an http(s) URL")
    }

    private func checkCatalog(_ folder: String) -> Report {
        var report = Report(source: folder, type: "catalog")
        let catalog: LocalCatalog
        do {
            catalog = try LocalCatalog(folder: URL(fileURLWithPath: folder))
        } catch let error as CatalogError {
            // Every problem of the manifest, one each.
            report.problems += error.problems.map { Problem(kind: "catalog", id: nil, code: "bad_manifest", message: "\($0)") }
            return report
        } catch {
            report.problems.append(Problem(kind: "catalog", id: nil, code: "bad_manifest", message: "\(error)"))
            return report
        }
        for entry in catalog.entries {
            var found = Found(kind: entry.kind.rawValue, id: entry.id, creative: "", tracking: [:])
            do {
                switch entry.creative {
                case .text(let text):
                    found.creative = "text \"\(text)\""
                case .image(let name), .video(let name):
                    // The same check that serving makes (SafeFile): inside the folder, a regular file.
                    let path = try catalog.creativeFile(name)
                    found.creative = path
                    if case .image = entry.creative {
                        let probe = try ImageDecoder.probe(path)
                        found.width = probe.width
                        found.height = probe.height
                    }
                }
                if entry.kind.isOverPlayingContent {
                    found.slots = entry.slots.map { [$0.start, $0.duration] }
                }
                found.layout = entry.squeezeback?.summary
                if case .seconds(let at)? = entry.at { found.at = at }
                if case .percent(let share)? = entry.at { found.atPercent = share }
                report.ads.append(found)
            } catch {
                report.problems.append(Problem(kind: entry.kind.rawValue, id: entry.id, code: "bad_creative", message: "\(error)"))
            }
        }
        return report
    }

    private static func describe(_ icon: AdIcon) -> String {
        func place(_ p: AdIcon.Position, _ start: String, _ end: String) -> String {
            switch p {
            case .start: start
            case .end: end
            case .pixels(let n): "\(n)px"
            }
        }
        let until = icon.duration.map { "–\(String(format: "%g", icon.offset + $0))s" } ?? " on"
        return "\(icon.program ?? "icon") \(place(icon.x, "left", "right")),\(place(icon.y, "top", "bottom")) \(String(format: "%g", icon.offset))s\(until)"
    }

    private func checkVAST(_ source: String, content: String) -> Report {
        let isURL = source.hasPrefix("http")
        var report = Report(source: source, type: isURL ? "vast-url" : "vast-file")
        let cache: CreativeCache
        do {
            cache = try CreativeCache.temporary()
        } catch {
            report.problems.append(Problem(kind: "vast", id: nil, code: "cache", message: "\(error)"))
            return report
        }
        defer { try? FileManager.default.removeItem(atPath: cache.folder) }
        let client = VASTClient(tag: isURL ? source : URL(fileURLWithPath: source).absoluteString, cache: cache)
        var document: Data?
        if !isURL {
            do {
                document = try SafeFile.read(source, maxBytes: 1024 * 1024)
            } catch {
                report.problems.append(Problem(kind: "vast", id: nil, code: error.kind.rawValue, message: error.description))
                return report
            }
        }
        // Pre- and mid-rolls only from a tag that answers a VMAP schedule with such breaks (a plain
        // VAST answer's linear ad is the post-roll's; the daemon asks it for no pre-roll after the first).
        var kinds: [AdKind] = [.overlay, .pauseAd, .postroll]
        var index = 0
        while index < kinds.count {
            let kind = kinds[index]
            index += 1
            defer {
                if kind == .postroll, isURL {
                    let episode = ContentInfo(id: content)
                    if client.mayFill(.preroll, content: episode, at: 0) { kinds.append(.preroll) }
                    if client.mayFill(.midroll, content: episode, at: 0) { kinds.append(.midroll) }
                }
            }
            let request = AdRequest(content: ContentInfo(id: content), kind: kind, position: 0)
            let read = document
            let outcome = Blocking.run { try await client.resolve(request, document: read) }
            switch outcome {
            case .success(let resolution?):
                let creative = resolution.creative
                // The creative's kind: the overlay chain's answer may be a squeezeback (R26).
                var found = Found(kind: creative.kind.rawValue, id: creative.id, creative: "", duration: creative.duration,
                                  tracking: creative.tracking.mapValues(\.count), chain: resolution.chain)
                found.layout = creative.squeezeback?.summary
                if !creative.icons.isEmpty { found.icons = creative.icons.map(Self.describe) }
                if kind.isLinear { found.podRemaining = creative.podRemaining }
                if kind == .midroll { found.at = creative.slotStart }
                switch creative.content {
                case .image(let location, let w, let h):
                    found.creative = "image"
                    found.width = w
                    found.height = h
                    if let probe = try? ImageDecoder.probe(location) {
                        found.creative = "\(probe.format.rawValue) image"
                        found.width = probe.width
                        found.height = probe.height
                    }
                case .video(let location): found.creative = "video \(location)"
                case .html(let url): found.creative = "html \(url)"
                case .text(let text): found.creative = "text \"\(text)\""
                }
                report.ads.append(found)
            case .success(nil):
                report.problems.append(Problem(kind: kind.rawValue, id: nil, code: "vast-303", message: "no ad (no fill)"))
            case .failure(let error as VASTError):
                report.problems.append(Problem(kind: kind.rawValue, id: nil, code: "vast-\(error.code.rawValue)", message: error.message))
            case .failure(let error):
                report.problems.append(Problem(kind: kind.rawValue, id: nil, code: "error", message: "\(error)"))
            }
        }
        return report
    }
}
