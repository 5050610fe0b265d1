import AdTestSupport
import Bounds
import Foundation
import XCTest

/// The programs as a person types them (issue 47, 4): their version, a tool's own usage on bad
/// usage, and stderr's lines without the journal's priority prefix unless stderr is the journal.
final class CommandLineTests: XCTestCase {
    func testEveryProgramSaysTheOneVersion() throws {
        for program in ["adplayerd", "adplayerctl", "adplayerd-web", "adplayerd-mqtt", "adplayerd-dev"] {
            let result = try runToEnd(Executables.path(program), ["--version"])
            XCTAssertEqual(result.status, 0, program)
            XCTAssertEqual(result.output, "\(program) \(Product.version)\n")
        }
    }

    /// Bad usage of a tool: exit 2, the one problem first (named by the tool), then the tool's
    /// own usage — not the daemon's page of flags. `TOOL --help` prints that usage, exit 0.
    func testAToolsBadUsagePrintsTheProblemAndItsOwnUsage() throws {
        let daemonPage = "[--mpv-ipc-socket"
        for (tool, arguments) in [("simulate", ["--for", "1h"]), ("plays", ["verify", "--no-such-flag"]), ("beacons", ["status", "--bogus"]),
                                  ("ads-check", ["--bogus"]), ("schedule-check", []), ("manual", ["nothing.9"])] {
            let result = try runProcess(Executables.adplayerd, [tool] + arguments, mergeErrors: false)
            let errors = String(decoding: result.errors, as: UTF8.self)
            XCTAssertEqual(result.status, 2, "\(tool): \(errors)")
            let lines = errors.split(separator: "\n", omittingEmptySubsequences: false)
            XCTAssertTrue(lines.first?.hasPrefix("adplayerd \(tool): ") == true, "\(tool): the problem first: \(errors)")
            XCTAssertTrue(errors.contains("usage: adplayerd \(tool)"), "\(tool): its usage: \(errors)")
            XCTAssertFalse(errors.contains(daemonPage), "\(tool): the daemon's page printed: \(errors)")
            XCTAssertEqual(errors.components(separatedBy: "usage: adplayerd \(tool)").count - 1, 1, "\(tool): the usage once: \(errors)")

            let help = try runProcess(Executables.adplayerd, [tool, "--help"], mergeErrors: false)
            XCTAssertEqual(help.status, 0, tool)
            XCTAssertTrue(String(decoding: help.output, as: UTF8.self).hasPrefix("usage: adplayerd \(tool)"), tool)
        }
        // The daemon's own: the flag named, exit 2.
        let daemon = try runProcess(Executables.adplayerd, ["--no-such-flag"], mergeErrors: false)
        XCTAssertEqual(daemon.status, 2)
        XCTAssertEqual(String(decoding: daemon.errors, as: UTF8.self), "adplayerd: command line: unknown option --no-such-flag\n")
    }

    /// Paths as a person types them: relative to the working folder, for every tool.
    func testToolsTakePathsRelativeToTheWorkingFolder() throws {
        let scratch = FileManager.default.temporaryDirectory.appendingPathComponent("relative-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: scratch) }
        try FileManager.default.copyItem(atPath: try Media.path("catalog"), toPath: scratch.appendingPathComponent("catalog").path)
        try FileManager.default.createDirectory(at: scratch.appendingPathComponent("lib"), withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: try Media.path("episode-1.mp4"), toPath: scratch.appendingPathComponent("lib/episode-1.mp4").path)
        // The daemon's own file keeps absolute paths (docs/configuration.md); the tools' flags need not.
        try "library = \(scratch.appendingPathComponent("lib").path)\n".write(to: scratch.appendingPathComponent("box.conf"), atomically: true, encoding: .utf8)
        func run(_ arguments: [String]) throws -> (status: Int32, output: String) {
            let result = try runProcess(Executables.adplayerd, arguments, directory: scratch)
            return (result.status, String(decoding: result.output, as: UTF8.self))
        }
        let check = try run(["check-config", "--config", "box.conf"])
        XCTAssertEqual(check.status, 0, check.output)
        let ads = try run(["ads-check", "catalog"])
        XCTAssertEqual(ads.status, 0, ads.output)
        XCTAssertTrue(ads.output.contains("catalog (catalog)"), ads.output)
        let simulate = try run(["simulate", "--library", "lib", "--ads", "catalog", "--from", "2026-12-07T00:00:00Z", "--for", "1m",
                                "--out", "sim", "--keep-state", "kept", "--send-beacons"])
        XCTAssertEqual(simulate.status, 0, simulate.output)
        XCTAssertTrue(FileManager.default.fileExists(atPath: scratch.appendingPathComponent("sim/summary.txt").path), simulate.output)
        let export = try run(["plays", "export", "--state-dir", "kept", "--format", "dooh-csv", "--output", "plays.csv"])
        XCTAssertEqual(export.status, 0, export.output)
        let verify = try run(["plays", "verify", "plays.csv"])
        XCTAssertEqual(verify.status, 0, verify.output)
        let state = try run(["plays", "verify", "--state-dir", "kept"])
        XCTAssertEqual(state.status, 0, state.output)
        let beacons = try run(["beacons", "status", "--state-dir", "kept"])
        XCTAssertEqual(beacons.status, 0, beacons.output)
    }

    /// `plays verify` in a shell: `adplayerd plays: …`, no `<3>`; the same with stderr the
    /// journal's stream (`$JOURNAL_STREAM` naming its device and inode): `<3>adplayerd plays: …`.
    func testStderrCarriesAPriorityOnlyOnTheJournalsStream() throws {
        let missing = "/nonexistent-\(UUID().uuidString.prefix(8))"
        func verify(journal: Bool) throws -> String {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Executables.adplayerd)
            process.arguments = ["plays", "verify", "--state-dir", missing]
            let pipe = Pipe()
            var environment = ProcessInfo.processInfo.environment
            environment["JOURNAL_STREAM"] = nil
            if journal {
                var info = stat()
                XCTAssertEqual(fstat(pipe.fileHandleForWriting.fileDescriptor, &info), 0)
                environment["JOURNAL_STREAM"] = "\(info.st_dev):\(info.st_ino)"
            }
            process.environment = environment
            process.standardError = pipe
            process.standardOutput = FileHandle.nullDevice
            try process.run()
            try pipe.fileHandleForWriting.close()
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            XCTAssertEqual(process.terminationStatus, 1)
            return String(decoding: data, as: UTF8.self)
        }
        let plain = try verify(journal: false)
        XCTAssertTrue(plain.hasPrefix("adplayerd plays: \(missing)"), plain)
        XCTAssertFalse(plain.contains("<3>") || plain.contains("<4>"), plain)
        let journal = try verify(journal: true)
        XCTAssertTrue(journal.hasPrefix("<3>adplayerd plays: \(missing)"), journal)
    }
}
