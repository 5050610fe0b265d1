import AdRuntime
import AdTestSupport
import Foundation
import XCTest

/// The units in systemd/ and the daemon's side of `Type=notify`.
final class SystemdTests: XCTestCase {
    /// `systemd-analyze verify` has nothing to say about any unit (it exits 0 even for
    /// unknown keys, so any output fails the test). The units name /usr/local/bin/adplayerd;
    /// the copies checked name the binary just built, which must exist for the check. The
    /// web's socket and service are checked side by side (the service requires the socket).
    func testEveryUnitVerifiesWithoutAWord() throws {
        let units = ["adplayerd.service", "adplayerd-web.socket", "adplayerd-web.service", "adplayerd-mqtt.service"]
        for user in [false, true] {
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("units-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            defer { try? FileManager.default.removeItem(at: folder) }
            // The man pages the units name (Documentation=man:…), as `make install` puts them
            // beside the program: systemd-analyze looks each up with man.
            for (page, section) in [("adplayerd.8", "8"), ("adplayerd.conf.5", "5")] {
                let made = try runProcess(Executables.adplayerd, ["manual", page, "--docs", repositoryRoot.appendingPathComponent("docs").path], mergeErrors: false)
                XCTAssertEqual(made.status, 0, page)
                let manFolder = folder.appendingPathComponent("man/man\(section)")
                try FileManager.default.createDirectory(at: manFolder, withIntermediateDirectories: true)
                try made.output.write(to: manFolder.appendingPathComponent(page))
            }
            for unit in units {
                let text = try String(contentsOf: repositoryRoot.appendingPathComponent("systemd/\(user ? "user" : "system")/\(unit)"), encoding: .utf8)
                if unit == "adplayerd.service" {
                    XCTAssertTrue(text.contains("Type=notify") && text.contains("RuntimeDirectory=adplayerd") && text.contains("StateDirectory=adplayerd"),
                                  unit)
                }
                if unit == "adplayerd-web.socket" { XCTAssertTrue(text.contains("ListenStream=127.0.0.1:8080"), unit) }
                if unit == "adplayerd-web.service" { XCTAssertTrue(text.contains("adplayerd-web --config"), unit) }
                if unit == "adplayerd-mqtt.service" { XCTAssertTrue(text.contains("adplayerd-mqtt --config") && text.contains("Restart=on-failure"), unit) }
                try Data(text.replacingOccurrences(of: "/usr/local/bin/adplayerd", with: Executables.adplayerd).utf8)
                    .write(to: folder.appendingPathComponent(unit))
            }
            for unit in units {
                let process = Process()
                process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
                process.arguments = ["systemd-analyze"] + (user ? ["--user"] : []) + ["verify", folder.appendingPathComponent(unit).path]
                var environment = ProcessInfo.processInfo.environment
                environment["XDG_RUNTIME_DIR"] = folder.path   // a user manager needs one, even offline
                environment["MANPATH"] = folder.appendingPathComponent("man").path
                process.environment = environment
                process.currentDirectoryURL = folder
                let output = Pipe()
                process.standardOutput = output
                process.standardError = output
                try process.run()
                let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
                process.waitUntilExit()
                XCTAssertEqual(process.terminationStatus, 0, "\(user ? "user" : "system")/\(unit): \(said)")
                XCTAssertEqual(said, "", "\(user ? "user" : "system")/\(unit): systemd-analyze verify said something")
            }
        }
    }

    /// READY=1 with a STATUS once the socket accepts, WATCHDOG=1 from the loop at half the
    /// interval systemd asks for, STOPPING=1 on SIGTERM.
    func testNotifyReadyWatchdogAndStopping() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("notify-\(UUID().uuidString.prefix(8))").path
        defer { unlink(path) }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in raw.copyBytes(from: bytes); raw[bytes.count] = 0 }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        XCTAssertEqual(bound, 0)
        setenv("NOTIFY_SOCKET", path, 1)
        setenv("WATCHDOG_USEC", "200000", 1)
        defer { unsetenv("NOTIFY_SOCKET"); unsetenv("WATCHDOG_USEC") }
        let daemon = try DaemonProcess()
        var messages: [String] = []
        func receive(until predicate: ([String]) -> Bool) -> Bool {
            let deadline = Date().addingTimeInterval(30)
            while !predicate(messages), deadline.timeIntervalSinceNow > 0 {
                var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
                guard poll(&pfd, 1, 200) > 0 else { continue }
                var buffer = [UInt8](repeating: 0, count: 4096)
                let n = recv(fd, &buffer, buffer.count, 0)
                if n > 0 { messages.append(String(decoding: buffer[0..<n], as: UTF8.self)) }
            }
            return predicate(messages)
        }
        XCTAssertTrue(receive { $0.contains { $0.hasPrefix("READY=1") && $0.contains("STATUS=") } }, "\(messages)")
        XCTAssertTrue(receive { $0.filter { $0 == "WATCHDOG=1" }.count >= 3 }, "\(messages)")
        XCTAssertEqual(daemon.stop(SIGTERM), 0)
        XCTAssertTrue(receive { $0.contains("STOPPING=1") }, "\(messages)")
    }
}
