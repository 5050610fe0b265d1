import AdRuntime
import AdTestSupport
import Foundation
import XCTest

/// The units in systemd/ and the daemon's side of `Type=notify`.
final class SystemdTests: XCTestCase {
    /// `systemd-analyze verify` has nothing to say about either unit (it exits 0 even for
    /// unknown keys, so any output fails the test). The units name /usr/local/bin/adplayerd;
    /// the copy checked names the binary just built, which must exist for the check.
    func testBothUnitsVerifyWithoutAWord() throws {
        for (unit, user) in [("systemd/system/adplayerd.service", false), ("systemd/user/adplayerd.service", true)] {
            let text = try String(contentsOf: repositoryRoot.appendingPathComponent(unit), encoding: .utf8)
            XCTAssertTrue(text.contains("Type=notify") && text.contains("RuntimeDirectory=adplayerd") && text.contains("StateDirectory=adplayerd"),
                          unit)
            let folder = FileManager.default.temporaryDirectory.appendingPathComponent("units-\(UUID().uuidString.prefix(8))")
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            defer { try? FileManager.default.removeItem(at: folder) }
            let copy = folder.appendingPathComponent("adplayerd.service")
            try Data(text.replacingOccurrences(of: "/usr/local/bin/adplayerd", with: Executables.adplayerd).utf8).write(to: copy)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["systemd-analyze"] + (user ? ["--user"] : []) + ["verify", copy.path]
            var environment = ProcessInfo.processInfo.environment
            environment["XDG_RUNTIME_DIR"] = folder.path   // a user manager needs one, even offline
            process.environment = environment
            let output = Pipe()
            process.standardOutput = output
            process.standardError = output
            try process.run()
            let said = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
            process.waitUntilExit()
            XCTAssertEqual(process.terminationStatus, 0, "\(unit): \(said)")
            XCTAssertEqual(said, "", "\(unit): systemd-analyze verify said something")
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
