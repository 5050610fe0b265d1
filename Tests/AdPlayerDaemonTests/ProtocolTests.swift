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
    }

    /// The client's encoding of each request is what the daemon decodes.
    func testRequestsRoundTrip() throws {
        let requests: [Request] = [.status(queue: false), .status(queue: true), .open(path: "/a b.mp4", contentID: "ep-1", start: 3.5), .queue(paths: ["/a", "/b"]),
                                   .seek(.to(10)), .seek(.by(-5)), .speed(1.5), .loop(true), .closeAd, .subscribe(events: ["ad.*"]),
                                   .subscribe(events: nil), .metrics, .plays(since: nil), .plays(since: 1_800_000_000.5), .version]
        for (index, request) in requests.enumerated() {
            let decoded = try Commands.decode(try JSONValue.parse(request.json(id: Int64(index)).line())).get()
            XCTAssertEqual(decoded.request, request)
            XCTAssertEqual(decoded.id, .int(Int64(index)))
        }
    }
}
