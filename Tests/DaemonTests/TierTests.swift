import AdTestSupport
import Foundation
import XCTest

/// Permission tiers on the real socket: a `socket-group` member gets `socket-group-tier`, the
/// daemon's user and root get `admin`; a command above a client's tier is refused `forbidden`
/// and nothing of it runs.
final class TierTests: XCTestCase {
    /// `adplayerctl` as another user (nobody), a member of the socket's group (nogroup).
    private func asGroupMember(_ daemon: DaemonProcess, _ arguments: String...) throws -> (Int32, String) {
        // Under `make asan`: LeakSanitizer cannot inspect a process that changed its user (it is
        // no longer dumpable) and fails it at exit; the leak check is the other runs' to make.
        var environment = ProcessInfo.processInfo.environment
        if let options = environment["ASAN_OPTIONS"] { environment["ASAN_OPTIONS"] = options + ":detect_leaks=0" }
        return try runToEnd("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "--", Executables.adplayerctl,
                                                 "--socket", daemon.socket] + arguments, environment: environment)
    }

    func testAGroupMemberMayRunItsTierAndNothingAbove() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: the test runs adplayerctl as another user (setpriv)") }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv"), getgrnam("nogroup") != nil else {
            throw XCTSkip("needs setpriv (util-linux) and the group nogroup")
        }
        let daemon = try DaemonProcess(extra: ["--socket-group", "nogroup", "--socket-group-tier", "read"])
        chmod(daemon.folder.path, 0o755)   // the folder is the test's; the socket itself is 0660 for the group
        try daemon.ctl("open", Media.path("episode-1.mp4")).0.expect(0)

        var (status, output) = try asGroupMember(daemon, "--json", "version")
        XCTAssertEqual(status, 0, output)
        XCTAssertTrue(output.contains(#""tier":"read""#), output)
        (status, output) = try asGroupMember(daemon, "status")
        XCTAssertEqual(status, 0, output)
        (status, output) = try asGroupMember(daemon, "--json", "pause")
        XCTAssertEqual(status, 1, output)
        XCTAssertTrue(output.contains(#""code":"forbidden""#) && output.contains("control tier"), output)
        (status, output) = try asGroupMember(daemon, "--json", "clear")
        XCTAssertEqual(status, 1, output)
        XCTAssertTrue(output.contains(#""code":"forbidden""#), output)

        // Nothing of the refused commands ran: the queue still holds the episode (`clear` runs
        // on the loop before its reply, so a clear that ran would show here).
        let connection = try daemon.connect()
        let state = try connection.call("status")
        let result = try XCTUnwrap(state["result"] as? [String: Any])
        XCTAssertEqual(result["queue_length"] as? Int, 1, "\(state)")
        XCTAssertNotNil(result["item"] as? [String: Any], "\(state)")

        // The daemon's own user (root here) has admin.
        XCTAssertTrue(try daemon.ctl("--json", "version").1.contains(#""tier":"admin""#))
        XCTAssertEqual(try daemon.ctl("clear").0, 0)
    }

    func testAnUnknownTierIsAConfigurationError() throws {
        let (status, output) = try runToEnd(Executables.adplayerd, ["--socket-group-tier", "root", "--socket", "/tmp/never.sock"])
        XCTAssertEqual(status, 2, output)
        XCTAssertTrue(output.contains("socket-group-tier") && output.contains("read, control, admin"), output)
    }
}

private extension Int32 {
    func expect(_ value: Int32, file: StaticString = #filePath, line: UInt = #line) { XCTAssertEqual(self, value, file: file, line: line) }
}
