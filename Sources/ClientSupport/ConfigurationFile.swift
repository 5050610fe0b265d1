import Bounds
import ControlProtocol
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import ProcessSupport

/// A setting that cannot be used, and where it came from.
public struct ConfigurationError: Error, Sendable, Equatable, CustomStringConvertible {
    public let source: String
    public let reason: String
    public var description: String { "\(source): \(reason)" }

    public init(source: String, reason: String) {
        self.source = source
        self.reason = reason
    }
}

/// The configuration file and the command line of every adplayerd process, read alike: the
/// daemon interprets every key (`AdPlayerDaemon.Configuration`), `adplayerd-web` and
/// `adplayerd-mqtt` only theirs (`ClientConfiguration`), all from this one reader and one list
/// of names, so that a key misspelt in the shared file is named by each of them.
public enum ConfigurationFile {
    /// Every key, as in the file and (with `--`) on the command line.
    public static let keys: [String] = ["config", "library", "ads", "state-dir", "socket", "socket-group", "socket-group-tier", "vo", "ao",
                                        "pause-ad-delay", "mpv-ipc-socket", "ads-token", "log-level", "mpris", "loop",
                                        "limit-ad-tracking", "gdpr-consent", "gpp-string", "gpp-section-id", "ifa", "ifa-type", "app-bundle",
                                        "outbox-max-beacons", "outbox-max-mib", "beacon-max-days", "time-sync-wait",
                                        "plays-max-rows", "plays-max-days", "metrics-file", "metrics-interval",
                                        "cache-max-mib", "offline-ad-lifetime", "beacon-max-delay",
                                        "audio-device", "mpv-option", "alang", "slang", "ad-volume", "ad-loudness", "ad-loudnorm",
                                        "web-listen", "web-token-file",
                                        "mqtt-broker", "mqtt-box-id", "mqtt-prefix", "mqtt-groups", "mqtt-username", "mqtt-password-file",
                                        "mqtt-ca-file", "mqtt-cert-file", "mqtt-key-file", "mqtt-keepalive", "mqtt-commands", "mqtt-events",
                                        "display-hours", "timezone", "cec-command", "pause-ad-max", "pause-ad-rotate", "screensaver-after", "screensaver-rotate",
                                        "latlong", "venue-id", "impressions-per-play", "pop-deadline", "ad-separation",
                                        "pop-require-display", "pop-display-wait", "display-connector", "drm-sysfs-root",
                                        "display-check-interval", "schedule", "record-content-plays", "repeat"]

    /// Keys that take no value on the command line (`--mpris`); in a file they take yes/no.
    public static let switches: Set<String> = ["mpris", "loop", "limit-ad-tracking", "ad-loudnorm", "pause-ad-rotate", "pop-require-display", "record-content-plays"]

    /// The largest configuration file read.
    public static let maxFileBytes = 1024 * 1024

    /// One `key = value` of a file or a flag, with where it came from (`FILE:LINE`, `--flag`).
    public struct Setting: Sendable, Equatable {
        public let key: String
        public let value: String
        public let source: String
    }

    /// Reads a configuration file: `key = value` lines, `#` comments, blank lines; a value may be
    /// quoted. The file is read through `SafeFile` (a regular file of at most 1 MiB: a FIFO, a
    /// device or a symlink loop is refused by name, nothing is read before its size is known).
    /// A line that is not a setting is added to `problems` and the reading goes on; throws only
    /// when the file itself cannot be read.
    public static func read(_ path: String, problems: inout [ConfigurationError]) throws(ConfigurationError) -> [Setting] {
        let data: Data
        do {
            data = try SafeFile.read(path, maxBytes: maxFileBytes)
        } catch {
            throw ConfigurationError(source: path, reason: error.reason)
        }
        guard let text = String(data: data, encoding: .utf8) else { throw ConfigurationError(source: path, reason: "not UTF-8 text") }
        var settings: [Setting] = []
        for (index, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmedSpaces()
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            let source = "\(path):\(index + 1)"
            guard let equals = line.firstIndex(of: "=") else {
                problems.append(ConfigurationError(source: source, reason: "expected `key = value`, found \"\(line.prefix(80))\""))
                continue
            }
            let key = line[..<equals].trimmedSpaces()
            var value = line[line.index(after: equals)...].trimmedSpaces()
            if value.count >= 2, value.hasPrefix("\""), value.hasSuffix("\"") { value = String(value.dropFirst().dropLast()) }
            guard key != "config" else {
                problems.append(ConfigurationError(source: source, reason: "config: a file cannot name another"))
                continue
            }
            settings.append(Setting(key: key, value: value, source: source))
        }
        return settings
    }

    /// The command line's words by the keys (`--library DIR`, `--mpris`): the file it names
    /// (`--config`), and its options in order.
    public static func parse(arguments: [String]) throws(ConfigurationError) -> (file: String?, options: [Setting], given: Set<String>) {
        let spec = Dictionary(uniqueKeysWithValues: keys.map { ($0, switches.contains($0) ? CommandLineArguments.Kind.flag : .value) })
        let parsed: CommandLineArguments
        do {
            parsed = try CommandLineArguments(arguments, spec: spec)
        } catch {
            throw ConfigurationError(source: "command line", reason: error.message)
        }
        if let word = parsed.positional.first {
            throw ConfigurationError(source: word, reason: "the daemon takes no files (to play files: adplayerd-dev play FILE...)")
        }
        let options = parsed.options.filter { $0.name != "config" }.map { Setting(key: $0.name, value: $0.value, source: $0.source) }
        return (parsed.value("config"), options, Set(options.map(\.key)))
    }

    /// The control socket by default: systemd's `RUNTIME_DIRECTORY`, else `/run/adplayerd` for
    /// root, else XDG's runtime folder for a user.
    public static func defaultSocket(_ environment: [String: String]) -> String {
        if let runtime = environment["RUNTIME_DIRECTORY"]?.split(separator: ":").first { return "\(runtime)/control.sock" }
        if getuid() == 0 { return "/run/adplayerd/control.sock" }
        if let xdg = environment["XDG_RUNTIME_DIR"], !xdg.isEmpty { return "\(xdg)/adplayerd/control.sock" }
        return "/tmp/adplayerd-\(getuid())/control.sock"
    }

    /// The state folder by default: systemd's `STATE_DIRECTORY`, else `/var/lib/adplayerd` for
    /// root, else XDG's state folder for a user.
    public static func defaultStateDir(_ environment: [String: String]) -> String {
        if let state = environment["STATE_DIRECTORY"]?.split(separator: ":").first { return String(state) }
        if getuid() == 0 { return "/var/lib/adplayerd" }
        if let xdg = environment["XDG_STATE_HOME"], !xdg.isEmpty { return "\(xdg)/adplayerd" }
        return "\(environment["HOME"] ?? "/tmp")/.local/state/adplayerd"
    }
}

/// What `adplayerd-web` and `adplayerd-mqtt` read of the configuration: the daemon's socket,
/// the state folder, the log level, and their own keys (`web-*`, `mqtt-*`), each checked as the
/// daemon checks it. The daemon's other keys are the daemon's: known, and left to it.
public struct ClientConfiguration: Sendable {
    public var socket: String
    public var stateDir: String
    public var logLevel = LogLevel.notice
    /// `adplayerd web`: where it listens, and its tokens (`ROLE TOKEN` lines, a 0600 file).
    public var webListen = try! ListenAddress(parsing: "127.0.0.1:8080")
    public var webTokenFile: String?
    /// `adplayerd mqtt` (docs/fleet.md): the broker, this box's name and groups, credentials, TLS.
    public var mqtt = MqttSettings()

    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        socket = ConfigurationFile.defaultSocket(environment)
        stateDir = ConfigurationFile.defaultStateDir(environment)
    }

    /// Applies one setting if it is a client's; another known key is the daemon's (ignored);
    /// an unknown key is refused by name.
    public mutating func set(_ key: String, _ value: String, source: String) throws(ConfigurationError) {
        func fail(_ reason: String) -> ConfigurationError { ConfigurationError(source: source, reason: reason) }
        guard value.utf8.count <= 4096, !value.contains("\0") else { throw fail("\(key): the value is too long or not text") }
        switch key {
        case "state-dir":
            guard !value.isEmpty else { throw fail("state-dir: empty") }
            stateDir = value
        case "socket":
            guard !value.isEmpty, value.utf8.count < 108 else { throw fail("socket: a path of 1 to 107 bytes") }
            socket = value
        case "log-level":
            guard let level = LogLevel(name: value) else {
                throw fail("log-level: \"\(value)\" is not one of \(LogLevel.allCases.map(\.name).joined(separator: ", "))")
            }
            logLevel = level
        case "web-listen":
            do {
                webListen = try ListenAddress(parsing: value)
            } catch {
                throw fail("web-listen: \(error)")
            }
        case "web-token-file":
            guard value.isEmpty || value.hasPrefix("/") else { throw fail("web-token-file: \"\(value.prefix(80))\" must be an absolute path") }
            webTokenFile = value.isEmpty ? nil : value
        case _ where key.hasPrefix("mqtt-") && ConfigurationFile.keys.contains(key):
            do {
                try mqtt.set(key, value)
            } catch {
                throw fail(error.message)
            }
        case _ where ConfigurationFile.keys.contains(key):
            break
        default:
            throw fail("unknown key \"\(key)\" (known: \(ConfigurationFile.keys.joined(separator: ", ")))")
        }
    }

    /// The configuration: the file named by `--config` (if any), then every flag over it.
    public static func load(arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(ConfigurationError) -> ClientConfiguration {
        var problems: [ConfigurationError] = []
        let (file, options, _) = try ConfigurationFile.parse(arguments: arguments)
        var configuration = ClientConfiguration(environment: environment)
        var settings: [ConfigurationFile.Setting] = []
        if let file { settings = try ConfigurationFile.read(file, problems: &problems) }
        for setting in settings + options {
            do {
                try configuration.set(setting.key, setting.value, source: setting.source)
            } catch {
                problems.append(error)
            }
        }
        if let first = problems.first { throw first }
        return configuration
    }
}
