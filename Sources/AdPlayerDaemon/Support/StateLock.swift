import Foundation

/// One daemon a state folder: an exclusive `flock` on `STATE_DIR/adplayerd.lock`, held for the
/// daemon's life (the kernel lets go of it when the process ends, `kill -9` included). Taken
/// before anything plays, so a second daemon given the same folder stops at start instead of
/// resuming the same queue into the same database.
public final class StateLock: Sendable {
    private let fd: Int32
    public let path: String

    /// Takes the lock, or says who holds it. Throws `ConfigurationError` (exit status 2).
    public init(folder: String) throws(ConfigurationError) {
        path = folder + "/adplayerd.lock"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else {
            throw ConfigurationError(source: "state-dir", reason: "\(path): \(String(cString: strerror(errno)))")
        }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let why = errno == EWOULDBLOCK ? "another adplayerd uses this state folder" : String(cString: strerror(errno))
            close(fd)
            throw ConfigurationError(source: "state-dir", reason: "\(folder): \(why)")
        }
        self.fd = fd
    }

    deinit { close(fd) }
}
