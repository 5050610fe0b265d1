import AdRuntime
import CSystem
import Foundation

/// A control-protocol error: a code a program matches, a sentence a person reads.
struct ControlError: Error, Sendable, Equatable, CustomStringConvertible {
    let code: String
    let message: String
    var description: String { "\(code): \(message)" }

    static func malformed(_ message: String) -> ControlError { ControlError(code: "malformed", message: message) }
    static func badArgs(_ message: String) -> ControlError { ControlError(code: "bad_args", message: message) }
}

/// The control socket (docs/protocol.md): a Unix stream socket speaking newline-delimited
/// JSON. One thread of its own ("adplayerd-ctl") polls the listening socket and every
/// client, non-blocking; it never waits on the player, and the player's loop never waits on it.
///
/// - A complete line is handed to `onRequest` with a `reply` closure; a client's next line is
///   taken only once the reply to the previous one is queued, so replies come in order.
/// - Events are broadcast to clients that subscribed, filtered by name.
/// - Bounds: a line over 1 MiB closes that connection (after an error reply); a client whose
///   unsent output passes 8 MiB (it does not read) is disconnected — it never holds up the
///   player or the other clients; at most 64 clients.
/// - The socket is 0600, or 0660 with `group`; a connecting peer must be this user, root, or
///   (with `group`) in that group (SO_PEERCRED).
///
/// Threading: `broadcast`, the `reply` closures and `stop` may be called from any thread; they
/// queue and wake the socket thread through a pipe.
final class ControlServer: @unchecked Sendable {
    // @unchecked: `clients`, `listener` and `wake` are used by the socket thread only (after
    // `start`); what other threads hand over is behind `inbox`'s lock.
    typealias RequestHandler = @Sendable (_ client: UInt64, _ request: JSONValue, _ reply: @escaping @Sendable (JSONValue) -> Void) -> Void

    static let maxLineBytes = 1024 * 1024
    static let maxPendingOutput = 8 * 1024 * 1024
    static let maxClients = 64

    private struct Client {
        let fd: Int32
        let id: UInt64
        var input = Data()
        var output = Data()
        var busy = false
        var subscription: Set<String>?
        var closeAfterFlush = false
    }

    private enum Delivery {
        case reply(client: UInt64, JSONValue)
        case event(name: String, JSONValue)
        case subscribe(client: UInt64, Set<String>?)
    }

    private struct Inbox {
        var deliveries: [Delivery] = []
        var stopping = false
    }

    let path: String
    private let group: gid_t?
    private let log: Logger
    private let onRequest: RequestHandler
    private var listener: Int32 = -1
    private var wake: (read: Int32, write: Int32) = (-1, -1)
    private var clients: [Int32: Client] = [:]
    private var nextClient: UInt64 = 1
    private let inbox = Locked(Inbox())
    private let stopped = Handover<Bool>()

    init(path: String, group: String?, log: Logger, onRequest: @escaping RequestHandler) throws {
        self.path = path
        self.log = log
        self.onRequest = onRequest
        if let group {
            guard let entry = getgrnam(group) else { throw ControlError(code: "config", message: "socket-group: no group \"\(group)\"") }
            self.group = entry.pointee.gr_gid
        } else {
            self.group = nil
        }
    }

    /// Creates the socket (refusing to take over one a live daemon answers on) and starts the
    /// thread. When this returns, the socket accepts.
    func start() throws {
        let directory = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: group == nil ? 0o700 : 0o750])
        if Self.someoneAnswers(path) { throw ControlError(code: "socket", message: "\(path): another adplayerd answers on it") }
        var info = stat()
        if lstat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFSOCK else { throw ControlError(code: "socket", message: "\(path) exists and is not a socket") }
            unlink(path)
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw ControlError(code: "socket", message: "socket(): \(String(cString: strerror(errno)))") }
        // The mode is set before anyone can connect: bind under a umask, then chmod/chown.
        let previous = umask(0o177)
        let bound = Self.withAddress(path) { bind(fd, $0, $1) }
        umask(previous)
        guard bound == 0 else {
            close(fd)
            throw ControlError(code: "socket", message: "\(path): bind: \(String(cString: strerror(errno)))")
        }
        if let group {
            chown(path, getuid(), group)
            chmod(path, 0o660)
        } else {
            chmod(path, 0o600)
        }
        guard listen(fd, 16) == 0 else {
            close(fd)
            throw ControlError(code: "socket", message: "\(path): listen: \(String(cString: strerror(errno)))")
        }
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { throw ControlError(code: "socket", message: "pipe: \(String(cString: strerror(errno)))") }
        for pipeFD in pipeFDs {
            _ = fcntl(pipeFD, F_SETFL, fcntl(pipeFD, F_GETFL) | O_NONBLOCK)
            _ = fcntl(pipeFD, F_SETFD, FD_CLOEXEC)
        }
        listener = fd
        wake = (pipeFDs[0], pipeFDs[1])
        let context = Unmanaged.passRetained(self).toOpaque()
        var thread = pthread_t()
        pthread_create(&thread, nil, controlThreadMain, context)
        pthread_detach(thread)
    }

    /// Stops accepting, closes every client after what is queued for it, removes the socket.
    func stop() {
        inbox.withLock { $0.stopping = true }
        poke()
        _ = stopped.wait(timeout: 2)
    }

    /// Sends `event` (an object with an `event` key) to every client subscribed to `name`.
    func broadcast(_ name: String, _ event: JSONValue) {
        inbox.withLock { $0.deliveries.append(.event(name: name, event)) }
        poke()
    }

    private func poke() {
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    // MARK: The socket thread

    fileprivate func run() {
        setThreadName("adplayerd-ctl")
        while true {
            var fds = [pollfd(fd: listener, events: Int16(POLLIN), revents: 0), pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            let order = clients.keys.sorted()
            for fd in order {
                let client = clients[fd]!
                var events = Int16(0)
                if !client.busy && !client.closeAfterFlush { events |= Int16(POLLIN) }
                if !client.output.isEmpty { events |= Int16(POLLOUT) }
                fds.append(pollfd(fd: fd, events: events, revents: 0))
            }
            let ready = poll(&fds, nfds_t(fds.count), -1)
            if ready < 0 && errno != EINTR { log.error("control socket: poll: \(String(cString: strerror(errno)))"); break }
            if fds[1].revents != 0 { drainWake() }
            if takeDeliveries() { break }
            if fds[0].revents & Int16(POLLIN) != 0 { acceptClients() }
            for (index, fd) in order.enumerated() {
                let revents = fds[index + 2].revents
                guard revents != 0, clients[fd] != nil else { continue }
                if revents & Int16(POLLOUT) != 0 { flush(fd) }
                if revents & Int16(POLLIN | POLLHUP | POLLERR) != 0, clients[fd] != nil { readFrom(fd) }
            }
        }
        for fd in clients.keys { close(fd) }
        clients = [:]
        close(listener)
        unlink(path)
        close(wake.read)
        close(wake.write)
        stopped.fulfil(true)
    }

    private func drainWake() {
        var buffer = [UInt8](repeating: 0, count: 256)
        while read(wake.read, &buffer, buffer.count) > 0 {}
    }

    /// Moves what other threads handed over into the clients' output. True when stopping.
    private func takeDeliveries() -> Bool {
        let (deliveries, stopping) = inbox.withLock { inbox -> ([Delivery], Bool) in
            defer { inbox.deliveries = [] }
            return (inbox.deliveries, inbox.stopping)
        }
        for delivery in deliveries {
            switch delivery {
            case .reply(let id, let reply):
                guard let fd = clients.first(where: { $0.value.id == id })?.key else { continue }
                clients[fd]?.busy = false
                queue(reply.line(), to: fd)
                processLines(fd)   // the next request may already be waiting
            case .event(let name, let event):
                let line = event.line()
                for (fd, client) in clients where client.subscription.map({ Self.matches(name, $0) }) ?? false {
                    queue(line, to: fd)
                }
            case .subscribe(let id, let filter):
                guard let fd = clients.first(where: { $0.value.id == id })?.key else { continue }
                clients[fd]?.subscription = filter ?? ["*"]
            }
        }
        return stopping
    }

    /// `name` matches a filter entry exactly, by prefix (`ad.*`), or `*`.
    static func matches(_ name: String, _ filter: Set<String>) -> Bool {
        if filter.contains("*") || filter.contains(name) { return true }
        return filter.contains { $0.hasSuffix(".*") && name.hasPrefix($0.dropLast()) }
    }

    private func acceptClients() {
        while true {
            let fd = csystem_accept_nonblocking(listener)
            guard fd >= 0 else { return }
            guard clients.count < Self.maxClients else {
                log.warning("control socket: refused a client: already \(Self.maxClients)")
                close(fd)
                continue
            }
            if let refusal = peerRefusal(fd) {
                log.warning("control socket: refused a client: \(refusal)")
                close(fd)
                continue
            }
            clients[fd] = Client(fd: fd, id: nextClient)
            nextClient += 1
        }
    }

    /// Why the peer on `fd` may not connect, or nil (SO_PEERCRED).
    private func peerRefusal(_ fd: Int32) -> String? {
        var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
        guard csystem_peer_credentials(fd, &pid, &uid, &gid) == 0 else { return "no peer credentials" }
        if uid == getuid() || uid == 0 { return nil }
        if let group, Self.isMember(pid: pid, gid: gid, of: group) { return nil }
        return "uid \(uid) is not allowed"
    }

    private static func isMember(pid: pid_t, gid: gid_t, of group: gid_t) -> Bool {
        if gid == group { return true }
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Groups:") }) else { return false }
        return line.dropFirst(7).split(separator: " ").contains { gid_t($0) == group }
    }

    private func readFrom(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n > 0 {
                clients[fd]?.input.append(contentsOf: buffer[0..<n])
                if let input = clients[fd]?.input, input.count > Self.maxLineBytes, !input.prefix(Self.maxLineBytes + 1).contains(10) {
                    queue(JSONValue.object(["id": .null, "ok": false, "error": ["code": "line_too_long",
                                                                                "message": "a line over 1 MiB; closing the connection"]]).line(), to: fd)
                    clients[fd]?.input = Data()
                    clients[fd]?.closeAfterFlush = true
                    flush(fd)
                    return
                }
                // Enough for now: the rest waits in the kernel until these lines are answered
                // (a client's input never grows past one line's bound plus a read).
                if let input = clients[fd]?.input, input.count > Self.maxLineBytes { break }
                continue
            }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { break }
            if n < 0 && errno == EINTR { continue }
            drop(fd)   // closed by the peer, or an error
            return
        }
        processLines(fd)
    }

    /// Hands the next complete line of `fd` to the handler, unless one is being answered.
    private func processLines(_ fd: Int32) {
        while let client = clients[fd], !client.busy, !client.closeAfterFlush,
              let newline = client.input.firstIndex(of: 10) {
            let line = client.input[client.input.startIndex..<newline]
            clients[fd]?.input = Data(client.input[(newline + 1)...])
            if line.allSatisfy({ $0 == 32 || $0 == 9 || $0 == 13 }) { continue }   // blank lines are ignored
            let request: JSONValue
            do {
                request = try JSONValue.parse(Data(line))
            } catch {
                queue(Self.errorReply(id: .null, .malformed("not JSON")).line(), to: fd)
                continue
            }
            clients[fd]?.busy = true
            let id = client.id
            if request["cmd"]?.string == "subscribe" {
                answerSubscribe(id, request)
                continue
            }
            onRequest(id, request) { [self] reply in
                inbox.withLock { $0.deliveries.append(.reply(client: id, reply)) }
                poke()
            }
        }
    }

    /// `subscribe {"events"?: [...]}` is the socket's own: which events this client gets.
    private func answerSubscribe(_ client: UInt64, _ request: JSONValue) {
        let id = request["id"] ?? .null
        var filter: Set<String>?
        if let events = request["args"]?["events"] {
            guard let list = events.array?.compactMap(\.string), list.count == events.array?.count, list.count <= 64 else {
                inbox.withLock { $0.deliveries.append(.reply(client: client, Self.errorReply(id: id, .badArgs("events must be an array of event names")))) }
                poke()
                return
            }
            filter = Set(list)
        }
        inbox.withLock { inbox in
            inbox.deliveries.append(.subscribe(client: client, filter))
            inbox.deliveries.append(.reply(client: client, ["id": id, "ok": true,
                                                              "result": ["events": .array((filter.map(Array.init) ?? ["*"]).sorted().map { .string($0) })]]))
        }
        poke()
    }

    static func errorReply(id: JSONValue, _ error: ControlError) -> JSONValue {
        ["id": id, "ok": false, "error": ["code": .string(error.code), "message": .string(error.message)]]
    }

    private func queue(_ line: Data, to fd: Int32) {
        guard var client = clients[fd] else { return }
        client.output.append(line)
        if client.output.count > Self.maxPendingOutput {
            log.warning("control socket: client \(client.id) reads too slowly (\(client.output.count / 1024) KiB waiting); disconnected")
            drop(fd)
            return
        }
        clients[fd] = client
        flush(fd)
    }

    private func flush(_ fd: Int32) {
        while let output = clients[fd]?.output, !output.isEmpty {
            let n = output.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                clients[fd]?.output = Data(output.dropFirst(n))
                continue
            }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            if n < 0 && errno == EINTR { continue }
            drop(fd)
            return
        }
        if clients[fd]?.closeAfterFlush == true { drop(fd) }
    }

    private func drop(_ fd: Int32) {
        guard clients.removeValue(forKey: fd) != nil else { return }
        close(fd)
    }

    // MARK: Addresses

    static func withAddress<R>(_ path: String, _ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8.prefix(107))
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
    }

    /// Whether a live server accepts connections on `path`.
    static func someoneAnswers(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return withAddress(path) { connect(fd, $0, $1) } == 0
    }
}

private func controlThreadMain(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let context else { return nil }
    Unmanaged<ControlServer>.fromOpaque(context).takeRetainedValue().run()
    return nil
}
