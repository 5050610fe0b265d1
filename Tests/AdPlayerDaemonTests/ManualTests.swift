import AdPlayerDaemon
import AdTestSupport
import ControlProtocol
import Foundation
import XCTest

/// The man pages and adplayerctl's bash completion (issue 47, 3), made by `adplayerd manual`
/// from the command table and the configuration's keys: every command and key in them, the
/// pages read clean by man (as lintian reads them), the completion offering what the table says.
final class ManualTests: XCTestCase {
    var scratch: URL!

    override func setUpWithError() throws {
        scratch = FileManager.default.temporaryDirectory.appendingPathComponent("manual-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: scratch, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: scratch) }

    func page(_ name: String, docs: String? = nil) throws -> String {
        let result = try runProcess(Executables.adplayerd, ["manual", name, "--docs", docs ?? repositoryRoot.appendingPathComponent("docs").path], mergeErrors: false)
        XCTAssertEqual(result.status, 0, String(decoding: result.errors, as: UTF8.self))
        return String(decoding: result.output, as: UTF8.self)
    }

    static func roffName(_ text: String) -> String { text.replacingOccurrences(of: "-", with: "\\-") }

    func testTheManPagesNameEveryCommandAndKeyAndManReadsThemClean() throws {
        let control = try page("adplayerctl.1")
        for command in Commands.all {
            XCTAssertTrue(control.contains(".TP\n\\fB" + Self.roffName(command.commandLine.word)), "adplayerctl(1): \(command.commandLine.word)")
            XCTAssertTrue(control.contains("(tier: \(command.tier.name))"), "adplayerctl(1): \(command.name)'s tier")
        }
        let daemon = try page("adplayerd.8")
        let configuration = try page("adplayerd.conf.5")
        for key in Configuration.keys {
            XCTAssertTrue(daemon.contains("\\fB\\-\\-\(Self.roffName(key))\\fR"), "adplayerd(8): --\(key)")
            if key != "config" { XCTAssertTrue(configuration.contains(".TP\n\\fB\(Self.roffName(key))\\fR = "), "adplayerd.conf(5): \(key)") }
        }
        XCTAssertTrue(daemon.contains("usage: adplayerd simulate") && daemon.contains("usage: adplayerd plays export"), "adplayerd(8): the tools")
        // A key's meaning is docs/configuration.md's.
        XCTAssertTrue(configuration.contains("the screen's operating hours"), "adplayerd.conf(5): display-hours' meaning")

        // man reads them with no warning (lintian's own command).
        for (name, text) in [("adplayerctl.1", control), ("adplayerd.8", daemon), ("adplayerd.conf.5", configuration)] {
            let file = scratch.appendingPathComponent(name)
            try text.write(to: file, atomically: true, encoding: .utf8)
            let read = try runProcess("/usr/bin/man", ["--warnings", "-E", "UTF-8", "-l", "-Tutf8", "-Z", file.path],
                                      environment: ["LC_ALL": "C.UTF-8", "MANROFFSEQ": "", "MANWIDTH": "80", "PATH": "/usr/bin:/bin"], mergeErrors: false)
            XCTAssertEqual(read.status, 0, name)
            XCTAssertEqual(String(decoding: read.errors, as: UTF8.self), "", "\(name): man warns")
            XCTAssertGreaterThan(read.output.count, 1000, name)
        }
    }

    /// A key the documentation does not describe stops the pages: nothing ships without its meaning.
    func testAKeyWithoutItsRowInTheDocumentationIsRefused() throws {
        let docs = scratch.appendingPathComponent("docs")
        try FileManager.default.createDirectory(at: docs, withIntermediateDirectories: true)
        let full = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        try full.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.hasPrefix("| `timezone`") }.joined(separator: "\n")
            .write(to: docs.appendingPathComponent("configuration.md"), atomically: true, encoding: .utf8)
        let result = try runProcess(Executables.adplayerd, ["manual", "adplayerd.conf.5", "--docs", docs.path], mergeErrors: false)
        XCTAssertEqual(result.status, 2)
        XCTAssertTrue(String(decoding: result.errors, as: UTF8.self).contains("configuration.md has no row for timezone"),
                      String(decoding: result.errors, as: UTF8.self))
    }

    /// Completion in a real bash: the commands, a command's words, its options, event names,
    /// and for `open`/`queue` the files of the configuration's library (names with spaces kept).
    func testTheBashCompletionOffersWhatTheCommandTableSays() throws {
        let script = scratch.appendingPathComponent("adplayerctl.bash")
        try page("adplayerctl.bash").write(to: script, atomically: true, encoding: .utf8)
        let library = scratch.appendingPathComponent("library")
        try FileManager.default.createDirectory(at: library, withIntermediateDirectories: true)
        for name in ["episode 1.mp4", "episode-2.mkv"] { FileManager.default.createFile(atPath: library.appendingPathComponent(name).path, contents: Data()) }
        let configuration = scratch.appendingPathComponent("adplayerd.conf")
        try "library = \"\(library.path)\"\n".write(to: configuration, atomically: true, encoding: .utf8)
        let empty = scratch.appendingPathComponent("here")
        try FileManager.default.createDirectory(at: empty, withIntermediateDirectories: true)

        func complete(_ words: String...) throws -> [String] {
            let quoted = words.map { "'\($0)'" }.joined(separator: " ")
            let program = """
                source '\(script.path)'
                COMP_WORDS=(adplayerctl \(quoted)); COMP_CWORD=\(words.count); COMPREPLY=()
                _adplayerctl
                printf '%s\\n' "${COMPREPLY[@]}"
                """
            let result = try runProcess("/bin/bash", ["-c", "cd '\(empty.path)' && " + program],
                                        environment: ["ADPLAYERD_CONFIG": configuration.path, "HOME": scratch.path, "PATH": "/usr/bin:/bin"], mergeErrors: false)
            XCTAssertEqual(result.status, 0, String(decoding: result.errors, as: UTF8.self))
            return String(decoding: result.output, as: UTF8.self).split(separator: "\n").map(String.init).sorted()
        }
        XCTAssertEqual(try complete(""), Commands.all.map(\.commandLine.word).sorted())
        XCTAssertEqual(try complete("dis"), ["display"])
        XCTAssertEqual(try complete("display", ""), ["auto", "off", "on"])
        XCTAssertEqual(try complete("--socket", "/run/x.sock", "repeat", ""), ["all", "off", "one"])
        XCTAssertEqual(try complete("takeover", "e"), ["end"])
        XCTAssertEqual(try complete("events", "ad.st"), ["ad.started"])
        XCTAssertEqual(try complete("open", "--s"), ["--socket", "--start"])
        XCTAssertEqual(try complete("open", ""), [library.path + "/episode 1.mp4", library.path + "/episode-2.mkv"])
        XCTAssertEqual(try complete("queue", library.path + "/episode-"), [library.path + "/episode-2.mkv"])
        XCTAssertEqual(try complete("seek", ""), [])
    }
}
