#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import FoundationEssentials

/// The project's one way to replace a file whole or not at all: each file is written to a
/// temporary name beside it (`O_EXCL`, `O_NOFOLLOW`: never through a link an attacker left),
/// then renamed over the old one. Until the renames nothing old is touched, so a failure before
/// them leaves the previous files as they were (the temporaries removed).
///
/// `durable`: where a power cut must not lose what was written (the bridge's cursor, the offline
/// ads' list, a proof-of-play export), the file is fsynced before its rename and its folder
/// after it, so that the new name itself survives; where the file can be made again (metrics, a
/// cache's names), neither, and the write costs no flush.
///
/// Threading: any thread; it blocks on the disk, so never on the player's loop.
public enum AtomicFile {
    public struct Failure: Error, Sendable, Equatable, CustomStringConvertible {
        public let path: String
        public let reason: String
        /// errno, for callers that act on it (a full disk: ENOSPC).
        public let code: Int32
        public var description: String { "\(path): \(reason)" }
    }

    /// Writes `data` to `path` (see the type).
    public static func write(_ data: Data, to path: String, mode: mode_t = 0o600, durable: Bool) throws(Failure) {
        try replace([(path, data)], mode: mode, durable: durable)
    }

    /// Writes every file to its temporary, then renames them all (in order), then syncs the folders.
    public static func replace(_ files: [(path: String, data: Data)], mode: mode_t = 0o600, durable: Bool) throws(Failure) {
        var written: [(temporary: String, path: String)] = []
        defer { for file in written { unlink(file.temporary) } }
        for file in files {
            let temporary = file.path + ".tmp-\(getpid())-\(Self.counter.next())"
            let fd = open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, mode)
            guard fd >= 0 else { throw Self.failure(file.path, "cannot be written", errno) }
            written.append((temporary, file.path))
            var code: Int32 = 0
            file.data.withUnsafeBytes { bytes in
                var offset = 0
                while offset < bytes.count {
                    let n = Glibc.write(fd, bytes.baseAddress! + offset, bytes.count - offset)
                    if n < 0 && errno == EINTR { continue }
                    guard n > 0 else {
                        code = n == 0 ? EIO : errno
                        return
                    }
                    offset += n
                }
                if durable, fsync(fd) != 0 { code = errno }
            }
            if close(fd) != 0, code == 0 { code = errno }
            guard code == 0 else { throw Self.failure(file.path, "cannot be written", code) }
        }
        for file in written {
            guard rename(file.temporary, file.path) == 0 else { throw Self.failure(file.path, "cannot be replaced", errno) }
        }
        written = []
        guard durable else { return }
        var folders: [String] = []
        for file in files {
            let folder = folderOf(file.path)
            if !folders.contains(folder) { folders.append(folder) }
        }
        for folder in folders { syncFolder(folder.isEmpty ? "." : folder) }
    }

    /// fsync of a folder: a rename into it, or a file made in it, survives a power cut.
    public static func syncFolder(_ folder: String) {
        let fd = open(folder, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return }
        fsync(fd)
        close(fd)
    }

    private static func failure(_ path: String, _ what: String, _ code: Int32) -> Failure {
        Failure(path: path, reason: "\(what) (\(String(cString: strerror(code))))", code: code)
    }

    /// Temporaries of one process never collide, whatever its threads write at once.
    private static let counter = Counter()

    private final class Counter: Sendable {
        private let value = Locked(0)
        func next() -> Int { value.withLock { $0 += 1; return $0 } }
    }
}
