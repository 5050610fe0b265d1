import AdRuntime
import CFFmpeg
import Foundation

/// Creative files on the box's own disk (SPEC §4): images and post-roll videos that ad servers
/// name by URL, kept so that an ad is shown from a local file — at once, and with no network.
///
/// - **Where**: a folder of the daemon's own (the state folder's `creatives`, or
///   `$CACHE_DIRECTORY` under systemd), made 0700 and checked to be a real directory owned by
///   this user — never a shared `/tmp` name another user could create or link first.
/// - **Content-addressed**: a creative is `objects/<SHA-256 of its bytes>`; `urls/<SHA-256 of
///   its URL>` names the object a URL gave. An object is checked against its name before each
///   use: a damaged file is deleted and fetched again, never shown.
/// - **Atomic**: a download goes to a temporary file in the folder, is hashed, then renamed;
///   a crash leaves a temporary file, removed at the next start.
/// - **Bounded** in bytes (`maxBytes`, default 512 MiB): the least recently used go first
///   (use is the file's modification time, set at each use, so it survives restarts).
///
/// Threading: any thread but the player's loop (it reads, hashes and renames files); one lock
/// over the index, never held across a download.
public final class CreativeCache: Sendable {
    public static let defaultMaxBytes = 512 << 20

    public struct Problem: Error, Sendable, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    private struct Object {
        var bytes: Int
        var used: Double
    }

    public let folder: String
    public let maxBytes: Int
    private let index: Locked<[String: Object]>

    /// Opens (making it if need be) the cache in `folder`; fails if `folder` is not a directory
    /// of this user's (a symlink, someone else's) or cannot be made private.
    public init(folder: String, maxBytes: Int = CreativeCache.defaultMaxBytes) throws {
        self.folder = folder
        self.maxBytes = maxBytes
        for path in [folder, folder + "/objects", folder + "/urls"] { try Self.makePrivateFolder(path) }
        var objects: [String: Object] = [:]
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder + "/objects")) ?? [] {
            let path = folder + "/objects/" + name
            var info = stat()
            guard Self.isHash(name), lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
                unlink(path)   // a temporary file a crash left, or something that is no object
                continue
            }
            objects[name] = Object(bytes: Int(info.st_size), used: Double(info.st_mtim.tv_sec) + Double(info.st_mtim.tv_nsec) / 1e9)
        }
        index = Locked(objects)
        trim(keeping: nil)
    }

    /// A cache in a new private temporary folder (mkdtemp: a fresh 0700 name no one could
    /// have made first), for tools that keep nothing; the caller removes `folder` when done.
    public static func temporary(maxBytes: Int = CreativeCache.defaultMaxBytes) throws -> CreativeCache {
        var template = Array((FileManager.default.temporaryDirectory.path + "/adplayerd-creatives-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw Problem(description: "cannot make a temporary folder: \(String(cString: strerror(errno)))") }
        return try CreativeCache(folder: String(cString: made), maxBytes: maxBytes)
    }

    /// The bytes the cache holds.
    public var totalBytes: Int { index.withLock { $0.values.reduce(0) { $0 + $1.bytes } } }

    /// The cached file for `url`, checked against its hash (a damaged one is deleted: nil), and
    /// marked used; nil when not cached.
    public func file(for url: String) -> String? {
        let link = folder + "/urls/" + Self.sha256(Data(url.utf8))
        guard let data = try? SafeFile.read(link, maxBytes: 64), let hash = String(data: data, encoding: .utf8), Self.isHash(hash) else {
            return nil
        }
        let path = folder + "/objects/" + hash
        guard index.withLock({ $0[hash] != nil }), Self.sha256(file: path) == hash else {
            // Missing, or damaged since it was written: gone, to be fetched again.
            remove(hash)
            unlink(link)
            return nil
        }
        utimensat(AT_FDCWD, path, nil, 0)   // used now: its times are the clock's
        let now = Date().timeIntervalSince1970
        index.withLock { $0[hash]?.used = now }
        return path
    }

    /// The cached file for `url`, or downloads it (streamed to disk within `limits`) and keeps
    /// it. Throws `FetchError` when it cannot be fetched, `Problem` when it cannot be kept.
    public func fetch(_ url: String, with fetcher: any BoundedFetcher, limits: HTTPLimits) async throws -> String {
        if let path = file(for: url) { return path }
        let temporary = folder + "/objects/.tmp-" + UUID().uuidString
        do {
            _ = try await fetcher.download(HTTPRequest(url: url), to: temporary, limits: limits)
        } catch {
            unlink(temporary)
            throw error
        }
        return try keep(temporary, for: url)
    }

    /// Moves a downloaded `temporary` file (in this cache's `objects` folder) to its object and
    /// names it for `url`; the least recently used objects make room.
    func keep(_ temporary: String, for url: String) throws -> String {
        guard let hash = Self.sha256(file: temporary) else {
            unlink(temporary)
            throw Problem(description: "\(temporary): cannot be read back")
        }
        var info = stat()
        guard stat(temporary, &info) == 0 else { throw Problem(description: "\(temporary): \(String(cString: strerror(errno)))") }
        let bytes = Int(info.st_size)
        guard bytes <= maxBytes else {
            unlink(temporary)
            throw Problem(description: "\(url): \(bytes) bytes is more than the whole cache (\(maxBytes))")
        }
        let path = folder + "/objects/" + hash
        guard rename(temporary, path) == 0 else {
            let why = String(cString: strerror(errno))
            unlink(temporary)
            throw Problem(description: "\(path): \(why)")
        }
        index.withLock { $0[hash] = Object(bytes: bytes, used: Date().timeIntervalSince1970) }
        // The URL's name for it, written whole or not at all.
        let link = folder + "/urls/" + Self.sha256(Data(url.utf8))
        let linkTemporary = link + ".tmp-" + UUID().uuidString
        do {
            try Data(hash.utf8).write(to: URL(fileURLWithPath: linkTemporary))
            guard rename(linkTemporary, link) == 0 else { throw Problem(description: "\(link): \(String(cString: strerror(errno)))") }
        } catch {
            unlink(linkTemporary)
            throw Problem(description: "\(link): \(error)")
        }
        trim(keeping: hash)
        return path
    }

    /// Least recently used out until the cache is within its bound (never `keeping`).
    private func trim(keeping: String?) {
        let doomed: [String] = index.withLock { objects in
            var total = objects.values.reduce(0) { $0 + $1.bytes }
            var out: [String] = []
            for (hash, object) in objects.sorted(by: { $0.value.used < $1.value.used }) where total > maxBytes && hash != keeping {
                total -= object.bytes
                out.append(hash)
            }
            for hash in out { objects[hash] = nil }
            return out
        }
        for hash in doomed { unlink(folder + "/objects/" + hash) }
        // A URL's name for an object that is gone is removed when it is next looked up.
    }

    private func remove(_ hash: String) {
        index.withLock { $0[hash] = nil }
        unlink(folder + "/objects/" + hash)
    }

    /// Makes `path` a directory of this user's, 0700: refused if it is a symlink or someone else's.
    static func makePrivateFolder(_ path: String) throws {
        if mkdir(path, 0o700) != 0, errno != EEXIST {
            throw Problem(description: "\(path): cannot be made: \(String(cString: strerror(errno)))")
        }
        var info = stat()
        guard lstat(path, &info) == 0 else { throw Problem(description: "\(path): \(String(cString: strerror(errno)))") }
        guard (info.st_mode & S_IFMT) == S_IFDIR else { throw Problem(description: "\(path): is not a directory (a symlink?): refused") }
        guard info.st_uid == geteuid() else { throw Problem(description: "\(path): belongs to uid \(info.st_uid), not to this user: refused") }
        if info.st_mode & 0o777 != 0o700, chmod(path, 0o700) != 0 {
            throw Problem(description: "\(path): cannot be made private: \(String(cString: strerror(errno)))")
        }
    }

    static func isHash(_ name: String) -> Bool {
        name.utf8.count == 64 && name.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    /// SHA-256 of `data`, in lowercase hex.
    public static func sha256(_ data: Data) -> String {
        let hasher = SHA256()
        data.withUnsafeBytes { hasher.update($0) }
        return hasher.finish()
    }

    /// SHA-256 of a file's bytes (read a MiB at a time), or nil if it cannot be read.
    public static func sha256(file path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        let hasher = SHA256()
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0, errno == EINTR { continue }
            if n < 0 { return nil }
            if n == 0 { break }
            buffer.withUnsafeBytes { hasher.update(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
        }
        return hasher.finish()
    }
}

/// libavutil's SHA-256 (FFmpeg is linked already for the creatives' decoding).
private final class SHA256 {
    private let context: OpaquePointer

    init() {
        context = av_sha_alloc()
        av_sha_init(context, 256)
    }

    deinit { av_free(UnsafeMutableRawPointer(context)) }

    func update(_ bytes: UnsafeRawBufferPointer) {
        guard let base = bytes.baseAddress, !bytes.isEmpty else { return }
        av_sha_update(context, base.assumingMemoryBound(to: UInt8.self), bytes.count)
    }

    func finish() -> String {
        var digest = [UInt8](repeating: 0, count: 32)
        av_sha_final(context, &digest)
        return digest.map { String(format: "%02x", $0) }.joined()
    }
}
