import Foundation
import Synchronization

/// The clocks and the randomness that decide what an ad does — `[TIMESTAMP]`, dayparts,
/// flights, caps, separation, cache-busting, ids — read in one place, so that
/// `adplayerd simulate` (docs/simulate.md) can run the daemon's own code on simulated time
/// with every random choice seeded: two runs with the same inputs write the same bytes.
///
/// Outside a simulation (the daemon, the tools) nothing is set: the system's clocks and
/// random numbers, at the cost of one relaxed atomic load a read. A simulation sets both once,
/// before anything runs, for the life of its process. Only what decides ads reads here: logs,
/// latency figures, deadlines of waits and the creative cache keep the system's clocks.
public enum SimulatedTime {
    private static let active = Atomic<Bool>(false)
    /// A class, so that the closure is stored and read as it is (a closure in a generic box is
    /// re-wrapped at every read).
    private final class Source: Sendable {
        let now: @Sendable () -> (wall: Double, monotonic: Double)
        init(_ now: @escaping @Sendable () -> (wall: Double, monotonic: Double)) { self.now = now }
    }
    private static let clock = Locked<Source?>(nil)

    /// From now on, `wall()` and `monotonic()` are `now()`'s (seconds since 1970, seconds).
    public static func install(_ now: @escaping @Sendable () -> (wall: Double, monotonic: Double)) {
        clock.withLock { $0 = Source(now) }
        active.store(true, ordering: .releasing)
    }

    public static var isActive: Bool { active.load(ordering: .acquiring) }

    /// The wall clock, seconds since 1970.
    public static func wall() -> Double {
        if active.load(ordering: .relaxed), let source = clock.withLock({ $0 }) { return source.now().wall }
        return Date().timeIntervalSince1970
    }

    public static func date() -> Date { Date(timeIntervalSince1970: wall()) }

    /// Seconds of a clock that never jumps (`CLOCK_MONOTONIC`).
    public static func monotonic() -> Double {
        if active.load(ordering: .relaxed), let source = clock.withLock({ $0 }) { return source.now().monotonic }
        return Double(MonotonicTime.now()) / 1e9
    }
}

/// Random numbers for what an ad does (ids, cache-busting, shuffles): the system's, or a
/// seeded sequence in a simulation (`seed`), so that its choices repeat.
public enum ProcessRandom {
    private static let seeded = Locked<SplitMix64?>(nil)

    /// From now on every number comes from the sequence of `seed`.
    public static func seed(_ seed: UInt64) {
        seeded.withLock { $0 = SplitMix64(seed: seed) }
    }

    public static func next() -> UInt64 {
        if let value = seeded.withLock({ generator -> UInt64? in generator?.next() }) { return value }
        var system = SystemRandomNumberGenerator()
        return system.next()
    }

    /// A generator drawing from `next()`, for `shuffled(using:)` and `random(in:using:)`.
    public struct Generator: RandomNumberGenerator {
        public init() {}
        public mutating func next() -> UInt64 { ProcessRandom.next() }
    }

    public static func uint64(in range: ClosedRange<UInt64>) -> UInt64 {
        var generator = Generator()
        return UInt64.random(in: range, using: &generator)
    }

    public static func int(in range: Range<Int>) -> Int {
        var generator = Generator()
        return Int.random(in: range, using: &generator)
    }

    /// A version-4 UUID, lower case.
    public static func uuid() -> String {
        let high = next(), low = next()
        var bytes = (0..<8).map { UInt8(truncatingIfNeeded: high >> (8 * $0)) } + (0..<8).map { UInt8(truncatingIfNeeded: low >> (8 * $0)) }
        bytes[6] = (bytes[6] & 0x0F) | 0x40
        bytes[8] = (bytes[8] & 0x3F) | 0x80
        let hex = bytes.map { String(format: "%02x", $0) }.joined()
        let parts = [hex.prefix(8), hex.dropFirst(8).prefix(4), hex.dropFirst(12).prefix(4), hex.dropFirst(16).prefix(4), hex.dropFirst(20)]
        return parts.joined(separator: "-")
    }
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
