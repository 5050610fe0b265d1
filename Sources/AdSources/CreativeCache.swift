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
/// - **A disk that refuses** (full, read-only, over quota): an image is kept in memory instead —
///   a file in a private folder of this process's on `/dev/shm` (tmpfs: RAM, never the disk),
///   at most `memoryMaxBytes` (64 MiB) of them, the least recently used dropped first — so the
///   ad still shows and is billed; at its next use, once the disk takes it, it moves to the
///   disk (`retryInterval`). Said once when the disk starts refusing and once when it takes
///   creatives again. Post-roll videos are not kept in memory: they play from the server
///   while the disk refuses.
///
/// Threading: any thread but the player's loop (it reads, hashes and renames files); one lock
/// over the index, never held across a download.
public final class CreativeCache: Sendable {
    public static let defaultMaxBytes = 512 << 20

    public struct Problem: Error, Sendable, CustomStringConvertible {
        public let description: String
        /// The disk refused to store (errno), as opposed to a creative that is wrong.
        public let refusedBy: Int32?
        public init(description: String, refusedBy: Int32? = nil) {
            self.description = description
            self.refusedBy = refusedBy
        }
    }

    public static let defaultMemoryMaxBytes = 64 << 20

    /// A creative kept in memory while the disk refuses it.
    private struct Held {
        var path: String
        var bytes: Int
        var used: Double
    }

    private struct Memory {
        /// This cache's folder on the memory file system, made at the first creative it holds.
        var folder: String?
        var held: [String: Held] = [:]   // by URL
        var lastTry = -Double.infinity
        /// The disk refused the last creative it was given (said once until it takes one again).
        var refusing = false
    }

    private struct Object {
        var bytes: Int
        var used: Double
    }

    public let folder: String
    public let maxBytes: Int
    private let index: Locked<[String: Object]>
    public let memoryMaxBytes: Int
    /// Where creatives the disk refuses are kept (`/dev/shm`: RAM).
    public let memoryRoot: String
    /// How often, at most, a creative held in memory is offered to the disk again.
    public let retryInterval: Double
    private let memory = Locked(Memory())
    /// Files whose hash was checked, by path: what `stat` said then and when (monotonic s). A
    /// file unchanged since (the same inode, size, change time) is not read again within
    /// `reverifyInterval`: hashing a 30 MB video at every play was most of an ad's cost.
    private let verified = Locked<[String: (identity: FileIdentity, at: Double)]>([:])
    static let reverifyInterval = 86_400.0

    struct FileIdentity: Equatable {
        var device: UInt64, inode: UInt64, size: Int64, changed: Int64, changedNanos: Int64
        init?(_ path: String) {
            var info = stat()
            guard lstat(path, &info) == 0 else { return nil }
            device = UInt64(info.st_dev)
            inode = UInt64(info.st_ino)
            size = Int64(info.st_size)
            changed = Int64(info.st_ctim.tv_sec)
            changedNanos = Int64(info.st_ctim.tv_nsec)
        }
    }

    /// Whether the file at `path` still hashes to `hash` — read again only when it changed, or
    /// once a day.
    private func intact(_ path: String, _ hash: String) -> Bool {
        let now = Double(MonotonicTime.now()) / 1e9
        guard let identity = FileIdentity(path) else { return false }
        if let known = verified.withLock({ $0[path] }), known.identity == identity, now - known.at < Self.reverifyInterval { return true }
        guard Self.sha256(file: path) == hash else {
            _ = verified.withLock { $0.removeValue(forKey: path) }
            return false
        }
        verified.withLock { map in
            if map.count > 10_000 { map.removeAll() }   // bounded: a cache holds far fewer
            map[path] = (identity, now)
        }
        return true
    }

    /// After its times were touched (`utimensat` changes the change time): known as checked.
    private func stillVerified(_ path: String) {
        guard let identity = FileIdentity(path) else { return }
        verified.withLock { map in if map[path] != nil { map[path]!.identity = identity } }
    }
    private let onProblem: @Sendable (String) -> Void
    private static let instances = Locked(0)

    /// Opens (making it if need be) the cache in `folder`; fails if `folder` is not a directory
    /// of this user's (a symlink, someone else's) or cannot be made private. `onProblem` hears
    /// when the disk starts refusing creatives and when it takes them again.
    public init(folder: String, maxBytes: Int = CreativeCache.defaultMaxBytes,
                memoryMaxBytes: Int = CreativeCache.defaultMemoryMaxBytes, memoryRoot: String = "/dev/shm",
                retryInterval: Double = 10, onProblem: @escaping @Sendable (String) -> Void = { _ in }) throws {
        self.folder = folder
        self.maxBytes = maxBytes
        self.memoryMaxBytes = memoryMaxBytes
        self.memoryRoot = memoryRoot
        self.retryInterval = retryInterval
        self.onProblem = onProblem
        Self.removeAbandonedMemory(in: memoryRoot)
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
    public static func temporary(maxBytes: Int = CreativeCache.defaultMaxBytes,
                                 onProblem: @escaping @Sendable (String) -> Void = { _ in }) throws -> CreativeCache {
        var template = Array((FileManager.default.temporaryDirectory.path + "/adplayerd-creatives-XXXXXX").utf8CString)
        guard let made = mkdtemp(&template) else { throw Problem(description: "cannot make a temporary folder: \(String(cString: strerror(errno)))") }
        return try CreativeCache(folder: String(cString: made), maxBytes: maxBytes, onProblem: onProblem)
    }

    /// The bytes the cache holds on disk.
    public var totalBytes: Int { index.withLock { $0.values.reduce(0) { $0 + $1.bytes } } }

    /// The bytes held in memory because the disk refused them.
    public var memoryBytes: Int { memory.withLock { $0.held.values.reduce(0) { $0 + $1.bytes } } }

    /// The cached file for `url`, checked against its hash (a damaged one is deleted: nil), and
    /// marked used; nil when not cached. One held in memory is offered to the disk first.
    public func file(for url: String) -> String? {
        if let held = heldFile(for: url) { return held }
        let link = folder + "/urls/" + Self.sha256(Data(url.utf8))
        guard let data = try? SafeFile.read(link, maxBytes: 64), let hash = String(data: data, encoding: .utf8), Self.isHash(hash) else {
            return nil
        }
        let path = folder + "/objects/" + hash
        guard index.withLock({ $0[hash] != nil }), intact(path, hash) else {
            // Missing, or damaged since it was written: gone, to be fetched again.
            remove(hash)
            unlink(link)
            return nil
        }
        utimensat(AT_FDCWD, path, nil, 0)   // used now: its times are the clock's
        stillVerified(path)
        let now = Date().timeIntervalSince1970
        index.withLock { $0[hash]?.used = now }
        return path
    }

    /// The cached file for `url`, or downloads it (streamed to disk within `limits`) and keeps
    /// it. Throws `FetchError` when it cannot be fetched, `Problem` when it cannot be kept.
    ///
    /// `inMemory`: when the disk refuses it, the creative is kept in memory (at most
    /// `memoryMaxBytes`) rather than refused — for images, which are small and must show.
    public func fetch(_ url: String, with fetcher: any BoundedFetcher, limits: HTTPLimits, inMemory: Bool = false) async throws -> String {
        if let path = file(for: url) { return path }
        let temporary = folder + "/objects/.tmp-" + UUID().uuidString
        var refused: String
        do {
            _ = try await fetcher.download(HTTPRequest(url: url), to: temporary, limits: limits)
            do {
                let kept = try keep(temporary, for: url)
                diskTookOne()
                return kept
            } catch let problem as Problem where problem.refusedBy != nil && inMemory {
                refused = problem.description
            }
        } catch let error as FetchError {
            unlink(temporary)
            guard case .cannotStore = error.kind, inMemory else { throw error }
            refused = error.description
        } catch {
            unlink(temporary)
            throw error
        }
        // The disk refused it: fetched again into memory (the partial file is gone).
        let data = try await fetcher.fetch(HTTPRequest(url: url), limits: HTTPLimits(maxBytes: min(limits.maxBytes, memoryMaxBytes),
                                                                                      deadline: limits.deadline, maxRedirects: limits.maxRedirects))
        return try hold(data, for: url, because: refused)
    }

    // MARK: Memory, while the disk refuses

    /// Keeps `data` in memory for `url`; the least recently used held creatives make room.
    private func hold(_ data: Data, for url: String, because refused: String) throws -> String {
        let hash = Self.sha256(data)
        let folder: String
        do {
            folder = try memoryFolder()
        } catch {
            throw Problem(description: "\(refused); and it cannot be kept in memory: \(error)")
        }
        let path = folder + "/" + hash
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        let code = fd < 0 ? errno : data.withUnsafeBytes { writeAll(fd, $0.baseAddress, $0.count) }
        if fd >= 0 { close(fd) }
        guard code == 0 else {
            unlink(path)
            throw Problem(description: "\(refused); and it cannot be kept in memory: \(path): \(String(cString: strerror(code)))")
        }
        let now = Date().timeIntervalSince1970
        let (doomed, first, total): ([String], Bool, Int) = memory.withLock { state in
            state.held[url] = Held(path: path, bytes: data.count, used: now)
            state.lastTry = Double(MonotonicTime.now()) / 1e9
            var total = state.held.values.reduce(0) { $0 + $1.bytes }
            var doomed: [String] = []
            for (other, held) in state.held.sorted(by: { $0.value.used < $1.value.used }) where total > memoryMaxBytes && other != url {
                total -= held.bytes
                state.held[other] = nil
                if !state.held.values.contains(where: { $0.path == held.path }) { doomed.append(held.path) }
            }
            defer { state.refusing = true }
            return (doomed, !state.refusing, total)
        }
        for path in doomed { unlink(path) }
        if first {
            onProblem("creatives: the disk refuses them (\(refused)): kept in memory instead (\(total) of at most \(memoryMaxBytes) bytes); "
                      + "moved to the disk once it takes them")
        }
        return path
    }

    /// The file held in memory for `url` (checked against its hash), moved to the disk first
    /// when the disk takes it again (tried at most every `retryInterval`); nil when none.
    private func heldFile(for url: String) -> String? {
        let now = Double(MonotonicTime.now()) / 1e9
        let (found, retry): (Held?, Bool) = memory.withLock { state in
            guard let held = state.held[url] else { return (nil, false) }
            let retry = now - state.lastTry >= retryInterval
            if retry { state.lastTry = now }
            return (held, retry)
        }
        guard let found else { return nil }
        let hash = (found.path as NSString).lastPathComponent
        guard intact(found.path, hash) else {
            forget(url)
            return nil
        }
        if retry, let onDisk = moveToDisk(found.path, for: url) { return onDisk }
        memory.withLock { $0.held[url]?.used = Date().timeIntervalSince1970 }
        return found.path
    }

    /// Copies a held creative into the disk's cache: its path there, or nil (the disk still refuses).
    private func moveToDisk(_ held: String, for url: String) -> String? {
        let temporary = folder + "/objects/.tmp-" + UUID().uuidString
        guard let data = try? SafeFile.read(held, maxBytes: memoryMaxBytes) else { return nil }
        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        let code = fd < 0 ? errno : data.withUnsafeBytes { writeAll(fd, $0.baseAddress, $0.count) }
        if fd >= 0 { close(fd) }
        guard code == 0, let kept = try? keep(temporary, for: url) else {
            unlink(temporary)
            return nil
        }
        forget(url)
        diskTookOne()
        return kept
    }

    private func forget(_ url: String) {
        let gone: String? = memory.withLock { state in
            guard let held = state.held.removeValue(forKey: url) else { return nil }
            return state.held.values.contains(where: { $0.path == held.path }) ? nil : held.path
        }
        if let gone { unlink(gone) }
    }

    private func diskTookOne() {
        let (was, left) = memory.withLock { state in
            defer { state.refusing = false }
            return (state.refusing, state.held.count)
        }
        if was { onProblem("creatives: the disk takes them again (\(left) still in memory, moved at their next use)") }
    }

    /// This cache's memory folder: `adplayerd-creatives-<pid>-<n>` in `memoryRoot`, 0700.
    private func memoryFolder() throws -> String {
        let folder = memory.withLock { state in
            if let folder = state.folder { return folder }
            let n = Self.instances.withLock { count in
                count += 1
                return count
            }
            state.folder = memoryRoot + "/adplayerd-creatives-\(getpid())-\(n)"
            return state.folder!
        }
        try Self.makePrivateFolder(folder)
        return folder
    }

    /// Removes what this cache held in memory (at exit, or when a reload replaces it).
    public func releaseMemory() {
        let folder: String? = memory.withLock { state in
            state.held = [:]
            return state.folder
        }
        if let folder { Self.removeFolder(folder) }
    }

    /// Memory folders of this user's whose process is gone (killed before it removed them).
    private static func removeAbandonedMemory(in root: String) {
        guard let names = try? FileManager.default.contentsOfDirectory(atPath: root) else { return }
        for name in names where name.hasPrefix("adplayerd-creatives-") {
            let parts = name.dropFirst("adplayerd-creatives-".count).split(separator: "-")
            guard parts.count == 2, let pid = Int32(parts[0]), pid != getpid() else { continue }
            var info = stat()
            let path = root + "/" + name
            guard lstat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR, info.st_uid == geteuid(),
                  kill(pid, 0) != 0, errno == ESRCH else { continue }
            removeFolder(path)
        }
    }

    private static func removeFolder(_ path: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [] { unlink(path + "/" + name) }
        rmdir(path)
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
            let code = errno
            unlink(temporary)
            throw Problem(description: "\(path): \(String(cString: strerror(code)))", refusedBy: code)
        }
        index.withLock { $0[hash] = Object(bytes: bytes, used: Date().timeIntervalSince1970) }
        // The URL's name for it, written whole or not at all.
        let link = folder + "/urls/" + Self.sha256(Data(url.utf8))
        do {
            try AtomicFile.write(Data(hash.utf8), to: link, durable: false)
        } catch {
            // The object stays (it is whole); without its name it is trimmed like any other.
            throw Problem(description: error.description, refusedBy: error.code)
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
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
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
        return Digits.hex(digest)
    }
}
