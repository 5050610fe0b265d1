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
        /// When the list was last written (the environment's wall clock), and whether what is
        /// kept now differs from it.
        var saved = -Double.infinity
        var unsaved = false
    }

    /// A list whose ads are the same as written (an ad served again: its new expiry, its place
    /// first) is written again at most this often; a new ad is written at once. An ad served
    /// every minute cost a durable write (two fsyncs) a minute for no gain: a restart that
    /// finds the older expiry keeps the ad a little less long, nothing more.
    static let rewriteInterval = 300.0

    static let maxPerKind = 16
    private static let maxFileBytes = 8 << 20
    let path: String
    private let cache: CreativeCache
    private let state: Locked<State>
    private let environment: AdEnvironment

    package init(cache: CreativeCache, tag: String, environment: AdEnvironment = .system) {
        self.cache = cache
        self.environment = environment
        path = Self.path(cache: cache, tag: tag)
        let saved = (try? SafeFile.read(path, maxBytes: Self.maxFileBytes)).flatMap { try? JSONDecoder().decode([Entry].self, from: $0) } ?? []
        state = Locked(State(entries: saved))
    }

    static func path(cache: CreativeCache, tag: String) -> String {
        cache.folder + "/offline-" + CreativeCache.sha256(Data(tag.utf8)).prefix(16) + ".json"
    }

    /// Keeps `entry` (replacing an older serving of the same creative). A new ad is on disk
    /// when this returns; an ad kept already is written again at most every `rewriteInterval`.
    package func remember(_ entry: Entry) {
        state.withLock { state in
            let count = state.entries.count
            let wasKept = state.entries.contains { $0.kind == entry.kind && $0.id == entry.id && $0.media == entry.media }
            state.entries.removeAll { ($0.kind == entry.kind && $0.id == entry.id && $0.media == entry.media) || $0.expires <= environment.wall() }
            // Expired ones went: the list on disk no longer says what is kept.
            if state.entries.count < count - (wasKept ? 1 : 0) { state.unsaved = true }
            state.entries.insert(entry, at: 0)
            var counts: [String: Int] = [:]
            state.entries = state.entries.filter { e in
                counts[e.kind, default: 0] += 1
                return counts[e.kind]! <= Self.maxPerKind
            }
            let now = environment.wall()
            guard !wasKept || state.unsaved || now - state.saved >= Self.rewriteInterval else { return }
            save(state.entries)
            state.saved = now
            state.unsaved = false
        }
    }

    /// What is kept, newest first.
    package func kept() -> [Entry] { state.withLock { $0.entries } }

    /// An ad of `kind` that has not expired and whose file is in the cache (checked), in turn;
    /// nil if none.
    package func take(_ kind: AdKind) -> AdCreative? {
        let now = environment.wall()
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

/// The offline lists of one box, one per file: a reload makes a new VAST source for the same tag
/// while the episode that plays still uses the old one — both write through the one list, so
/// neither renames an older list over the other's newer one.
///
/// Threading: any thread.
public final class OfflineLists: Sendable {
    private let lists = Locked<[String: OfflineAds]>([:])

    public init() {}

    func list(cache: CreativeCache, tag: String, environment: AdEnvironment) -> OfflineAds {
        let path = OfflineAds.path(cache: cache, tag: tag)
        return lists.withLock { lists in
            if let list = lists[path] { return list }
            let list = OfflineAds(cache: cache, tag: tag, environment: environment)
            lists[path] = list
            return list
        }
    }
}
