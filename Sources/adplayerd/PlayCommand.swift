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
        usage: adplayerd play [--vo VO] [--ao AO] [--demo] FILE...
          Plays FILEs through libmpv and prints the player model's changes as a timeline.
          --vo, --ao  mpv's video and audio outputs (default: null, null)
          --demo      pause, resume, change speed and seek during the first file
        """

    let options: Options

    func run() throws -> Int32 {
        var configuration = MpvPlayerConfiguration()
        configuration.vo = options.vo
        configuration.ao = options.ao
        let player = try MpvPlayer(configuration: configuration) { message in
            FileHandle.standardError.write(Data("<4>mpv: \(message.prefix): \(message.text)".utf8))
        }
        defer { player.shutdown() }

        let finished = DispatchSemaphore(value: 0)
        let queue = Queue(files: options.files)
        let printer = TimelinePrinter { event in
            switch event.change {
            case .ended, .failed:
                // The next episode, on another thread: an observer must not block the player.
                DispatchQueue.global().async {
                    if let next = queue.next() {
                        do { try player.load(next) } catch { print("          load \(next): \(error)"); finished.signal() }
                    } else {
                        finished.signal()
                    }
                }
            default: break
            }
        }
        let observation = player.addObserver(printer)
        defer { observation.cancel() }

        guard let first = queue.next() else { return 0 }
        try player.load(first)
        if options.demo { runDemo(player) }
        finished.wait()
        return 0
    }

    private func runDemo(_ player: MpvPlayer) {
        let steps: [(Double, String, @Sendable (MpvPlayer) throws -> Void)] = [
            (1.0, "pause", { try $0.pause() }),
            (1.8, "play", { try $0.play() }),
            (2.3, "speed 2", { try $0.setSpeed(2) }),
            (3.0, "seek 0.5", { try $0.seek(0.5) }),
            (3.6, "speed 1", { try $0.setSpeed(1) }),
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

/// The files still to play.
final class Queue: Sendable {
    private let files: Mutex<[String]>
    init(files: [String]) { self.files = Mutex(files) }
    func next() -> String? { files.withLock { $0.isEmpty ? nil : $0.removeFirst() } }
}
