import AdRuntime
import ControlProtocol
import CSystem
import Foundation

/// A client connection: its buffers and lines (socket thread only).
extension ControlServer {
    struct Client {
        let fd: Int32
        let id: UInt64
        /// What this client may run (from its credentials, at connection).
        let tier: Tier
        /// Who it is, as the kernel says (SO_PEERCRED): what an audit names.
        var uid: uid_t = 0
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

    /// Reads what the socket has, up to one line's bound beyond what is buffered.
    func readFrom(_ fd: Int32) {
        while let client = clients[fd], client.wantsInput {
            let n = readBuffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                clients[fd]!.input.append(readBuffer[0..<n])
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
    func processLines(_ fd: Int32) {
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
            // What an audit records is who the kernel says connected, beside what the client says.
            let request = decoded.request.audited(by: Self.who(claimed: decoded.request.auditedBy, uid: client.uid))
            onRequest(id, request) { [self] result in
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
    func closeIfDone(_ fd: Int32) {
        guard let client = clients[fd], client.output.isEmpty else { return }
        if client.closing || (client.inputClosed && !client.busy && client.input.isEmpty) { drop(fd) }
    }

    func queue(_ line: [UInt8], to fd: Int32) {
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

    func flush(_ fd: Int32) {
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

    func drop(_ fd: Int32) {
        guard let client = clients.removeValue(forKey: fd) else { return }
        byID[client.id] = nil
        // No thread writes to it from here on (the descriptor may be reused once closed).
        inbox.withLock { _ = $0.subscribers.removeValue(forKey: fd) }
        close(fd)
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
