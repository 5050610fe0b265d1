import Foundation

/// A raw HTTP exchange over TCP: the bytes as given (hostile ones included), the reply read
/// up to its length or to the connection's close.
public struct RawHTTP: Sendable {
    public let fd: Int32

    public init(port: UInt16, timeout: Int = 20) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = port.bigEndian
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let ok = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard ok == 0 else { throw RawHTTPFailure(description: "connect 127.0.0.1:\(port): \(String(cString: strerror(errno)))") }
        var timeout = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
    }

    public func close() { Glibc.close(fd) }

    @discardableResult
    public func send(_ text: String) -> Bool { send(Array(text.utf8)) }

    @discardableResult
    public func send(_ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = Glibc.send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                guard n > 0 else { return false }
                offset += n
            }
            return true
        }
    }

    public struct Response: Sendable {
        public var status: Int
        public var headers: [String: String]
        public var body: [UInt8]
        public var text: String { String(decoding: body, as: UTF8.self) }
    }

    /// One response (nil if the connection closed before a whole one came).
    public func read() -> Response? {
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        func more() -> Bool {
            let n = recv(fd, &chunk, chunk.count, 0)
            guard n > 0 else { return false }
            buffer += chunk[..<n]
            return true
        }
        var end: Int?
        while end == nil {
            guard more() else { return nil }
            end = Self.headEnd(buffer)
        }
        let head = String(decoding: buffer[..<end!], as: UTF8.self).components(separatedBy: "\r\n")
        let status = Int(head[0].split(separator: " ")[1]) ?? 0
        var headers: [String: String] = [:]
        for line in head.dropFirst() where line.contains(":") {
            let parts = line.split(separator: ":", maxSplits: 1)
            headers[parts[0].lowercased()] = parts[1].trimmingCharacters(in: .whitespaces)
        }
        var body = Array(buffer[end!...])
        if let length = headers["content-length"].flatMap(Int.init) {
            while body.count < length {
                let before = buffer.count
                guard more() else { return nil }
                body += buffer[before...]
            }
        }
        return Response(status: status, headers: headers, body: body)
    }

    /// Whether the server closed the connection (reads EOF within the receive timeout).
    public func closedByServer() -> Bool {
        var byte: UInt8 = 0
        while true {
            let n = recv(fd, &byte, 1, 0)
            if n == 0 { return true }
            if n < 0 { return errno == ECONNRESET }
        }
    }

    static func headEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for i in 3..<bytes.count where bytes[i] == 10 && bytes[i - 1] == 13 && bytes[i - 2] == 10 && bytes[i - 3] == 13 { return i + 1 }
        return nil
    }

    /// One request on a connection of its own (`Connection: close` added), its response.
    public static func exchange(port: UInt16, _ request: String) throws -> Response {
        let client = try RawHTTP(port: port)
        defer { client.close() }
        client.send(request)
        guard let response = client.read() else { throw RawHTTPFailure(description: "no response to \(request.prefix(60))") }
        return response
    }

    /// `GET path` with an optional bearer token.
    public static func get(port: UInt16, _ path: String, token: String? = nil) throws -> Response {
        let auth = token.map { "Authorization: Bearer \($0)\r\n" } ?? ""
        return try exchange(port: port, "GET \(path) HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\(auth)Connection: close\r\n\r\n")
    }

    /// `POST /api/command` with a JSON body.
    public static func command(port: UInt16, _ body: String, token: String? = nil) throws -> Response {
        let auth = token.map { "Authorization: Bearer \($0)\r\n" } ?? ""
        return try exchange(port: port, "POST /api/command HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\n\(auth)Content-Type: application/json\r\n"
                            + "Content-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n\(body)")
    }
}

public struct RawHTTPFailure: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}

/// A TCP socket bound to 127.0.0.1 on a port the kernel chose (not listening yet), and the port.
public func loopbackSocket() throws -> (fd: Int32, port: UInt16) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    guard fd >= 0, withUnsafeMutablePointer(to: &address, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) } }) == 0,
          withUnsafeMutablePointer(to: &address, { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }) == 0 else {
        if fd >= 0 { close(fd) }
        throw RawHTTPFailure(description: "no loopback port: \(String(cString: strerror(errno)))")
    }
    return (fd, UInt16(bigEndian: address.sin_port))
}

/// A port nobody listens on now (the kernel's choice, released for the test to use).
public func freePort() throws -> UInt16 {
    let (fd, port) = try loopbackSocket()
    close(fd)
    return port
}
