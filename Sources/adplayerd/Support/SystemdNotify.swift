import Foundation

/// systemd's notification protocol (sd_notify(3)) without libsystemd: one datagram per
/// message to the socket named in `$NOTIFY_SOCKET` (`@` means the abstract namespace).
/// Never blocks (`MSG_DONTWAIT`): a notification that cannot go is dropped.
struct SystemdNotifier: Sendable {
    private let address: [UInt8]

    /// Nil when not started by systemd with `Type=notify`.
    init?(environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty, path.utf8.count < 108 else { return nil }
        var bytes = Array(path.utf8)
        if bytes.first == UInt8(ascii: "@") { bytes[0] = 0 }
        address = bytes
    }

    /// The watchdog's interval if systemd asked for one (`WATCHDOG_USEC`, for this process).
    static func watchdogInterval(environment: [String: String] = ProcessInfo.processInfo.environment) -> Double? {
        guard let text = environment["WATCHDOG_USEC"], let usec = Double(text), usec > 0, usec.isFinite else { return nil }
        if let pid = environment["WATCHDOG_PID"], Int32(pid) != getpid() { return nil }
        return usec / 1_000_000
    }

    func send(_ state: String) {
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return }
        defer { close(fd) }
        var peer = sockaddr_un()
        peer.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &peer.sun_path) { raw in raw.copyBytes(from: address) }
        let length = socklen_t(MemoryLayout<sa_family_t>.size + address.count)
        let payload = Array(state.utf8)
        _ = withUnsafePointer(to: &peer) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { target in
                sendto(fd, payload, payload.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL), target, length)
            }
        }
    }
}
