import AdRuntime
import AdSources
import AdTracking
import ClientSupport
import ControlProtocol
import Foundation

/// The daemon's settings: a configuration file (`--config`), then command-line flags that
/// override it. Every key is a flag's name without the dashes (SPEC §6). Format and example:
/// docs/configuration.md.
public struct Configuration: Sendable {
    public var configFile: String?
    /// Folders whose files `open` and `queue` accept (symlinks resolved, regular files only).
    public var library: [String] = []
    /// Ad sources, asked in order until one fills: catalog folders, VAST tag URLs, slots API
    /// URLs (…/v1/ads); none: no ads.
    public var ads: [String] = []
    public var stateDir: String
    public var socket: String
    /// The control socket is 0600, or 0660 for this group (and members of it may connect).
    public var socketGroup: String?
    /// What members of `socketGroup` may run (the daemon's user and root: everything).
    public var socketGroupTier = Tier.control
    public var vo = "null"
    public var ao = "null"
    public var pauseAdDelay = 1.0
    /// Digital out of home: the screen's venue, the audience a play counts for, the default
    /// proof-of-play deadline (`latlong` is in `macroPolicy`).
    public var venueID: String?
    public var impressionsPerPlay: Double?
    public var popDeadline: Double?
    /// Competitive separation (seconds; 0: none): two ads of one advertiser, or sharing a
    /// category, never within it of each other, across every source.
    public var adSeparation = 0.0
    /// The longest a pause ad stays on screen (burn-in care); nil: the whole pause.
    public var pauseAdMax: Double?
    /// At `pauseAdMax` the next pause ad takes its place (else the output rests, black).
    public var pauseAdRotate = false
    /// A pause this long makes the screen idle: screensaver ads take the pause ad's place
    /// (R27); nil: never.
    public var screensaverAfter: Double? = 300
    /// Seconds each screensaver creative stays before the next (moved a little) takes its place.
    public var screensaverRotate = 30.0
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
    /// `repeat`: what the queue does at its end from the start (`off`, `one`, `all`); nil: as
    /// the viewer left it (the state folder). `loop = yes` is `repeat = one`.
    public var repeatMode: RepeatMode?
    /// The command line this was read from: the health verdict reads the file again with it
    /// (its `configuration` check); nil: made by hand (a test), nothing to read again.
    public var rereadArguments: [String]?
    /// Privacy and identity for the macros of every ad request and tracking URL (docs/ads.md).
    public var macroPolicy = MacroPolicy()
    /// The outbox's and proof of play's bounds, and how beacons wait for the clock.
    public var outbox = BeaconOutbox.Configuration()
    /// node_exporter's textfile: the metrics written there every `metricsInterval` seconds.
    public var metricsFile: String?
    public var metricsInterval = 5.0
    /// VAST creatives on disk: `$CACHE_DIRECTORY` under systemd, else the state folder's
    /// `creatives` (see `creativeCacheFolder`); bounded in bytes.
    public var cacheDirectory: String?
    public var cacheMaxBytes = CreativeCache.defaultMaxBytes
    /// How long a VAST ad with no `<Expires>` may be shown from the cache while its server
    /// cannot be reached (0: never).
    public var offlineAdLifetime = VASTClient.Configuration().offlineLifetime
    /// mpv's audio device (`adplayerctl audio-devices` lists them); nil: mpv's default.
    public var audioDevice: String?
    /// Allow-listed mpv options (`mpv-option = key=value`), in order.
    public var mpvOptions: [(String, String)] = []
    /// Track language preferences (mpv's `alang`, `slang`): comma-separated ISO 639 codes.
    public var audioLanguages: String?
    public var subtitleLanguages: String?
    /// Ads' videos play at most at this share (%) of the content's volume, and optionally
    /// loudness-normalised (EBU R128, -24 LUFS).
    public var adVolume = 100.0
    /// How loud ads with sound play (`ad-loudness`, R28): at the content's measured loudness
    /// by default; `ad-loudnorm = yes` is `target -24`, `no` is `off`.
    public var adLoudness = AdLoudnessPolicy.match
    /// `adplayerd web`: where it listens, and its tokens (`ROLE TOKEN` lines, a 0600 file).
    public var webListen = try! ListenAddress(parsing: "127.0.0.1:8080")
    public var webTokenFile: String?
    /// `adplayerd mqtt` (docs/fleet.md): the broker, this box's name and groups, credentials, TLS.
    public var mqtt = MqttSettings()
    /// The box's time zone, for operating hours (an IANA name; the system's by default).
    public var timeZone = TimeZone.current
    /// The screen's operating hours (`display-hours`, docs/configuration.md); nil: always on.
    /// Kept as text until the time zone is known (keys come in any order).
    public var displayHoursText: String?
    public var displayHours: WeeklyHours? {
        displayHoursText.flatMap { try? WeeklyHours($0, timeZone: timeZone) }
    }
    /// What puts the display in standby and wakes it (HDMI-CEC): this program and its
    /// arguments, then `--standby` or `--image-view-on`; `none`: blank only.
    public var cecCommand: [String]? = ["cec-ctl"]
    /// Display evidence (issue 36, docs/reporting.md "What the screen showed"): an ad's
    /// impression waits for it (`pop-require-display`), at most `popDisplayWait` seconds; the
    /// DRM/KMS connector the box drives (`display-connector`: a name such as `card0-HDMI-A-1`,
    /// `auto` — any connected — or `none`), read under `drmSysfsRoot` (for tests), and how often
    /// the panel and the connector are read between plays.
    public var popRequireDisplay = false
    public var popDisplayWait = 2.0
    public var displayConnector = "auto"
    public var drmSysfsRoot = "/sys/class/drm"
    public var displayCheckInterval = 30.0
    /// What plays when (`schedule`, docs/schedule.md), and whether each content item the
    /// schedule plays is recorded in proof of play (kind `content`).
    public var schedule: String?
    public var recordContentPlays = false

    /// Defaults from the environment: systemd's `RUNTIME_DIRECTORY`/`STATE_DIRECTORY`, else
    /// `/run/adplayerd` and `/var/lib/adplayerd` for root, else XDG's folders for a user.
    public init(environment: [String: String] = ProcessInfo.processInfo.environment) {
        socket = Self.defaultSocket(environment)
        stateDir = Self.defaultStateDir(environment)
        adsToken = environment["ADPLAYERD_ADS_TOKEN"]
        cacheDirectory = environment["CACHE_DIRECTORY"]?.split(separator: ":").first.map(String.init)
    }

    /// Where VAST creatives are kept.
    public var creativeCacheFolder: String { cacheDirectory ?? stateDir + "/creatives" }

    public static func defaultSocket(_ environment: [String: String]) -> String { ConfigurationFile.defaultSocket(environment) }

    public static func defaultStateDir(_ environment: [String: String]) -> String { ConfigurationFile.defaultStateDir(environment) }

    /// The settings the daemon shares with `adplayerd-web` and `adplayerd-mqtt` (the socket,
    /// the state folder, the log level, `web-*`, `mqtt-*`), as their `ClientConfiguration`:
    /// one interpreter of those keys for every process.
    var shared: ClientConfiguration {
        get {
            var shared = ClientConfiguration(environment: [:])
            shared.socket = socket
            shared.stateDir = stateDir
            shared.logLevel = logLevel
            shared.webListen = webListen
            shared.webTokenFile = webTokenFile
            shared.mqtt = mqtt
            return shared
        }
        set {
            socket = newValue.socket
            stateDir = newValue.stateDir
            logLevel = newValue.logLevel
            webListen = newValue.webListen
            webTokenFile = newValue.webTokenFile
            mqtt = newValue.mqtt
        }
    }

    /// Every key, as in the file and (with `--`) on the command line.
    public static var keys: [String] { ConfigurationFile.keys }

    /// What a key's value is, as `adplayerd --help` shows it (a key not named here takes `S`).
    static let placeholders: [String: String] = [
        "config": "FILE", "library": "DIR", "ads": "SOURCE", "state-dir": "DIR", "socket": "PATH", "socket-group": "GROUP",
        "socket-group-tier": "read|control|admin", "vo": "VO", "ao": "AO", "pause-ad-delay": "S", "mpv-ipc-socket": "PATH",
        "ads-token": "TOKEN", "log-level": "LEVEL", "outbox-max-beacons": "N", "outbox-max-mib": "N", "beacon-max-days": "N",
        "time-sync-wait": "S", "plays-max-rows": "N", "plays-max-days": "N", "metrics-file": "PATH", "metrics-interval": "S",
        "cache-max-mib": "N", "offline-ad-lifetime": "S", "beacon-max-delay": "S", "audio-device": "NAME", "mpv-option": "KEY=VALUE",
        "alang": "LANGS", "slang": "LANGS", "ad-volume": "PERCENT", "ad-loudness": "match|off|target LUFS", "web-listen": "HOST:PORT", "web-token-file": "FILE",
        "mqtt-broker": "URL", "mqtt-box-id": "ID", "mqtt-prefix": "PREFIX", "mqtt-groups": "G,G", "mqtt-username": "NAME",
        "mqtt-password-file": "FILE", "mqtt-ca-file": "FILE", "mqtt-cert-file": "FILE", "mqtt-key-file": "FILE", "mqtt-keepalive": "S",
        "mqtt-commands": "none|read|control|admin", "mqtt-events": "NAMES",
        "display-hours": "HOURS", "timezone": "ZONE", "cec-command": "COMMAND", "pause-ad-max": "S|none", "screensaver-after": "S|none", "screensaver-rotate": "S", "latlong": "LAT,LONG", "venue-id": "ID", "impressions-per-play": "N",
        "pop-deadline": "S", "pop-display-wait": "S", "display-connector": "NAME|auto|none", "drm-sysfs-root": "DIR",
        "display-check-interval": "S", "schedule": "FILE", "repeat": "off|one|all",
    ]
    /// What a key's value is called (`DIR`, `S`): the usage's and the man pages' placeholder.
    public static func placeholder(_ key: String) -> String { placeholders[key] ?? "S" }

    /// Keys that may be given more than once.
    public static let repeatable: Set<String> = ["library", "ads", "mpv-option"]

    /// Every key as a flag (`[--library DIR]...`), in the order of `keys`, wrapped at `width`:
    /// `adplayerd --help` made from the keys, so that none is missing.
    public static func flagsUsage(width: Int = 100, indent: Int = 17) -> [String] {
        var lines: [String] = []
        var line = ""
        for key in keys {
            var flag = switches.contains(key) ? "[--\(key)]" : "[--\(key) \(placeholder(key))]"
            if repeatable.contains(key) { flag += "..." }
            if !line.isEmpty, indent + line.count + 1 + flag.count > width {
                lines.append(line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + flag
        }
        if !line.isEmpty { lines.append(line) }
        return lines
    }

    /// The video and audio outputs of mpv 0.35 on Linux (its manual's VIDEO OUTPUT DRIVERS and
    /// AUDIO OUTPUT DRIVERS): mpv accepts any name when it is created and fails only when it
    /// plays, so a name outside these is reported (check-config, and the log at start).
    public static let knownVideoOutputs: Set<String> = ["gpu", "gpu-next", "xv", "x11", "vdpau", "sdl", "dmabuf-wayland", "vaapi", "null",
                                                        "caca", "tct", "image", "libmpv", "drm", "wlshm", "kitty", "sixel", "rpi"]
    public static let knownAudioOutputs: Set<String> = ["alsa", "pulse", "pipewire", "jack", "oss", "openal", "sdl", "null", "pcm", "sndio"]

    /// Keys that take no value on the command line (`--mpris`); in a file they take yes/no.
    public static var switches: Set<String> { ConfigurationFile.switches }

    /// The mpv options a box may need to set (`mpv-option = key=value`): decoding, the output
    /// and its mode, the picture's geometry, the audio's channels and headroom. Nothing that
    /// loads files or runs programs (mpv's own configuration, scripts, IPC, ytdl, …): those
    /// stay locked (docs/reliability.md).
    public static let allowedMpvOptions: Set<String> = ["hwdec", "fs", "gpu-context", "gpu-api", "gpu-sw", "drm-connector", "drm-mode",
                                                        "video-sync", "keepaspect", "video-rotate", "panscan", "audio-channels",
                                                        "volume-max"]

    /// Applies one setting. `source` names where it came from in errors (`FILE:LINE`, `--flag`).
    public mutating func set(_ key: String, _ value: String, source: String) throws(ConfigurationError) {
        func fail(_ reason: String) -> ConfigurationError { ConfigurationError(source: source, reason: reason) }
        guard value.utf8.count <= 4096, !value.contains("\0") else { throw fail("\(key): the value is too long or not text") }
        switch key {
        case "config": configFile = value
        case "library":
            guard value.hasPrefix("/") else { throw fail("library: \"\(value)\" must be an absolute folder") }
            library.append(value)
        case "ads":
            // Repeatable: a fallback chain in order. An empty value clears the list.
            if value.isEmpty {
                ads = []
            } else {
                do { _ = try AdSourceFactory.parse(value) } catch { throw fail("\(error)") }
                ads.append(value)
            }
        case "state-dir", "socket", "log-level", "web-listen", "web-token-file":
            // Shared with the page and the bridge: read by their one interpreter.
            try shared.set(key, value, source: source)
        case "socket-group": socketGroup = value.isEmpty ? nil : value
        case "socket-group-tier":
            guard let tier = Tier(name: value) else {
                throw fail("socket-group-tier: \"\(value.prefix(64))\" is not one of \(Tier.allCases.map(\.name).joined(separator: ", "))")
            }
            socketGroupTier = tier
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
        case "audio-device":
            guard !value.isEmpty, value.utf8.count <= 256, value.unicodeScalars.allSatisfy({ $0.value >= 0x20 && $0.value != 0x7F }) else {
                throw fail("audio-device: \"\(value.prefix(80))\" is not a device name (adplayerctl audio-devices lists them)")
            }
            audioDevice = value
        case "mpv-option":
            guard let equals = value.firstIndex(of: "=") else { throw fail("mpv-option: \"\(value.prefix(80))\" is not key=value") }
            let name = value[..<equals].trimmingCharacters(in: .whitespaces)
            let setting = value[value.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            guard Self.allowedMpvOptions.contains(name) else {
                throw fail("mpv-option: \"\(name.prefix(64))\" is not an option adplayerd passes to mpv (allowed: "
                           + Self.allowedMpvOptions.sorted().joined(separator: ", ") + ")")
            }
            guard !setting.isEmpty, setting.utf8.count <= 256,
                  setting.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0.value != 0x7F }) else {
                throw fail("mpv-option: \(name): \"\(setting.prefix(80))\" is not a value (printable ASCII, no spaces, at most 256 bytes)")
            }
            mpvOptions.append((name, setting))
        case "alang", "slang":
            guard value.utf8.count <= 256, value.allSatisfy({ $0.isASCII && ($0.isLetter || $0 == "," || $0 == "-") }) else {
                throw fail("\(key): \"\(value.prefix(80))\" is not a list of language codes (en,fr or eng,fre)")
            }
            if key == "alang" { audioLanguages = value.isEmpty ? nil : value } else { subtitleLanguages = value.isEmpty ? nil : value }
        case "ad-volume": adVolume = Double(try Self.integer(value, 0...100, key, fail))
        case "ad-loudness": adLoudness = try Self.loudness(value, fail)
        case "timezone":
            guard value.utf8.count <= 64, value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "/_+-".contains($0)) }),
                  let zone = TimeZone(identifier: value) else {
                throw fail("timezone: \"\(value)\" is not a time zone this system knows (an IANA name such as Europe/Paris; tzdata)")
            }
            timeZone = zone
            if let text = displayHoursText { do { _ = try WeeklyHours(text, timeZone: zone) } catch { throw fail("\(error)") } }
        case "display-hours":
            if value.trimmingCharacters(in: .whitespaces).isEmpty {
                displayHoursText = nil
            } else {
                do { _ = try WeeklyHours(value, timeZone: timeZone) } catch { throw fail("\(error)") }
                displayHoursText = value
            }
        case "cec-command":
            let words = value.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            guard value.utf8.count <= 1024, !words.isEmpty, !value.contains("\0") else {
                throw fail("cec-command: give a program and its arguments, or none")
            }
            cecCommand = words == ["none"] ? nil : words
        case "latlong":
            let parts = value.split(separator: ",", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard parts.count == 2, let lat = Double(parts[0]), let long = Double(parts[1]), lat.isFinite, long.isFinite,
                  (-90...90).contains(lat), (-180...180).contains(long) else {
                throw fail("latlong: \"\(value)\" is not LATITUDE,LONGITUDE in degrees (-90 to 90, -180 to 180)")
            }
            macroPolicy.latLong = String(format: "%.6f,%.6f", lat, long)
        case "venue-id":
            guard (1...128).contains(value.utf8.count), value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.:/".contains($0)) }) else {
                throw fail("venue-id: 1 to 128 letters, digits and - _ . : /")
            }
            venueID = value
        case "impressions-per-play":
            guard let number = Double(value), number.isFinite, number > 0, number <= 1_000_000 else {
                throw fail("impressions-per-play: a number above 0 and at most 1,000,000 (the audience one play counts for)")
            }
            impressionsPerPlay = number
        case "ad-separation":
            do {
                adSeparation = try Seconds.parse(value, .delay, field: "ad-separation")
            } catch {
                throw fail("\(error)")
            }
        case "pop-deadline":
            do {
                popDeadline = value == "none" ? nil : try Seconds.parse(value, .duration, field: "pop-deadline")
            } catch {
                throw fail("\(error) (or none)")
            }
        case "screensaver-after":
            do {
                screensaverAfter = value == "none" ? nil : try Seconds.parse(value, .duration, field: "screensaver-after")
            } catch {
                throw fail("\(error) (or none)")
            }
        case "screensaver-rotate":
            let seconds: Double
            do { seconds = try Seconds.parse(value, .duration, field: key) } catch { throw fail("\(error)") }
            guard seconds >= 5 else { throw fail("screensaver-rotate: at least 5 seconds (a creative is its own play)") }
            screensaverRotate = seconds
        case "pause-ad-max":
            if value == "none" {
                pauseAdMax = nil
            } else {
                do {
                    pauseAdMax = try Seconds.parse(value, .duration, field: "pause-ad-max")
                } catch {
                    throw fail("\(error) (or none)")
                }
            }
        case "pop-display-wait", "display-check-interval":
            let seconds: Double
            do { seconds = try Seconds.parse(value, .duration, field: key) } catch { throw fail("\(error)") }
            if key == "pop-display-wait" {
                guard seconds >= 0.5, seconds <= 10 else { throw fail("pop-display-wait: from 0.5 to 10 seconds") }
                popDisplayWait = seconds
            } else {
                guard seconds >= 1, seconds <= 3600 else { throw fail("display-check-interval: from 1 to 3600 seconds") }
                displayCheckInterval = seconds
            }
        case "display-connector":
            guard (1...64).contains(value.utf8.count), value.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || "-_.".contains($0)) }) else {
                throw fail("display-connector: a DRM connector's name (card0-HDMI-A-1), auto or none")
            }
            displayConnector = value
        case "schedule":
            guard value.hasPrefix("/") || value == "none", value.utf8.count <= 4096, !value.contains("\0") else {
                throw fail("schedule: an absolute path of a schedule file (docs/schedule.md), or none")
            }
            schedule = value == "none" ? nil : value
        case "repeat":
            guard let mode = RepeatMode(rawValue: value) else { throw fail("repeat: off, one or all") }
            repeatMode = mode
        case "drm-sysfs-root":
            guard value.hasPrefix("/"), value.utf8.count <= 1024, !value.contains("\0") else { throw fail("drm-sysfs-root: an absolute path") }
            drmSysfsRoot = value
        case "mpris", "loop", "limit-ad-tracking", "ad-loudnorm", "pause-ad-rotate", "pop-require-display", "record-content-plays":
            let on: Bool
            switch value.lowercased() {
            case "yes", "true", "on", "1": on = true
            case "no", "false", "off", "0": on = false
            default: throw fail("\(key): \"\(value)\" is not yes or no")
            }
            switch key {
            case "mpris": mpris = on
            case "loop": loop = on
            case "ad-loudnorm": adLoudness = on ? .target(LoudnessDecision.fallbackTarget) : .off
            case "pause-ad-rotate": pauseAdRotate = on
            case "pop-require-display": popRequireDisplay = on
            case "record-content-plays": recordContentPlays = on
            default: macroPolicy.limitAdTracking = on
            }
        case "gdpr-consent", "gpp-string", "gpp-section-id", "ifa", "ifa-type", "app-bundle":
            // Sent in URLs (encoded once): printable ASCII, as these values are.
            guard value.utf8.count <= 2048, value.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F }) else {
                throw fail("\(key): printable ASCII without spaces, at most 2048 characters")
            }
            let text: String? = value.isEmpty ? nil : value
            switch key {
            case "gdpr-consent": macroPolicy.gdprConsent = text
            case "gpp-string": macroPolicy.gppString = text
            case "gpp-section-id": macroPolicy.gppSectionIDs = text
            case "ifa": macroPolicy.ifa = text
            case "ifa-type": macroPolicy.ifaType = text
            default: macroPolicy.appBundle = text
            }
        case "beacon-max-delay":
            outbox.maxDelay = Double(try Self.integer(value, 1...86_400, key, fail))
            outbox.baseDelay = min(outbox.baseDelay, outbox.maxDelay)
        case "cache-max-mib": cacheMaxBytes = try Self.integer(value, 16...1_048_576, key, fail) << 20
        case "offline-ad-lifetime": offlineAdLifetime = Double(try Self.integer(value, 0...30 * 86_400, key, fail))
        case "outbox-max-beacons": outbox.maxRows = try Self.integer(value, 100...10_000_000, key, fail)
        case "outbox-max-mib": outbox.maxBytes = try Self.integer(value, 1...4096, key, fail) << 20
        case "beacon-max-days": outbox.maxAge = Double(try Self.integer(value, 1...365, key, fail)) * 86_400
        case "plays-max-rows": outbox.playsMaxRows = try Self.integer(value, 1000...10_000_000, key, fail)
        case "plays-max-days": outbox.playsMaxAge = Double(try Self.integer(value, 1...3650, key, fail)) * 86_400
        case "time-sync-wait", "metrics-interval":
            do {
                let seconds = try Seconds.parse(value, key == "time-sync-wait" ? .delay : .duration, field: key)
                if key == "time-sync-wait" { outbox.timeSyncWait = seconds } else { metricsInterval = max(1, seconds) }
            } catch {
                throw fail("\(error)")
            }
        case _ where key.hasPrefix("mqtt-") && ConfigurationFile.keys.contains(key):
            try shared.set(key, value, source: source)
        case "metrics-file":
            guard value.isEmpty || value.hasPrefix("/") else { throw fail("metrics-file: \"\(value)\" must be an absolute path") }
            metricsFile = value.isEmpty ? nil : value
        default:
            throw fail("unknown key \"\(key)\" (known: \(Self.keys.joined(separator: ", ")))")
        }
    }

    /// `ad-loudness`: `match`, `off`, or `target LUFS` (`target -23`; the bounds of
    /// `AdLoudnessPolicy.targetRange`).
    static func loudness(_ value: String, _ fail: (String) -> ConfigurationError) throws(ConfigurationError) -> AdLoudnessPolicy {
        let words = value.lowercased().split(whereSeparator: { $0 == " " || $0 == "\t" })
        switch words.first {
        case "match" where words.count == 1: return .match
        case "off" where words.count == 1: return .off
        case "target" where words.count == 2:
            let range = AdLoudnessPolicy.targetRange
            guard let level = Double(words[1]), level.isFinite, range.contains(level) else {
                throw fail("ad-loudness: target \"\(words[1].prefix(40))\" is not a loudness in LUFS from \(Int(range.lowerBound)) to \(Int(range.upperBound))")
            }
            return .target(level)
        default:
            throw fail("ad-loudness: \"\(value.prefix(80))\" is not match, off or target LUFS (target -23)")
        }
    }

    private static func integer(_ value: String, _ range: ClosedRange<Int>, _ key: String,
                                _ fail: (String) -> ConfigurationError) throws(ConfigurationError) -> Int {
        guard let number = Int(value), range.contains(number) else {
            throw fail("\(key): \"\(value)\" is not a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }

    /// Reads a configuration file (`ConfigurationFile.read`): errors name the file and line.
    public mutating func read(file path: String) throws(ConfigurationError) {
        var problems: [ConfigurationError] = []
        try read(file: path, problems: &problems)
        if let first = problems.first { throw first }
    }

    /// Reads the file as `read(file:)`, but a line that cannot be used is added to `problems`
    /// and the reading goes on: every problem of the file, one each (`check-config`). Throws
    /// only when the file itself cannot be read.
    public mutating func read(file path: String, problems: inout [ConfigurationError]) throws(ConfigurationError) {
        for setting in try ConfigurationFile.read(path, problems: &problems) {
            do {
                try set(setting.key, setting.value, source: setting.source)
            } catch {
                problems.append(error)
            }
        }
    }

    /// The largest configuration file read.
    public static var maxFileBytes: Int { ConfigurationFile.maxFileBytes }

    /// The configuration: the file named by `--config` (if any), then every flag over it.
    public static func load(arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment)
        throws(ConfigurationError) -> Configuration {
        var problems: [ConfigurationError] = []
        let configuration = try load(arguments: arguments, environment: environment, problems: &problems)
        if let first = problems.first { throw first }
        return configuration
    }

    /// As `load(arguments:)`, with every problem of the file and the flags in `problems`, one
    /// each, and the configuration that the usable lines make (`check-config`).
    public static func load(arguments: [String], environment: [String: String] = ProcessInfo.processInfo.environment,
                            problems: inout [ConfigurationError]) throws(ConfigurationError) -> Configuration {
        let (file, options, given) = try ConfigurationFile.parse(arguments: arguments)
        var configuration = Configuration(environment: environment)
        configuration.rereadArguments = arguments
        if let file {
            configuration.configFile = file
            try configuration.read(file: file, problems: &problems)
        }
        // Flags win; a library given on the command line replaces the file's list.
        if given.contains("library") { configuration.library = [] }
        if given.contains("ads") { configuration.ads = [] }
        for option in options {
            do {
                try configuration.set(option.key, option.value, source: option.source)
            } catch {
                problems.append(error)
            }
        }
        return configuration
    }
}

extension Configuration {
    /// What is wrong with this configuration on this machine, one sentence each, without
    /// touching the network or mpv: library folders that are missing or not folders, a state
    /// folder or metrics folder that cannot be written. The daemon logs them at start;
    /// `adplayerd check-config` adds the ad sources and mpv's own check of the options.
    public func localProblems() -> [String] {
        var problems: [String] = []
        if library.isEmpty { problems.append("library: none: open and queue will refuse every file") }
        // mpv takes any name for its outputs and fails only when it plays: the names it has.
        for (key, value, known) in [("vo", vo, Self.knownVideoOutputs), ("ao", ao, Self.knownAudioOutputs)] {
            for name in value.split(separator: ",").map(String.init) where !known.contains(name) {
                problems.append("\(key): \"\(name)\" is not an output mpv has (\(known.sorted().joined(separator: ", ")); mpv --\(key)=help lists this build's)")
            }
        }
        for folder in library {
            var info = stat()
            if stat(folder, &info) != 0 {
                problems.append("library: \(folder): \(String(cString: strerror(errno)))")
            } else if (info.st_mode & S_IFMT) != S_IFDIR {
                problems.append("library: \(folder): not a folder")
            } else if access(folder, R_OK | X_OK) != 0 {
                problems.append("library: \(folder): cannot be read (permission denied)")
            }
        }
        if let problem = Self.writableFolderProblem(stateDir) { problems.append("state-dir: \(stateDir): \(problem)") }
        if let metricsFile, let problem = Self.writableFolderProblem((metricsFile as NSString).deletingLastPathComponent, mustExist: true) {
            problems.append("metrics-file: \(metricsFile): its folder \(problem)")
        }
        for (key, file) in [("web-token-file", webTokenFile), ("mqtt-password-file", mqtt.passwordFile), ("mqtt-ca-file", mqtt.caFile),
                            ("mqtt-cert-file", mqtt.certFile), ("mqtt-key-file", mqtt.keyFile)] {
            guard let file else { continue }
            if access(file, R_OK) != 0 { problems.append("\(key): \(file): \(String(cString: strerror(errno)))") }
        }
        if (mqtt.certFile == nil) != (mqtt.keyFile == nil) { problems.append("mqtt-cert-file and mqtt-key-file go together (mutual TLS)") }
        return problems
    }

    /// Why `folder` cannot be written (or made, when it need not exist): nil if it can.
    static func writableFolderProblem(_ folder: String, mustExist: Bool = false) -> String? {
        var info = stat()
        if stat(folder, &info) == 0 {
            guard (info.st_mode & S_IFMT) == S_IFDIR else { return "is not a folder" }
            return access(folder, W_OK | X_OK) == 0 ? nil : "cannot be written (permission denied)"
        }
        if mustExist { return "does not exist" }
        // Made at start: its nearest existing parent must be writable.
        var parent = (folder as NSString).deletingLastPathComponent
        while !parent.isEmpty, parent != "/", stat(parent, &info) != 0 { parent = (parent as NSString).deletingLastPathComponent }
        return access(parent.isEmpty ? "/" : parent, W_OK | X_OK) == 0 ? nil : "cannot be made (\(parent) is not writable)"
    }
}
