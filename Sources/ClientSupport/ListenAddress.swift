import ControlProtocol
import Bounds
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Where a TCP server listens (`web-listen`): `HOST:PORT` with an IP literal — IPv4
/// (`127.0.0.1:8080`, `0.0.0.0:8080`), IPv6 in brackets (`[::1]:8080`) — or `localhost`;
/// port 0 picks a free one. Checked here, once: the configuration and the server read it alike.
public struct ListenAddress: Sendable, Equatable, CustomStringConvertible {
    public let host: String
    public let port: UInt16
    public let ipv6: Bool

    public init(parsing text: String) throws(UsageError) {
        let fail = UsageError("\"\(text.prefix(80))\" is not HOST:PORT (an IPv4 address, [an IPv6 address] or localhost, and a port from 0 to 65535)")
        guard text.utf8.count <= 64, let colon = text.lastIndex(of: ":") else { throw fail }
        var host = String(text[..<colon])
        guard let port = UInt16(text[text.index(after: colon)...]) else { throw fail }
        var ipv6 = false
        if host.hasPrefix("[") && host.hasSuffix("]") {
            host = String(host.dropFirst().dropLast())
            var address = in6_addr()
            guard inet_pton(AF_INET6, host, &address) == 1 else { throw fail }
            ipv6 = true
        } else {
            if host == "localhost" { host = "127.0.0.1" }
            var address = in_addr()
            guard inet_pton(AF_INET, host, &address) == 1 else { throw fail }
        }
        self.host = host
        self.port = port
        self.ipv6 = ipv6
    }

    /// Only this machine can reach it (127.0.0.0/8, ::1).
    public var isLoopback: Bool { SocketAddress.isLoopback(host) }

    public var description: String { ipv6 ? "[\(host)]:\(port)" : "\(host):\(port)" }
}
