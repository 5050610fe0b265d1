import AdRuntime
import AdTestSupport
import Foundation
import XCTest

/// `dbus-monitor` on a private bus: the signals adplayerd emits on its MPRIS path, in order.
final class BusMonitor: @unchecked Sendable {
    // @unchecked: the process is set up in init; the text is behind its lock.
    struct Signal: CustomStringConvertible {
        let member: String
        /// dbus-monitor's lines for the body.
        let body: [String]
        var description: String { "\(member)(\(body.joined(separator: " ")))" }

        /// The first `int64` of the body (Seeked's position).
        var int64: Int64? {
            body.lazy.compactMap { line -> Int64? in
                let parts = line.split(separator: " ")
                guard parts.count == 2, parts[0] == "int64" else { return nil }
                return Int64(parts[1])
            }.first
        }

        /// The body as one line (`string "PlaybackStatus" variant string "Paused" …`).
        var text: String { body.joined(separator: " ").split(separator: " ").joined(separator: " ") }

        /// A `PropertiesChanged` naming `property`.
        func names(_ property: String) -> Bool { body.contains("string \"\(property)\"") }
    }

    private let process = Process()
    private let text = Locked("")
    private let bus: PrivateBus

    /// Watches signals on `/org/mpris/MediaPlayer2`; returns once the monitor sees them (a
    /// marker signal sent through the bus has come back).
    init(_ bus: PrivateBus) throws {
        self.bus = bus
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-monitor")
        process.arguments = ["--address", bus.address, "type='signal',path='/org/mpris/MediaPlayer2'"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        let text = self.text
        output.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            text.withLock { $0 += String(decoding: data, as: UTF8.self) }
        }
        try process.run()
        var marks = 0
        let ready = waitUntil(timeout: 20) {
            marks += 1
            _ = try? bus.run("dbus-send", ["--session", "--type=signal", "/org/mpris/MediaPlayer2", "test.Monitor.Ready"])
            return self.text.withLock { $0.contains("member=Ready") }
        }
        guard ready else { throw ControlConnection.Failure(description: "dbus-monitor saw nothing") }
        _ = marks
    }

    deinit {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    /// Every signal seen so far, but the monitor's own markers.
    var signals: [Signal] {
        let lines = text.withLock { $0 }.split(separator: "\n", omittingEmptySubsequences: true).map(String.init)
        var result: [Signal] = []
        var member: String?
        var body: [String] = []
        func close() {
            if let member, member != "Ready" { result.append(Signal(member: member, body: body)) }
            member = nil
            body = []
        }
        for line in lines {
            if line.hasPrefix("signal ") || line.hasPrefix("method ") || line.hasPrefix("error ") {
                close()
                member = line.components(separatedBy: "member=").last.map { String($0.prefix { $0 != " " }) }
            } else if member != nil {
                body.append(line.trimmingCharacters(in: .whitespaces))
            }
        }
        close()
        return result
    }

    func signals(_ member: String) -> [Signal] { signals.filter { $0.member == member } }

    /// Waits (20 s at most) until a signal matching `match` has been seen after the first
    /// `after` signals named `member`; returns it.
    func wait(for member: String, after: Int = 0, _ match: (Signal) -> Bool = { _ in true }) throws -> Signal {
        var found: Signal?
        _ = waitUntil(timeout: 20) {
            found = self.signals(member).dropFirst(after).first(where: match)
            return found != nil
        }
        guard found != nil else { throw ControlConnection.Failure(description: "no \(member) signal; saw \(signals)") }
        // dbus-monitor writes a line at a time: the body of the signal found may still be on
        // its way (seen under load: a Seeked without its position). A marker sent now is
        // printed after it; once the marker is in, so is the whole signal.
        try mark()
        guard let complete = signals(member).dropFirst(after).first(where: match) else {
            throw ControlConnection.Failure(description: "no \(member) signal once complete; saw \(signals)")
        }
        return complete
    }

    /// Sends a marker signal through the bus and waits until the monitor has printed it.
    private func mark() throws {
        let count = { self.text.withLock { $0.components(separatedBy: "member=Ready").count } }
        let before = count()
        _ = try bus.run("dbus-send", ["--session", "--type=signal", "/org/mpris/MediaPlayer2", "test.Monitor.Ready"])
        guard waitUntil(timeout: 20, { count() > before }) else {
            throw ControlConnection.Failure(description: "dbus-monitor did not print the marker")
        }
    }
}

/// `logind_standin.py` on a private "system" bus: owns `org.freedesktop.login1` and emits
/// PrepareForSleep on command.
final class LogindStandIn: @unchecked Sendable {
    // @unchecked: driven by the test's thread.
    private let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private var buffer = ""

    init(on bus: PrivateBus) throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else {
            throw ControlConnection.Failure(description: "python3 is not installed")
        }
        // The system Python: Debian's python3-dbus is installed for it.
        process.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        process.arguments = [repositoryRoot.appendingPathComponent("Tests/Fixtures/logind_standin.py").path, bus.address]
        process.standardInput = input
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let first = try line()
        guard first == "ready" else { throw ControlConnection.Failure(description: "logind stand-in: \(first)") }
    }

    deinit {
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    /// PrepareForSleep(true) (`sleeping`) or (false); returns once the bus has it.
    func prepareForSleep(_ sleeping: Bool) throws {
        input.fileHandleForWriting.write(Data((sleeping ? "sleep\n" : "wake\n").utf8))
        let answer = try line()
        guard answer == "sent" else { throw ControlConnection.Failure(description: "logind stand-in: \(answer)") }
    }

    private func line() throws -> String {
        while !buffer.contains("\n") {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw ControlConnection.Failure(description: "logind stand-in exited: \(buffer)") }
            buffer += String(decoding: chunk, as: UTF8.self)
        }
        let index = buffer.firstIndex(of: "\n")!
        defer { buffer = String(buffer[buffer.index(after: index)...]) }
        return String(buffer[..<index])
    }
}
