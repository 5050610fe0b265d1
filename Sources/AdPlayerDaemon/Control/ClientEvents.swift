import AdRuntime
import ControlProtocol
import Foundation

/// Where the daemon's events go to clients: the control socket once it listens, nowhere
/// before it does or after it stopped. The controller, the ad surface's announcements and the
/// outbox all tell clients through one of these; `ControlServer.broadcast` does the fan-out.
///
/// Threading: any thread (the server's own broadcast is).
public final class ClientEvents: Sendable {
    private let server = Locked<ControlServer?>(nil)

    public init() {}

    /// From now on events go to `server`'s subscribers; nil: nowhere (the daemon is stopping).
    public func connect(_ server: ControlServer?) { self.server.withLock { $0 = server } }

    public func send(_ event: ControlEvent) { server.withLock { $0 }?.broadcast(event) }

    /// Events in order, each client's share in one write.
    public func send(_ events: [ControlEvent]) { server.withLock { $0 }?.broadcast(events) }
}
