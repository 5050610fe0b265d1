import AdRuntime
import AdSources
import AdTracking
import Foundation
import MpvPlayerAdapter

struct UsageError: Error {
    let message: String
}

/// `adplayerd play [--vo VO] [--ao AO] [--demo] FILE…`: plays the files one after another
/// and prints the player model's changes. `--demo` also pauses, resumes, changes speed and
/// seeks during the first file, to show each change.
struct PlayCommand {
    struct Options {
        var files: [String] = []
        var vo = "null"
        var ao = "null"
        var demo = false
        var ads: String?
        var stateDir: String?
        var pauseAdDelay = 1.0

        static func parse(_ args: [String]) throws -> Options {
            var options = Options()
            var rest = args[...]
            if rest.first == "play" { rest = rest.dropFirst() }
            while let arg = rest.popFirst() {
                switch arg {
                case "--vo", "--ao":
                    guard let value = rest.popFirst() else { throw UsageError(message: "\(arg) needs a value") }
                    if arg == "--vo" { options.vo = value } else { options.ao = value }
                case "--demo": options.demo = true
                case "--ads":
                    guard let value = rest.popFirst() else { throw UsageError(message: "--ads needs a catalog folder") }
                    options.ads = value
                case "--state-dir":
                    guard let value = rest.popFirst() else { throw UsageError(message: "--state-dir needs a folder") }
                    options.stateDir = value
                case "--pause-ad-delay":
                    guard let value = rest.popFirst(), let seconds = Double(value), seconds >= 0 else {
                        throw UsageError(message: "--pause-ad-delay needs a number of seconds ≥ 0")
                    }
                    options.pauseAdDelay = seconds
                case "-h", "--help": throw UsageError(message: "help")
                default:
                    if arg.hasPrefix("-") { throw UsageError(message: "unknown option \(arg)") }
                    options.files.append(arg)
                }
            }
            if options.files.isEmpty { throw UsageError(message: "no file to play") }
            return options
        }
    }

    static let usage = """
        usage: adplayerd play [--vo VO] [--ao AO] [--ads SOURCE] [--state-dir DIR] [--pause-ad-delay S] [--demo] FILE...
          Plays FILEs through libmpv and prints the player model's changes (and the ads') as a timeline.
          --vo, --ao          mpv's video and audio outputs (default: null, null)
          --ads SOURCE        run ads from SOURCE: a catalog folder (catalog.json), a VAST tag URL, or the
                              slots API (an URL ending in /v1/ads; token in $ADPLAYERD_ADS_TOKEN): overlays
                              at their slots, a pause ad after the content stayed paused, a post-roll
                              after each episode
          --state-dir DIR     keep the tracking outbox (beacons, R17) in DIR/adplayerd.sqlite and deliver it
          --pause-ad-delay S  seconds of pause before a pause ad (default 1)
          --demo              pause, resume, change speed and seek during the first file
        """

    let options: Options

    func run() throws -> Int32 {
        var configuration = MpvPlayerConfiguration()
        configuration.vo = options.vo
        configuration.ao = options.ao
        configuration.extraOptions = [("title", "adplayerd")]
        let catalog = try options.ads.map(Self.source)
        let tracking = try options.stateDir.map(Self.tracking)
        let player = try MpvPlayer(configuration: configuration) { message in
            FileHandle.standardError.write(Data("<4>mpv: \(message.prefix): \(message.text)".utf8))
        }
        defer { player.shutdown() }
        let surface = MpvAdSurface(player: player)

        let finished = DispatchSemaphore(value: 0)
        let queue = Queue(files: options.files)
        let printer = TimelinePrinter()
        let current = Locked<EpisodeAds?>(nil)
        let pauseAdDelay = options.pauseAdDelay

        // Moves on to the next file, on a thread of its own: never from inside an observer.
        // An episode's ad policy calls it when its post-roll is done, hence the box.
        let advance = Advance()
        let next: @Sendable () -> Void = {
            DispatchQueue.global().async {
                current.withLock { $0?.stop(); $0 = nil }
                while let file = queue.next() {
                    do {
                        let entry = try player.load(file)
                        if let catalog {
                            let content = ContentInfo(id: URL(fileURLWithPath: file).deletingPathExtension().lastPathComponent)
                            let episode = EpisodeAds(content: content, entry: entry, source: catalog, surface: surface,
                                                     loop: player.loop, pauseAdDelay: pauseAdDelay,
                                                     onEvent: { printer.print($0); tracking?.reporter.record($0) },
                                                     onFinished: { advance.run() })
                            current.withLock { $0 = episode }
                            episode.follow(player)
                        }
                        return
                    } catch {
                        print("          \(file): \(error)")
                    }
                }
                current.withLock { $0?.stop(); $0 = nil }
                finished.signal()
            }
        }
        advance.set(next)
        let observer = ChangeObserver { event in
            printer.print(event)
            // Without ads, the end of a file (or its failure) moves on; with ads, the policy does.
            if catalog == nil {
                switch event.change {
                case .ended, .failed: next()
                default: break
                }
            }
        }
        let observation = player.addObserver(observer)
        defer { observation.cancel() }

        next()
        if options.demo { runDemo(player) }
        finished.wait()
        if let tracking {
            // What is due now goes out before we stop; the rest waits in the outbox.
            _ = Blocking.run { try await tracking.outbox.deliverAll(until: Date().addingTimeInterval(5)) }
        }
        return 0
    }

    /// A catalog folder, a slots API URL (…/v1/ads) or a VAST tag URL.
    static func source(_ spec: String) throws -> any AdSource {
        if spec.hasPrefix("http://") || spec.hasPrefix("https://") {
            guard let url = URL(string: spec) else { throw UsageError(message: "--ads: bad URL \(spec)") }
            if url.path.hasSuffix("/v1/ads") {
                let base = URL(string: spec.replacingOccurrences(of: "/v1/ads", with: ""))!
                return SlotsAPIClient(endpoint: base, token: ProcessInfo.processInfo.environment["ADPLAYERD_ADS_TOKEN"] ?? "")
            }
            let cache = FileManager.default.temporaryDirectory.appendingPathComponent("adplayerd-creatives-\(getpid())")
            return VASTClient(tag: spec, cacheDirectory: cache)
        }
        return try LocalCatalog(folder: URL(fileURLWithPath: spec))
    }

    /// The outbox in the state folder, delivering in the background, and its reporter.
    static func tracking(_ stateDir: String) throws -> (outbox: BeaconOutbox, reporter: TrackingReporter) {
        try FileManager.default.createDirectory(atPath: stateDir, withIntermediateDirectories: true)
        let outbox = try BeaconOutbox(path: stateDir + "/adplayerd.sqlite", onEvent: { event in
            if case .sent(let url, _) = event { print("          beacon sent \(url)") }
        })
        Task.detached {
            while true {
                _ = try? await outbox.deliverDue()
                try? await Task.sleep(nanoseconds: 500_000_000)
            }
        }
        return (outbox, TrackingReporter(outbox: outbox) { error in
            FileHandle.standardError.write(Data("<3>adplayerd: tracking: \(error)\n".utf8))
        })
    }

    private func runDemo(_ player: MpvPlayer) {
        let steps: [(Double, String, @Sendable (MpvPlayer) throws -> Void)] = [
            (1.5, "pause", { try $0.pause() }),
            (3.2, "play", { try $0.play() }),
            (3.7, "speed 2", { try $0.setSpeed(2) }),
            (4.2, "seek 1.0", { try $0.seek(1.0) }),
            (4.6, "speed 1", { try $0.setSpeed(1) }),
        ]
        DispatchQueue.global().async {
            let start = Date()
            for (at, name, step) in steps {
                Thread.sleep(forTimeInterval: max(0, at - Date().timeIntervalSince(start)))
                print("          >>> \(name)")
                do { try step(player) } catch { print("          \(name): \(error)") }
            }
        }
    }
}

/// "Play the next file", set once the closure that does it exists.
final class Advance: Sendable {
    private let body = Locked<(@Sendable () -> Void)?>(nil)
    func set(_ next: @escaping @Sendable () -> Void) { body.withLock { $0 = next } }
    func run() { body.withLock { $0 }?() }
}

/// A player observer made of a closure.
final class ChangeObserver: PlayerObserver {
    private let body: @Sendable (PlayerEvent) -> Void
    init(_ body: @escaping @Sendable (PlayerEvent) -> Void) { self.body = body }
    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) { body(event) }
}

/// The files still to play.
final class Queue: Sendable {
    private let files: Locked<[String]>
    init(files: [String]) { self.files = Locked(files) }
    func next() -> String? { files.withLock { $0.isEmpty ? nil : $0.removeFirst() } }
}
