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
///   `subscribe` and `version` are answered here, every other command is handed to `onRequest` with a
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
/// **Ordering invariant** (the one rule of the fan-out): a client receives its replies and
/// events in the order they were produced. The thread that broadcasts writes an event straight
/// to a subscriber only while nothing waits for that subscriber — its output is empty and the
/// inbox holds nothing — and marks it `direct = false` the moment anything is queued for it;
/// from then on everything for it goes through the socket thread, in order, until its output
/// is written and the inbox is empty again (`allowDirectWrites`).
///
/// By concern: listening, credentials and the socket thread here; a client connection (its
/// buffers and lines) in ControlServer+Client.swift; the event fan-out in ControlServer+Events.swift.
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

    enum Delivery {
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
    struct Subscriber {
        var subscription: Set<String>
        var direct: Bool
    }

    struct Inbox {
        var deliveries: [Delivery] = []
        var stopping = false
        var subscribers: [Int32: Subscriber] = [:]
    }

    /// Most clients an event is written to directly by the broadcasting thread (the player's
    /// loop); the others get it from the socket thread.
    static let maxDirectWrites = 16

    public let path: String
    let group: gid_t?
    let groupTier: Tier
    let log: Logger
    let onRequest: RequestHandler
    var listener: Int32 = -1
    var wake: (read: Int32, write: Int32) = (-1, -1)
    var clients: [Int32: Client] = [:]
    var byID: [UInt64: Int32] = [:]
    var nextClient: UInt64 = 1
    /// Out of file descriptors: the listener is not polled before this (MonotonicTime).
    var listenerRestsUntil: UInt64 = 0
    /// One buffer for every read of the socket thread (not 64 KiB allocated per read).
    var readBuffer = [UInt8](repeating: 0, count: 64 * 1024)
    var loggedEMFILE = false
    let inbox = Locked(Inbox())
    let stopped = Handover<Bool>()

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

    /// The socket's folder must be one nobody else can swap the socket in: owned by this user
    /// (or root), and writable by no one else — unless it is a sticky folder such as /tmp,
    /// where others cannot remove or rename what is ours. (`/tmp/other-users-folder/ctl.sock`:
    /// refused.)
    static func checkFolder(_ directory: String) throws {
        var info = stat()
        guard stat(directory.isEmpty ? "." : directory, &info) == 0 else {
            throw SocketError(message: "\(directory): \(String(cString: strerror(errno)))")
        }
        guard info.st_uid == geteuid() || info.st_uid == 0 else {
            throw SocketError(message: "\(directory) (the socket's folder) is owned by another user (uid \(info.st_uid)): they could replace the socket")
        }
        let sticky = info.st_mode & S_ISVTX != 0
        guard info.st_mode & 0o022 == 0 || sticky else {
            throw SocketError(message: "\(directory) (the socket's folder) is writable by others (mode \(String(info.st_mode & 0o777, radix: 8))) "
                              + "and not sticky: they could replace the socket")
        }
    }

    /// Creates the socket (refusing to take over one a live daemon answers on) and starts the
    /// thread. When this returns, the socket accepts.
    public func start() throws {
        // A path the address cannot hold whole is refused, never cut (a client could not reach it).
        guard path.utf8.count < 108 else {
            throw SocketError(message: "\(path): the socket path is \(path.utf8.count) bytes; a Unix socket's is at most 107")
        }
        let directory = (path as NSString).deletingLastPathComponent
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: group == nil ? 0o700 : 0o750])
        try Self.checkFolder(directory)
        guard path.utf8.count <= SocketAddress.maxUnixPathBytes else { throw SocketError(message: SocketAddress.PathTooLong(path: path).description) }
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
        let bound = (try? SocketAddress.unix(path) { bind(fd, $0, $1) }) ?? -1
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

    func poke() {
        var byte: UInt8 = 1
        _ = write(wake.write, &byte, 1)
    }

    // MARK: The socket thread

    func run() {
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

    func drainWake() {
        var buffer = [UInt8](repeating: 0, count: 256)
        while read(wake.read, &buffer, buffer.count) > 0 {}
    }

    /// Moves what other threads handed over into the clients' output. True when stopping.
    func takeDeliveries() -> Bool {
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

    func acceptClients() {
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
            var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
            _ = csystem_peer_credentials(fd, &pid, &uid, &gid)
            clients[fd] = Client(fd: fd, id: nextClient, tier: tier, uid: uid)
            byID[nextClient] = fd
            nextClient += 1
        }
    }

    /// The tier of the peer on `fd`, or why it may not connect (SO_PEERCRED).
    func peerTier(_ fd: Int32) -> Result<Tier, SocketError> {
        var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
        guard csystem_peer_credentials(fd, &pid, &uid, &gid) == 0 else { return .failure(SocketError(message: "no peer credentials")) }
        if uid == getuid() || uid == 0 { return .success(.admin) }
        if let group, Self.isMember(pid: pid, gid: gid, of: group) { return .success(groupTier) }
        return .failure(SocketError(message: "uid \(uid) is not allowed"))
    }

    /// An audit's "by": what the client says it is (`adplayerctl (user NAME)`, `web page (admin
    /// role)`), and the uid the kernel says connected — the client's word alone proves nothing.
    static func who(claimed: String?, uid: uid_t) -> String {
        var entry = passwd(), result: UnsafeMutablePointer<passwd>?
        var buffer = [CChar](repeating: 0, count: 4096)
        let name = getpwuid_r(uid, &entry, &buffer, buffer.count, &result) == 0 && result != nil ? String(cString: entry.pw_name) : nil
        let peer = "uid \(uid)" + (name.map { " \($0)" } ?? "")
        return "\(String((claimed ?? "a control-socket client").prefix(200))) [\(peer)]"
    }

    static func isMember(pid: pid_t, gid: gid_t, of group: gid_t) -> Bool {
        if gid == group { return true }
        guard let status = try? SafeFile.read("/proc/\(pid)/status", maxBytes: 64 * 1024),
              let line = String(decoding: status, as: UTF8.self).split(separator: "\n").first(where: { $0.hasPrefix("Groups:") })
        else { return false }
        return line.dropFirst(7).split(separator: " ").contains { gid_t($0) == group }
    }

    // MARK: Addresses

    /// Whether a live server accepts connections on `path`.
    public static func someoneAnswers(_ path: String) -> Bool {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return (try? SocketAddress.unix(path) { connect(fd, $0, $1) }) == 0
    }
}
