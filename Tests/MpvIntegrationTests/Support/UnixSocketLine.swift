import Foundation

/// A tiny client for line-based Unix sockets (mpv's JSON IPC in tests).
enum UnixSocketLine {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    /// Connects to `path`, sends `line`, and returns the first reply line that carries a
    /// `request_id` (events may come first). Gives up after `timeout` seconds.
    static func exchange(path: String, line: String, timeout: Int = 10) throws -> String {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: \(errno)") }
        defer { close(fd) }
        var tv = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard bytes.count < MemoryLayout.size(ofValue: address.sun_path) else { throw Failure(description: "path too long") }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else { throw Failure(description: "connect \(path): errno \(errno)") }
        let message = Array((line + "\n").utf8)
        guard write(fd, message, message.count) == message.count else { throw Failure(description: "write failed") }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while true {
            let n = read(fd, &chunk, chunk.count)
            guard n > 0 else { throw Failure(description: "no reply (read \(n), errno \(errno)); got: \(String(decoding: buffer, as: UTF8.self))") }
            buffer += chunk[0..<n]
            while let newline = buffer.firstIndex(of: 10) {
                let reply = String(decoding: buffer[..<newline], as: UTF8.self)
                buffer.removeSubrange(...newline)
                if reply.contains("request_id") { return reply }
            }
        }
    }
}
