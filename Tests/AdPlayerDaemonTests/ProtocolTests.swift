import AdPlayerDaemon
import AdRuntime
import AdSources
import AdTestSupport
import AdTracking
import ControlProtocol
import Foundation
import XCTest

/// The control protocol's one module: requests decoded and validated for every command,
/// exact integer ids, JSON read and written strictly, and docs/protocol.md in step with it.
final class ProtocolTests: XCTestCase {
    private func decode(_ line: String) -> Result<Envelope, Commands.Failure> {
        switch Result(catching: { try JSONValue.parse(line) }) {
        case .success(let value): return Commands.decode(value)
        case .failure(let error): return .failure(Commands.Failure(id: .null, error: .malformed("\(error)")))
        }
    }

    private func code(_ line: String) -> ErrorCode? {
        if case .failure(let failure) = decode(line) { return failure.error.code }
        return nil
    }

    /// Every command goes through the same checks — `subscribe` too.
    func testEveryRequestIsValidatedTheSameWay() {
        for command in Commands.all.map(\.name) {
            XCTAssertEqual(code(#"{"id": "x", "cmd": "\#(command)"}"#), .malformed, command)
            XCTAssertEqual(code(#"{"id": 1.5, "cmd": "\#(command)"}"#), .malformed, command)
            XCTAssertEqual(code(#"{"id": 1, "cmd": "\#(command)", "args": 5}"#), .malformed, command)
            XCTAssertEqual(code(#"{"id": 1, "cmd": "\#(command)", "args": {"bogus": 1}}"#), .badArgs, command)
        }
        XCTAssertEqual(code(#"{"id": 1, "cmd": "subscribe", "args": {"events": "ad.*"}}"#), .badArgs)
        XCTAssertEqual(code(#"{"id": 1, "cmd": "subscribe", "args": {"events": [1]}}"#), .badArgs)
        XCTAssertEqual(code(#"[1]"#), .malformed)
        XCTAssertEqual(code(#"{"id": 1}"#), .malformed)
        XCTAssertEqual(code(#"{"id": 1, "cmd": "rm -rf"}"#), .unknownCommand)
        XCTAssertEqual(try decode(#"{"cmd": "subscribe", "args": {"events": ["ad.*", "player.paused"]}}"#).get().request,
                       .subscribe(events: ["ad.*", "player.paused"]))
    }

    /// Arguments are bounded where they are decoded.
    func testArgumentsAreBounded() throws {
        XCTAssertEqual(code(#"{"cmd": "seek", "args": {"to": -3}}"#), .badArgs)
        XCTAssertEqual(code(#"{"cmd": "seek", "args": {"to": 1, "by": 1}}"#), .badArgs)
        XCTAssertEqual(code(#"{"cmd": "seek", "args": {"to": 1e300}}"#), .badArgs)
        XCTAssertEqual(code(#"{"cmd": "speed", "args": {"value": 0}}"#), .badArgs)
        XCTAssertEqual(code(#"{"cmd": "open", "args": {"path": "relative.mp4"}}"#), .badArgs)
        XCTAssertEqual(code(#"{"cmd": "open", "args": {"path": "/a.mp4", "content_id": "a\nb"}}"#), .badArgs)
        XCTAssertEqual(code(#"{"cmd": "queue", "args": {"paths": []}}"#), .badArgs)
        XCTAssertEqual(code(#"{"cmd": "loop", "args": {"on": "yes"}}"#), .badArgs)
        XCTAssertEqual(try decode(#"{"cmd": "seek", "args": {"by": -2.5}}"#).get().request, .seek(.by(-2.5)))
        XCTAssertEqual(try decode(#"{"cmd": "open", "args": {"path": "/a.mp4", "start": 12}}"#).get().request,
                       .open(path: "/a.mp4", contentID: nil, start: 12))
    }

    /// An id is echoed exactly: integers above 2^53 included; what does not fit in 64 bits is refused.
    func testIntegerIdsAreExact() throws {
        let big: Int64 = 9_007_199_254_740_993   // 2^53 + 1: a Double cannot hold it
        let envelope = try decode(#"{"id": \#(big), "cmd": "version"}"#).get()
        XCTAssertEqual(envelope.id, .int(big))
        XCTAssertEqual(String(decoding: Reply.ok(envelope.id, [:]).line(), as: UTF8.self), #"{"id":9007199254740993,"ok":true,"result":{}}"# + "\n")
        XCTAssertEqual(try decode(#"{"id": \#(Int64.max), "cmd": "version"}"#).get().id, .int(Int64.max))
        XCTAssertEqual(code(#"{"id": 9223372036854775808, "cmd": "version"}"#), .malformed)
        XCTAssertEqual(code(#"{"id": 1e3, "cmd": "version"}"#), .malformed)
    }

    /// JSON is read strictly and written so that it reads back the same.
    func testJSONReadsStrictlyAndWritesWhatItReads() throws {
        for bad in ["{", "[1,]", "{\"a\" 1}", "01", "1.", "\"\\x\"", "\"\u{01}\"", "nul", "{} {}", "\"\\ud800\"",
                    String(repeating: "[", count: 100) + String(repeating: "]", count: 100)] {
            XCTAssertThrowsError(try JSONValue.parse(bad), bad)
        }
        let value: JSONValue = ["s": "a\"b\\c\n\u{01}é\u{2028}😀", "n": -1.25, "i": .int(-42), "b": true, "z": .null, "a": [1, 2.5, "x"]]
        XCTAssertEqual(try JSONValue.parse(value.line()), value)
        XCTAssertEqual(try JSONValue.parse(#""\ud83d\ude00 \u00e9""#), "😀 é")
        XCTAssertEqual(JSONValue.number(.infinity).text, "null")
        XCTAssertFalse(value.line().dropLast().contains(10), "one line")
    }

    /// docs/protocol.md lists exactly the commands, events and error codes the code has.
    func testTheProtocolDocumentListsExactlyWhatTheCodeHas() throws {
        let text = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/protocol.md"), encoding: .utf8)
        func firstColumn(of heading: String) -> Set<String> {
            guard let start = text.range(of: "## \(heading)\n") else { return [] }
            let section = text[start.upperBound...].prefix { _ in true }
            let end = section.range(of: "\n## ")?.lowerBound ?? section.endIndex
            var names = Set<String>()
            for line in section[..<end].split(separator: "\n") where line.hasPrefix("| `") {
                let cell = line.dropFirst(2).prefix { $0 != "|" }
                for name in cell.split(separator: ",") {
                    let trimmed = name.trimmingCharacters(in: .whitespaces)
                    if trimmed.hasPrefix("`"), trimmed.hasSuffix("`") { names.insert(String(trimmed.dropFirst().dropLast())) }
                }
            }
            return names
        }
        XCTAssertEqual(firstColumn(of: "Commands"), Set(Commands.all.map(\.name)))
        // Each row of the commands' table: its tier, and every argument the command takes, named.
        let rest = text[text.range(of: "## Commands\n")!.upperBound...]
        let commands = rest[..<(rest.range(of: "\n## ")?.lowerBound ?? rest.endIndex)]
        for line in commands.split(separator: "\n") where line.hasPrefix("| `") {
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            for name in cells[1].split(separator: ",").map({ $0.trimmingCharacters(in: .whitespaces).trimmingCharacters(in: CharacterSet(charactersIn: "`")) }) {
                guard let command = Commands.named(name) else { continue }
                XCTAssertEqual(cells[2], command.tier.name, "the tier of \(name) in docs/protocol.md")
                for argument in command.parameters.all { XCTAssertTrue(cells[3].contains("`\(argument.name)`"), "\(name)'s argument \(argument.name)") }
            }
        }
        XCTAssertEqual(firstColumn(of: "Events"), Set(EventName.allCases.map(\.rawValue)))
        XCTAssertEqual(firstColumn(of: "Error codes"), Set(ErrorCode.allCases.map(\.rawValue)))
        XCTAssertTrue(text.contains("version \(ControlProtocol.version)"))
    }

    /// docs/ads.md names every macro and the cache's figures, docs/reporting.md every metric and
    /// drop reason the code has, with the values the code uses; docs/configuration.md every
    /// configuration key.
    func testTheReportingAndConfigurationDocumentsListWhatTheCodeHas() throws {
        let reporting = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/reporting.md"), encoding: .utf8)
        let ads = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/ads.md"), encoding: .utf8)
        for macro in Macro.allCases { XCTAssertTrue(ads.contains("`[\(macro.rawValue)]`"), "macro \(macro.rawValue)") }
        XCTAssertTrue(ads.contains("cache-max-mib` (default \(CreativeCache.defaultMaxBytes >> 20) MiB)"))
        XCTAssertTrue(ads.contains("(16 a kind") && ads.contains("within 10 minutes"))
        XCTAssertEqual(VASTClient.Configuration().prefetchLifetime, 600)
        for name in Metrics.help.keys { XCTAssertTrue(reporting.contains("| `\(name)` | \(Metrics.help[name]!.type) |"), "metric \(name)") }
        for reason in DropReason.allCases { XCTAssertTrue(reporting.contains("`\(reason.rawValue)`"), "drop reason \(reason.rawValue)") }
        for id in [LogMessageID.adShown, .adError, .beaconDropped] { XCTAssertTrue(reporting.contains("`\(id.rawValue)`"), "MESSAGE_ID \(id)") }
        XCTAssertTrue(reporting.contains("over 64 URLs for one event, or over 256 for one ad"))
        XCTAssertEqual(TrackingReporter.maxURLsPerEvent, 64)
        XCTAssertEqual(TrackingReporter.maxURLsPerAd, 256)
        XCTAssertTrue(reporting.contains("over \(BeaconURL.maxBytes / 1024) KiB"))
        let defaults = BeaconOutbox.Configuration()
        XCTAssertTrue(reporting.contains("| beacons waiting | \(defaults.maxRows.formatted(.number.grouping(.automatic).locale(Locale(identifier: "en_US")))) |"))
        XCTAssertTrue(reporting.contains("| bytes of URLs waiting | \(defaults.maxBytes >> 20) MiB |"))
        XCTAssertTrue(reporting.contains("| a beacon's age | \(Int(defaults.maxAge / 86_400)) days"))
        XCTAssertTrue(reporting.contains("(default \(Int(defaults.timeSyncWait)) s of run time"))

        let configuration = try String(contentsOf: repositoryRoot.appendingPathComponent("docs/configuration.md"), encoding: .utf8)
        for key in Configuration.keys { XCTAssertTrue(configuration.contains("`\(key)`"), "configuration key \(key)") }
        // `adplayerd --help` is made from the keys: every one, as a flag.
        let usage = Configuration.flagsUsage().joined(separator: " ")
        for key in Configuration.keys { XCTAssertTrue(usage.contains("[--\(key)"), "adplayerd --help: --\(key)") }
        XCTAssertTrue(usage.contains("[--mpris]") && usage.contains("[--library DIR]..."), usage)
    }

    /// One example of every command (several for some), by name: the round trips below
    /// cover the whole table, and a new command without an example fails them.
    static let examples: [String: [Request]] = [
        "audio-devices": [.audioDevices], "audio-track": [.audioTrack(.id(2)), .audioTrack(.auto)], "background": [.background],
        "clear": [.clear], "close-ad": [.closeAd], "skip": [.skip], "display": [.display(.off), .display(.on), .display(.auto)], "foreground": [.foreground], "health": [.health],
        "identify": [.identify(seconds: 30), .identify(seconds: 5.5)], "jump": [.jump(index: 3)], "logs": [.logs(lines: 100), .logs(lines: 1)], "loop": [.loop(true), .loop(false)],
        "metrics": [.metrics], "move": [.move(from: 0, to: 4)], "mute": [.mute(true), .mute(nil)], "next": [.next],
        "open": [.open(path: "/a b.mp4", contentID: "ep-1", start: 3.5), .open(path: "/c.mp4", contentID: nil, start: nil)],
        "pause": [.pause], "play": [.play], "plays": [.plays(since: nil), .plays(since: 1_800_000_000.5),
                                                        .plays(since: nil, afterRow: 41, limit: 10), .plays(since: nil, limit: 20, newest: true)],
        "previous": [.previous], "reload": [.reload],
        "queue": [.queue(paths: ["/a", "/b"])], "remove": [.remove(index: 0)], "repeat": [.setRepeat(.all), .setRepeat(.one)],
        "screenshot": [.screenshot(withAds: true), .screenshot(withAds: false), .screenshot(withAds: true, inline: true)], "seek": [.seek(.to(10)), .seek(.by(-5))],
        "shuffle": [.shuffle(true)], "speed": [.speed(1.5)], "status": [.status(queue: false), .status(queue: true)], "stop": [.stop],
        "subscribe": [.subscribe(events: ["ad.*"]), .subscribe(events: nil)], "subtitle-track": [.subtitleTrack(.off), .subtitleTrack(.id(1))],
        "toggle": [.toggle], "tracks": [.tracks], "version": [.version], "volume": [.volume(.to(40)), .volume(.by(-5))],
        "schedule": [.schedule], "schedule-auto": [.scheduleAuto],
        "takeover": [.takeover(target: "/promo.mp4", seconds: 600, priority: 50, by: "web page (admin role)"),
                     .takeover(target: "lunch", seconds: nil, priority: nil, by: nil)],
        "takeover-end": [.takeoverEnd(by: "mqtt (adplayerd/g/lobby/cmd)"), .takeoverEnd(by: nil)],
    ]

    /// The client's encoding of every request is what the daemon decodes: every command of the
    /// table, each example carried under its own row.
    func testEveryCommandRoundTrips() throws {
        XCTAssertEqual(Set(Self.examples.keys), Set(Commands.all.map(\.name)), "an example for every command, and none for a command that is not")
        var id: Int64 = 0
        for (name, requests) in Self.examples {
            for request in requests {
                id += 1
                XCTAssertEqual(request.name, name)
                XCTAssertEqual(Commands.row(of: request)?.name, name)
                let decoded = try Commands.decode(try JSONValue.parse(request.json(id: id).line())).get()
                XCTAssertEqual(decoded.request, request, name)
                XCTAssertEqual(decoded.id, .int(id))
            }
        }
    }

    /// The table is sorted by name, one row a name, one `adplayerctl` word a row; what runs on
    /// the socket is what the socket answers.
    func testTheTableIsSortedAndItsRowsAreConsistent() {
        let names = Commands.all.map(\.name)
        XCTAssertEqual(names, names.sorted())
        XCTAssertEqual(Set(names).count, names.count)
        XCTAssertEqual(Set(Commands.all.map(\.commandLine.word)).count, names.count)
        XCTAssertEqual(Set(Commands.all.filter { $0.venue == .socket }.map(\.name)), ["subscribe", "version"])
        XCTAssertEqual(Set(Commands.all.filter { $0.tier == .admin }.map(\.name)), ["clear", "reload", "takeover", "takeover-end"])
        XCTAssertEqual(Set(Commands.all.filter { $0.tier == .read }.map(\.name)),
                       ["audio-devices", "health", "logs", "metrics", "plays", "schedule", "status", "subscribe", "tracks", "version"])
        for command in Commands.all {
            XCTAssertFalse(command.commandLine.help.isEmpty, command.name)
            XCTAssertTrue(command.commandLine.synopsis.hasPrefix(command.commandLine.word), command.name)
        }
    }

    /// Each tier may run its commands and those below, and no others; the refusal says why.
    func testTiersRefuseWhatIsAboveThem() throws {
        for command in Commands.all {
            let request = try XCTUnwrap(Self.examples[command.name]?.first)
            for tier in Tier.allCases {
                let refusal = Commands.refusal(request, tier: tier)
                XCTAssertEqual(refusal == nil, tier >= command.tier, "\(command.name) for \(tier)")
                if let refusal {
                    XCTAssertEqual(refusal.code, .forbidden)
                    XCTAssertTrue(refusal.message.contains(command.tier.name), refusal.message)
                }
            }
        }
        XCTAssertEqual(Tier(name: "control"), .control)
        XCTAssertNil(Tier(name: "root"))
    }

    /// `adplayerctl`'s words for each command make the request its row builds, its options
    /// are its own, and its help lists every command.
    func testTheCommandLineFormsComeFromTheTable() throws {
        func parse(_ words: [String]) throws -> Request {
            let arguments = try CommandLineArguments(words, spec: Commands.commandLineOptions)
            let input = CommandLineInput(words: Array(arguments.positional.dropFirst()), arguments: arguments, directory: "/media")
            return try Commands.parse(commandLine: input, word: arguments.positional[0])
        }
        let who = "adplayerctl (user \(ProcessInfo.processInfo.environment["USER"] ?? String(getuid())))"
        let lines: [([String], Request)] = [
            (["audio-devices"], .audioDevices), (["audio-track", "2"], .audioTrack(.id(2))), (["audio-track", "auto"], .audioTrack(.auto)),
            (["background"], .background), (["clear"], .clear), (["close-ad"], .closeAd), (["skip"], .skip), (["foreground"], .foreground),
            (["display", "off"], .display(.off)), (["display", "auto"], .display(.auto)),
            (["health"], .health), (["identify"], .identify(seconds: 30)), (["identify", "10"], .identify(seconds: 10)),
            (["logs"], .logs(lines: 100)), (["logs", "5"], .logs(lines: 5)), (["reload"], .reload),
            (["plays", "--after", "7", "--limit", "3"], .plays(since: nil, afterRow: 7, limit: 3)),
            (["jump", "4"], .jump(index: 3)), (["loop", "on"], .loop(true)), (["metrics"], .metrics), (["move", "1", "5"], .move(from: 0, to: 4)),
            (["mute"], .mute(nil)), (["mute", "on"], .mute(true)), (["next"], .next),
            (["open", "a b.mp4", "--content-id", "ep-1", "--start", "3.5"], .open(path: "/media/a b.mp4", contentID: "ep-1", start: 3.5)),
            (["pause"], .pause), (["play"], .play), (["plays", "--since", "1800000000.5"], .plays(since: 1_800_000_000.5)),
            (["previous"], .previous), (["queue", "/a", "b"], .queue(paths: ["/a", "/media/b"])), (["remove", "1"], .remove(index: 0)),
            (["repeat", "all"], .setRepeat(.all)), (["screenshot", "--video-only"], .screenshot(withAds: false)),
            (["seek", "10"], .seek(.to(10))), (["seek", "-5"], .seek(.by(-5))), (["shuffle", "on"], .shuffle(true)), (["speed", "1.5"], .speed(1.5)),
            (["status"], .status(queue: true)), (["stop"], .stop), (["events", "ad.*"], .subscribe(events: ["ad.*"])), (["events"], .subscribe(events: nil)),
            (["subtitle-track", "off"], .subtitleTrack(.off)), (["toggle"], .toggle), (["tracks"], .tracks), (["version"], .version),
            (["volume", "40"], .volume(.to(40))), (["volume", "-5"], .volume(.by(-5))),
            (["schedule"], .schedule), (["schedule", "auto"], .scheduleAuto), (["schedule-auto"], .scheduleAuto),
            (["takeover", "promo.mp4", "--for", "90m", "--priority", "50"], .takeover(target: "/media/promo.mp4", seconds: 5400, priority: 50, by: who)),
            (["takeover", "lunch"], .takeover(target: "lunch", seconds: nil, priority: nil, by: who)),
            (["takeover", "end"], .takeoverEnd(by: who)), (["takeover-end"], .takeoverEnd(by: nil)),
        ]
        XCTAssertEqual(Set(lines.map { $0.1.name }), Set(Commands.all.map(\.name)), "a command line for every command")
        for (words, request) in lines { XCTAssertEqual(try parse(words), request, words.joined(separator: " ")) }
        for bad in [["pause", "now"], ["seek"], ["loop", "maybe"], ["jump", "0"], ["status", "--since", "1"], ["screenshot", "--start", "1"],
                    ["audio-track", "off"], ["rm"], ["logs", "0"], ["logs", "1001"],
                    ["identify", "0"], ["plays", "--limit", "0"], ["plays", "--after", "-1"], ["health", "now"],
                    ["schedule", "manual"], ["takeover"], ["takeover", "a", "b"], ["takeover", "x", "--for", "soon"], ["takeover", "x", "--priority", "high"]] {
            XCTAssertThrowsError(try parse(bad), bad.joined(separator: " "))
        }
        for command in Commands.all { XCTAssertTrue(Commands.commandLineHelp.contains("  " + command.commandLine.synopsis), command.name) }
    }

    /// The module edges: the protocol knows no ads runtime (adplayerctl links the protocol
    /// alone), the daemon library knows no mpv (these tests build without libmpv); the
    /// protocol's ad kinds are the runtime's.
    func testModuleEdges() throws {
        func imports(_ folder: String) throws -> Set<String> {
            let root = repositoryRoot.appendingPathComponent("Sources/\(folder)")
            var found = Set<String>()
            for case let file as String in FileManager.default.enumerator(atPath: root.path)! where file.hasSuffix(".swift") {
                let text = try String(contentsOf: root.appendingPathComponent(file), encoding: .utf8)
                for line in text.split(separator: "\n") where line.hasPrefix("import ") || line.hasPrefix("@_exported import ") {
                    found.insert(String(line.split(separator: " ").last!))
                }
            }
            return found
        }
        let protocolImports = try imports("ControlProtocol"), clientImports = try imports("adplayerctl"), daemonImports = try imports("AdPlayerDaemon")
        // The protocol and adplayerctl link no Foundation at all: BoundsCore and the C library.
        XCTAssertTrue(protocolImports.isSubset(of: ["BoundsCore", "Glibc", "Synchronization"]), "\(protocolImports)")
        XCTAssertTrue(clientImports.isSubset(of: ["BoundsCore", "ControlProtocol", "Glibc"]), "\(clientImports)")
        let coreImports = try imports("BoundsCore")
        XCTAssertTrue(coreImports.isSubset(of: ["Glibc", "Darwin", "Synchronization"]), "\(coreImports)")
        // The operator's programs and what they link carry FoundationEssentials, never the whole
        // Foundation with ICU (issue 47, 5: 70 MB → 23 MB each): not a module of theirs imports it,
        // and no ICU data is in their executables.
        for module in ["BoundsCore", "Bounds", "ControlProtocol", "ClientSupport", "ProcessSupport", "AdPlayerWeb", "AdPlayerFleet", "adplayerctl", "adplayerd-web", "adplayerd-mqtt"] {
            let found = try imports(module)
            XCTAssertTrue(found.isDisjoint(with: ["Foundation", "FoundationXML", "FoundationNetworking"]), "\(module) imports \(found)")
        }
        for program in ["adplayerctl", "adplayerd-web", "adplayerd-mqtt"] {
            let bytes = try Data(contentsOf: URL(fileURLWithPath: Executables.path(program)))
            XCTAssertNil(bytes.range(of: Data("icudt".utf8)), "\(program) carries ICU's data")
        }
        XCTAssertNotNil(try Data(contentsOf: URL(fileURLWithPath: Executables.adplayerd)).range(of: Data("icudt".utf8)), "the check finds ICU where it is")
        XCTAssertFalse(daemonImports.contains("MpvPlayerAdapter") || daemonImports.contains("CMpv"), "\(daemonImports)")
        XCTAssertEqual(ControlProtocol.adKinds, AdKind.allCases.map(\.protocolName))
    }
}
