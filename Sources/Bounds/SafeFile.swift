import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Why a file from outside cannot be used, naming it once.
public struct FileRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        case missing = "not_found", outside = "outside_library", notRegular = "not_a_file"
        case unreadable = "not_readable", tooLarge = "too_large", badName = "bad_name"
    }
    public let path: String
    public let kind: Kind
    public let reason: String

    public init(path: String, kind: Kind, reason: String) {
        self.path = path
        self.kind = kind
        self.reason = reason
    }

    public var description: String { "\(path): \(reason)" }
}

/// The one place that decides whether a file from outside (a creative, a manifest, an
/// episode) may be opened: after resolving every symlink, it must be a regular file — not a
/// FIFO, device, socket or directory, so that nothing waits on it — inside its allowed
/// folder (resolved too), and its size is the target's.
public enum SafeFile {
    /// A resolved, checked file.
    public struct Checked: Sendable, Equatable {
        /// The real path, symlinks resolved.
        public let path: String
        public let size: Int
    }

    /// Checks `path` (relative to `folder` if not absolute): inside `folder` once resolved
    /// (when `folder` is given), a regular file, at most `maxBytes` when given.
    public static func check(_ path: String, inside folder: String? = nil, maxBytes: Int? = nil) throws(FileRefusal) -> Checked {
        let joined = path.hasPrefix("/") || folder == nil ? path : folder! + "/" + path
        guard !path.isEmpty, !path.utf8.contains(0) else { throw FileRefusal(path: path, kind: .badName, reason: "not a file name") }
        guard let real = realPath(joined) else {
            let missing = errno == ENOENT || errno == ENOTDIR
            throw FileRefusal(path: joined, kind: missing ? .missing : .unreadable,
                              reason: missing ? "does not exist" : "cannot be resolved: \(String(cString: strerror(errno)))")
        }
        if let folder {
            guard let base = realPath(folder) else { throw FileRefusal(path: folder, kind: .missing, reason: "the folder does not exist") }
            guard isInside(real, base) else {
                throw FileRefusal(path: joined, kind: .outside, reason: "is outside \(folder) (it resolves to \(real))")
            }
        }
        var info = stat()
        guard stat(real, &info) == 0 else { throw FileRefusal(path: joined, kind: .unreadable, reason: "cannot be read: \(String(cString: strerror(errno)))") }
        switch info.st_mode & S_IFMT {
        case S_IFREG: break
        case S_IFDIR: throw FileRefusal(path: joined, kind: .notRegular, reason: "is a directory, not a file")
        case S_IFIFO: throw FileRefusal(path: joined, kind: .notRegular, reason: "is a FIFO, not a regular file")
        default: throw FileRefusal(path: joined, kind: .notRegular, reason: "is not a regular file")
        }
        guard access(real, R_OK) == 0 else { throw FileRefusal(path: joined, kind: .unreadable, reason: "is not readable (permission denied)") }
        let size = Int(info.st_size)
        if let maxBytes, size > maxBytes {
            throw FileRefusal(path: joined, kind: .tooLarge, reason: "is \(size) bytes; the limit is \(maxBytes)")
        }
        return Checked(path: real, size: size)
    }

    /// A secret (a signing key, a password file) must be readable by its owner alone: a file
    /// whose group or others may read or write it is refused, naming its mode.
    public static func requirePrivate(_ path: String) throws(FileRefusal) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw FileRefusal(path: path, kind: errno == ENOENT ? .missing : .unreadable, reason: String(cString: strerror(errno)))
        }
        guard info.st_mode & 0o077 == 0 else {
            throw FileRefusal(path: path, kind: .unreadable,
                              reason: "is readable by others (mode \(String(info.st_mode & 0o777, radix: 8))): chmod 600 it")
        }
    }

    /// Whether the resolved path `real` is `base` or inside it, compared **byte for byte**: a
    /// file system names files by bytes, and Swift's string comparison would take a sibling
    /// folder `lib-café` spelled in NFD for the library `lib-café` in NFC (canonical
    /// equivalence) — or refuse a file whose name starts with a combining mark.
    public static func isInside(_ real: String, _ base: String, orEqual: Bool = false) -> Bool {
        if orEqual, real.utf8.elementsEqual(base.utf8) { return true }
        let prefix = base == "/" ? "/" : base + "/"
        return real.utf8.starts(with: prefix.utf8)
    }

    /// Reads a checked file whole, without blocking on open (`O_NONBLOCK`) and refusing a file
    /// swapped for something else since the check, or grown past `maxBytes`.
    public static func read(_ path: String, inside folder: String? = nil, maxBytes: Int) throws(FileRefusal) -> Data {
        let checked = try check(path, inside: folder, maxBytes: maxBytes)
        let fd = open(checked.path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)
        guard fd >= 0 else { throw FileRefusal(path: path, kind: .unreadable, reason: "cannot be opened: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { throw FileRefusal(path: path, kind: .notRegular, reason: "is not a regular file") }
        var data = Data(count: min(Int(info.st_size), maxBytes) + 1)
        var filled = 0
        while filled < data.count {
            let n = data.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, $0.count - filled) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            filled += n
        }
        guard filled <= maxBytes else { throw FileRefusal(path: path, kind: .tooLarge, reason: "is larger than \(maxBytes) bytes") }
        return data.prefix(filled)
    }

    /// `path` with every symlink resolved, or nil (missing, a loop).
    public static func realPath(_ path: String) -> String? {
        guard let resolved = realpath(path, nil) else { return nil }
        defer { free(resolved) }
        return String(cString: resolved)
    }
}
