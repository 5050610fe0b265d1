import AdPlayerDaemon
import AdPlayerMpv
import AdPlayerSimulation
import AdRuntime
import AdSources
import AdSchedule
import AdTracking
import ClientSupport
import ControlProtocol
import Foundation
import MpvPlayerAdapter

/// `adplayerd simulate` (issue 38, docs/simulate.md): the daemon's ad code on simulated time
/// against a real ad server; every request and beacon recorded; the rules checked. Exit 0 when
/// every rule held, 1 when one failed, 2 on bad usage.
struct SimulateCommand {
    static let usage = """
        usage: adplayerd simulate [--config FILE] [--library DIR]... [--ads SOURCE]... [--schedule FILE]
                                  --from TIME --for DURATION [--viewer SCRIPT.json] [--seed N] [--virtual | --speed X]
                                  [--send-beacons] [--replay FILE.har] [--expect FILE.json] [--screen verified|unverified|off]
                                  [--request-wait SECONDS] [--keep-state DIR] --out DIR [--KEY VALUE]...
          plays DURATION (24h, 90m, 3600s) from TIME (ISO 8601 or seconds since 1970) on simulated time; writes
          timeline.jsonl, requests.har, plays.csv, report.xml (JUnit) and summary.txt in DIR (docs/simulate.md)
        """

    /// Our own flags; every other is a configuration key (docs/configuration.md).
    static let own: [String: CommandLineArguments.Kind] = ["from": .value, "for": .value, "viewer": .value, "seed": .value, "virtual": .flag,
                                                          "speed": .value, "send-beacons": .flag, "replay": .value, "out": .value,
                                                          "expect": .value, "screen": .value, "request-wait": .value,
                                                          "keep-state": .value]

    let arguments: [String]

    func run() throws -> Int32 {
        let (mine, rest) = Self.split(arguments, own: Self.own)
        let parsed = try CommandLineArguments(mine, spec: Self.own)
        guard parsed.positional.isEmpty else { throw UsageError("simulate takes no words but options (\(parsed.positional[0].prefix(64)))") }
        var speed: Double?
        if let text = parsed.value("speed") {
            guard !parsed.flag("virtual") else { throw UsageError("--virtual and --speed: one or the other") }
            guard let value = Double(text), value.isFinite, value >= 1, value <= 100 else {
                throw UsageError("--speed: \(text) is not a speed from 1 to 100 (mpv's limit)")
            }
            speed = value
        }
        guard let fromText = parsed.value("from"), let lengthText = parsed.value("for"), let out = parsed.value("out") else {
            throw UsageError("simulate needs --from, --for and --out")
        }
        guard let from = Double(fromText) ?? ISO8601.parse(fromText), from > 0 else {
            throw UsageError("--from: \(fromText) is not ISO 8601 (2026-12-05T06:00:00Z) or seconds since 1970")
        }
        let seconds: Double
        do {
            seconds = try Seconds.parseLength(lengthText, .span, field: "--for")
        } catch {
            throw UsageError("\(error)")
        }
        guard seconds > 0 else { throw UsageError("--for: give a length above 0") }
        var seed: UInt64 = 1
        if let text = parsed.value("seed") {
            guard let value = UInt64(text) else { throw UsageError("--seed: \(text) is not a whole number from 0 to \(UInt64.max)") }
            seed = value
        }
        let configuration: Configuration
        do {
            configuration = try Configuration.load(arguments: Self.absolute(rest))
        } catch {
            throw UsageError("\(error)")
        }
        guard !configuration.library.isEmpty || configuration.schedule != nil else { throw UsageError("simulate needs --library DIR (or a configuration with one)") }
        var viewer = ViewerScript()
        if let file = parsed.value("viewer") {
            viewer = try ViewerScript.parse(try Self.read(file, "--viewer"), from: from)
        }
        var replay: [RecordedExchange]?
        if let file = parsed.value("replay") {
            replay = try HAR.read(try Self.read(file, "--replay"))
        }
        var caps = Self.catalogCaps(configuration)
        if let file = parsed.value("expect") {
            for (id, cap) in try Self.expectations(try Self.read(file, "--expect"), timeZone: configuration.timeZone) { caps[id] = cap }
        }

        var screen = VirtualScreen.Verdict.verified
        if let text = parsed.value("screen") {
            guard let verdict = VirtualScreen.Verdict(rawValue: text) else { throw UsageError("--screen: verified, unverified or off") }
            screen = verdict
        }
        var requestWait = 1.0
        if let text = parsed.value("request-wait") {
            guard let value = Double(text), value.isFinite, value >= 0.05, value <= 60 else { throw UsageError("--request-wait: seconds from 0.05 to 60") }
            requestWait = value
        }

        try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: true)
        // The run's own state (ledger, outbox, cache): a private folder removed at the end, or
        // kept in `--keep-state DIR` (a new or empty folder) for `plays verify --state-dir DIR`.
        let work: String
        if let kept = parsed.value("keep-state") {
            work = kept.hasPrefix("/") ? kept : FileManager.default.currentDirectoryPath + "/" + kept
            try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
            guard ((try? FileManager.default.contentsOfDirectory(atPath: work)) ?? []).isEmpty else {
                throw UsageError("--keep-state: \(kept) is not empty (a run's state starts from nothing)")
            }
        } else {
            work = try Self.privateFolder(besides: out)
        }
        defer { if parsed.value("keep-state") == nil { try? FileManager.default.removeItem(atPath: work) } }

        let measure: @Sendable (String) -> Double? = { MediaProbe.duration($0) }
        let network: SimulationHTTP.Source = replay.map { .replay($0) } ?? .live(BoundedHTTP(threads: 1))
        let parts = SimulationStage.Parts(from: from, seed: seed, workFolder: work, network: network, sendBeacons: parsed.flag("send-beacons"),
                                          screen: screen, measure: measure)
        let stage = try speed.map { try Self.realStage(speed: $0, parts, requestWait: requestWait) } ?? SimulationStage.virtual(parts, requestWait: requestWait)
        var settings = Simulation.Settings(configuration: Self.simulated(configuration), from: from, seconds: seconds, out: out)
        settings.viewer = viewer
        settings.seed = seed
        settings.caps = caps
        let outcome = try Simulation(settings, stage: stage).run()
        print(outcome.summary, terminator: "")
        return outcome.passed ? 0 : 1
    }

    /// The arguments split: ours (`own`), then the configuration's — every other flag a
    /// configuration key with a value, but a switch (`--loop`).
    /// Paths given on the command line as a person types them (issue 47, 4): a relative
    /// `--library`, `--schedule`, `--state-dir`, `--config`, `--cache-dir` or `--ads` folder
    /// (not a URL) is taken from the working directory, before the configuration — which keeps
    /// absolute paths — reads it.
    static func absolute(_ rest: [String]) -> [String] {
        let keys: Set<String> = ["library", "schedule", "state-dir", "config", "cache-dir", "ads"]
        let here = FileManager.default.currentDirectoryPath
        func resolved(_ key: String, _ value: String) -> String {
            guard keys.contains(key), !value.isEmpty, !value.hasPrefix("/"), !(key == "ads" && value.contains("://")) else { return value }
            return (here as NSString).appendingPathComponent(value)
        }
        var out: [String] = []
        var index = 0
        while index < rest.count {
            let argument = rest[index]
            let key = argument.hasPrefix("--") ? String(argument.dropFirst(2).prefix { $0 != "=" }) : ""
            if let equals = argument.firstIndex(of: "="), argument.hasPrefix("--") {
                out.append("--\(key)=" + resolved(key, String(argument[argument.index(after: equals)...])))
            } else if argument.hasPrefix("--"), keys.contains(key), index + 1 < rest.count {
                out += [argument, resolved(key, rest[index + 1])]
                index += 1
            } else {
                out.append(argument)
            }
            index += 1
        }
        return out
    }

    static func split(_ arguments: [String], own: [String: CommandLineArguments.Kind]) -> (mine: [String], rest: [String]) {
        var mine: [String] = []
        var rest: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            let key = argument.hasPrefix("--") ? String(argument.dropFirst(2).prefix { $0 != "=" }) : ""
            if let kind = own[key] {
                mine.append(argument)
                if kind == .value, !argument.contains("="), index + 1 < arguments.count {
                    mine.append(arguments[index + 1])
                    index += 1
                }
            } else if argument.hasPrefix("--") {
                rest.append(argument)
                if !argument.contains("="), !ConfigurationFile.switches.contains(key), index + 1 < arguments.count {
                    rest.append(arguments[index + 1])
                    index += 1
                }
            } else {
                mine.append(argument)   // a positional argument
            }
            index += 1
        }
        return (mine, rest)
    }

    /// A run's state folder: on /dev/shm when there is one (a day of plays is thousands of
    /// synced ledger writes, free on tmpfs, seconds on a disk), else in `folder`; private to the
    /// run (the caller removes it at the end), and one a killed run left behind is removed by the next.
    static func privateFolder(besides folder: String) throws -> String {
        var shm = stat()
        let base = stat("/dev/shm", &shm) == 0 && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : folder
        removeLeftovers(in: base)
        let work = base + "/.adplayerd-simulate-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        return work
    }

    /// The configuration as a simulation plays it: the library with `repeat all` unless the
    /// configuration says otherwise (docs/simulate.md); everything else as configured.
    static func simulated(_ configuration: Configuration) -> Configuration {
        var simulated = configuration
        if simulated.repeatMode == nil, !simulated.loop { simulated.repeatMode = .all }
        return simulated
    }

    /// A run killed before its end left its private state folder: removed by the next run
    /// (one whose process is gone).
    static func removeLeftovers(in folder: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] where name.hasPrefix(".adplayerd-simulate-") {
            guard let pid = Int32(name.dropFirst(".adplayerd-simulate-".count).prefix { $0 != "-" }), pid != getpid() else { continue }
            if kill(pid, 0) != 0, errno == ESRCH { try? FileManager.default.removeItem(atPath: folder + "/" + name) }
        }
    }

    /// `--speed X`: libmpv on the real media, headless (`vo=null`, `ao=null`), its clock and its
    /// speed X times real time; the rest as the virtual stage (the network, the beacons, the screen).
    static func realStage(speed: Double, _ parts: SimulationStage.Parts, requestWait: Double) throws -> SimulationStage {
        var configuration = MpvPlayerConfiguration()
        configuration.timeScale = speed
        // mpv's errors are the run's problems (an ad's file that does not decode): the
        // `simulation-ran` rule names each.
        let errors = Locked<[String]>([])
        let player = try MpvPlayer(configuration: configuration) { message in
            guard message.isError, !message.isKnownHarmless else { return }
            errors.withLock { if $0.count < 100 { $0.append("mpv: \(message.description)") } }
        }
        let loop = player.loop
        let start = loop.now()
        let from = parts.from
        let environment = AdEnvironment(simulatedClock: { (from + Double(loop.now() &- start) / 1e9, Double(loop.now()) / 1e9) }, seed: parts.seed)
        let surface = WatchedAdSurface(MpvAdSurface(player: player, hideAtOnce: true))
        let (box, http, beacons) = SimulationStage.boxStage(parts, environment: environment, loop: loop, player: player, surface: surface,
                                                            requestWait: requestWait)
        return SimulationStage(box: box, http: http, beacons: beacons, surface: surface, start: start, isVirtual: false, virtualPlayer: nil,
                               drive: SimulationStage.realTimeDrive(loop), shutdown: { player.shutdown() }, problems: { errors.withLock { $0 } })
    }

    static func read(_ file: String, _ flag: String) throws -> Data {
        do {
            return try SafeFile.read(file, maxBytes: 1 << 30)
        } catch {
            throw UsageError("\(flag) \(error)")
        }
    }

    /// The caps, dayparts and flights of the configuration's catalogs, by creative id.
    static func catalogCaps(_ configuration: Configuration) -> [String: SimulationRules.Cap] {
        var caps: [String: SimulationRules.Cap] = [:]
        for spec in configuration.ads where !spec.contains("://") {
            guard let catalog = try? LocalCatalog(folder: URL(fileURLWithPath: spec, isDirectory: true), timeZone: configuration.timeZone) else { continue }
            for entry in catalog.entries {
                let schedule = entry.schedule
                var cap = SimulationRules.Cap()
                cap.perHour = schedule.perHour
                cap.perDay = schedule.perDay
                cap.perEpisode = entry.maxPerEpisode ?? schedule.perEpisode
                cap.minInterval = schedule.minInterval ?? schedule.perHour.map { 3600 / Double($0) }
                cap.daypart = schedule.daypart
                cap.flightStart = schedule.flightStart?.timeIntervalSince1970
                cap.flightEnd = schedule.flightEnd?.timeIntervalSince1970
                if cap != SimulationRules.Cap() { caps[entry.id] = cap }
            }
        }
        return caps
    }

    /// `--expect FILE.json`: what ad servers promised of their creatives, by creative id:
    /// `{"creatives": {"ID": {"per_hour": 2, "per_day": 10, "per_episode": 1, "min_interval": 600,
    /// "daypart": "mon-fri 09:00-17:00", "flight_start": "…", "flight_end": "…"}}}`.
    static func expectations(_ data: Data, timeZone: TimeZone) throws -> [String: SimulationRules.Cap] {
        guard case .object(let top)? = try? JSONValue.parse(data), case .object(let creatives)? = top["creatives"] else {
            throw UsageError("--expect: expected {\"creatives\": {\"ID\": {...}}}")
        }
        var caps: [String: SimulationRules.Cap] = [:]
        for (id, value) in creatives {
            guard case .object(let fields) = value else { throw UsageError("--expect: creatives.\(id): expected an object") }
            var cap = SimulationRules.Cap()
            for (key, value) in fields {
                let field = "--expect: creatives.\(id).\(key)"
                func count() throws -> Int {
                    guard case .int(let n) = value, n >= 1, n <= 1_000_000 else { throw UsageError("\(field): a whole number from 1") }
                    return Int(n)
                }
                func text() throws -> String {
                    guard case .string(let text) = value else { throw UsageError("\(field): expected a string") }
                    return text
                }
                func instant() throws -> Double {
                    let text = try text()
                    guard let date = EntrySchedule.date(text, timeZone: timeZone) else { throw UsageError("\(field): \(text) is not an ISO 8601 time") }
                    return date.timeIntervalSince1970
                }
                switch key {
                case "per_hour": cap.perHour = try count()
                case "per_day": cap.perDay = try count()
                case "per_episode": cap.perEpisode = try count()
                case "min_interval":
                    switch value {
                    case .int(let n) where n >= 0: cap.minInterval = Double(n)
                    case .number(let n) where n >= 0 && n.isFinite: cap.minInterval = n
                    default: throw UsageError("\(field): seconds")
                    }
                case "daypart":
                    do {
                        cap.daypart = try WeeklyHours(try text(), timeZone: timeZone, key: "daypart")
                    } catch {
                        throw UsageError("\(field): \(error)")
                    }
                case "flight_start": cap.flightStart = try instant()
                case "flight_end": cap.flightEnd = try instant()
                default: throw UsageError("\(field): not one of per_hour, per_day, per_episode, min_interval, daypart, flight_start, flight_end")
                }
            }
            caps[id] = cap
        }
        return caps
    }
}
