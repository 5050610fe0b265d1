import Foundation
import AdRuntime

/// A bad manifest: which file, which field, why.
public struct CatalogError: Error, Sendable, Equatable, CustomStringConvertible {
    public let file: String
    /// A JSON path: `overlays[1].slots[0].start`.
    public let field: String
    public let reason: String

    public init(file: String, field: String, reason: String) {
        self.file = file
        self.field = field
        self.reason = reason
    }

    public var description: String { "\(file): \(field): \(reason)" }
}

/// The embedded default ad source (SPEC §4.1): a folder with `catalog.json` and creative
/// files. See docs/catalog.md for the schema.
///
/// - Overlays: each slot of each entry is one ad; a request at position p gets the earliest
///   slot starting at or after p (so a request made when an overlay ends gets the next).
/// - Pause ads, post-rolls: entries rotate round-robin per episode.
/// - `content` limits an entry to those content ids; `max_per_episode` caps how often an
///   entry is served per episode (counted in this process).
/// - A creative file that is missing fails that ad only (`loadFailed`); the content plays on.
///
/// Threading: any thread; rotation and caps behind a lock.
public final class LocalCatalog: AdSource {
    public struct Slot: Sendable, Equatable {
        public let start: Double
        public let duration: Double
    }

    public enum Creative: Sendable, Equatable {
        case image(String)
        case text(String)
        case video(String)
    }

    public struct Entry: Sendable, Equatable {
        public let id: String
        public let kind: AdKind
        public let creative: Creative
        public let slots: [Slot]
        public let content: [String]?
        public let maxPerEpisode: Int?

        func isFor(_ contentID: String) -> Bool { content.map { $0.contains(contentID) } ?? true }
    }

    public let folder: URL
    public let entries: [Entry]
    private let served = Locked<[String: Int]>([:])   // "content|entry" → count
    private let rotation = Locked<[String: Int]>([:])  // "content|kind" → next index

    /// Reads and validates `folder/catalog.json`.
    public init(folder: URL) throws {
        self.folder = folder
        let file = folder.appendingPathComponent("catalog.json")
        let data: Data
        do {
            data = try Data(contentsOf: file)
        } catch {
            throw CatalogError(file: file.path, field: "(file)", reason: "cannot be read: \(error.localizedDescription)")
        }
        entries = try Self.parse(data, file: file.path)
    }

    static func parse(_ data: Data, file: String) throws -> [Entry] {
        func fail(_ field: String, _ reason: String) -> CatalogError { CatalogError(file: file, field: field, reason: reason) }
        let root: Any
        do {
            root = try JSONSerialization.jsonObject(with: data)
        } catch {
            throw fail("(document)", "not valid JSON: \(error.localizedDescription)")
        }
        guard let object = root as? [String: Any] else { throw fail("(document)", "must be a JSON object") }
        guard let version = object["version"] as? Int else { throw fail("version", "missing, or not an integer") }
        guard version == 1 else { throw fail("version", "\(version) is not supported (this is version 1)") }
        var entries: [Entry] = []
        var ids = Set<String>()
        for (key, kind) in [("overlays", AdKind.overlay), ("pause_ads", .pauseAd), ("postrolls", .postroll)] {
            guard let value = object[key] else { continue }
            guard let list = value as? [Any] else { throw fail(key, "must be an array") }
            for (index, item) in list.enumerated() {
                let path = "\(key)[\(index)]"
                guard let entry = item as? [String: Any] else { throw fail(path, "must be an object") }
                guard let id = entry["id"] as? String, !id.isEmpty else { throw fail("\(path).id", "missing, or not a non-empty string") }
                guard ids.insert(id).inserted else { throw fail("\(path).id", "\"\(id)\" is used twice") }
                let creative: Creative
                switch kind {
                case .overlay, .pauseAd:
                    let image = entry["image"], text = entry["text"]
                    if let image = image as? String, text == nil, !image.isEmpty {
                        creative = .image(image)
                    } else if let text = text as? String, image == nil, !text.isEmpty {
                        creative = .text(text)
                    } else {
                        throw fail(path, "needs exactly one of \"image\" (a file) or \"text\" (a non-empty string)")
                    }
                case .postroll:
                    guard let video = entry["video"] as? String, !video.isEmpty else { throw fail("\(path).video", "missing, or not a file name") }
                    creative = .video(video)
                }
                var slots: [Slot] = []
                if kind == .overlay {
                    guard let list = entry["slots"] as? [Any], !list.isEmpty else { throw fail("\(path).slots", "an overlay needs at least one slot") }
                    for (s, slot) in list.enumerated() {
                        let slotPath = "\(path).slots[\(s)]"
                        guard let slot = slot as? [String: Any] else { throw fail(slotPath, "must be an object") }
                        guard let start = number(slot["start"]), start >= 0, start.isFinite else {
                            throw fail("\(slotPath).start", "must be a number of seconds ≥ 0")
                        }
                        guard let duration = number(slot["duration"]), duration > 0, duration.isFinite else {
                            throw fail("\(slotPath).duration", "must be a number of seconds > 0")
                        }
                        slots.append(Slot(start: start, duration: duration))
                    }
                }
                var content: [String]?
                if let value = entry["content"] {
                    guard let list = value as? [String], list.allSatisfy({ !$0.isEmpty }) else {
                        throw fail("\(path).content", "must be an array of content ids")
                    }
                    content = list
                }
                var cap: Int?
                if let value = entry["max_per_episode"] {
                    guard let n = value as? Int, n > 0 else { throw fail("\(path).max_per_episode", "must be a positive integer") }
                    cap = n
                }
                entries.append(Entry(id: id, kind: kind, creative: creative, slots: slots.sorted { $0.start < $1.start },
                                     content: content, maxPerEpisode: cap))
            }
        }
        return entries
    }

    private static func number(_ value: Any?) -> Double? {
        // JSON true/false arrive as a boolean NSNumber subclass: not a number of seconds.
        guard let n = value as? NSNumber, !String(describing: type(of: n)).contains("Boolean") else { return nil }
        return n.doubleValue
    }

    // MARK: AdSource

    public func ad(for request: AdRequest) async throws -> AdCreative? {
        let contentID = request.content.id
        let eligible = entries.filter { $0.kind == request.kind && $0.isFor(contentID) && !capped($0, contentID) }
        let chosen: (Entry, Slot?)?
        if request.kind == .overlay {
            chosen = eligible.flatMap { entry in entry.slots.map { (entry, Optional($0)) } }
                .filter { $0.1!.start >= request.position - 0.001 }
                .min { $0.1!.start < $1.1!.start }
        } else {
            chosen = rotate(eligible, key: "\(contentID)|\(request.kind.rawValue)").map { ($0, nil) }
        }
        guard let (entry, slot) = chosen else { return nil }
        served.withLock { $0["\(contentID)|\(entry.id)", default: 0] += 1 }
        return try creative(entry, slot)
    }

    private func capped(_ entry: Entry, _ contentID: String) -> Bool {
        guard let cap = entry.maxPerEpisode else { return false }
        return served.withLock { $0["\(contentID)|\(entry.id)", default: 0] } >= cap
    }

    private func rotate(_ entries: [Entry], key: String) -> Entry? {
        guard !entries.isEmpty else { return nil }
        return rotation.withLock { next in
            let index = next[key, default: 0] % entries.count
            next[key] = index + 1
            return entries[index]
        }
    }

    private func creative(_ entry: Entry, _ slot: Slot?) throws -> AdCreative {
        func file(_ name: String, _ field: String) throws -> String {
            let path = folder.appendingPathComponent(name).standardizedFileURL.path
            // Creatives live in the catalog's folder: no "../" escapes from it.
            guard path.hasPrefix(folder.standardizedFileURL.path + "/") else {
                throw CatalogError(file: folder.appendingPathComponent("catalog.json").path, field: "\(entry.id).\(field)",
                                   reason: "\(name) is outside the catalog's folder")
            }
            guard FileManager.default.fileExists(atPath: path) else {
                throw CatalogError(file: folder.appendingPathComponent("catalog.json").path, field: "\(entry.id).\(field)",
                                   reason: "the creative file \(name) is missing")
            }
            return path
        }
        let content: AdCreativeContent = switch entry.creative {
        case .image(let name): .image(location: try file(name, "image"))
        case .text(let text): .text(text)
        case .video(let name): .video(location: try file(name, "video"))
        }
        return AdCreative(id: entry.id, kind: entry.kind, content: content, duration: slot?.duration, slotStart: slot?.start)
    }
}
