import BoundsCore
#if canImport(Glibc)
import Glibc
#endif

/// The client side of the control protocol (docs/protocol.md): newline-delimited JSON over
/// the daemon's Unix socket. Requests `{"id", "cmd", "args"}`; replies `{"id", "ok",
/// "result"|"error"}`; events `{"event", …}` after `subscribe`.
///
/// Threading: one thread makes the calls and reads (`buffer` is its own); `shutdown` may come
/// from any other (it only shuts the socket down), hence `@unchecked Sendable`.
public final class ControlClient: @unchecked Sendable {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
        public init(description: String) { self.description = description }
    }

    private let fd: Int32
    private var buffer: [UInt8] = []
    private var nextID: Int64 = 1

    /// Connects to `path`; a clear failure when the daemon is not running. `timeout`: how long
    /// a read or a write may wait (nil: for ever, as `adplayerctl events` follows the stream).
    public init(path: String, timeout: Double? = nil) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket(): \(String(cString: strerror(errno)))") }
        let connected: Int32
        do {
            connected = try SocketAddress.unix(path) { connect(fd, $0, $1) }
        } catch {
            close(fd)
            throw Failure(description: error.description)
        }
        guard connected == 0 else {
            let code = errno
            close(fd)
            switch code {
            case ENOENT, ECONNREFUSED:
                throw Failure(description: "adplayerd is not running (nothing answers on \(path))")
            case EACCES:
                throw Failure(description: "\(path): permission denied (the daemon's socket is for its user or its socket-group)")
            default:
                throw Failure(description: "\(path): \(String(cString: strerror(code)))")
            }
        }
        if let timeout {
            var value = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - timeout.rounded(.down)) * 1e6))
            setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
            setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
        }
    }

    /// Ends the connection now from any thread (a reader waiting in `readMessage` returns).
    public func shutdown() { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }

    deinit { close(fd) }

    /// Sends a request and returns its reply (events that arrive first are handed to `onEvent`).
    public func call(_ request: Request, onEvent: (JSONValue) -> Void = { _ in }) throws -> JSONValue {
        let id = nextID
        nextID += 1
        try send(request.json(id: id).line())
        while true {
            let message = try readMessage()
            if message["event"] != nil {
                onEvent(message)
                continue
            }
            if message["id"]?.integer == id || message["id"] == .null { return message }
        }
    }

    /// Reads the next message (for following events).
    public func readMessage() throws -> JSONValue {
        while true {
            if let newline = buffer.firstIndex(of: 10) {
                let line = buffer[..<newline]
                defer { buffer.removeFirst(newline + 1) }
                guard let object = try? JSONValue.parse(line), object.object != nil else {
                    throw Failure(description: "the daemon sent something that is not a JSON object")
                }
                return object
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = read(fd, &chunk, chunk.count)
            if n < 0 && errno == EINTR { continue }
            if n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { throw Failure(description: "the daemon did not answer in time") }
            guard n > 0 else { throw Failure(description: "the daemon closed the connection") }
            buffer.append(contentsOf: chunk[0..<n])
            if buffer.count > 16 * 1024 * 1024 { throw Failure(description: "the daemon sent a line over 16 MiB") }
        }
    }

    private func send(_ data: [UInt8]) throws {
        try data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                if n < 0 && errno == EINTR { continue }
                guard n > 0 else { throw Failure(description: "cannot send to the daemon: \(String(cString: strerror(errno)))") }
                offset += n
            }
        }
    }

    /// Where the daemon's socket is: `--socket`, `$ADPLAYERD_SOCKET`, else the first of the
    /// daemon's default places that exists (a user's, then the system daemon's).
    public static func socketPath(_ explicit: String?, environment: [String: String] = ThisProcess.environment) -> String {
        if let explicit { return explicit }
        if let path = environment["ADPLAYERD_SOCKET"], !path.isEmpty { return path }
        var candidates: [String] = []
        if let xdg = environment["XDG_RUNTIME_DIR"], !xdg.isEmpty { candidates.append("\(xdg)/adplayerd/control.sock") }
        candidates.append("/tmp/adplayerd-\(getuid())/control.sock")
        candidates.append("/run/adplayerd/control.sock")
        return candidates.first { ThisProcess.exists($0) } ?? candidates[0]
    }
}
