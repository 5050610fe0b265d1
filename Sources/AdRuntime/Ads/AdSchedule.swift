import Foundation

/// When something happened, in a way that survives the wall clock jumping (NTP at boot, an
/// operator): the wall clock, the monotonic clock and the boot it was read in. How long ago
/// it was is measured on the monotonic clock within the same boot — a jump of the wall clock
/// changes nothing — and on the wall clock across a reboot, never below 0 (a clock set back
/// makes it "just now": it does not re-allow what a cap or a separation holds back).
public struct ShowTime: Sendable, Equatable, Codable {
    public var wall: Double
    public var monotonic: Double
    public var boot: String

    public init(wall: Double, monotonic: Double, boot: String) {
        self.wall = wall
        self.monotonic = monotonic
        self.boot = boot
    }

    /// Seconds from `self` to `now` (≥ 0).
    public func elapsed(until now: ShowTime) -> Double {
        max(0, boot == now.boot ? now.monotonic - monotonic : now.wall - wall)
    }

    /// `environment`'s clocks now (the system's: `CLOCK_MONOTONIC`, the kernel's boot id).
    public static func now(_ environment: AdEnvironment = .system) -> ShowTime {
        ShowTime(wall: environment.wall(), monotonic: environment.monotonic(), boot: environment.bootID)
    }
}

/// Where the time comes from for scheduling (flights, dayparts, caps, separation): the system's
/// clocks, or a test's virtual ones.
public protocol ScheduleClock: Sendable {
    func now() -> ShowTime
}

/// The clocks of a box's environment (the system's, or a simulation's).
public struct SystemScheduleClock: ScheduleClock {
    public let environment: AdEnvironment
    public init(_ environment: AdEnvironment = .system) { self.environment = environment }
    public func now() -> ShowTime { ShowTime.now(environment) }
}

/// Competitive separation (`ad-separation`): two ads of the same advertiser, or sharing a
/// category, never show within `seconds` of each other — across every source. The daemon
/// records each ad that goes on screen; each source asks before it serves (the catalog passes
/// such an entry over, a VAST source passes the ad over like a failed buffet ad).
///
/// Threading: any thread (a lock over the last shows; at most one per advertiser and category).
public final class AdSeparation: Sendable {
    public let seconds: Double
    private let clock: any ScheduleClock
    private let last = Locked<[String: ShowTime]>([:])   // "a:NAME" / "c:NAME" → its last show

    public init(seconds: Double, clock: any ScheduleClock = SystemScheduleClock()) {
        self.seconds = seconds
        self.clock = clock
    }

    private static func keys(_ advertiser: String?, _ categories: [String]) -> [String] {
        (advertiser.map { ["a:" + $0.lowercased()] } ?? []) + categories.map { "c:" + $0.lowercased() }
    }

    /// Whether an ad of `advertiser` and `categories` may show now.
    public func allows(advertiser: String?, categories: [String]) -> Bool {
        guard seconds > 0 else { return true }
        let keys = Self.keys(advertiser, categories)
        guard !keys.isEmpty else { return true }
        let now = clock.now()
        return last.withLock { last in keys.allSatisfy { key in last[key].map { $0.elapsed(until: now) >= seconds } ?? true } }
    }

    /// An ad of `advertiser` and `categories` went on screen now.
    public func record(advertiser: String?, categories: [String]) {
        let keys = Self.keys(advertiser, categories)
        guard !keys.isEmpty else { return }
        let now = clock.now()
        last.withLock { last in for key in keys { last[key] = now } }
    }
}
