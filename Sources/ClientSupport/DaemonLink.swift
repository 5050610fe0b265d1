
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Bounds
import ControlProtocol

/// The web process's side of the control protocol: a request is a connection of its own (the
/// daemon's socket bounds and orders them; a slow one never holds up another), and one
/// subscribed connection follows the events, handed to `onEvent`, reconnecting with backoff
/// when the daemon goes away (`onConnection` says so).
///
/// Threading: `call` from any thread (it blocks, at most `timeout`); the follower has its own.
public final class DaemonLink: Sendable {
    public let socket: String
    let timeout: Double
    private let stopping = Locked(false)
    private let follower = Locked<ControlClient?>(nil)

    public init(socket: String, timeout: Double = 5) {
        self.socket = socket
        self.timeout = timeout
    }

    /// Runs `request` on the daemon: its reply (`{"id", "ok", …}`), or a failure to reach it.
    public func call(_ request: Request, timeout: Double? = nil) -> Result<JSONValue, ControlClient.Failure> {
        do {
            let client = try ControlClient(path: socket, timeout: timeout ?? self.timeout)
            return .success(try client.call(request))
        } catch let failure as ControlClient.Failure {
            return .failure(failure)
        } catch {
            return .failure(ControlClient.Failure(description: "\(error)"))
        }
    }

    /// Follows the daemon's events until `stop`: `onEvent` with each, `onConnection` when the
    /// subscription is made or lost.
    public func follow(onEvent: @escaping @Sendable (JSONValue) -> Void, onConnection: @escaping @Sendable (Bool) -> Void) {
        startThread(named: "web-follow") { [self] in
            var delay = 0.25
            while !stopping.withLock({ $0 }) {
                do {
                    let client = try ControlClient(path: socket, timeout: nil)
                    follower.withLock { $0 = client }
                    let reply = try client.call(.subscribe(events: nil))
                    guard reply["ok"]?.bool == true else { throw ControlClient.Failure(description: "subscribe refused") }
                    onConnection(true)
                    delay = 0.25
                    while true { onEvent(try client.readMessage()) }
                } catch {
                    follower.withLock { $0 = nil }
                    if stopping.withLock({ $0 }) { break }
                    onConnection(false)
                    sleepThread(delay + Double.random(in: 0...0.1))
                    delay = min(delay * 2, 5)
                }
            }
        }
    }

    public func stop() {
        stopping.withLock { $0 = true }
        follower.withLock { $0?.shutdown() }
    }
}
