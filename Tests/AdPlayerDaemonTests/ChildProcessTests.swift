@testable import AdPlayerDaemon
import AdTestSupport
import Foundation
import XCTest

/// The daemon's runner of helper programs (issue 34, 19): its own process group killed whole
/// at the timeout, a bounded tail of what it prints, always reaped.
final class ChildProcessTests: XCTestCase {
    /// A child that keeps the output pipe open in a background process of its own and hangs:
    /// the run ends at its timeout with both killed and reaped — and the next run works.
    func testAHangingCommandAndWhatItStartedAreKilledAndReaped() throws {
        let marker = FileManager.default.temporaryDirectory.appendingPathComponent("child-\(UUID().uuidString.prefix(8))").path
        defer { unlink(marker) }
        let outcome = try ChildProcess.run("/bin/sh", ["-c", "sleep 300 & echo $! > '\(marker)'; echo started; sleep 300"], timeout: 1)
        XCTAssertTrue(outcome.timedOut)
        XCTAssertNil(outcome.status)
        XCTAssertEqual(outcome.output, "started\n")
        let background = try XCTUnwrap(Int32((try String(contentsOfFile: marker, encoding: .utf8)).trimmingCharacters(in: .whitespacesAndNewlines)))
        XCTAssertTrue(waitUntil(timeout: 10) { Self.goneOrZombie(background) }, "the background child was killed with its group")
        XCTAssertFalse(Self.zombieChildren(of: getpid()).contains { $0 != background }, "every child of ours reaped")
        XCTAssertEqual(try ChildProcess.run("/bin/sh", ["-c", "exit 3"], timeout: 5), ChildProcess.Outcome(status: 3, timedOut: false, output: ""))
    }

    /// 50 MB on its output: a tail of 4 KiB kept, the end of it what it printed last.
    func testWhatItPrintsIsBoundedToItsTail() throws {
        let outcome = try ChildProcess.run("/bin/sh", ["-c", "head -c 50000000 /dev/zero | tr '\\0' a; echo; echo THE-END >&2"], timeout: 60)
        XCTAssertEqual(outcome.status, 0)
        XCTAssertLessThanOrEqual(outcome.output.utf8.count, 4096)
        XCTAssertTrue(outcome.output.hasSuffix("a\nTHE-END\n"), String(outcome.output.suffix(40)))
    }

    static func goneOrZombie(_ pid: Int32) -> Bool {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else { return true }
        return stat.split(separator: ")").last?.split(separator: " ").first == "Z"
    }

    static func zombieChildren(of parent: Int32) -> [Int32] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { Int32($0) }.filter { pid in
            guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
                  let fields = stat.split(separator: ")").last?.split(separator: " "), fields.count > 2 else { return false }
            return fields[0] == "Z" && Int32(fields[1]) == parent
        }
    }
}
