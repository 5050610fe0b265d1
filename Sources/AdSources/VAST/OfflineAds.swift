import AdRuntime
import Foundation

/// The VAST ads a server served lately, kept (with the creative cache holding their files) so
/// that they can be shown again while that server cannot be reached — each until its
/// `<Expires>`, or the configured lifetime when it has none (SPEC §4, "offline"). Their
/// tracking is theirs: an impression shown offline is recorded at show time and delivered
/// when the network returns (R17).
///
/// Kept in the cache folder (`offline-<tag hash>.json`, written whole: a temporary file,
/// fsynced, renamed, the folder fsynced), at most `maxPerKind` a kind, the newest first; served
/// in turn. Read whole when the source is made, before its first request.
///
/// Each list is written under the lock that made it (issue 39): two ads kept at once (an
/// overlay and a pause ad resolved together) used to be saved outside it, and the older list
/// could be renamed over the newer one — after a restart the ad kept first was gone.
///
/// Threading: any thread but the player's loop (file reads and writes); one lock.
package final class OfflineAds: Sendable {
    package struct Entry: Codable, Equatable {
        package var kind: String
        package var id: String
        /// The creative file's URL (the cache's key) and what it is.
        var media: String
        var video: Bool
        var width: Int?
        var height: Int?
        var duration: Double?
        var tracking: [String: [String]]
        var adServingID: String?
        var universalAdID: String?
        /// For competitive separation and skipping, as the ad was served (absent in older files).
        var advertiser: String?
        var categories: [String]?
        var skipOffset: Double?
        /// Seconds since 1970.
        var expires: Double

        package init(kind: String, id: String, media: String, video: Bool = false, width: Int? = nil, height: Int? = nil,
                     duration: Double? = nil, tracking: [String: [String]] = [:], adServingID: String? = nil, universalAdID: String? = nil,
                     advertiser: String? = nil, categories: [String]? = nil, skipOffset: Double? = nil, expires: Double) {
            self.kind = kind
            self.id = id
            self.media = media
            self.video = video
            self.width = width
            self.height = height
            self.duration = duration
            self.tracking = tracking
            self.adServingID = adServingID
            self.universalAdID = universalAdID
            self.advertiser = advertiser
            self.categories = categories
            self.skipOffset = skipOffset
            self.expires = expires
        }
    }

    private struct State {
        var entries: [Entry]
        var turn: [String: Int] = [:]
    }

    static let maxPerKind = 16
    private static let maxFileBytes = 8 << 20
    private let path: String
    private let cache: CreativeCache
    private let state: Locked<State>

    package init(cache: CreativeCache, tag: String) {
        self.cache = cache
        path = cache.folder + "/offline-" + CreativeCache.sha256(Data(tag.utf8)).prefix(16) + ".json"
        let saved = (try? SafeFile.read(path, maxBytes: Self.maxFileBytes)).flatMap { try? JSONDecoder().decode([Entry].self, from: $0) } ?? []
        state = Locked(State(entries: saved))
    }

    /// Keeps `entry` (replacing an older serving of the same creative) and saves the list, on
    /// disk when this returns.
    package func remember(_ entry: Entry) {
        state.withLock { state in
            state.entries.removeAll { ($0.kind == entry.kind && $0.id == entry.id && $0.media == entry.media) || $0.expires <= SimulatedTime.wall() }
            state.entries.insert(entry, at: 0)
            var counts: [String: Int] = [:]
            state.entries = state.entries.filter { e in
                counts[e.kind, default: 0] += 1
                return counts[e.kind]! <= Self.maxPerKind
            }
            save(state.entries)
        }
    }

    /// What is kept, newest first.
    package func kept() -> [Entry] { state.withLock { $0.entries } }

    /// An ad of `kind` that has not expired and whose file is in the cache (checked), in turn;
    /// nil if none.
    package func take(_ kind: AdKind) -> AdCreative? {
        let now = SimulatedTime.wall()
        let candidates = state.withLock { $0.entries.filter { $0.kind == kind.rawValue && $0.expires > now } }
        guard !candidates.isEmpty else { return nil }
        let start = state.withLock { state -> Int in
            defer { state.turn[kind.rawValue, default: 0] += 1 }
            return state.turn[kind.rawValue, default: 0]
        }
        for offset in 0..<candidates.count {
            let entry = candidates[(start + offset) % candidates.count]
            guard let file = cache.file(for: entry.media) else { continue }
            var creative = AdCreative(id: entry.id, kind: kind,
                                      content: entry.video ? .video(location: file) : .image(location: file, width: entry.width, height: entry.height),
                                      duration: entry.duration, tracking: entry.tracking, adServingID: entry.adServingID,
                                      universalAdID: entry.universalAdID, source: "vast-cache")
            creative.expires = Date(timeIntervalSince1970: entry.expires)
            creative.advertiser = entry.advertiser
            creative.categories = entry.categories ?? []
            creative.skipOffset = entry.skipOffset
            return creative
        }
        return nil
    }

    /// Writes the list durably: a temporary file, fsync, rename, the folder's fsync. Under the
    /// lock (the order of the lists is the order of the writes).
    private func save(_ entries: [Entry]) {
        guard let data = try? JSONEncoder().encode(entries) else { return }
        try? AtomicFile.write(data, to: path, durable: true)
    }
}
