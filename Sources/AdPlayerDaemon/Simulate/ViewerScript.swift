import ControlProtocol
import Foundation

/// What the simulated viewer does (`--viewer SCRIPT.json`, docs/simulate.md): steps at
/// simulated times (seconds from `--from`, `HH:MM:SS`, or an ISO 8601 wall time), optionally
/// again `every` so many seconds, or when an episode's content reaches a position. Each step
/// is one of the daemon's commands, run through the command table as a client's would be.
///
///     {"steps": [
///       {"at": "00:10:00", "do": "pause", "for": 45},
///       {"at": 3600, "every": 3600, "do": "background", "for": 20},
///       {"content": 30, "episode": 2, "do": "seek", "to": 300},
///       {"content": 3, "do": "skip"}
///     ]}
public struct ViewerScript: Sendable, Equatable {
    public enum Trigger: Sendable, Equatable {
        /// Seconds after the start of the simulation, again every `every` seconds when given.
        case time(Double, every: Double?)
        /// When the content of an item reaches `position` (each item once; only the `episode`th
        /// episode started, counting from 1, when given).
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
            let known: Set<String> = ["at", "every", "content", "episode", "do", "for", "to", "by", "value"]
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
            guard case .string(let verb)? = step["do"] else { throw UsageError("\(field).do: expected a command (\(verbs.joined(separator: ", ")))") }
            let action = try Self.action(verb, step, field: field)
            script.steps.append(Step(trigger: trigger, action: action, label: verb))
        }
        return script
    }

    static let verbs = ["pause", "play", "toggle", "seek", "skip", "close-ad", "stop", "next", "previous", "background", "foreground", "speed"]

    private static func action(_ verb: String, _ step: [String: JSONValue], field: String) throws -> Action {
        var holding: Double?
        if let value = step["for"] {
            holding = try number(value, field: "\(field).for", range: 0.001...Seconds.Bounds.span.maximum)
        }
        func only(_ request: Request) throws -> Action {
            if holding != nil { throw UsageError("\(field).for: only pause and background last a while") }
            return .command(request)
        }
        switch verb {
        case "pause": return holding.map { .holding(.pause, undo: .play, seconds: $0) } ?? .command(.pause)
        case "background": return holding.map { .holding(.background, undo: .foreground, seconds: $0) } ?? .command(.background)
        case "play": return try only(.play)
        case "toggle": return try only(.toggle)
        case "skip": return try only(.skip)
        case "close-ad": return try only(.closeAd)
        case "stop": return try only(.stop)
        case "next": return try only(.next)
        case "previous": return try only(.previous)
        case "foreground": return try only(.foreground)
        case "speed":
            guard let value = step["value"] else { throw UsageError("\(field).value: speed needs a value (0.01 to 100)") }
            return try only(.speed(try number(value, field: "\(field).value", range: 0.01...100)))
        case "seek":
            switch (step["to"], step["by"]) {
            case (let to?, nil): return try only(.seek(.to(try number(to, field: "\(field).to", range: 0...Seconds.Bounds.position.maximum))))
            case (nil, let by?):
                let limit = Seconds.Bounds.position.maximum
                return try only(.seek(.by(try number(by, field: "\(field).by", range: -limit...limit))))
            default: throw UsageError("\(field): seek needs \"to\" or \"by\" (seconds)")
            }
        default:
            throw UsageError("\(field).do: \"\(OneLine.escape(verb))\" is not one of \(verbs.joined(separator: ", "))")
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
