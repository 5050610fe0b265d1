import CSystem
import Foundation

/// systemd's notification protocol through libsystemd (`sd_notify`, `sd_watchdog_enabled`):
/// `READY=1`, `STATUS=…`, `RELOADING=1`, `STOPPING=1`, `WATCHDOG=1`. Outside systemd
/// (no `$NOTIFY_SOCKET`) it sends nothing.
///
/// Threading: any thread. A notification is one datagram to PID 1's notify socket, whose
/// receive buffer systemd keeps large; the watchdog's comes from a timer on the player's loop,
/// so that a loop that stops turning stops it (docs/benchmarks.md has its cost there).
public struct SystemdNotifier: Sendable {
    /// Nil when not started by systemd with `Type=notify`.
    public init?(environment: [String: String] = ProcessInfo.processInfo.environment) {
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty else { return nil }
    }

    /// The watchdog's interval in seconds if systemd expects `WATCHDOG=1` from this process.
    public static func watchdogInterval() -> Double? {
        var usec: UInt64 = 0
        guard csystem_watchdog(&usec) > 0, usec > 0 else { return nil }
        return Double(usec) / 1_000_000
    }

    public func send(_ state: String) {
        _ = csystem_notify(state)
    }
}
