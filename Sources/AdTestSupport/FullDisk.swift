import Foundation

/// A real file system that is full: a small tmpfs mounted for the test (root only; the tests
/// run as root), filled by one file until the kernel says ENOSPC. `free()` removes that file,
/// as an operator clearing space would; `unmount()` (also at deinit) takes it away.
public final class FullDisk {
    public let path: String
    private let filler: String
    private var mounted = true

    /// Why this machine cannot give the test a full disk (the test skips, saying so).
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// `folders`: made before it is filled (a folder costs no data blocks on tmpfs).
    public init(kib: Int = 256, folders: [String] = []) throws {
        guard geteuid() == 0 else { throw Unavailable(description: "mounting a small tmpfs needs root (CI runs as root)") }
        path = FileManager.default.temporaryDirectory.appendingPathComponent("full-\(UUID().uuidString.prefix(8))").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let (status, output) = try runToEnd("/usr/bin/mount", ["-t", "tmpfs", "-o", "size=\(kib)k,mode=0700", "tmpfs", path])
        guard status == 0 else {
            rmdir(path)
            throw Unavailable(description: "this machine does not let the tests mount a tmpfs: \(output)")
        }
        for folder in folders { try FileManager.default.createDirectory(atPath: path + "/" + folder, withIntermediateDirectories: true) }
        filler = path + "/filler"
        let fd = open(filler, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { throw Unavailable(description: "cannot write to the tmpfs: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let block = [UInt8](repeating: 0x5A, count: 4096)
        while true {
            let n = write(fd, block, block.count)
            if n < 0, errno == EINTR { continue }
            if n <= 0 { break }
        }
        // Full: not one more byte fits.
        let probe = open(path + "/probe", O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        if probe >= 0 {
            let wrote = write(probe, block, 1)
            close(probe)
            unlink(path + "/probe")
            guard wrote < 1 else { throw Unavailable(description: "the tmpfs took a byte after it was filled") }
        }
    }

    /// Space again: the filler removed.
    public func free() { unlink(filler) }

    public func unmount() {
        guard mounted else { return }
        mounted = false
        _ = try? runToEnd("/usr/bin/umount", ["-l", path])
        rmdir(path)
    }

    deinit { unmount() }
}
