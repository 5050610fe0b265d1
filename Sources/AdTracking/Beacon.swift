import AdRuntime
import AdSources
import Foundation

/// Sends one beacon; the outbox decides what the answer means.
public protocol BeaconSender: Sendable {
    /// The HTTP status, or an error when no answer came. `url` is sent exactly as given.
    func send(_ url: String, timeout: Double) async -> Result<Int, any Error>
    /// The same, knowing which beacon `url` is (its event, its play, when it was recorded): a
    /// simulation's recorder keeps them. Default: `send(url, timeout:)`.
    func send(_ beacon: Beacon, url: String, timeout: Double) async -> Result<Int, any Error>
}

extension BeaconSender {
    public func send(_ beacon: Beacon, url: String, timeout: Double) async -> Result<Int, any Error> {
        await send(url, timeout: timeout)
    }
}

/// Beacons over HTTP(S) GET through the one bounded reader (64 KiB of answer at most).
public struct HTTPBeaconSender: BeaconSender {
    private let fetcher: any BoundedFetcher

    public init(fetcher: any BoundedFetcher = BoundedHTTP(threads: 4)) {
        self.fetcher = fetcher
    }

    public func send(_ url: String, timeout: Double) async -> Result<Int, any Error> {
        do {
            let response = try await fetcher.exchange(HTTPRequest(url: url), limits: HTTPLimits(maxBytes: 64 * 1024, deadline: timeout))
            return .success(response.status)
        } catch let error as FetchError where error.kind == .tooLarge {
            return .success(200)   // it answered; the body does not matter
        } catch {
            return .failure(error)
        }
    }
}

/// One beacon to deliver: its URL (every macro filled but `[TIMESTAMP]`, which is filled when
/// it is sent, from `recorded`), the event it reports, the play it belongs to.
public struct Beacon: Sendable, Equatable {
    public var url: String
    /// `impression`, `start`, `firstQuartile`, `error`, …
    public var event: String
    /// The play (proof of play) it belongs to: the ad's instance.
    public var play: String?
    /// Billable (an impression): when the outbox is full, these are dropped last.
    public var billable: Bool
    public var recorded: RecordedTime
    /// Seconds after it was queued within which it must be delivered (`pop-deadline`): later,
    /// it is dropped (`deadline`), never sent late. Nil: no deadline.
    public var deadline: Double?

    public init(url: String, event: String, play: String? = nil, billable: Bool = false, recorded: RecordedTime, deadline: Double? = nil) {
        self.deadline = deadline
        self.url = url
        self.event = event
        self.play = play
        self.billable = billable
        self.recorded = recorded
    }
}

/// What the outbox did.
public enum OutboxEvent: Sendable, Equatable {
    case sent(url: String, attempts: Int)
    case retrying(url: String, attempts: Int, reason: String, inSeconds: Double)
    /// Dropped for `reason` (`DropReason`): never silently.
    case dropped(url: String, reason: String)
    /// The disk refused a write (full, an I/O error, read-only): beacons wait in memory.
    case diskFailing(String)
    /// The disk takes writes again: what waited in memory is written.
    case diskRecovered(written: Int)
    /// The database was locked by another process at open: beacons and plays are kept in
    /// memory (within the outbox's bounds) until it opens (`BeaconOutbox+Waiting.swift`).
    case databaseLocked(String)
    /// It opened (or a side file a stop left was imported): what was kept is in it now.
    case databaseOpened(beacons: Int, plays: Int, from: String)
}

/// Why a beacon was not delivered. Every one is counted (`OutboxStatus.dropped`), reported
/// (`OutboxEvent.dropped`) and, when it belongs to a play, counted on that play.
public enum DropReason: String, Sendable, CaseIterable {
    /// Refused alone, before it was queued (`BeaconRefusal`).
    case notHTTP = "not_http", noHost = "no_host", tooLong = "too_long", malformed, tooMany = "too_many"
    /// The outbox was at its bound (rows or bytes): the oldest non-billable went first.
    case outboxFull = "outbox_full"
    /// Older than the outbox's age bound, in time the box has run.
    case expired
    /// The disk refused writes and the memory queue was at its bound too.
    case memoryFull = "memory_full"
    /// Not delivered within its source's `pop-deadline` after the ad showed: not sent late.
    case deadline

    public init(_ refusal: BeaconRefusal) { self = DropReason(rawValue: refusal.rawValue)! }
}

/// What `beacons status`, `metrics` and the tests see of the outbox.
public struct OutboxStatus: Sendable, Equatable {
    /// Beacons not yet delivered: on disk and waiting in memory.
    public var pending = 0
    public var pendingInMemory = 0
    public var pendingBytes = 0
    public var sent = 0
    /// Attempts that failed (each retried, with backoff).
    public var failedAttempts = 0
    /// Beacons dropped, by `DropReason`.
    public var dropped: [String: Int] = [:]
    /// The disk refuses writes now.
    public var diskFailing = false
    public init() {}
}
