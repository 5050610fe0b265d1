#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The monotonic clock every latency in the product is measured on (CLOCK_MONOTONIC, ns).
public enum MonotonicTime {
    public static func now() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }
}

/// Seconds as the loops count them.
public enum LoopTime {
    /// The longest wait a loop takes from a number of seconds: 100 years. Values that come from
    /// outside are bounded before they get here (`Seconds`); this only keeps a loop from
    /// trapping on an absurd one.
    public static let maxSeconds = 100 * 365 * 24 * 3600.0

    /// `seconds` as whole nanoseconds: NaN and negatives are 0, anything above `maxSeconds`
    /// is `maxSeconds`. Never traps.
    public static func nanoseconds(_ seconds: Double) -> UInt64 {
        guard seconds > 0 else { return 0 }   // also NaN
        return UInt64((min(seconds, maxSeconds) * 1e9).rounded())
    }
}
