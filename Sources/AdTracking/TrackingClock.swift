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
    /// What this box knows of its wall clock besides the kernel's word (nil: nothing; the
    /// kernel's word alone decides).
    var evidence: ClockEvidence? { get }
}

extension TrackingClock {
    public var evidence: ClockEvidence? { nil }
}

/// Whether a wall clock the kernel does not call synchronised may be trusted all the same.
/// Many boxes run no NTP client — VMs, containers, boxes with a battery-backed clock that is
/// right — and the kernel then says "unsynchronised" for ever: holding every `[TIMESTAMP]`
/// beacon for `time-sync-wait` there delays billing for nothing. So a time is held only on
/// evidence that the clock is wrong: it is before this release was built (`notBefore`), or
/// before the newest wall time this box already recorded, or (checked when it is sent,
/// `RecordedTime.corrected`) the clock jumped against the monotonic clock since.
public final class ClockEvidence: Sendable {
    /// 2026-11-01T00:00:00Z: no clock that says earlier is right (a release after it is built later).
    public static let notBefore: Double = 1_793_491_200
    private let newest = Locked(0.0)

    public init() {}

    /// A wall time this box recorded (at start: the newest the outbox holds).
    public func saw(_ wall: Double) {
        guard wall.isFinite else { return }
        newest.withLock { $0 = max($0, wall) }
    }

    /// Whether nothing says `wall` is wrong.
    public func plausible(_ wall: Double) -> Bool {
        wall >= Self.notBefore && wall + 1 >= newest.withLock { $0 }
    }
}

/// The system's clocks.
public struct SystemTrackingClock: TrackingClock {
    public let bootID: String
    public let evidence: ClockEvidence? = ClockEvidence()

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
    /// Why the wall time was taken as right when it was recorded.
    public enum Trust: Int, Sendable {
        /// Nothing said it was: it waits for the clock (up to `time-sync-wait`).
        case none = 0
        /// The kernel called the clock synchronised.
        case synchronized = 1
        /// The kernel did not, but nothing said the clock was wrong (`ClockEvidence`).
        case plausible = 2
    }

    public var wall: Double
    public var monotonic: Double
    public var boot: String
    public var trust: Trust
    public var synchronized: Bool { trust == .synchronized }

    public init(wall: Double, monotonic: Double, boot: String, trust: Trust) {
        self.wall = wall
        self.monotonic = monotonic
        self.boot = boot
        self.trust = trust
    }

    public init(wall: Double, monotonic: Double, boot: String, synchronized: Bool) {
        self.init(wall: wall, monotonic: monotonic, boot: boot, trust: synchronized ? .synchronized : .none)
    }

    public static func now(_ clock: any TrackingClock) -> RecordedTime {
        let wall = clock.wallNow().timeIntervalSince1970
        let trust: Trust
        if clock.wallClockSynchronized() {
            trust = .synchronized
        } else if let evidence = clock.evidence, evidence.plausible(wall) {
            trust = .plausible
        } else {
            trust = .none
        }
        if trust != .none { clock.evidence?.saw(wall) }
        return RecordedTime(wall: wall, monotonic: clock.monotonicNow(), boot: clock.bootID, trust: trust)
    }

    /// What the wall clock should have said then, as far as can be known now: the recorded wall
    /// time if it was synchronised; if not and this is the same boot with a synchronised clock
    /// now, the recorded monotonic time on today's wall-minus-monotonic offset (what NTP
    /// corrected is corrected here too); else the recorded wall time (nothing better is known).
    /// Nil: not synchronised yet, same boot — wait (see `BeaconOutbox.Configuration.timeSyncWait`).
    /// Trusted as plausible: the recorded wall time, unless the clock jumped against the
    /// monotonic clock since (same boot) — then corrected if the clock is synchronised now,
    /// else held (nobody says which clock was right).
    func corrected(_ clock: any TrackingClock) -> Double? {
        switch trust {
        case .synchronized:
            return wall
        case .plausible:
            guard boot == clock.bootID else { return wall }
            let offsetNow = clock.wallNow().timeIntervalSince1970 - clock.monotonicNow()
            if abs(offsetNow - (wall - monotonic)) < Self.jumpTolerance { return wall }
            return clock.wallClockSynchronized() ? monotonic + offsetNow : nil
        case .none:
            guard boot == clock.bootID else { return wall }
            guard clock.wallClockSynchronized() else { return nil }
            return monotonic + (clock.wallNow().timeIntervalSince1970 - clock.monotonicNow())
        }
    }

    /// How far the wall clock may move against the monotonic clock before it counts as a jump
    /// (an unsynchronised clock drifts a few ppm: seconds a week at most).
    static let jumpTolerance = 2.0
}
