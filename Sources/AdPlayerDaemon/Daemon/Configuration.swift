import AdRuntime
import ControlProtocol
import Foundation

/// The daemon's settings: a configuration file (`--config`), then command-line flags that
/// override it. Every key is a flag's name without the dashes (SPEC §6). Format and example:
/// docs/configuration.md.
public struct Configuration: Sendable, Equatable {
    public var configFile: String?
    /// Folders whose files `open` and `queue` accept (symlinks resolved, regular files only).
    public var library: [String] = []
    /// A catalog folder, a VAST tag URL or a slots API URL (…/v1/ads); none: no ads.
    public var ads: String?
    public var stateDir: String
    public var socket: String
    /// The control socket is 0600, or 0660 for this group (and members of it may connect).
    public var socketGroup: String?
    public var vo = "null"
    public var ao = "null"
    public var pauseAdDelay = 1.0
    /// Unsafe: mpv's own IPC socket, for tests and debugging (anyone who can open it drives
    /// the player and can run programs through mpv).
    public var mpvIPCSocket: String?
    /// The slots API's bearer token (or `$ADPLAYERD_ADS_TOKEN`).
    public var adsToken: String?
    public var logLevel = LogLevel.notice
    /// MPRIS2 on the session bus.
    public var mpris = false
    /// Loop the episode that plays (R14).
    public var loop = false

    /// Defaults from the environment: systemd's `RUNTIME_DIRECTORY`/`STATE_DIRECTORY`, else
    /// `/run/adplayerd` and `/var/lib/adplayerd` for root, else XDG's folders for a user.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        socket = Self.defaultSocket(environment)
        stateDir = Self.defaultStateDir(environment)
        adsToken = environment["ADPLAYERD_ADS_TOKEN"]
    }

    public static func defaultSocket(_ environment: [String: String]) -> String {
        if let runtime = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first { return "\(runtime)/control.sock" }
        if getuid() == 0 { return "/run/adplayerd/control.sock" }
        if let xdg = environment["XDG_RUNTIME_DIR"], !xdg.isEmpty { return "\(xdg)/adplayerd/control.sock" }
        return "/tmp/adplayerd-\(getuid())/control.sock"
    }

    public static func defaultStateDir(_ environment: [String: String]) -> String {
        if let state = environment["STATE_DIRECTORY"]?.split(separator: ":").first { return String(state) }
        if getuid() == 0 { return "/var/lib/adplayerd" }
        if let xdg = environment["XDG_STATE_HOME"], !xdg.isEmpty { return "\(xdg)/adplayerd" }
        return "\(environment["HOME"] ?? "/tmp")/.local/state/adplayerd"
    }

    /// Every key, as in the file and (with `--`) on the command line.
    public static let keys: [String] = ["config", "library", "ads", "state-dir", "socket", "socket-group", "vo", "ao",
                                 "pause-ad-delay", "mpv-ipc-socket", "ads-token", "log-level", "mpris", "loop"]

    /// Keys that take no value on the command line (`--mpris`); in a file they take yes/no.
    public static let switches: Set<String> = ["mpris", "loop"]

    /// Applies one setting. `source` names where it came from in errors (`FILE:LINE`, `--flag`).
    public mutating func set(_ key: String, _ value: String, source: String) throws(ConfigurationError) {
        func fail(_ reason: String) -> ConfigurationError { ConfigurationError(source: source, reason: reason) }
        guard value.utf8.count <= 4096, !value.contains("\0") else { throw fail("\(key): the value is too long or not text") }
        switch key {
        case "config": configFile = value
        case "library":
            guard value.hasPrefix("/") else { throw fail("library: \"\(value)\" must be an absolute folder") }
            library.append(value)
        case "ads": ads = value.isEmpty ? nil : value
        case "state-dir":
            guard !value.isEmpty else { throw fail("state-dir: empty") }
            stateDir = value
        case "socket":
            guard !value.isEmpty, value.utf8.count < 108 else { throw fail("socket: a path of 1 to 107 bytes") }
            socket = value
        case "socket-group": socketGroup = value.isEmpty ? nil : value
        case "vo":
            guard value.allSatisfy({ $0.isLetter || $0.isNumber || "-_,".contains($0) }), !value.isEmpty else {
                throw fail("vo: \"\(value)\" is not a video output name")
            }
            vo = value
        case "ao":
            guard value.allSatisfy({ $0.isLetter || $0.isNumber || "-_,".contains($0) }), !value.isEmpty else {
                throw fail("ao: \"\(value)\" is not an audio output name")
            }
            ao = value
        case "pause-ad-delay":
            do {
                pauseAdDelay = try Seconds.parse(value, .delay, field: "pause-ad-delay")
            } catch {
                throw fail("\(error)")
            }
        case "mpv-ipc-socket": mpvIPCSocket = value.isEmpty ? nil : value
        case "ads-token": adsToken = value
        case "log-level":
            guard let level = LogLevel(name: value) else {
                throw fail("log-level: \"\(value)\" is not one of \(LogLevel.allCases.map(\.name).joined(separator: ", "))")
            }
            logLevel = level
        case "mpris", "loop":
            let on: Bool
            switch value.lowercased() {
            case "yes", "true", "on", "1": on = true
            case "no", "false", "off", "0": on = false
            default: throw fail("\(key): \"\(value)\" is not yes or no")
            }
            if key == "mpris" { mpris = on } else { loop = on }
        default:
            throw fail("unknown key \"\(key)\" (known: \(Self.keys.joined(separator: ", ")))")
        }
    }

    /// Reads a configuration file: `key = value` lines, `#` comments, blank lines; `library`
    /// may repeat. The file is read through `SafeFile` (a regular file of at most 1 MiB: a
    /// FIFO, a device or a symlink loop is refused by name, nothing is read before its size is
    /// known). Errors name the file and line.
    public mutating func read(file path: String) throws(ConfigurationError) {
        let data: Data
        do {
            data = try SafeFile.read(path, maxBytes: Self.maxFileBytes)
        } catch {
            throw ConfigurationError(source: path, reason: error.reason)
        }
        guard let text = String(data: data, encoding: .utf8) else { throw ConfigurationError(source: path, reason: "not UTF-8 text") }
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces)
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            let source = "\(path):\(index + 1)"
            guard let equals = line.firstIndex(of: "=") else {
                throw ConfigurationError(source: source, reason: "expected `key = value`, found \"\(line.prefix(80))\"")
            }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces)
            var value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            guard key != "config" else { throw ConfigurationError(source: source, reason: "config: a file cannot name another") }
            try set(key, value, source: source)
        }
    }

    /// The largest configuration file read.
    public static let maxFileBytes = 1024 * 1024

    /// The configuration: the file named by `--config` (if any), then every flag over it.
    public static func load(arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(ConfigurationError) -> Configuration {
        let spec = Dictionary(uniqueKeysWithValues: keys.map { ($0, switches.contains($0) ? CommandLineArguments.Kind.flag : .value) })
        let parsed: CommandLineArguments
        do {
            parsed = try CommandLineArguments(arguments, spec: spec)
        } catch {
            throw ConfigurationError(source: "command line", reason: error.message)
        }
        if let word = parsed.positional.first {
            throw ConfigurationError(source: word, reason: "the daemon takes no files (to play files: adplayerd play FILE...)")
        }
        var configuration = Configuration(environment: environment)
        if let file = parsed.value("config") {
            configuration.configFile = file
            try configuration.read(file: file)
        }
        // Flags win; a library given on the command line replaces the file's list.
        if parsed.flag("library") { configuration.library = [] }
        for option in parsed.options where option.name != "config" { try configuration.set(option.name, option.value, source: option.source) }
        return configuration
    }
}

/// A setting that cannot be used, and where it came from.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public let source: String
    public let reason: String
    public var description: String { "\(source): \(reason)" }
}
