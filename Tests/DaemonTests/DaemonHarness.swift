import AdRuntime
import AdTestSupport
import Foundation
import XCTest

/// An `adplayerd` process for one test: its own state folder and socket, a library, stderr
/// collected. Waits have generous deadlines that only bound a failing test.
final class DaemonProcess: @unchecked Sendable {
    // @unchecked: the process is driven by the test's thread; `stderr` is behind its lock.
    let folder: URL
    let socket: String
    let stateDir: String
    let library: String
    private(set) var process: Process
    private let errors = Locked(Data())
    private let extraArguments: [String]
    private let environment: [String: String]
    private let wrapper: [String]
    private let stderrIsJournal: Bool

    /// `environment`: added to the test's own (a private bus's address, a display). `wrapper`:
    /// a command that execs the daemon (`prlimit --nofile=48:48 --`), so the pid is the daemon's.
    /// `stderrIsJournal`: `$JOURNAL_STREAM` names the stderr pipe, as systemd does for a journal stream.
    init(catalog: URL? = nil, library: String? = nil, extra: [String] = [], environment: [String: String] = [:],
         wrapper: [String] = [], stderrIsJournal: Bool = false, folderForAll: Bool = false) throws {
        self.wrapper = wrapper
        self.stderrIsJournal = stderrIsJournal
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("daemon-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        // `folderForAll`: a daemon run as another user (`setpriv` in `wrapper`) makes its state and socket here.
        if folderForAll { chmod(folder.path, 0o1777) }   // sticky: the socket's folder may be shared, not swapped
        socket = folder.appendingPathComponent("ctl.sock").path
        stateDir = folder.appendingPathComponent("state").path
        self.library = try library ?? URL(fileURLWithPath: Media.path("episode-1.mp4")).deletingLastPathComponent().path
        var arguments = ["--library", self.library, "--state-dir", stateDir, "--socket", socket, "--log-level", "info"]
        if let catalog { arguments += ["--ads", catalog.path] }
        extraArguments = arguments + extra
        self.environment = environment
        process = Process()
        try launch()
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        // As `BackgroundProcess`: the handler's dispatch source must not outlive the pipe it
        // reads (libdispatch's manager thread crashed on a freed source: "Bad pointer
        // dereference" in `_dispatch_event_loop_drain`, once in a full run).
        (process.standardError as? Pipe)?.fileHandleForReading.readabilityHandler = nil
        try? FileManager.default.removeItem(at: folder)
    }

    /// Starts the daemon (again) and waits until its socket answers.
    func launch() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: wrapper.first ?? Executables.adplayerd)
        process.arguments = wrapper.isEmpty ? extraArguments : Array(wrapper.dropFirst()) + [Executables.adplayerd] + extraArguments
        var environment = ProcessInfo.processInfo.environment.merging(self.environment) { $1 }
        let pipe = Pipe()
        if stderrIsJournal {
            var info = stat()
            fstat(pipe.fileHandleForWriting.fileDescriptor, &info)
            environment["JOURNAL_STREAM"] = "\(info.st_dev):\(info.st_ino)"
        }
        process.environment = environment
        process.standardError = pipe
        process.standardOutput = FileHandle.nullDevice
        let errors = self.errors
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            errors.withLock { $0.append(data) }
        }
        try process.run()
        self.process = process
        guard waitUntil(timeout: 30, { (try? ControlConnection(path: self.socket)) != nil || !process.isRunning }), process.isRunning else {
            throw ControlConnection.Failure(description: "adplayerd did not start: \(log)")
        }
    }

    var log: String { errors.withLock { String(decoding: $0, as: UTF8.self) } }

    /// Sends `signal` and waits for the exit; the exit status.
    @discardableResult
    func stop(_ signal: Int32 = SIGTERM) -> Int32 {
        kill(process.processIdentifier, signal)
        process.waitUntilExit()
        return process.terminationStatus
    }

    func connect() throws -> ControlConnection { try ControlConnection(path: socket) }

    /// Runs `adplayerctl --socket … ARGS` and returns (exit status, stdout).
    func ctl(_ arguments: String...) throws -> (Int32, String) {
        try runToEnd(Executables.adplayerctl, ["--socket", socket] + arguments)
    }
}

/// A client of the control socket for tests: requests and the events that arrive.
final class ControlConnection: @unchecked Sendable {
    // @unchecked: used by one test thread at a time.
    struct Failure: Error, CustomStringConvertible { let description: String }

    let fd: Int32
    private var buffer = Data()
    private var nextID = 1
    private(set) var events: [[String: Any]] = []

    /// Forgets the events kept so far (read past, unmatched): what comes next is after them.
    func dropKept() { events = [] }

    init(path: String) throws {
        fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        guard connected == 0 else {
            close(fd)
            throw Failure(description: "connect \(path): \(String(cString: strerror(errno)))")
        }
    }

    deinit { close(fd) }

    func sendLine(_ text: String) throws {
        try sendRaw(Data((text + "\n").utf8))
    }

    func sendRaw(_ data: Data) throws {
        try data.withUnsafeBytes { raw in
            var offset = 0
            while offset < raw.count {
                let n = send(fd, raw.baseAddress! + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                guard n > 0 else { throw Failure(description: "send: \(String(cString: strerror(errno)))") }
                offset += n
            }
        }
    }

    /// Sends a request and waits (20 s at most) for its reply; events meanwhile are kept.
    func call(_ command: String, _ args: [String: Any]? = nil) throws -> [String: Any] {
        let id = nextID
        nextID += 1
        var request: [String: Any] = ["id": id, "cmd": command]
        if let args { request["args"] = args }
        try sendLine(String(decoding: try JSONSerialization.data(withJSONObject: request), as: UTF8.self))
        return try reply(id: id)
    }

    func reply(id: Int?) throws -> [String: Any] {
        while true {
            let message = try nextMessage(timeout: 20)
            if message["event"] != nil { events.append(message); continue }
            if let id { if (message["id"] as? NSNumber)?.intValue == id { return message } } else { return message }
        }
    }

    /// The next message, or a failure after `timeout` seconds.
    func nextMessage(timeout: Double) throws -> [String: Any] {
        let deadline = Date().addingTimeInterval(timeout)
        while true {
            if let newline = buffer.firstIndex(of: 10) {
                let line = buffer[buffer.startIndex..<newline]
                buffer = Data(buffer[(newline + 1)...])
                guard let object = try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] else {
                    throw Failure(description: "not an object: \(String(decoding: line, as: UTF8.self))")
                }
                return object
            }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { throw Failure(description: "no message within \(timeout) s") }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, Int32(left * 1000)) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = read(fd, &chunk, chunk.count)
            guard n > 0 else { throw Failure(description: "the daemon closed the connection") }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }

    /// Waits for an event matching `match` (kept events first), 30 s at most.
    /// A failure names the line that waited and every event seen on this connection.
    func event(timeout: Double = 30, file: StaticString = #fileID, line: UInt = #line,
               _ match: ([String: Any]) -> Bool) throws -> [String: Any] {
        if let index = events.firstIndex(where: match) { return events.remove(at: index) }
        let deadline = Date().addingTimeInterval(timeout)
        while deadline.timeIntervalSinceNow > 0 {
            let message: [String: Any]
            do { message = try nextMessage(timeout: deadline.timeIntervalSinceNow) } catch {
                throw Failure(description: "\(file):\(line): waiting for an event: \(error); saw \(events)")
            }
            guard message["event"] != nil else { continue }
            if match(message) { return message }
            events.append(message)
        }
        throw Failure(description: "\(file):\(line): no such event within \(timeout) s; saw \(events)")
    }

    /// Whether the daemon closed this connection (reads see the end).
    func isClosedByPeer(timeout: Double = 20) -> Bool {
        let deadline = Date().addingTimeInterval(timeout)
        while deadline.timeIntervalSinceNow > 0 {
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 200) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = read(fd, &chunk, chunk.count)
            if n <= 0 { return true }
        }
        return false
    }
}

/// `event.name == name` and, when given, `key == value`.
func named(_ name: String, _ key: String? = nil, _ value: String? = nil) -> ([String: Any]) -> Bool {
    { event in
        guard event["event"] as? String == name else { return false }
        guard let key else { return true }
        return event[key] as? String == value
    }
}

/// A catalog folder for a test, with the generated creatives copied in.
func makeCatalog(_ json: String) throws -> URL {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("catalog-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    for name in ["overlay.png", "pause.png", "postroll.mp4"] {
        try FileManager.default.copyItem(atPath: try Media.path(name), toPath: folder.appendingPathComponent(name).path)
    }
    try Data(json.utf8).write(to: folder.appendingPathComponent("catalog.json"))
    return folder
}
