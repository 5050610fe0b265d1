import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Synchronization

/// The clocks, the randomness and the worker threads of one box — what decides what an ad does
/// (`[TIMESTAMP]`, dayparts, flights, caps, separation, cache-busting, ids, shuffles) and where
/// the box's off-loop work runs — handed to every part that needs them, never read from a
/// global: two simulations in one process (a test runner, a service running forecasts) each
/// have their own, and write exactly what each writes alone.
///
/// `AdEnvironment.system` (the daemon, the tools): the system's clocks and random numbers, a
/// thread of its own for each `Workers`. A simulation's (`simulated(clock:seed:)`): its clock,
/// a seeded sequence, and one thread that every `Workers` made with it shares — tracking's
/// writer, the state store's writer, the ad tasks take their turns in the order work was
/// handed over, whatever the threads' timing — with the work in flight counted, so that its
/// time moves only when nothing is under way (docs/simulate.md). Only what decides ads reads
/// here: logs, latency figures, deadlines of waits and the creative cache keep the system's clocks.
///
/// Threading: any thread.
public final class AdEnvironment: Sendable {
    /// The system's: immutable (nothing here changes after it is made).
    public static let system = AdEnvironment()

    private let clock: (@Sendable () -> (wall: Double, monotonic: Double))?
    private let seeded: Locked<SplitMix64>?
    /// The work handed to this environment's `Workers` and counted tasks, not finished yet
    /// (behind a lock with a condition: a simulation's driver waits for it to reach 0).
    private let inFlight = Locked(0)
    /// A simulation's one thread, shared by every `Workers` made with this environment (made
    /// at the first); nil: each `Workers` has threads of its own.
    private let shared: Locked<Workers?>?
    /// The boot a show time names (`ShowTime`): the kernel's, or the simulation's.
    public let bootID: String

    private init() {
        clock = nil
        seeded = nil
        shared = nil
        bootID = Self.kernelBootID
    }

    /// A simulation: `clock` says the simulated wall clock (seconds since 1970) and monotonic
    /// seconds; every random choice comes from the sequence of `seed`.
    public init(simulatedClock clock: @escaping @Sendable () -> (wall: Double, monotonic: Double), seed: UInt64) {
        self.clock = clock
        seeded = Locked(SplitMix64(seed: seed))
        shared = Locked(nil)
        bootID = "simulation"
    }

    public var isSimulated: Bool { clock != nil }

    // MARK: Clocks

    /// The wall clock, seconds since 1970.
    public func wall() -> Double { clock?().wall ?? Date().timeIntervalSince1970 }

    public func date() -> Date { Date(timeIntervalSince1970: wall()) }

    /// Seconds of a clock that never jumps (`CLOCK_MONOTONIC`).
    public func monotonic() -> Double { clock?().monotonic ?? Double(MonotonicTime.now()) / 1e9 }

    // MARK: Randomness

    public func next() -> UInt64 {
        if let seeded { return seeded.withLock { $0.next() } }
        var system = SystemRandomNumberGenerator()
        return system.next()
    }

    /// A generator drawing from `next()`, for `shuffled(using:)` and `random(in:using:)`.
    public struct Generator: RandomNumberGenerator {
        let environment: AdEnvironment
        public init(_ environment: AdEnvironment) { self.environment = environment }
        public mutating func next() -> UInt64 { environment.next() }
    }

    public func uint64(in range: ClosedRange<UInt64>) -> UInt64 {
        var generator = Generator(self)
        return UInt64.random(in: range, using: &generator)
    }

    public func int(in range: Range<Int>) -> Int {
        var generator = Generator(self)
        return Int.random(in: range, using: &generator)
    }

    /// A version-4 UUID, lower case.
    public func uuid() -> String {
        let high = next(), low = next()
        var bytes = (0..<8).map { UInt8(truncatingIfNeeded: high >> (8 * $0)) } + (0..<8).map { UInt8(truncatingIfNeeded: low >> (8 * $0)) }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = Digits.hex(bytes)
        let parts = [hex.prefix(8), hex.dropFirst(8).prefix(4), hex.dropFirst(12).prefix(4), hex.dropFirst(16).prefix(4), hex.dropFirst(20)]
        return parts.joined(separator: "-")
    }

    // MARK: Work

    /// Whether nothing handed to this environment's workers and counted tasks is under way.
    public var settled: Bool { inFlight.withLock { $0 == 0 } }

    /// How much is under way (a simulation's; 0 for the system's).
    package var underWay: Int { inFlight.withLock { $0 } }

    /// Work handed over (`Workers.execute`, a counted task's start).
    /// Counted in a simulation only (the daemon's work is not waited for).
    package func began() {
        guard clock != nil else { return }
        inFlight.withLock { $0 += 1 }
    }

    /// Work done: the waiters of `waitSettled` hear of the last.
    package func finished() {
        guard clock != nil else { return }
        if inFlight.withLock({ $0 -= 1; return $0 == 0 }) { inFlight.signal { _ in } }
    }

    /// Waits (blocking, not spinning: the simulation's thread needs the core) until nothing is
    /// under way; false when `timeout` seconds of real time pass first.
    public func waitSettled(timeout: Double) -> Bool {
        inFlight.wait(timeout: timeout) { $0 == 0 ? true : nil } ?? false
    }

    /// The thread this environment's `Workers` share (a simulation), made at the first ask.
    package func sharedWorkers(_ make: () -> Workers) -> Workers? {
        guard let shared else { return nil }
        return shared.withLock { current in
            if let current { return current }
            let made = make()
            current = made
            return made
        }
    }

    /// Where counted tasks run: the simulation's one thread, or the global executor.
    package var taskExecutor: Workers? { shared?.withLock { $0 } }

    private static let kernelBootID: String = {
        let fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return "" }
        defer { close(fd) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = read(fd, &buffer, buffer.count)
        return n > 0 ? String(decoding: buffer.prefix(n), as: UTF8.self).trimmed() : ""
    }()
}

/// SplitMix64: a small, fast, well-mixed sequence from one 64-bit seed.
public struct SplitMix64: RandomNumberGenerator, Sendable {
    private var state: UInt64
    public init(seed: UInt64) { state = seed }
    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
