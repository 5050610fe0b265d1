import Bounds
import ProcessSupport
import ControlProtocol
import CSystem
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// What `adplayerd` and `adplayerd-dev` do first, before any thread exists (mpv's included),
/// so that the tools measure the process the daemon is.
public enum ProcessSetup {
    public static func beforeAnyThread() {
        // Signals wait for the signal thread (Signals).
        Signals.blockForProcess()
        let environment = ProcessInfo.processInfo.environment
        // Two malloc arenas, not glibc's default of 8 per core: mpv starts demuxer and decoder
        // threads for every file, each new thread may take an arena of its own, and memory freed
        // into an arena stays resident. Measured over 150 one-second episodes with ads
        // (docs/reliability.md): RSS climbs in steps to 266 MiB with the default, stays at 120 MiB
        // with two. An environment's MALLOC_ARENA_MAX still wins (glibc reads it first).
        if environment["MALLOC_ARENA_MAX"] == nil { _ = csystem_limit_malloc_arenas(2) }
        // Blocks of 128 KiB and more (mpv's demuxer packets and decoder buffers, a creative's pixels)
        // are mapped, and given back when freed, at a fixed threshold: glibc's moving threshold
        // (raised to the size of each large block freed, up to 32 MiB) lets them fragment the heap
        // from one file to the next — mpv opens three or four files an episode with ads. Peak RSS
        // playing the two sample episodes with ads: 109 → 97 MiB (docs/benchmarks.md §2).
        if environment["MALLOC_MMAP_THRESHOLD_"] == nil { _ = csystem_fix_malloc_mmap_threshold(128 * 1024) }
    }

    /// A tool of a program (`adplayerd plays`): its usage, printed with the one problem when its
    /// command line cannot be used, and what runs it.
    public struct Tool {
        public let usage: String
        public let run: ([String]) throws -> Int32
        public init(usage: String, _ run: @escaping ([String]) throws -> Int32) {
            self.usage = usage
            self.run = run
        }
    }

    /// Runs a command line: the tool named by the first word, else `otherwise` (the daemon;
    /// nil: the usage, exit 2); `--version` prints the program's name and `Product.version`;
    /// `-h`, `--help`, `help` print the usage (after a tool's name, the
    /// tool's). Errors become one line on stderr and an exit status: 2 for bad usage (with the
    /// tool's own usage, not the program's) or configuration, 1 for anything else. Lines carry
    /// a journald priority only on the journal's stream (`StandardError`).
    /// A tool gets the signals' default actions back (Ctrl-C stops it), but those in
    /// `watchingSignals`, which take them on a thread of their own as the daemon does.
    public static func runTools(_ name: String, _ arguments: [String], tools: [String: Tool], usage: String,
                                watchingSignals: Set<String> = [], otherwise: (([String]) throws -> Int32)?) -> Never {
        var usage = usage
        var name = name
        do {
            if let first = arguments.first, let tool = tools[first] {
                usage = tool.usage
                name += " " + first
                let rest = Array(arguments.dropFirst())
                if rest.count == 1, ["-h", "--help"].contains(rest[0]) {
                    print(tool.usage)
                    exit(0)
                }
                if !watchingSignals.contains(first) { Signals.unblockForTool() }
                exit(try tool.run(rest))
            }
            if arguments == ["--version"] {
                print("\(name) \(Product.version)")
                exit(0)
            }
            if ["-h", "--help", "help"].contains(arguments.first ?? "") {
                print(usage)
                exit(0)
            }
            guard let otherwise else {
                StandardError.write(priority: 3, "\(name): a tool is needed\n\n\(usage)", named: true)
                exit(2)
            }
            exit(try otherwise(arguments))
        } catch let error as UsageError {
            StandardError.write(priority: 3, "\(name): \(error.message)\n\n\(usage)", named: true)
            exit(2)
        } catch let error as ConfigurationError {
            StandardError.write(priority: 3, "\(name): \(error)", named: true)
            exit(2)
        } catch {
            StandardError.write(priority: 3, "\(name): \(Logger.escape(String(describing: error)))", named: true)
            exit(1)
        }
    }
}
