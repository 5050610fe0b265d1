#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Addresses read in one place: whether an IP address is this machine's own (the web's
/// loopback rules, the host's addresses), and a Unix socket's address (the control socket, its
/// clients).
public enum SocketAddress {
    /// Whether `text` (a numeric IPv4 or IPv6 address, as `getnameinfo` writes it) reaches only
    /// this machine: 127.0.0.0/8, ::1, and IPv4-mapped 127.0.0.0/8 (`::ffff:127.0.0.1`, what a
    /// dual-stack socket reports for an IPv4 peer). Anything that does not parse is not.
    public static func isLoopback(_ text: String) -> Bool {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 { return UInt32(bigEndian: v4.s_addr) >> 24 == 127 }
        var v6 = in6_addr()
        guard inet_pton(AF_INET6, text, &v6) == 1 else { return false }
        let bytes = withUnsafeBytes(of: v6) { Array($0) }
        if bytes[0..<15].allSatisfy({ $0 == 0 }) && bytes[15] == 1 { return true }
        return bytes[0..<10].allSatisfy({ $0 == 0 }) && bytes[10] == 0xFF && bytes[11] == 0xFF && bytes[12] == 127
    }

    /// The longest Unix socket path, in bytes (`sun_path` holds 108 with its NUL).
    public static let maxUnixPathBytes = 107

    public struct PathTooLong: Error, Sendable, CustomStringConvertible {
        public let path: String
        public init(path: String) { self.path = path }
        public var description: String { "\(path.prefix(120)): a socket path is at most \(SocketAddress.maxUnixPathBytes) bytes" }
    }

    /// Runs `body` with `path` as a Unix socket address; a path too long for one is refused,
    /// never cut (a cut path is another socket).
    public static func unix<R>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) throws(PathTooLong) -> R {
        let bytes = Array(path.utf8)
        guard bytes.count <= maxUnixPathBytes, !bytes.contains(0) else { throw PathTooLong(path: path) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }
}
