import AdRuntime
import Foundation
import MpvPlayerAdapter
import Synchronization

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
        usage: adplayerd play [--vo VO] [--ao AO] [--ads CATALOG] [--pause-ad-delay S] [--demo] FILE...
          Plays FILEs through libmpv and prints the player model's changes (and the ads') as a timeline.
          --vo, --ao          mpv's video and audio outputs (default: null, null)
          --ads CATALOG       run ads from a local catalog folder (catalog.json): overlays at their slots,
                              a pause ad after the content stayed paused, a post-roll after each episode
          --pause-ad-delay S  seconds of pause before a pause ad (default 1)
          --demo              pause, resume, change speed and seek during the first file
        """

    let options: Options

    func run() throws -> Int32 {
        var configuration = MpvPlayerConfiguration()
        configuration.vo = options.vo
        configuration.ao = options.ao
        configuration.extraOptions = [("title", "adplayerd")]
        let catalog = try options.ads.map { try LocalCatalog(folder: URL(fileURLWithPath: $0)) }
        let player = try MpvPlayer(configuration: configuration) { message in
            FileHandle.standardError.write(Data("<4>mpv: \(message.prefix): \(message.text)".utf8))
        }
        defer { player.shutdown() }
        let surface = MpvAdSurface(player: player)

        let finished = DispatchSemaphore(value: 0)
        let queue = Queue(files: options.files)
        let printer = TimelinePrinter()
        let current = Mutex<EpisodeAds?>(nil)
        let pauseAdDelay = options.pauseAdDelay

        // Moves on to the next file, on a thread of its own: never from inside an observer.
        let next: @Sendable () -> Void = {
            DispatchQueue.global().async {
                current.withLock { $0?.stop(); $0 = nil }
                while let file = queue.next() {
                    do {
                        let entry = try player.load(file)
                        if let catalog {
                            let content = ContentInfo(id: URL(fileURLWithPath: file).deletingPathExtension().lastPathComponent)
                            let episode = EpisodeAds(content: content, entry: entry, source: catalog, surface: surface,
                                                     pauseAdDelay: pauseAdDelay, onEvent: { printer.print($0) },
                                                     onFinished: { PlayCommand.advance() })
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
        PlayCommand.advanceHandler.withLock { $0 = next }
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
        return 0
    }

    /// The current run's "next file" (set by `run`).
    static let advanceHandler = Mutex<(@Sendable () -> Void)?>(nil)
    static func advance() { advanceHandler.withLock { $0 }?() }

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

/// A player observer made of a closure.
final class ChangeObserver: PlayerObserver {
    private let body: @Sendable (PlayerEvent) -> Void
    init(_ body: @escaping @Sendable (PlayerEvent) -> Void) { self.body = body }
    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) { body(event) }
}

/// The files still to play.
final class Queue: Sendable {
    private let files: Mutex<[String]>
    init(files: [String]) { self.files = Mutex(files) }
    func next() -> String? { files.withLock { $0.isEmpty ? nil : $0.removeFirst() } }
}
