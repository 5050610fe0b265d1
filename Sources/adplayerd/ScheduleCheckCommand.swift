import AdPlayerDaemon
import AdRuntime
import Bounds
import ControlProtocol
import Foundation
import MpvPlayerAdapter

/// `adplayerd schedule-check FILE [--at TIME] [--for LENGTH]` (issue 37): what the schedule
/// will play, item by item with its local times, worked out on virtual time by the code the
/// daemon runs (`ScheduleState`, `ScheduleSimulation`), each file as long as FFmpeg reads it
/// (an image for its `seconds`). The library and the time zone are the configuration's
/// (`--config FILE`, or `--library DIR`… and `--timezone ZONE`). Exit 0, 1 when the schedule
/// does not load (every problem named), 2 on bad usage.
struct ScheduleCheckCommand {
    static let usage = """
        usage: adplayerd schedule-check FILE [--at TIME] [--for LENGTH] [--config FILE] [--library DIR]... [--timezone ZONE] [--json]
          what FILE's schedule plays from TIME (ISO 8601 or seconds since 1970; default now) for LENGTH
          (3600s, 90m, 24h; default 24h), item by item
        """

    let arguments: [String]

    func run() throws -> Int32 {
        let parsed = try CommandLineArguments(arguments, spec: ["at": .value, "for": .value, "config": .value, "library": .value,
                                                                "timezone": .value, "json": .flag])
        guard parsed.positional.count == 1 else { throw UsageError(Self.usage) }
        var configuration = Configuration()
        if let file = parsed.value("config") {
            configuration = try Configuration.load(arguments: ["--config", file])
        }
        let libraries = parsed.values("library")
        if !libraries.isEmpty { configuration.library = libraries }
        if let zone = parsed.value("timezone") {
            guard let timeZone = TimeZone(identifier: zone) else { throw UsageError("--timezone: \(zone) is not a time zone (Europe/Paris)") }
            configuration.timeZone = timeZone
        }
        let at: Date
        if let text = parsed.value("at") {
            guard let seconds = Double(text) ?? ISO8601.parse(text) else { throw UsageError("--at: \(text) is not ISO 8601 or seconds since 1970") }
            at = Date(timeIntervalSince1970: seconds)
        } else {
            at = Date()
        }
        let length: Double
        do {
            length = try Seconds.parseLength(parsed.value("for") ?? "24h", .span, field: "--for")
        } catch {
            throw UsageError("\(error)")
        }
        let path = parsed.positional[0]
        let resolved: ResolvedSchedule
        do {
            resolved = try ScheduleLoader.load(path: path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path,
                                               library: configuration.library, timeZone: configuration.timeZone, measure: { MediaProbe.duration($0) })
        } catch {
            FileHandle.standardError.write(Data(("adplayerd schedule-check: \(path):\n  " + error.problems.joined(separator: "\n  ") + "\n").utf8))
            return 1
        }
        var lengths: [String: Double?] = [:]
        let state = ScheduleState(resolved, timeline: ScheduleTimeline.compute(resolved.schedule, from: at), now: at)
        let entries = ScheduleSimulation.run(state, from: at, seconds: length) { file in
            if let known = lengths[file] { return known }
            let probed = MediaProbe.duration(file)
            lengths[file] = probed
            return probed
        }
        if parsed.flag("json") {
            for entry in entries {
                let line: JSONValue = ["start": .string(ISO8601.format(entry.start.timeIntervalSince1970)),
                                       "end": .string(ISO8601.format(entry.end.timeIntervalSince1970)),
                                       "path": .string(entry.pick.path), "rule": .string(entry.pick.rule.kind.rawValue), "id": .string(entry.pick.rule.id),
                                       "from": entry.pick.start.map { .number($0) } ?? .null, "cut": .bool(entry.cut)]
                print(line.text)
            }
        } else {
            print("schedule \(path) in \(configuration.timeZone.identifier), from \(ISO8601.format(at.timeIntervalSince1970)) for \(String(format: "%g", length)) s:")
            for entry in entries { print(OneLine.escape(ScheduleSimulation.describe(entry, timeZone: configuration.timeZone))) }
        }
        return 0
    }
}
