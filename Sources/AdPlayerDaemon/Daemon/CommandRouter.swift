import AdRuntime
import AdTracking
import ControlProtocol
import Foundation

/// Runs a decoded request (`Commands.decode` validated it: docs/protocol.md) and answers it.
/// Files are checked here, through `SafeFile` against the library, on a worker of their own
/// (the file system may be slow); everything else is handed to the player's loop, where the
/// controller runs it. Nothing unchecked reaches the loop.
///
/// Threading: `handle` on the control socket's thread (or the bus thread); it returns at once,
/// and `reply` runs later on the loop or the files worker.
public final class CommandRouter: Sendable {
    private let loop: any PlayerLoop
    private let controller: Controller
    private let library: Locked<[String]>
    private let files = Workers(name: "adplayerd-files")
    private let metrics: Metrics?
    private let outbox: BeaconOutbox?

    /// `metrics` and `outbox` answer `metrics` and `plays` off the loop (nil: nothing recorded).
    public init(loop: any PlayerLoop, controller: Controller, library: [String], metrics: Metrics? = nil, outbox: BeaconOutbox? = nil) {
        self.loop = loop
        self.controller = controller
        self.library = Locked(library)
        self.metrics = metrics
        self.outbox = outbox
    }

    /// SIGHUP: the library folders of the new configuration.
    public func setLibrary(_ folders: [String]) { library.withLock { $0 = folders } }

    public func handle(_ request: Request, reply: @escaping @Sendable (Result<JSONValue, ControlError>) -> Void) {
        let controller = self.controller
        switch request {
        case .version: reply(.success(["protocol": .int(ControlProtocol.version), "daemon": "adplayerd"]))
        case .subscribe: reply(.failure(ControlError(.internalError, "subscribe is the socket's own")))
        case .status: onLoop(reply) { controller.status() }
        case .metrics:
            let metrics = self.metrics
            files.execute { reply(.success(Self.describe(metrics))) }
        case .plays(let since):
            let outbox = self.outbox
            files.execute { reply(.success(["plays": .array((outbox?.plays(since: since) ?? []).map(Self.describe))])) }
        case .play: onLoop(reply) { try controller.play() }
        case .pause: onLoop(reply) { try controller.pause() }
        case .toggle: onLoop(reply) { try controller.toggle() }
        case .next: onLoop(reply) { try controller.next() }
        case .previous: onLoop(reply) { try controller.previous() }
        case .stop: onLoop(reply) { controller.stopCommand() }
        case .clear: onLoop(reply) { controller.clear() }
        case .background: onLoop(reply) { controller.setBackground(true) }
        case .foreground: onLoop(reply) { controller.setBackground(false) }
        case .closeAd: onLoop(reply) { try controller.closeAd() }
        case .loop(let on): onLoop(reply) { try controller.setLoop(on) }
        case .speed(let value): onLoop(reply) { try controller.speed(value) }
        case .seek(let target): onLoop(reply) { try controller.seek(target) }
        case .open(let path, let contentID, let start):
            checkFiles([path]) { [self] result in
                switch result {
                case .success(let paths):
                    let entry = QueueEntry(path: paths[0], contentID: contentID)
                    onLoop(reply) { try controller.open(entry, start: start) }
                case .failure(let error):
                    reply(.failure(error))
                }
            }
        case .queue(let paths):
            checkFiles(paths) { [self] result in
                switch result {
                case .success(let resolved): onLoop(reply) { try controller.enqueue(resolved.map { QueueEntry(path: $0) }) }
                case .failure(let error): reply(.failure(error))
                }
            }
        }
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
         "beacons": ["sent": .int(play.beaconsSent), "pending": .int(play.beaconsPending), "failed": .int(play.beaconsFailed)]]
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
    private func checkFiles(_ paths: [String], _ done: @escaping @Sendable (Result<[String], ControlError>) -> Void) {
        let folders = library.withLock { $0 }
        files.execute {
            guard !folders.isEmpty else {
                return done(.failure(ControlError(.noLibrary, "no library folder is configured (--library)")))
            }
            var resolved: [String] = []
            resolved.reserveCapacity(paths.count)
            for path in paths {
                var refusal: FileRefusal?
                var found: String?
                for folder in folders {
                    do {
                        found = try SafeFile.check(path, inside: folder).path
                        break
                    } catch let error as FileRefusal {
                        // The most telling refusal: a real problem with the file beats "outside".
                        if refusal == nil || refusal!.kind == .outside { refusal = error }
                    } catch {}
                }
                guard let found else {
                    let error = refusal ?? FileRefusal(path: path, kind: .outside, reason: "is not in a library folder")
                    let reason = error.kind == .outside ? "is not under a library folder (\(folders.joined(separator: ", ")))" : error.reason
                    return done(.failure(ControlError(ErrorCode(rawValue: error.kind.rawValue) ?? .badArgs, "\(path): \(reason)")))
                }
                resolved.append(found)
            }
            done(.success(resolved))
        }
    }
}

extension ControlError {
    /// `error` if it is a protocol error, else an `internal` one saying what it was.
    init(internalOrOwn error: any Error) {
        self = error as? ControlError ?? ControlError(.internalError, "\(error)")
    }
}
