import AdRuntime
import Bounds
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Files' measured loudness (SPEC R28), each measured once and kept by the file's identity
/// (device, inode, size, modification time): a file that changes is measured again. Kept in
/// memory for the loop's lookups and, with a `path`, in a small file beside the daemon's state
/// (`loudness.tsv`), so a restart measures nothing twice.
///
/// Two ways in:
/// - `measure` (off the loop, async): an ad's creative, with its preparation — flat out on a
///   thread of its own, seconds at most for a creative;
/// - `known` (on the loop): a memory lookup; a file not known (or not checked in this run) is
///   queued for the background thread, which runs at the lowest priority (nice 19) and at most
///   `pace` of a core, so an episode being measured never takes the player's CPU. Until it is
///   known, the fixed target applies.
///
/// Threading: any thread; the state is one lock's, never held while measuring or writing.
public final class LoudnessBook: LoudnessSource, @unchecked Sendable {
    // @unchecked: `state` is a Locked; the workers and closures are Sendable.
    public static let maximumEntries = 10_000

    struct Identity: Equatable, Sendable {
        var device: UInt64
        var inode: UInt64
        var size: Int64
        var modified: Int64   // ns
    }

    struct Entry: Sendable {
        var identity: Identity
        var loudness: Loudness
        var used: UInt64
    }

    private struct State {
        var entries: [String: Entry] = [:]
        /// Paths whose identity was checked in this run (a `known` of any other queues a check).
        var checked: Set<String> = []
        var queued: Set<String> = []
        /// Identities that failed to measure: not tried again until the file changes.
        var failed: [String: Identity] = [:]
        var clock: UInt64 = 0
        var dirty = false
        var measuredCount = 0
        var failures = 0
    }

    private let state = Locked(State())
    private let file: String?
    private let pace: Double
    private let background: Workers
    private let foreground: Workers
    private let note: @Sendable (String) -> Void

    /// `path`: where the book is kept (nil: memory only). `pace`: the background's share of a
    /// core (the simulation: 1, on its virtual time). `note`: a measurement that failed, once
    /// per file version.
    public init(path: String?, pace: Double = 0.5, environment: AdEnvironment = .system, note: @escaping @Sendable (String) -> Void = { _ in }) {
        file = path
        self.pace = pace
        self.note = note
        background = Workers(name: "adplayerd-lufs", environment: environment)
        foreground = Workers(name: "adplayerd-meter", environment: environment)
        if let path { state.withLock { $0.entries = Self.load(path) } }
        background.execute { Self.lowerPriority() }
    }

    /// How many files were measured and failed to in this run.
    public var counts: (measured: Int, failed: Int) { state.withLock { ($0.measuredCount, $0.failures) } }

    // MARK: LoudnessSource

    public func measure(_ path: String) async -> Loudness? {
        let answer = Handover<Loudness?>()
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            foreground.execute { [self] in
                answer.fulfil(lookUp(path, pace: 1, truePeak: true))
                continuation.resume()
            }
        }
        return answer.current ?? nil
    }

    public func known(_ path: String) -> Loudness? {
        let (found, check) = state.withLock { state -> (Loudness?, Bool) in
            state.clock += 1
            state.entries[path]?.used = state.clock
            let check = !state.checked.contains(path) && state.queued.insert(path).inserted
            return (state.entries[path]?.loudness, check)
        }
        if check { queueCheck(path) }
        return found
    }

    public func refresh(_ path: String) {
        if state.withLock({ $0.queued.insert(path).inserted }) { queueCheck(path) }
    }

    private func queueCheck(_ path: String) {
        background.execute { [self] in
            _ = lookUp(path, pace: pace, truePeak: false)
            _ = state.withLock { $0.queued.remove(path) }
        }
    }

    /// Blocks until the background has measured what it was asked to (tests, `simulate`'s end).
    public func settle() {
        let done = Handover<Bool>()
        background.execute { done.fulfil(true) }
        _ = done.wait()
    }

    // MARK: Off the loop

    /// The file's loudness: the book's when its identity is unchanged (and, for a creative,
    /// with its true peak), else measured now — an episode without its true peak (the
    /// oversampling is most of the cost, and only an ad's peak limits its gain).
    private func lookUp(_ path: String, pace: Double, truePeak: Bool) -> Loudness? {
        guard let identity = Self.identity(path) else { return nil }
        let known = state.withLock { state -> Loudness? in
            state.checked.insert(path)
            guard let entry = state.entries[path], entry.identity == identity else { return nil }
            if truePeak, entry.loudness.integrated != nil, entry.loudness.truePeak == nil { return nil }
            return entry.loudness
        }
        if let known { return known }
        if state.withLock({ $0.failed[path] == identity }) { return nil }
        do {
            let loudness = try LoudnessMeter.measure(path, pace: pace, truePeak: truePeak)
            state.withLock { state in
                state.clock += 1
                state.entries[path] = Entry(identity: identity, loudness: loudness, used: state.clock)
                state.measuredCount += 1
                state.dirty = true
                if state.entries.count > Self.maximumEntries,
                   let oldest = state.entries.min(by: { $0.value.used < $1.value.used })?.key {
                    state.entries[oldest] = nil
                }
            }
            save()
            return loudness
        } catch {
            state.withLock { state in
                state.failed[path] = identity
                state.failures += 1
            }
            note("\(error)")
            return nil
        }
    }

    private func save() {
        guard let file else { return }
        let text = state.withLock { state -> String? in
            guard state.dirty else { return nil }
            state.dirty = false
            return Self.text(state.entries)
        }
        guard let text else { return }
        do {
            try AtomicFile.write(Data(text.utf8), to: file, durable: false)
        } catch {
            note("\(file): the loudness book was not saved: \(error)")
        }
    }

    /// A file as the book knows it. A content-addressed file — the creative cache's objects,
    /// named by the SHA-256 of their bytes, which the cache checks before each use — is known
    /// by its name and size alone: the cache touches its times at every use (its LRU order),
    /// which must not make it a new file (measured 99 times in 6 simulated hours before).
    static func identity(_ path: String) -> Identity? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        if isContentAddressed(path) { return Identity(device: 0, inode: 0, size: Int64(info.st_size), modified: 0) }
        return Identity(device: UInt64(info.st_dev), inode: UInt64(info.st_ino), size: Int64(info.st_size),
                        modified: Int64(info.st_mtim.tv_sec) * 1_000_000_000 + Int64(info.st_mtim.tv_nsec))
    }

    /// `…/objects/<64 hex digits>`: the creative cache's naming (CreativeCache).
    static func isContentAddressed(_ path: String) -> Bool {
        let parts = path.split(separator: "/")
        guard parts.count >= 2, parts[parts.count - 2] == "objects", let name = parts.last, name.utf8.count == 64 else { return false }
        return name.utf8.allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    private static func lowerPriority() {
        // On Linux the nice value is per thread (sched(7)), and `who` 0 is the calling thread:
        // the background's measurements yield to the player's threads, nothing else moves.
        _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
    }

    // MARK: The file

    /// One line a file: `device inode size modified integrated truePeak path` (tab-separated;
    /// `-` for no sound). Paths with a tab or a line break are not kept.
    static func text(_ entries: [String: Entry]) -> String {
        var lines = ["# adplayerd loudness book 1: device inode size mtime_ns integrated_lufs true_peak_dbtp path"]
        for (path, entry) in entries.sorted(by: { $0.key < $1.key }) where !path.contains("\t") && !path.contains("\n") {
            let id = entry.identity
            let numbers = [entry.loudness.integrated, entry.loudness.truePeak].map { $0.map { String(format: "%.2f", $0) } ?? "-" }
            lines.append(["\(id.device)", "\(id.inode)", "\(id.size)", "\(id.modified)", numbers[0], numbers[1], path].joined(separator: "\t"))
        }
        return lines.joined(separator: "\n") + "\n"
    }

    /// The book at `path`; lines that do not parse are skipped (a damaged book is re-measured).
    static func load(_ path: String) -> [String: Entry] {
        guard let data = try? SafeFile.read(path, maxBytes: 8 << 20), let text = String(data: data, encoding: .utf8) else { return [:] }
        var entries: [String: Entry] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            let fields = line.split(separator: "\t", maxSplits: 6, omittingEmptySubsequences: false)
            guard fields.count == 7, let device = UInt64(fields[0]), let inode = UInt64(fields[1]), let size = Int64(fields[2]),
                  let modified = Int64(fields[3]), entries.count < maximumEntries else { continue }
            func level(_ field: Substring) -> Double?? {
                if field == "-" { return .some(nil) }
                guard let value = Double(field), value.isFinite, value > -200, value < 50 else { return nil }
                return .some(value)
            }
            guard let integrated = level(fields[4]), let peak = level(fields[5]) else { continue }
            entries[String(fields[6])] = Entry(identity: Identity(device: device, inode: inode, size: size, modified: modified),
                                               loudness: Loudness(integrated: integrated, truePeak: peak), used: 0)
        }
        return entries
    }
}
