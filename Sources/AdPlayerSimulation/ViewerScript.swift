import ControlProtocol
import Foundation

/// What the simulated viewer does (`--viewer SCRIPT.json`, docs/simulate.md): steps at
/// simulated times (seconds from `--from`, `HH:MM:SS`, or an ISO 8601 wall time), optionally
/// again `every` so many seconds, or when an item's content reaches a position. Each step is a
/// request as on the control socket — `{"cmd", "args"}`, any command of the table, decoded and
/// checked by the table itself — or the `do` shorthand for the usual ones (`pause`, `seek` with
/// `to`…, written as the same request).
///
///     {"steps": [
///       {"at": "00:10:00", "cmd": "pause", "for": 45},
///       {"at": 3600, "every": 3600, "cmd": "background", "for": 20},
///       {"content": 30, "episode": 2, "cmd": "seek", "args": {"to": 300}},
///       {"at": 7200, "cmd": "takeover", "args": {"target": "promo", "seconds": 600}},
///       {"content": 3, "do": "skip"}
///     ]}
public struct ViewerScript: Sendable, Equatable {
    public enum Trigger: Sendable, Equatable {
        /// Seconds after the start of the simulation, again every `every` seconds when given.
        case time(Double, every: Double?)
        /// When the content of an item reaches `position` (each item once — the first as every
        /// other; only the `episode`th item started, counting from 1, when given).
        case content(Double, episode: Int?)
    }

    public enum Action: Sendable, Equatable {
        case command(Request)
        /// The command, then its opposite `seconds` later (pause → play, background → foreground).
        case holding(Request, undo: Request, seconds: Double)
    }

    public struct Step: Sendable, Equatable {
        public var trigger: Trigger
        public var action: Action
        /// The step's words as written (the timeline says them).
        public var label: String
    }

    public var steps: [Step] = []

    public init() {}

    /// The most steps a script may hold (a day scripted each second would be 86 400).
    public static let maxSteps = 100_000

    /// Reads a script; `from` is the simulation's start (for wall times). Every problem is named
    /// with the step's index.
    public static func parse(_ data: Data, from: Double) throws -> ViewerScript {
        guard data.count <= 16 << 20 else { throw UsageError("--viewer: the script is over 16 MiB") }
        let json: JSONValue
        do {
            json = try JSONValue.parse(data)
        } catch {
            throw UsageError("--viewer: not JSON: \(error)")
        }
        guard case .object(let top) = json, case .array(let list)? = top["steps"] else {
            throw UsageError("--viewer: expected {\"steps\": [...]}")
        }
        guard list.count <= maxSteps else { throw UsageError("--viewer: more than \(maxSteps) steps") }
        var script = ViewerScript()
        for (index, item) in list.enumerated() {
            let field = "--viewer: steps[\(index)]"
            guard case .object(let step) = item else { throw UsageError("\(field): expected an object") }
            let known: Set<String> = ["at", "every", "content", "episode", "cmd", "args", "do", "for", "to", "by", "value"]
            if let unknown = step.keys.sorted().first(where: { !known.contains($0) }) {
                throw UsageError("\(field).\(unknown): not a field of a step (\(known.sorted().joined(separator: ", ")))")
            }
            let trigger: Trigger
            switch (step["at"], step["content"]) {
            case (let at?, nil):
                let seconds = try time(at, from: from, field: "\(field).at")
                var every: Double?
                if let value = step["every"] {
                    every = try number(value, field: "\(field).every", range: 1...Seconds.Bounds.span.maximum)
                }
                trigger = .time(seconds, every: every)
            case (nil, let content?):
                let position = try number(content, field: "\(field).content", range: 0...Seconds.Bounds.position.maximum)
                var episode: Int?
                if let value = step["episode"] {
                    episode = Int(try number(value, field: "\(field).episode", range: 1...1_000_000))
                }
                trigger = .content(position, episode: episode)
            default:
                throw UsageError("\(field): give either \"at\" (a time) or \"content\" (a position in the episode)")
            }
            let (request, label) = try Self.request(step, field: field)
            var holding: Double?
            if let value = step["for"] {
                holding = try number(value, field: "\(field).for", range: 0.001...Seconds.Bounds.span.maximum)
            }
            let action: Action
            switch (request, holding) {
            case (_, nil): action = .command(request)
            case (.pause, let seconds?): action = .holding(.pause, undo: .play, seconds: seconds)
            case (.background, let seconds?): action = .holding(.background, undo: .foreground, seconds: seconds)
            default: throw UsageError("\(field).for: only pause and background last a while")
            }
            script.steps.append(Step(trigger: trigger, action: action, label: label + (holding.map { " for \(String(format: "%g", $0)) s" } ?? "")))
        }
        return script
    }

    /// The step's request: `{"cmd", "args"}` decoded by the command table (its checks, its
    /// bounds), or the `do` shorthand written as the same request.
    private static func request(_ step: [String: JSONValue], field: String) throws -> (Request, String) {
        var command: [String: JSONValue]
        switch (step["cmd"], step["do"]) {
        case (.string(let name)?, nil):
            command = ["cmd": .string(name)]
            if let args = step["args"] { command["args"] = args }
            for key in ["to", "by", "value"] where step[key] != nil {
                throw UsageError("\(field).\(key): with \"cmd\", arguments go in \"args\"")
            }
        case (nil, .string(let verb)?):
            guard step["args"] == nil else { throw UsageError("\(field).args: with \"do\", write to, by or value (or use \"cmd\")") }
            var args: [String: JSONValue] = [:]
            switch verb {
            case "seek":
                if let to = step["to"] { args["to"] = to }
                if let by = step["by"] { args["by"] = by }
            case "speed":
                if let value = step["value"] { args["value"] = value }
            default:
                if let key = ["to", "by", "value"].first(where: { step[$0] != nil }) {
                    throw UsageError("\(field).\(key): \(verb) takes no \(key)")
                }
            }
            command = ["cmd": .string(verb), "args": .object(args)]
        default:
            throw UsageError("\(field): give \"cmd\" (a command of the control protocol, docs/protocol.md) or \"do\"")
        }
        switch Commands.decode(.object(command)) {
        case .success(let envelope):
            if case .subscribe = envelope.request { throw UsageError("\(field): subscribe: the simulation's events are its timeline") }
            return (envelope.request, command["cmd"]?.string ?? "")
        case .failure(let failure):
            throw UsageError("\(field): \(failure.error.code.rawValue): \(failure.error.message)")
        }
    }

    private static func number(_ value: JSONValue, field: String, range: ClosedRange<Double>) throws -> Double {
        let number: Double
        switch value {
        case .int(let n): number = Double(n)
        case .number(let n): number = n
        default: throw UsageError("\(field): expected a number")
        }
        guard number.isFinite, range.contains(number) else {
            throw UsageError("\(field): \(number) is not in \(String(format: "%g", range.lowerBound))…\(String(format: "%g", range.upperBound))")
        }
        return number
    }

    /// Seconds from the start: a number, `HH:MM:SS(.mmm)`, or an ISO 8601 wall time.
    private static func time(_ value: JSONValue, from: Double, field: String) throws -> Double {
        if case .string(let text) = value {
            if text.contains("T"), let wall = ISO8601.parse(text) {
                guard wall >= from else { throw UsageError("\(field): \(text) is before --from") }
                return wall - from
            }
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            if parts.count == 3, let h = Double(parts[0]), let m = Double(parts[1]), let s = Double(parts[2]),
               h >= 0, m >= 0, m < 60, s >= 0, s < 60 {
                return h * 3600 + m * 60 + s
            }
            throw UsageError("\(field): \"\(OneLine.escape(text))\" is not seconds, HH:MM:SS or an ISO 8601 time")
        }
        return try number(value, field: field, range: 0...Seconds.Bounds.span.maximum)
    }
}
