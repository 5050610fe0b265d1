import AdRuntime
import ControlProtocol
import CSystem
import Foundation

/// A socket that cannot be served: the path and why.
public struct SocketError: Error, Sendable, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

/// The control socket (docs/protocol.md): a Unix stream socket speaking newline-delimited
/// JSON. One thread of its own ("adplayerd-ctl") polls the listening socket and every
/// client, non-blocking; it never waits on the player, and the player's loop never waits on it.
///
/// - Every line is decoded and validated by `Commands.decode` (the protocol's one place);
///   `subscribe` is answered here, every other command is handed to `onRequest` with a
///   `reply`. A client's next line is taken once the reply to the previous one is queued, so
///   replies come in order.
/// - Input is handled in linear time: a client's buffer is read from an offset and compacted
///   once per read, never copied per line. Clients are served fairly: at most `linesPerTurn`
///   lines of one client per turn, then the others' turn.
/// - A client that half-closes (`echo … | socat -`, `nc -N`) has every complete line — and a
///   last one without its newline — answered before its connection is closed.
/// - Bounds: a line over 1 MiB closes that connection (after an error reply); a client whose
///   unsent output passes 8 MiB (it does not read) is disconnected — it never holds up the
///   player or the other clients; at most 64 clients. Out of file descriptors (`EMFILE`), the
///   listener rests for a moment (logged once) while the connected clients are served.
/// - The socket is 0600, or 0660 with `group`; a connecting peer must be this user, root, or
///   (with `group`) in that group (SO_PEERCRED). Each client has a permission tier: this user
///   and root `admin`, the group's members `groupTier`; a request above the client's tier is
///   refused `forbidden` here, before anything runs it (`Commands.refusal`).
/// - The commands the table runs on the socket (`Venue.socket`: `subscribe`, `version`) are
///   answered here.
///
/// Threading: `broadcast`, the `reply` closures and `stop` may be called from any thread; they
/// queue and wake the socket thread through a pipe.
public final class ControlServer: @unchecked Sendable {
    // @unchecked: `clients`, `listener`, `wake` and the rest of the socket thread's state are used
    // by that thread only (after `start`); what other threads hand over is behind `inbox`'s lock.
    public typealias RequestHandler = @Sendable (_ client: UInt64, _ request: Request,
                                                 _ reply: @escaping @Sendable (Result<JSONValue, ControlError>) -> Void) -> Void

    public static let maxPendingOutput = 8 * 1024 * 1024
    public static let maxClients = 64
    /// Requests of one client handled in one turn of the socket thread, before the others'.
    public static let linesPerTurn = 32
    /// How long the listener rests when the process is out of file descriptors.
    static let restAfterEMFILE = 0.25

    private struct Client {
        let fd: Int32
        let id: UInt64
        /// What this client may run (from its credentials, at connection).
        let tier: Tier
        var input = ByteQueue()
        var output = ByteQueue()
        /// A request is being answered: the next line waits.
        var busy = false
        var subscription: Set<String>?
        /// The peer sent its end (EOF): what came is answered, then the connection closes.
        var inputClosed = false
        /// After a fatal error reply (a line too long): flush, then close.
        var closing = false

        /// More is wanted from the socket: not while a line is being answered or waits.
        var wantsInput: Bool { !busy && !inputClosed && !closing && input.count <= ControlProtocol.maxLineBytes }
    }

    private enum Delivery {
        /// Encoded on the socket thread: a reply of a 10,000-entry queue costs the loop nothing.
        case reply(client: UInt64, JSONValue)
        /// To every subscriber it matches but those it was written to directly.
        case event(ControlEvent, [UInt8], except: Set<Int32>)
        /// What a direct write left unwritten, for that client.
        case rest(fd: Int32, [UInt8])
    }

    /// A subscribed client as the broadcasting threads see it: `direct` while nothing waits
    /// to be written to it (its output empty, nothing for it in the inbox) — then an event
    /// is written to it by the thread that broadcasts it, without a hop to the socket thread.
    private struct Subscriber {
        var subscription: Set<String>
        var direct: Bool
    }

    private struct Inbox {
        var deliveries: [Delivery] = []
        var stopping = false
        var subscribers: [Int32: Subscriber] = [:]
    }

    /// Most clients an event is written to directly by the broadcasting thread (the player's
    /// loop); the others get it from the socket thread.
    static let maxDirectWrites = 16

    public let path: String
    private let group: gid_t?
    private let groupTier: Tier
    private let log: Logger
    private let onRequest: RequestHandler
    private var listener: Int32 = -1
    private var wake: (read: Int32, write: Int32) = (-1, -1)
    private var clients: [Int32: Client] = [:]
    private var byID: [UInt64: Int32] = [:]
    private var nextClient: UInt64 = 1
    /// Out of file descriptors: the listener is not polled before this (MonotonicTime).
    private var listenerRestsUntil: UInt64 = 0
    private var loggedEMFILE = false
    private let inbox = Locked(Inbox())
    private let stopped = Handover<Bool>()

    /// `groupTier`: what members of `group` (not this user, not root) may run.
    public init(path: String, group: String?, groupTier: Tier = .control, log: Logger, onRequest: @escaping RequestHandler) throws {
        self.path = path
        self.groupTier = groupTier
        self.log = log
        self.onRequest = onRequest
        if let group {
            guard let entry = getgrnam(group) else { throw SocketError(message: "socket-group: no group \"\(group)\"") }
            self.group = entry.pointee.gr_gid
        } else {
            self.group = nil
        }
    }

    /// Creates the socket (refusing to take over one a live daemon answers on) and starts the
    /// thread. When this returns, the socket accepts.
    public func start() throws {
        let directory = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: group == nil ? 0o700 : 0o750])
        if Self.someoneAnswers(path) { throw SocketError(message: "\(path): another adplayerd answers on it") }
        var info = stat()
        if lstat(path, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFSOCK else { throw SocketError(message: "\(path) exists and is not a socket") }
            unlink(path)
        }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
        guard fd >= 0 else { throw SocketError(message: "socket(): \(String(cString: strerror(errno)))") }
        // The mode is set before anyone can connect: bind under a umask, then chmod/chown.
        let previous = umask(0o177)
        let bound = Self.withAddress(path) { bind(fd, $0, $1) }
        umask(previous)
        guard bound == 0 else {
            close(fd)
            throw SocketError(message: "\(path): bind: \(String(cString: strerror(errno)))")
        }
        if let group {
            chown(path, getuid(), group)
            chmod(path, 0o660)
        } else {
            chmod(path, 0o600)
        }
        guard listen(fd, 16) == 0 else {
            close(fd)
            throw SocketError(message: "\(path): listen: \(String(cString: strerror(errno)))")
        }
        var pipeFDs: [Int32] = [0, 0]
        guard pipe(&pipeFDs) == 0 else { throw SocketError(message: "pipe: \(String(cString: strerror(errno)))") }
        for pipeFD in pipeFDs {
            _ = fcntl(pipeFD, F_SETFL, fcntl(pipeFD, F_GETFL) | O_NONBLOCK)
            _ = fcntl(pipeFD, F_SETFD, FD_CLOEXEC)
        }
        listener = fd
        wake = (pipeFDs[0], pipeFDs[1])
        startThread(named: "adplayerd-ctl") { [self] in run() }
    }

    /// Stops accepting, closes every client, removes the socket.
    public func stop() {
        inbox.withLock { $0.stopping = true }
        poke()
        _ = stopped.wait(timeout: 2)
    }

    /// Sends `event` to every client subscribed to it; encoded once, here.
    public func broadcast(_ event: ControlEvent) { broadcast([event]) }

    /// Events in order, each client's share in one write (a player change and the ad events
    /// it caused: one system call, one wake-up of the reader).
    public func broadcast(_ events: [ControlEvent]) {
        guard !events.isEmpty else { return }
        let lines = events.map { $0.json.line() }
        let handOver = inbox.withLock { inbox -> Bool in
            guard !inbox.stopping else { return false }
            var written: Set<Int32> = []
            var others = false
            if inbox.deliveries.isEmpty {
                for (fd, subscriber) in inbox.subscribers.sorted(by: { $0.key < $1.key }) {
                    var bytes: [UInt8] = []
                    for (index, event) in events.enumerated() where event.matches(subscriber.subscription) { bytes += lines[index] }
                    guard !bytes.isEmpty else { continue }
                    guard subscriber.direct, written.count < Self.maxDirectWrites else {
                        others = true
                        continue
                    }
                    let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
                    if n == bytes.count {
                        written.insert(fd)
                        continue
                    }
                    inbox.subscribers[fd]?.direct = false
                    if n > 0 {
                        written.insert(fd)
                        inbox.deliveries.append(.rest(fd: fd, Array(bytes[n...])))
                    } else {
                        others = true
                    }
                }
            } else {
                others = true
            }
            if others {
                for (index, event) in events.enumerated() { inbox.deliveries.append(.event(event, lines[index], except: written)) }
            }
            return !inbox.deliveries.isEmpty
        }
        if handOver { poke() }
    }

    private func poke() {
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    // MARK: The socket thread

    private func run() {
        while true {
            let now = MonotonicTime.now()
            let listening = now >= listenerRestsUntil
            var fds = [pollfd(fd: listening ? listener : -1, events: Int16(POLLIN), revents: 0),
                       pollfd(fd: wake.read, events: Int16(POLLIN), revents: 0)]
            let order = clients.keys.sorted()
            var linesWaiting = false
            for fd in order {
                var events = Int16(0)
                if clients[fd]!.wantsInput { events |= Int16(POLLIN) }
                if !clients[fd]!.output.isEmpty { events |= Int16(POLLOUT) }
                fds.append(pollfd(fd: fd, events: events, revents: 0))
                if !clients[fd]!.busy && !clients[fd]!.closing
                    && (clients[fd]!.input.hasLine || (clients[fd]!.inputClosed && !clients[fd]!.input.isEmpty)) {
                    linesWaiting = true
                }
            }
            // Lines already read wait for their turn: no waiting then. A resting listener: until it may accept again.
            let timeout: Int32 = linesWaiting ? 0 : listening ? -1 : Int32((listenerRestsUntil - now) / 1_000_000) + 1
            let ready = poll(&fds, nfds_t(fds.count), timeout)
            if ready < 0 && errno != EINTR { log.error("control socket: poll: \(String(cString: strerror(errno)))"); break }
            if fds[1].revents != 0 { drainWake() }
            if takeDeliveries() { break }
            if listening && fds[0].revents & Int16(POLLIN) != 0 { acceptClients() }
            for (index, fd) in order.enumerated() {
                let revents = fds[index + 2].revents
                guard revents != 0, clients[fd] != nil else { continue }
                if revents & Int16(POLLOUT) != 0 { flush(fd) }
                if revents & Int16(POLLIN | POLLHUP | POLLERR) != 0, clients[fd]?.wantsInput == true { readFrom(fd) }
            }
            for fd in order where clients[fd] != nil {
                processLines(fd)
                closeIfDone(fd)
            }
            allowDirectWrites()
        }
        for fd in clients.keys { close(fd) }
        clients = [:]
        byID = [:]
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
                guard let fd = byID[id] else { continue }
                clients[fd]?.busy = false
                queue(reply.line(), to: fd)
            case .event(let event, let line, let except):
                for (fd, client) in clients where !except.contains(fd) && (client.subscription.map(event.matches) ?? false) {
                    queue(line, to: fd)
                }
            case .rest(let fd, let bytes):
                queue(bytes, to: fd)
            }
        }
        allowDirectWrites()
        return stopping
    }

    /// Subscribers whose output is all written may be written to directly again — if nothing
    /// for anyone waits in the inbox (it could be for them).
    private func allowDirectWrites() {
        let idle = clients.filter { $0.value.subscription != nil && $0.value.output.isEmpty && !$0.value.closing }.map(\.key)
        guard !idle.isEmpty else { return }
        inbox.withLock { inbox in
            guard inbox.deliveries.isEmpty else { return }
            for fd in idle { inbox.subscribers[fd]?.direct = true }
        }
    }

    private func acceptClients() {
        while true {
            let fd = csystem_accept_nonblocking(listener)
            guard fd >= 0 else {
                switch errno {
                case EINTR, ECONNABORTED: continue
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    // The pending connection stays queued and keeps the listener readable: rest,
                    // or poll would return at once for ever (100 % CPU).
                    if !loggedEMFILE {
                        log.warning("control socket: cannot accept a client: \(String(cString: strerror(errno))); "
                                    + "new clients wait while the \(clients.count) connected ones are served")
                        loggedEMFILE = true
                    }
                    listenerRestsUntil = MonotonicTime.now() + LoopTime.nanoseconds(Self.restAfterEMFILE)
                default:
                    break
                }
                return
            }
            if loggedEMFILE {
                log.notice("control socket: accepting clients again")
                loggedEMFILE = false
            }
            guard clients.count < Self.maxClients else {
                log.warning("control socket: refused a client: already \(Self.maxClients)")
                close(fd)
                continue
            }
            let tier: Tier
            switch peerTier(fd) {
            case .success(let granted): tier = granted
            case .failure(let refusal):
                log.warning("control socket: refused a client: \(refusal.message)")
                close(fd)
                continue
            }
            clients[fd] = Client(fd: fd, id: nextClient, tier: tier)
            byID[nextClient] = fd
            nextClient += 1
        }
    }

    /// The tier of the peer on `fd`, or why it may not connect (SO_PEERCRED).
    private func peerTier(_ fd: Int32) -> Result<Tier, SocketError> {
        var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
        guard csystem_peer_credentials(fd, &pid, &uid, &gid) == 0 else { return .failure(SocketError(message: "no peer credentials")) }
        if uid == getuid() || uid == 0 { return .success(.admin) }
        if let group, Self.isMember(pid: pid, gid: gid, of: group) { return .success(groupTier) }
        return .failure(SocketError(message: "uid \(uid) is not allowed"))
    }

    private static func isMember(pid: pid_t, gid: gid_t, of group: gid_t) -> Bool {
        if gid == group { return true }
        guard let status = try? SafeFile.read("/proc/\(pid)/status", maxBytes: 64 * 1024),
              let line = String(decoding: status, as: UTF8.self).split(separator: "\n").first(where: { $0.hasPrefix("Groups:") })
        else { return false }
        return line.dropFirst(7).split(separator: " ").contains { gid_t($0) == group }
    }

    /// Reads what the socket has, up to one line's bound beyond what is buffered.
    private func readFrom(_ fd: Int32) {
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        while let client = clients[fd], client.wantsInput {
            let n = read(fd, &chunk, chunk.count)
            if n > 0 {
                clients[fd]!.input.append(chunk[0..<n])
                continue
            }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            if n < 0 && errno == EINTR { continue }
            if n == 0 {
                clients[fd]!.inputClosed = true   // half-closed: answer what came, then close
                return
            }
            drop(fd)   // a read error
            return
        }
    }

    /// Handles the client's complete lines, at most `linesPerTurn`, one request at a time.
    private func processLines(_ fd: Int32) {
        var handled = 0
        while handled < Self.linesPerTurn, let client = clients[fd], !client.busy, !client.closing {
            let line: ArraySlice<UInt8>
            if let next = clients[fd]!.input.takeLine() {
                line = next
            } else if client.input.count > ControlProtocol.maxLineBytes {
                queue(Reply.error(.null, ControlError(.lineTooLong, "a line over 1 MiB; closing the connection")).line(), to: fd)
                clients[fd]?.input = ByteQueue()
                clients[fd]?.closing = true
                return
            } else if client.inputClosed, !client.input.isEmpty {
                line = clients[fd]!.input.takeRest()   // the last line, without its newline
            } else {
                return
            }
            // Blank lines are ignored, and cost no turn: what one turn skips is bounded by what
            // is buffered (a line's bound plus one read).
            if line.allSatisfy({ $0 == 32 || $0 == 9 || $0 == 13 }) { continue }
            handled += 1
            let decoded: Envelope
            do {
                switch Commands.decode(try JSONValue.parse(line)) {
                case .success(let envelope): decoded = envelope
                case .failure(let failure):
                    queue(Reply.error(failure.id, failure.error).line(), to: fd)
                    continue
                }
            } catch {
                queue(Reply.error(.null, .malformed("not JSON: \(error)")).line(), to: fd)
                continue
            }
            if let refusal = Commands.refusal(decoded.request, tier: client.tier) {
                queue(Reply.error(decoded.id, refusal).line(), to: fd)
                continue
            }
            switch decoded.request {
            case .subscribe(let events):
                let filter = Set(events ?? ["*"])
                clients[fd]?.subscription = filter
                inbox.withLock { $0.subscribers[fd] = Subscriber(subscription: filter, direct: false) }   // after the reply is out
                queue(Reply.ok(decoded.id, ["events": .array(filter.sorted().map { .string($0) })]).line(), to: fd)
                continue
            case .version:
                queue(Reply.ok(decoded.id, ["protocol": .int(ControlProtocol.version), "daemon": "adplayerd", "tier": .string(client.tier.name)]).line(),
                      to: fd)
                continue
            default:
                break
            }
            clients[fd]?.busy = true
            let id = client.id, requestID = decoded.id
            onRequest(id, decoded.request) { [self] result in
                let reply = switch result {
                case .success(let value): Reply.ok(requestID, value)
                case .failure(let error): Reply.error(requestID, error)
                }
                let queued = inbox.withLock { inbox -> Bool in
                    guard !inbox.stopping else { return false }
                    inbox.deliveries.append(.reply(client: id, reply))
                    return true
                }
                if queued { poke() }
            }
        }
    }

    /// A half-closed client with everything answered and sent, or a closing one with its output
    /// sent, goes.
    private func closeIfDone(_ fd: Int32) {
        guard let client = clients[fd], client.output.isEmpty else { return }
        if client.closing || (client.inputClosed && !client.busy && client.input.isEmpty) { drop(fd) }
    }

    private func queue(_ line: [UInt8], to fd: Int32) {
        guard clients[fd] != nil else { return }
        if clients[fd]!.subscription != nil, clients[fd]!.output.isEmpty {
            // From now until its output is written, events reach it through this thread, in order.
            inbox.withLock { inbox in inbox.subscribers[fd]?.direct = false }
        }
        clients[fd]!.output.append(line[...])
        let waiting = clients[fd]!.output.count
        if waiting > Self.maxPendingOutput {
            log.warning("control socket: client \(clients[fd]!.id) reads too slowly (\(waiting / 1024) KiB waiting); disconnected")
            drop(fd)
            return
        }
        flush(fd)
    }

    private func flush(_ fd: Int32) {
        while let client = clients[fd], !client.output.isEmpty {
            let n = client.output.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n > 0 {
                clients[fd]!.output.removeFirst(n)
                continue
            }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return }
            if n < 0 && errno == EINTR { continue }
            drop(fd)
            return
        }
    }

    private func drop(_ fd: Int32) {
        guard let client = clients.removeValue(forKey: fd) else { return }
        byID[client.id] = nil
        // No thread writes to it from here on (the descriptor may be reused once closed).
        inbox.withLock { _ = $0.subscribers.removeValue(forKey: fd) }
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

/// Bytes waiting to be parsed or sent: read from an offset, compacted once the consumed part
/// is at least half of it — each byte is moved O(1) times, whatever the number of lines.
struct ByteQueue {
    private var storage: [UInt8] = []
    private var head = 0
    /// Where the search for the next newline resumes (bytes before it hold none).
    private var scanned = 0

    var count: Int { storage.count - head }
    var isEmpty: Bool { head == storage.count }

    mutating func append(_ bytes: ArraySlice<UInt8>) {
        compact()
        storage.append(contentsOf: bytes)
    }

    /// Whether a complete line is buffered (looks only at bytes not looked at before).
    var hasLine: Bool {
        mutating get { newline() != nil }
    }

    /// The next line without its newline, if a complete one is buffered.
    mutating func takeLine() -> ArraySlice<UInt8>? {
        guard let newline = newline() else { return nil }
        let line = storage[head..<newline]
        head = newline + 1
        scanned = head
        return line
    }

    /// Everything left (a last line without its newline).
    mutating func takeRest() -> ArraySlice<UInt8> {
        let rest = storage[head...]
        head = storage.count
        scanned = head
        return rest
    }

    mutating func removeFirst(_ n: Int) {
        head += n
        scanned = max(scanned, head)
        compact()
    }

    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        storage[head...].withUnsafeBytes(body)
    }

    private mutating func newline() -> Int? {
        var i = max(scanned, head)
        while i < storage.count {
            if storage[i] == 10 {
                scanned = i
                return i
            }
            i += 1
        }
        scanned = storage.count
        return nil
    }

    private mutating func compact() {
        guard head > 0, head * 2 >= storage.count else { return }
        storage.removeFirst(head)
        scanned -= head
        head = 0
    }
}
