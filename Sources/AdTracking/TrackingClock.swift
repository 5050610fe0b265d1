import AdRuntime
import CSystem
import Foundation

/// The clocks tracking reads, injectable so that tests can jump the wall clock.
///
/// - the **wall clock** (what `[TIMESTAMP]` says), which can be wrong at boot on a box without
///   a battery-backed clock and jump when NTP sets it;
/// - the **monotonic clock** of this boot (never jumps; reset at boot);
/// - whether the kernel calls the wall clock **synchronised** (adjtimex, what timedatectl's
///   NTPSynchronized reports);
/// - this **boot's id**, so that a monotonic time from an earlier boot is never compared.
public protocol TrackingClock: Sendable {
    func wallNow() -> Date
    /// Seconds since boot, never jumping.
    func monotonicNow() -> Double
    /// True when the wall clock is known to be synchronised; false when it is known not to be.
    func wallClockSynchronized() -> Bool
    var bootID: String { get }
}

/// The system's clocks.
public struct SystemTrackingClock: TrackingClock {
    public let bootID: String

    public init() {
        let id = (try? SafeFile.read("/proc/sys/kernel/random/boot_id", maxBytes: 64)).map { String(decoding: $0, as: UTF8.self) }
        bootID = id?.trimmingCharacters(in: .whitespacesAndNewlines) ?? "unknown"
    }

    public func wallNow() -> Date { Date() }
    public func monotonicNow() -> Double { Double(MonotonicTime.now()) / 1e9 }
    /// The kernel's word (`adjtimex`: not `TIME_ERROR`, not `STA_UNSYNC`). Where a sandbox
    /// refuses even reading it (systemd's `ProtectClock=`, some seccomp profiles), systemd-timesyncd's
    /// flag file says it; with neither, nothing is known to be wrong: synchronised.
    /// Not on the player's loop (a `stat`): the outbox and the reporter's writer call it.
    public func wallClockSynchronized() -> Bool {
        switch csystem_clock_synchronized() {
        case 1: return true
        case 0: return false
        default: return Self.timesyncdSaysSynchronized()
        }
    }

    static func timesyncdSaysSynchronized(folder: String = "/run/systemd/timesync") -> Bool {
        var info = stat()
        guard stat(folder, &info) == 0 else { return true }   // no timesyncd: nothing known
        return stat(folder + "/synchronized", &info) == 0
    }
}

/// The time this box has actually run, across restarts and reboots: what beacons are aged by
/// (a week of running, not a week by a wall clock that may jump). The outbox saves it with
/// every write; after a restart it goes on from the last saved value (a crash loses at most
/// the time since that write: beacons then live a little longer, never shorter).
struct RunClock {
    private let base: Double
    private let monotonicAtStart: Double
    private let clock: any TrackingClock

    init(saved: Double, clock: any TrackingClock) {
        base = saved.isFinite && saved >= 0 ? saved : 0
        monotonicAtStart = clock.monotonicNow()
        self.clock = clock
    }

    /// Seconds run, now.
    func now() -> Double { base + max(0, clock.monotonicNow() - monotonicAtStart) }
}

/// When a recorded event happened, by the clocks of the moment it was recorded, so that its
/// `[TIMESTAMP]` can be filled right when it is sent — corrected if the wall clock was wrong.
public struct RecordedTime: Sendable, Equatable {
    public var wall: Double
    public var monotonic: Double
    public var boot: String
    public var synchronized: Bool

    public init(wall: Double, monotonic: Double, boot: String, synchronized: Bool) {
        self.wall = wall
        self.monotonic = monotonic
        self.boot = boot
        self.synchronized = synchronized
    }

    public static func now(_ clock: any TrackingClock) -> RecordedTime {
        RecordedTime(wall: clock.wallNow().timeIntervalSince1970, monotonic: clock.monotonicNow(), boot: clock.bootID,
                     synchronized: clock.wallClockSynchronized())
    }

    /// What the wall clock should have said then, as far as can be known now: the recorded wall
    /// time if it was synchronised; if not and this is the same boot with a synchronised clock
    /// now, the recorded monotonic time on today's wall-minus-monotonic offset (what NTP
    /// corrected is corrected here too); else the recorded wall time (nothing better is known).
    /// Nil: not synchronised yet, same boot — wait (see `BeaconOutbox.Configuration.timeSyncWait`).
    func corrected(_ clock: any TrackingClock) -> Double? {
        if synchronized { return wall }
        guard boot == clock.bootID else { return wall }
        guard clock.wallClockSynchronized() else { return nil }
        return monotonic + (clock.wallNow().timeIntervalSince1970 - clock.monotonicNow())
    }
}
