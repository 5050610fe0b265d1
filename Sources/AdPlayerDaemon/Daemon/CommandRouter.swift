import AdRuntime
import AdSchedule
import AdTracking
import ControlProtocol
import Foundation

/// Runs a decoded request (`Commands.decode` validated it: docs/protocol.md) where its row of
/// the command table says (`Venue`): files are checked here, through `SafeFile` against the
/// library, on a worker of their own (the file system may be slow), then the loop runs the
/// command; `metrics` and `plays` are answered on that worker (the database, never the
/// player); the rest runs on the player's loop, in the controller. `subscribe` and `version`
/// never come here (the socket answers them). Nothing unchecked reaches the loop.
///
/// Threading: `handle` on the control socket's thread (or the bus thread); it returns at once,
/// and `reply` runs later on the loop or the files worker.
public final class CommandRouter: Sendable {
    private let loop: any PlayerLoop
    private let controller: Controller
    private let library: Locked<[String]>
    private let files: Workers
    private let metrics: Metrics?
    private let outbox: BeaconOutbox?
    private let screenshots: String?
    /// One grab a second of each kind, for every client (`ScreenshotLimiter`).
    private let screenshotLimiter = ScreenshotLimiter()
    private let extras: Extras

    /// What answers `health`, `logs`, `reload` and `identify` (nil: the command is `unavailable`).
    public struct Extras: Sendable {
        public var health: HealthMonitor?
        public var log: Logger?
        public var reload: (@Sendable () -> Void)?
        /// The box as `identify` names it (its hostname when nil).
        public var boxName: String?
        public init(health: HealthMonitor? = nil, log: Logger? = nil, reload: (@Sendable () -> Void)? = nil, boxName: String? = nil) {
            self.health = health
            self.log = log
            self.reload = reload
            self.boxName = boxName
        }
    }

    /// `metrics` and `outbox` answer `metrics` and `plays` off the loop (nil: nothing recorded).
    /// `screenshots`: the daemon's folder for them (under the state folder).
    public init(loop: any PlayerLoop, controller: Controller, library: [String], metrics: Metrics? = nil, outbox: BeaconOutbox? = nil,
                screenshots: String? = nil, extras: Extras = Extras(), environment: AdEnvironment = .system) {
        files = Workers(name: "adplayerd-files", environment: environment)
        self.screenshots = screenshots
        self.extras = extras
        self.loop = loop
        self.controller = controller
        self.library = Locked(library)
        self.metrics = metrics
        self.outbox = outbox
    }

    /// SIGHUP: the library folders of the new configuration.
    public func setLibrary(_ folders: [String]) { library.withLock { $0 = folders } }

    /// Runs `request` where its row of the command table says (`Venue`); the socket has
    /// already checked the client's tier.
    public func handle(_ request: Request, reply: @escaping @Sendable (Result<JSONValue, ControlError>) -> Void) {
        guard let command = Commands.row(of: request) else {
            return reply(.failure(ControlError(.internalError, "\(request.name) has no row in the command table")))
        }
        let controller = self.controller
        switch command.venue {
        case .socket:
            reply(.failure(ControlError(.internalError, "\(request.name) is answered by the control socket")))
        case .loop:
            onLoop(reply) { try controller.perform(request) }
        case .worker:
            files.execute { [self] in reply(answerOffLoop(request)) }
        case .filesThenLoop:
            withFiles(request, reply)
        }
    }

    /// The commands of `Venue.worker`: the metrics and the database, never the player.
    private func answerOffLoop(_ request: Request) -> Result<JSONValue, ControlError> {
        switch request {
        case .metrics: return .success(Self.describe(metrics))
        case .plays(let since, let afterRow, let limit, let newest, let afterChain):
            guard let outbox else { return .success(["plays": [], "ledger": .null]) }
            // The ledger first: a reader whose cursor is past its last play, or whose ledger
            // id differs, starts over (docs/protocol.md, "plays").
            let ledger = outbox.ledger()
            let plays = afterChain.map { outbox.chainedPlays(after: $0, limit: limit ?? 10_000) }
                ?? outbox.plays(since: since, afterSequence: afterRow, limit: limit ?? 10_000, newest: newest)
            return .success(["plays": .array(plays.map(Self.describe)),
                             "ledger": ["id": .string(ledger.id), "last": .int(max(ledger.lastSequence, plays.last?.sequence ?? 0)),
                                        "head": .int(max(ledger.chainPosition, plays.last?.chainPosition ?? 0)),
                                        "waiting": .bool(ledger.waiting)]])
        case .health:
            guard let health = extras.health else { return .failure(ControlError(.unavailable, "this daemon keeps no health verdict")) }
            return .success(health.verdictJSON())
        case .logs(let lines):
            guard let log = extras.log else { return .failure(ControlError(.unavailable, "this daemon keeps no log lines")) }
            return .success(["lines": .array(log.recent(lines).map { line -> JSONValue in
                ["time": .string(ISO8601.format(line.wall)), "level": .string(line.level.name), "text": .string(line.text)]
            })])
        case .reload:
            guard let reload = extras.reload else { return .failure(ControlError(.unavailable, "this daemon cannot reload")) }
            reload()
            return .success(["reloading": true])
        default: return .failure(ControlError(.internalError, "\(request.name) does not run on a worker"))
        }
    }

    /// The commands of `Venue.filesThenLoop`: paths checked against the library, or a
    /// screenshot's file made, on the files worker; then the loop.
    private func withFiles(_ request: Request, _ reply: @escaping @Sendable (Result<JSONValue, ControlError>) -> Void) {
        let controller = self.controller
        switch request {
        case .open(let path, let contentID, let start):
            checkFiles([path]) { [self] result in
                switch result {
                case .success(let checked):
                    // A file (with its content id), or a folder's files in name order.
                    let paths = checked.paths
                    let entries = paths.count == 1 ? [QueueEntry(path: paths[0], contentID: contentID)] : paths.map { QueueEntry(path: $0) }
                    onLoop(reply) {
                        try controller.admit(request)
                        let opened = try controller.open(entries, start: start)
                        controller.commanded(request)
                        return checked.adding(to: opened)
                    }
                case .failure(let error):
                    reply(.failure(error))
                }
            }
        case .queue(let paths):
            checkFiles(paths) { [self] result in
                switch result {
                case .success(let checked):
                    onLoop(reply) {
                        try controller.admit(request)
                        let queued = try controller.enqueue(checked.paths.map { QueueEntry(path: $0) })
                        controller.commanded(request)
                        return checked.adding(to: queued)
                    }
                case .failure(let error): reply(.failure(error))
                }
            }
        case .takeover(let target, let seconds, let priority, let by):
            // A file or folder of the library (a path), or one of the schedule's playlists.
            guard target.hasPrefix("/") else {
                return onLoop(reply) {
                    try controller.admit(request)
                    return try controller.takeover(target: target, files: nil, seconds: seconds, priority: priority, by: by)
                }
            }
            let folders = library.withLock { $0 }
            files.execute { [self] in
                switch Library.resolveFiles([target], under: folders, extensions: Library.playableExtensions.union(Library.imageExtensions)) {
                case .success(let checked):
                    let files = checked.paths.map { ScheduleLoader.file($0, seconds: nil) }
                    onLoop(reply) {
                        try controller.admit(request)
                        return try controller.takeover(target: target, files: files, seconds: seconds, priority: priority, by: by)
                    }
                case .failure(let error): reply(.failure(error))
                }
            }
        case .screenshot(let withAds, let inline):
            guard let folder = screenshots else { return reply(.failure(ControlError(.unavailable, "no folder for screenshots"))) }
            files.execute { [self] in screenshot(in: folder, withAds: withAds, inline: inline, reply) }
        case .identify(let seconds):
            let boxName = extras.boxName
            files.execute { [self] in
                // Off the loop: the host's name and addresses (getifaddrs).
                let label = Self.identityLabel(boxName: boxName)
                onLoop(reply) { try controller.identify(label: label.text, seconds: seconds).adding(["code": .string(label.code)]) }
            }
        default:
            reply(.failure(ControlError(.internalError, "\(request.name) does not take files")))
        }
    }

    /// On the files worker: at most one grab of each kind a second for every client
    /// (`ScreenshotLimiter`: a request meanwhile gets the last one's file); a grab makes the
    /// folder (the daemon's own, the oldest shots beyond the last 20 gone), then the loop takes
    /// the shot; inline, the file is read back here once written.
    private func screenshot(in folder: String, withAds: Bool, inline: Bool, _ reply: @escaping @Sendable (Result<JSONValue, ControlError>) -> Void) {
        let files = self.files
        let answer: @Sendable (Result<JSONValue, ControlError>) -> Void
        if inline {
            answer = { (result: Result<JSONValue, ControlError>) in
                guard case .success(let value) = result, let path = value["path"]?.string else { return reply(result) }
                files.execute { reply(Self.inlined(value, path: path)) }
            }
        } else {
            answer = reply
        }
        let controller = self.controller, loop = self.loop
        screenshotLimiter.shot(withAds: withAds, answer) { done in
            let path: String
            do {
                path = try Self.screenshotPath(in: folder)
            } catch {
                return done(.failure(ControlError(.internalError, "screenshot: \(error)")))
            }
            let accepted = loop.execute { controller.screenshot(to: path, withAds: withAds, reply: done) }
            if !accepted { done(.failure(ControlError(.unavailable, "the player has shut down"))) }
        }
    }

    /// Largest screenshot a reply carries inline (the web page's `screenshot.png`).
    static let maxInlineScreenshot = 8 << 20

    /// A screenshot's reply with the PNG in it (base64); the file stays where it is.
    static func inlined(_ value: JSONValue, path: String) -> Result<JSONValue, ControlError> {
        do {
            let data = try SafeFile.read(path, maxBytes: maxInlineScreenshot)
            guard case .object(var fields) = value else { return .success(value) }
            fields["png_base64"] = .string(data.base64EncodedString())
            return .success(.object(fields))
        } catch {
            return .failure(ControlError(.tooLarge, "screenshot: \(path): \(error)"))
        }
    }

    /// What `identify` shows: the box's name, its addresses, and a short code that changes each
    /// time (said on the phone: "the screen that shows 4172"). Printable ASCII and spaces only:
    /// nothing mpv's OSD could read as markup.
    static func identityLabel(boxName: String?) -> (text: String, code: String) {
        let code = String(format: "%04d", Int.random(in: 0...9999))
        let name = boxName ?? ProcessInfo.processInfo.hostName
        let addresses = HostInfo.addresses(limit: 4).joined(separator: "  ")
        let text = "adplayerd  \(name)\n\(addresses.isEmpty ? "no network address" : addresses)\ncode \(code)"
        let clean = String(String.UnicodeScalarView(text.unicodeScalars.filter { $0 == "\n" || ($0.value >= 0x20 && $0.value < 0x7F) }))
        return (String(clean.prefix(400)), code)
    }

    /// Screenshots kept: the most recent.
    static let keptScreenshots = 20

    /// A new file name in `folder` (made 0700 if need be) for a screenshot; older ones beyond
    /// `keptScreenshots` are removed.
    static func screenshotPath(in folder: String) throws -> String {
        if mkdir(folder, 0o700) != 0, errno != EEXIST { throw ControlError(.internalError, "\(folder): \(String(cString: strerror(errno)))") }
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []).filter { $0.hasPrefix("screenshot-") && $0.hasSuffix(".png") }.sorted()
        for name in names.dropLast(keptScreenshots - 1) { unlink(folder + "/" + name) }
        let stamp = ISO8601.format(Date().timeIntervalSince1970).replacingOccurrences(of: ":", with: "")
        return folder + "/screenshot-\(stamp)-\(UInt32.random(in: 0...UInt32.max)).png"
    }

    /// The metrics as samples and as Prometheus text (what `metrics-file` holds), and the ads'
    /// counters by kind (what `adplayerctl metrics` prints).
    static func describe(_ metrics: Metrics?) -> JSONValue {
        let all = metrics?.samples() ?? []
        let samples = all.map { sample -> JSONValue in
            ["name": .string(sample.name), "labels": .object(sample.labels.mapValues { .string($0) }), "value": .number(sample.value)]
        }
        var result: [String: JSONValue] = ["samples": .array(samples), "text": .string(metrics?.text() ?? "")]
        let names = ["requested": "adplayerd_ads_requested_total", "filled": "adplayerd_ads_filled_total", "nofill": "adplayerd_ads_nofill_total",
                     "errors": "adplayerd_ad_errors_total", "started": "adplayerd_ads_started_total"]
        for kind in ControlProtocol.adKinds {
            result[kind] = .object(names.mapValues { name in
                .int(Int64(all.filter { $0.name == name && $0.labels["kind"] == kind }.reduce(0) { $0 + $1.value }))
            })
        }
        return .object(result)
    }

    /// A play as `plays` answers it (docs/protocol.md) and `plays export --format jsonl` prints it.
    public static func describe(_ play: PlayRecord) -> JSONValue {
        ["id": .string(play.id), "ad_id": .string(play.adID), "kind": .string(play.kind), "source": play.source.map { .string($0) } ?? .null,
         "content_id": .string(play.contentID), "started": .string(ISO8601.format(play.started)),
         "ended": play.ended.map { .string(ISO8601.format($0)) } ?? .null, "seconds": play.seconds.map { .number(($0 * 1000).rounded() / 1000) } ?? .null,
         "reason": play.reason.map { .string($0) } ?? .null, "viewable": play.viewable.map { .string($0) } ?? .null,
         "beacons": ["sent": .int(play.beaconsSent), "pending": .int(play.beaconsPending), "failed": .int(play.beaconsFailed),
                     "deadline": .int(play.beaconsDeadline)],
         "row": .int(play.sequence), "sequence": .int(play.sequence), "hash": play.hash.map { .string($0) } ?? .null,
         "chain": play.chainPosition.map { .int($0) } ?? .null, "prev_hash": play.previousHash.map { .string($0) } ?? .null,
         "segment": play.segment.map { .string($0) } ?? .null, "venue_id": play.venue.map { .string($0) } ?? .null, "impressions": play.impressions.map { .number($0) } ?? .null,
         "latlong": play.latLong.map { .string($0) } ?? .null, "ad_duration": play.adDuration.map { .number($0) } ?? .null,
         "display": play.display.map { .string($0) } ?? .null,
         "display_evidence": play.displayEvidence.map { (try? JSONValue.parse($0)) ?? .string($0) } ?? .null,
         "loudness": loudness(play)]
    }

    /// A play's loudness (R28) as `plays` answers it; null for a play without sound (`audio`
    /// `none`, or recorded before loudness).
    static func loudness(_ play: PlayRecord) -> JSONValue {
        let values = [("ad_lufs", play.adLoudness), ("ad_peak_dbtp", play.adTruePeak), ("content_lufs", play.contentLoudness),
                      ("target_lufs", play.targetLoudness), ("gain_db", play.gain)]
        guard let rule = play.audio, rule != "none" else { return .null }
        return .object(Dictionary(uniqueKeysWithValues: values.map { ($0.0, $0.1.map { JSONValue.number($0) } ?? .null) })
                       .merging(["rule": .string(rule)]) { a, _ in a })
    }

    /// Runs `body` on the loop and replies with what it returned or threw.
    private func onLoop(_ reply: @escaping @Sendable (Result<JSONValue, ControlError>) -> Void,
                        _ body: @escaping @Sendable () throws -> JSONValue) {
        let accepted = loop.execute {
            do {
                reply(.success(try body()))
            } catch {
                reply(.failure(ControlError(internalOrOwn: error)))
            }
        }
        if !accepted { reply(.failure(ControlError(.unavailable, "the player has shut down"))) }
    }

    /// Each path must be a regular file under one of the library folders once resolved (no
    /// `..`, no symlink escape); the answer carries the resolved paths. Off the socket thread.
    private func checkFiles(_ paths: [String], _ done: @escaping @Sendable (Result<CheckedFiles, ControlError>) -> Void) {
        let folders = library.withLock { $0 }
        files.execute { done(Library.resolveFiles(paths, under: folders)) }
    }
}

extension ControlError {
    /// `error` if it is a protocol error, else an `internal` one saying what it was.
    init(internalOrOwn error: any Error) {
        self = error as? ControlError ?? ControlError(.internalError, "\(error)")
    }
}

