import ClientSupport
import ControlProtocol
import ProcessSupport
import CSystem
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Bounds

/// A small HTTP/1.1 server, bounded in every way a client could push it (docs/web.md):
///
///     accept thread ──(at most maxConnections)──▶ one thread per connection:
///         wait for a request (idle: at most idleTimeout) → its head (at most maxHeadBytes, within
///         headerTimeout: a slowloris is cut) → its body (at most maxBodyBytes) → the handler →
///         the response (each write within writeTimeout) → again, or close
///
/// When every slot is taken, an idle keep-alive connection is closed to make room; only when
/// all are busy is a new one answered 503. An event stream's connection writes what its
/// `EventStream` queues and a comment every `streamKeepAlive` seconds; a client that stops
/// reading is dropped (the stream's bound). The handler runs on the connection's thread.
///
/// Threading: `start` and `stop` from one thread; everything else is the server's own.
public final class HTTPServer: Sendable {
    public struct Limits: Sendable {
        public var maxConnections = 64
        public var idleTimeout = 30.0
        public var headerTimeout = 10.0
        public var bodyTimeout = 10.0
        public var writeTimeout = 10.0
        /// The longest a whole response may take to be written (a reader taking a byte a
        /// second is cut off): each write is bounded by `writeTimeout`, the response by this.
        public var responseDeadline = HTTPServer.responseDeadline
        public var streamKeepAlive = 15.0
        public init() {}
    }

    /// Who sent a request.
    public struct Peer: Sendable {
        public var address: String
        public var isLoopback: Bool
    }

    public typealias Handler = @Sendable (HTTPRequest, Peer) -> HTTPResponse

    private struct Connection {
        let fd: Int32
        var idle = true
        var evicted = false
    }

    private struct Registry {
        var connections: [Int: Connection] = [:]
        var nextID = 0
        var stopping = false
    }

    private let listeners: [Int32]
    private let handler: Handler
    private let limits: Limits
    private let registry = Locked(Registry())
    private let acceptorDone = Locked(false)
    /// Counters for tests and the log: connections refused (all busy), idle ones closed to make room.
    private let counters = Locked((refused: 0, evicted: 0, served: 0))

    /// Serves on `listeners` (bound, listening sockets: `listen(_:)` or systemd's).
    public init(listeners: [Int32], limits: Limits = Limits(), handler: @escaping Handler) {
        self.listeners = listeners
        self.limits = limits
        self.handler = handler
    }

    /// A listening TCP socket on `address` and the port it got (`:0` picks one).
    public static func listen(_ address: ListenAddress) throws -> (fd: Int32, port: UInt16) {
        let family = address.ipv6 ? AF_INET6 : AF_INET
        let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw UsageError("socket(): \(String(cString: strerror(errno)))") }
        var on: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
        var result: Int32
        if address.ipv6 {
            var sa = sockaddr_in6()
            sa.sin6_family = sa_family_t(AF_INET6)
            sa.sin6_port = address.port.bigEndian
            inet_pton(AF_INET6, address.host, &sa.sin6_addr)
            result = withUnsafePointer(to: &sa) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) } }
        } else {
            var sa = sockaddr_in()
            sa.sin_family = sa_family_t(AF_INET)
            sa.sin_port = address.port.bigEndian
            inet_pton(AF_INET, address.host, &sa.sin_addr)
            result = withUnsafePointer(to: &sa) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        }
        guard result == 0, Glibc.listen(fd, 128) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            throw UsageError("\(address): \(reason)")
        }
        return (fd, localPort(fd) ?? address.port)
    }

    /// The port a socket is bound to.
    public static func localPort(_ fd: Int32) -> UInt16? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        guard ok == 0 else { return nil }
        let family = Int32(storage.ss_family)
        return withUnsafePointer(to: &storage) { pointer -> UInt16 in
            if family == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin6_port) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { UInt16(bigEndian: $0.pointee.sin_port) }
        }
    }

    public func start() {
        Self.thread(named: "web-accept") { [self] in acceptLoop() }
    }

    /// Stops accepting and closes every connection (their threads end).
    public func stop() {
        let open = registry.withLock { registry -> [Int32] in
            registry.stopping = true
            return registry.connections.values.map(\.fd)
        }
        for fd in open { Glibc.shutdown(fd, Int32(SHUT_RDWR)) }
    }

    public var openConnections: Int { registry.withLock { $0.connections.count } }
    public var refusedCount: Int { counters.withLock { $0.refused } }
    public var evictedCount: Int { counters.withLock { $0.evicted } }

    static func thread(named name: String, _ body: @escaping @Sendable () -> Void) {
        startThread(named: name, stackSize: 512 * 1024, body)
    }

    // MARK: Accepting

    private func acceptLoop() {
        var fds = listeners.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        while !registry.withLock({ $0.stopping }) {
            let n = poll(&fds, nfds_t(fds.count), 500)   // `stop` is seen within half a second
            if n < 0 && errno != EINTR { usleep(10_000) }
            guard n > 0 else { continue }
            for index in 0..<listeners.count where fds[index].revents & Int16(POLLIN) != 0 {
                let client = csystem_accept_nonblocking(listeners[index])
                guard client >= 0 else {
                    // Out of descriptors or memory: wait a little rather than spin.
                    if errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM { usleep(50_000) }
                    continue
                }
                admit(client)
            }
        }
        acceptorDone.withLock { $0 = true }
    }

    /// A new connection: a slot for it (an idle one closed to make room if need be), or 503.
    private func admit(_ fd: Int32) {
        // Blocking from here (poll bounds every wait), with a send timeout.
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags & ~O_NONBLOCK)
        var timeout = timeval(tv_sec: Int(limits.writeTimeout), tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        // A bounded kernel buffer (no autotuning to megabytes a connection): what a slow reader
        // has not taken waits in it, and the rest is the response deadline's to cut.
        var sendBuffer: Int32 = 256 << 10
        setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sendBuffer, socklen_t(MemoryLayout<Int32>.size))
        var noDelay: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
        let admitted = registry.withLock { registry -> Int? in
            guard !registry.stopping else { return nil }
            if registry.connections.count >= limits.maxConnections {
                // The idle connection that has waited longest (the lowest id) makes room.
                // Not one whose next request is already on the wire (bytes waiting to be read).
                guard let victim = registry.connections.filter({ $0.value.idle && !$0.value.evicted && !Self.hasBytesWaiting($0.value.fd) })
                    .keys.min() else { return nil }
                registry.connections[victim]?.evicted = true
                registry.connections[victim]?.idle = false
                Glibc.shutdown(registry.connections[victim]!.fd, Int32(SHUT_RDWR))
                counters.withLock { $0.evicted += 1 }
            }
            let id = registry.nextID
            registry.nextID += 1
            registry.connections[id] = Connection(fd: fd)
            return id
        }
        guard let id = admitted else {
            counters.withLock { $0.refused += 1 }
            refuse(fd)
            return
        }
        Self.thread(named: "web-conn") { [self] in
            serve(fd, id: id)
            registry.withLock { _ = $0.connections.removeValue(forKey: id) }
            Self.linger(fd)
            close(fd)
        }
    }

    // MARK: A connection

    private func serve(_ fd: Int32, id: Int) {
        let peer = Self.peer(fd)
        var buffer: [UInt8] = []
        while true {
            // 1. Wait for a request (idle, may be closed to make room).
            if buffer.isEmpty {
                guard Self.wait(fd, timeout: limits.idleTimeout) else { return }
            }
            let proceed = registry.withLock { registry -> Bool in
                guard let connection = registry.connections[id], !connection.evicted, !registry.stopping else { return false }
                registry.connections[id]?.idle = false
                return true
            }
            guard proceed else { return }
            // 2. The head, within headerTimeout from its first byte.
            let deadline = Date(timeIntervalSinceNow: limits.headerTimeout)
            var headEnd = HTTPParser.headEnd(buffer)
            while headEnd == nil {
                if buffer.count > HTTPParser.maxHeadBytes {
                    respond(fd, .error(431, "the request's head is over \(HTTPParser.maxHeadBytes) bytes"), keepAlive: false, method: "GET")
                    return
                }
                let left = deadline.timeIntervalSinceNow
                guard left > 0, Self.wait(fd, timeout: left) else {
                    if !buffer.isEmpty { respond(fd, .error(408, "the request's head did not arrive within \(Int(limits.headerTimeout)) s"), keepAlive: false, method: "GET") }
                    return
                }
                guard Self.receive(fd, into: &buffer, max: HTTPParser.maxHeadBytes + 4096) else { return }
                // A blank line before a request is tolerated (RFC 9112 §2.2).
                while buffer.starts(with: [13, 10]) { buffer.removeFirst(2) }
                headEnd = HTTPParser.headEnd(buffer)
            }
            var request: HTTPRequest
            let length: Int
            do {
                request = try HTTPParser.parse(head: buffer[..<headEnd!])
                length = try HTTPParser.bodyLength(request)
            } catch {
                respond(fd, .error(error.status, error.message), keepAlive: false, method: "GET")
                return
            }
            buffer.removeFirst(headEnd!)
            // 3. The body, within bodyTimeout.
            let bodyDeadline = Date(timeIntervalSinceNow: limits.bodyTimeout)
            while buffer.count < length {
                let left = bodyDeadline.timeIntervalSinceNow
                guard left > 0, Self.wait(fd, timeout: left) else {
                    respond(fd, .error(408, "the body did not arrive within \(Int(limits.bodyTimeout)) s"), keepAlive: false, method: request.method)
                    return
                }
                guard Self.receive(fd, into: &buffer, max: length + 4096) else { return }
            }
            request.body = Array(buffer[..<length])
            buffer.removeFirst(length)
            // 4. The answer.
            let response = handler(request, peer)
            counters.withLock { $0.served += 1 }
            if let stream = response.stream {
                return stream_(fd, response, stream)
            }
            let keepAlive = request.keepAlive && !registry.withLock({ $0.stopping })
            guard respond(fd, response, keepAlive: keepAlive, method: request.method), keepAlive else { return }
            registry.withLock { $0.connections[id]?.idle = buffer.isEmpty }
        }
    }

    @discardableResult
    private func respond(_ fd: Int32, _ response: HTTPResponse, keepAlive: Bool, method: String) -> Bool {
        let head = response.head(keepAlive: keepAlive, method: method)
        return Self.send(fd, method == "HEAD" ? head : head + response.body, deadline: limits.responseDeadline)
    }

    /// An event stream: its head, then its messages as they come, a comment when idle.
    private func stream_(_ fd: Int32, _ response: HTTPResponse, _ stream: EventStream) {
        defer {
            stream.close()
            response.closeAction?()
        }
        guard Self.send(fd, response.head(keepAlive: false, method: "GET") + response.body) else { return }
        while true {
            switch stream.next(timeout: limits.streamKeepAlive) {
            case .messages(let messages):
                guard Self.send(fd, Array(messages.joined())) else { return }
            case .idle:
                guard Self.send(fd, Array(": keep-alive\n\n".utf8)) else { return }
            case .closed:
                return
            }
        }
    }

    // MARK: Bytes

    /// Before closing: no more writes, and what the client still sends (the rest of a head too
    /// large) read and dropped for a moment, so that its answer is not lost to a reset.
    /// Connections answered 503 at once (every slot in use), lingering on a queue of their own
    /// so that the answer is read — closing a socket with its request unread would reset it, and
    /// the client would get no answer at all. At most `maxRefusing` linger, each on a small
    /// thread of its own; beyond, closed.
    private static let refusing = Locked(0)
    static let maxRefusing = 64

    private func refuse(_ fd: Int32) {
        let response = HTTPResponse.error(503, "the server is busy: every connection is in use; try again", headers: [("Retry-After", "2")])
        _ = Self.send(fd, response.head(keepAlive: false, method: "GET") + response.body)
        let admitted = Self.refusing.withLock { count -> Bool in
            guard count < Self.maxRefusing else { return false }
            count += 1
            return true
        }
        guard admitted else {
            close(fd)
            return
        }
        startThread(named: "web-refusal", stackSize: 64 * 1024) {
            Self.linger(fd, for: 0.5)
            close(fd)
            Self.refusing.withLock { $0 -= 1 }
        }
    }

    static func linger(_ fd: Int32, for seconds: Double = 1) {
        Glibc.shutdown(fd, Int32(SHUT_WR))
        var chunk = [UInt8](repeating: 0, count: 16384)
        var drained = 0
        let deadline = Date(timeIntervalSinceNow: seconds)
        while drained < 4 << 20, deadline.timeIntervalSinceNow > 0, wait(fd, timeout: deadline.timeIntervalSinceNow) {
            let n = recv(fd, &chunk, chunk.count, Int32(MSG_DONTWAIT))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return }
            drained += n
        }
    }

    /// Waits until `fd` can be read (or is closed), at most `timeout` seconds.
    static func wait(_ fd: Int32, timeout: Double) -> Bool {
        var item = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(max(0, min(timeout, 3600)) * 1000)
        while true {
            let n = poll(&item, 1, milliseconds)
            if n < 0 && errno == EINTR { continue }
            return n > 0
        }
    }

    /// Reads what is there into `buffer` (at most up to `max` bytes in it); false when closed.
    static func receive(_ fd: Int32, into buffer: inout [UInt8], max: Int) -> Bool {
        var chunk = [UInt8](repeating: 0, count: 16384)
        let room = Swift.max(1, Swift.min(chunk.count, max - buffer.count))
        while true {
            let n = recv(fd, &chunk, room, Int32(MSG_DONTWAIT))
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { return false }
            buffer.append(contentsOf: chunk[..<n])
            return true
        }
    }

    /// Writes all of `bytes` (each write within the send timeout); false when the peer is gone or stalled.
    /// Writes `bytes` whole, each `send` bounded by the socket's `SO_SNDTIMEO` and **the whole
    /// of it by `deadline` seconds**: a reader that takes a byte a second no longer holds a
    /// response's thread and slot indefinitely (it is cut off: false).
    static func send(_ fd: Int32, _ bytes: [UInt8], deadline: Double = responseDeadline) -> Bool {
        let end = Double(MonotonicTime.now()) / 1e9 + deadline
        return bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                guard Double(MonotonicTime.now()) / 1e9 < end else { return false }
                let n = Glibc.send(fd, raw.baseAddress! + offset, min(raw.count - offset, 65536), Int32(MSG_NOSIGNAL))
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { return false }
                offset += n
            }
            return true
        }
    }

    /// The longest a response may take to be written, whoever reads it.
    static let responseDeadline = 30.0

    /// Whether a request has arrived on `fd` that has not been read yet (no wait).
    static func hasBytesWaiting(_ fd: Int32) -> Bool {
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return n > 0
    }

    static func peer(_ fd: Int32) -> Peer {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) } }
        guard ok == 0 else { return Peer(address: "?", isLoopback: false) }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        _ = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getnameinfo($0, length, &host, socklen_t(host.count), nil, 0, NI_NUMERICHOST) }
        }
        let address = String(nulTerminated: host)
        let loopback = SocketAddress.isLoopback(address)
        return Peer(address: address, isLoopback: loopback)
    }
}
