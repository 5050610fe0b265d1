import Bounds
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// What one client of the web server may ask (issue 34, 11), by its address: a token bucket of
/// requests (`requestsPerSecond`, a burst of `burst`), and one of failed authentications
/// (`failuresPerSecond`: a token guessed at 5,000 a second gets 429 after the first few).
/// Past either, `429 Too Many Requests` with `Retry-After`. Bounded: at most `maxClients`
/// addresses are remembered (the one seen longest ago forgotten first). Monotonic time.
///
/// Threading: any thread; one lock.
public final class ClientLimits: Sendable {
    public struct Settings: Sendable {
        public var requestsPerSecond = 200.0
        public var burst = 400.0
        public var failuresPerSecond = 2.0
        public var failureBurst = 10.0
        public var maxClients = 1024
        public init() {}
    }

    private struct Client {
        var requests: Double
        var failures: Double
        var at: Double
    }

    private let settings: Settings
    private let clients = Locked([String: Client]())

    public init(_ settings: Settings = Settings()) { self.settings = settings }

    public static func now() -> Double { Double(MonotonicTime.now()) / 1e9 }

    /// Takes a request's token for `address`; false when it has none left.
    public func admit(_ address: String, now: Double = ClientLimits.now()) -> Bool {
        take(address, now: now) { client in
            guard client.requests >= 1 else { return false }
            client.requests -= 1
            return true
        }
    }

    /// Whether `address` may still try a token (false past its failures).
    public func mayAuthenticate(_ address: String, now: Double = ClientLimits.now()) -> Bool {
        take(address, now: now) { $0.failures >= 1 }
    }

    /// A failed authentication of `address`.
    public func failed(_ address: String, now: Double = ClientLimits.now()) {
        _ = take(address, now: now) { client in
            client.failures = max(0, client.failures - 1)
            return true
        }
    }

    private func take(_ address: String, now: Double, _ body: (inout Client) -> Bool) -> Bool {
        clients.withLock { clients in
            var client = clients[address] ?? Client(requests: settings.burst, failures: settings.failureBurst, at: now)
            let elapsed = max(0, now - client.at)
            client.requests = min(settings.burst, client.requests + elapsed * settings.requestsPerSecond)
            client.failures = min(settings.failureBurst, client.failures + elapsed * settings.failuresPerSecond)
            client.at = now
            let answer = body(&client)
            if clients[address] == nil, clients.count >= settings.maxClients,
               let oldest = clients.min(by: { $0.value.at < $1.value.at })?.key {
                clients[oldest] = nil
            }
            clients[address] = client
            return answer
        }
    }
}
