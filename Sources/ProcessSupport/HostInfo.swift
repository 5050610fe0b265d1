import Bounds
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// What names this machine to a person (`identify`, the web page): its network addresses.
public enum HostInfo {
    /// The host's IPv4 and IPv6 addresses, loopback and link-local left out, at most `limit`.
    public static func addresses(limit: Int = 16) -> [String] {
        var list: UnsafeMutablePointer<ifaddrs>?
        guard getifaddrs(&list) == 0, let first = list else { return [] }
        defer { freeifaddrs(list) }
        var found: [String] = []
        for entry in sequence(first: first, next: { $0.pointee.ifa_next }) where found.count < limit {
            guard let address = entry.pointee.ifa_addr else { continue }
            let family = Int32(address.pointee.sa_family)
            guard family == AF_INET || family == AF_INET6 else { continue }
            var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
            let length = socklen_t(family == AF_INET ? MemoryLayout<sockaddr_in>.size : MemoryLayout<sockaddr_in6>.size)
            guard getnameinfo(address, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) == 0 else { continue }
            let text = String(nulTerminated: host)
            if SocketAddress.isLoopback(text) || text.lowercased().hasPrefix("fe80") { continue }
            if !found.contains(text) { found.append(text) }
        }
        return found
    }

    /// The machine's id (`/etc/machine-id`, 32 hex digits), nil where there is none.
    public static func machineID() -> String? {
        guard let data = try? SafeFile.read("/etc/machine-id", maxBytes: 64) else { return nil }
        let text = String(decoding: data, as: UTF8.self).trimmed()
        return text.count == 32 && text.allSatisfy(\.isHexDigit) ? text : nil
    }
}

extension String {
    /// The text of a NUL-terminated C buffer (getnameinfo's), up to its first NUL.
    public init(nulTerminated buffer: [CChar]) {
        self = String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
