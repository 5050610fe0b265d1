import Foundation

/// A private bus could not be used (a tool missing, a call refused).
public struct BusFailure: Error, CustomStringConvertible {
    public let description: String
    public init(description: String) { self.description = description }
}

/// A private D-Bus daemon for one test (`dbus-daemon --session`, as `dbus-run-session`
/// starts): the session bus adplayerd's MPRIS is on, or a stand-in for the system bus where
/// logind speaks. Nothing reaches or leaves the machine's own buses.
public final class PrivateBus: @unchecked Sendable {
    // @unchecked: set up in init, stopped once.
    public let address: String
    private let process = Process()

    public init() throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/dbus-daemon")
        process.arguments = ["--session", "--nofork", "--nopidfile", "--print-address=1"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-daemon") else {
            throw BusFailure(description: "dbus-daemon is not installed (apt-get install dbus-daemon)")
        }
        try process.run()
        var text = Data()
        while !text.contains(10) {
            let chunk = output.fileHandleForReading.availableData
            guard !chunk.isEmpty else { throw BusFailure(description: "dbus-daemon printed no address") }
            text.append(chunk)
        }
        address = String(decoding: text, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// The bus daemon's process (a test stops it with SIGSTOP to play a hung bus).
    public var pid: Int32 { process.processIdentifier }

    deinit { stop() }

    public func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    /// Runs a tool on this bus (`DBUS_SESSION_BUS_ADDRESS` set to it): (exit status, stdout
    /// and stderr, trimmed). 20 s at most.
    public func run(_ tool: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
        let (status, output) = try runToEnd("/usr/bin/timeout", ["20", tool] + arguments,
                                            environment: ProcessInfo.processInfo.environment.merging(["DBUS_SESSION_BUS_ADDRESS": address]) { $1 })
        return (status, output.trimmingCharacters(in: .whitespacesAndNewlines))
    }

    /// The real `playerctl -p adplayerd ARGS` on this bus.
    public func playerctl(_ arguments: String...) throws -> (status: Int32, output: String) {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/playerctl") else {
            throw BusFailure(description: "playerctl is not installed (apt-get install playerctl)")
        }
        return try run("playerctl", ["-p", "adplayerd"] + arguments)
    }

    /// A property of adplayerd's `org.mpris.MediaPlayer2.Player`, as `dbus-send` prints its
    /// value (`boolean true`, `string "Playing"`, `double 2`).
    public func playerProperty(_ name: String) throws -> String {
        let (status, output) = try run("dbus-send", ["--session", "--print-reply=literal", "--dest=org.mpris.MediaPlayer2.adplayerd",
                                                     "/org/mpris/MediaPlayer2", "org.freedesktop.DBus.Properties.Get",
                                                     "string:org.mpris.MediaPlayer2.Player", "string:\(name)"])
        guard status == 0 else { throw BusFailure(description: "Get \(name): \(output)") }
        return output.replacingOccurrences(of: "variant", with: "").trimmingCharacters(in: .whitespaces)
    }

    /// Sets a property of adplayerd's `.Player` (`value` in dbus-send's form, `double:2`).
    public func setPlayerProperty(_ name: String, _ value: String) throws -> (status: Int32, output: String) {
        try run("dbus-send", ["--session", "--print-reply", "--dest=org.mpris.MediaPlayer2.adplayerd", "/org/mpris/MediaPlayer2",
                              "org.freedesktop.DBus.Properties.Set", "string:org.mpris.MediaPlayer2.Player", "string:\(name)",
                              "variant:\(value)"])
    }
}

