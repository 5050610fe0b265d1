import AdRuntime
import AdSources
import Foundation

/// What a fleet watches, in the Prometheus text format (for node_exporter's textfile
/// collector, `metrics-file`) and on the control socket (`metrics`): counters and gauges with
/// labels, kept here; the outbox's figures are read from it when the text is made.
///
/// Names follow Prometheus' conventions: `adplayerd_` first, `_total` for counters, units in
/// the name (`_seconds`). docs/reporting.md lists them.
///
/// Threading: any thread (one lock; an increment costs a lock and a dictionary update).
public final class Metrics: Sendable {
    public struct Sample: Sendable, Equatable {
        public var name: String
        public var labels: [String: String]
        public var value: Double
    }

    private struct Key: Hashable {
        let name: String
        let labels: [String]   // "key=value", sorted
    }

    private struct State {
        var counters: [Key: Double] = [:]
        var gauges: [Key: Double] = [:]
        var lastAdError: AdErrorNote?
    }

    /// The last ad error: when, its code and VAST error code (the health verdict names it).
    public struct AdErrorNote: Sendable, Equatable {
        public var wall: Double
        public var code: String
        public var vastCode: Int?
        public var message: String
    }

    /// Help text and type of each metric, as the text format writes them.
    public static let help: [String: (type: String, help: String)] = [
        "adplayerd_ads_requested_total": ("counter", "Ad requests made to the ad source, by kind."),
        "adplayerd_ads_filled_total": ("counter", "Ad requests the source filled, by kind."),
        "adplayerd_ads_nofill_total": ("counter", "Ad requests the source had nothing for, by kind."),
        "adplayerd_ads_passed_over_total": ("counter", "Requests a source found nothing eligible for, by kind and the reason (flight, daypart, cap, separation)."),
        "adplayerd_ads_started_total": ("counter", "Ads that went on screen (or whose video started), by kind."),
        "adplayerd_ad_breaks_total": ("counter", "Linear breaks that began (a pre-roll's, a mid-roll's: the content waited), by kind."),
        "adplayerd_ads_ended_total": ("counter", "Ads that ended, by kind and reason."),
        "adplayerd_ads_viewability_total": ("counter", "Ads by viewability (viewable, notViewable, undetermined) and kind."),
        "adplayerd_ad_errors_total": ("counter", "Ad errors by kind, code and VAST error code."),
        "adplayerd_ads_on_screen_seconds_total": ("counter", "Seconds ads were on a visible output, by kind."),
        "adplayerd_beacons_enqueued_total": ("counter", "Tracking beacons queued for delivery."),
        "adplayerd_beacons_sent_total": ("counter", "Tracking beacons delivered (2xx)."),
        "adplayerd_beacon_attempts_failed_total": ("counter", "Beacon delivery attempts that failed (each retried)."),
        "adplayerd_beacons_dropped_total": ("counter", "Tracking beacons dropped, by reason (never silently)."),
        "adplayerd_beacons_withheld_total": ("counter", "Beacons not sent for an ad whose display evidence did not verify under pop-require-display (notUsed was sent instead)."),
        "adplayerd_plays_unverified_total": ("counter", "Plays whose display evidence was not verified, by verdict (unverified, off) and reason."),
        "adplayerd_beacons_pending": ("gauge", "Tracking beacons not yet delivered."),
        "adplayerd_beacons_pending_in_memory": ("gauge", "Beacons waiting in memory because the disk refused writes."),
        "adplayerd_outbox_disk_failing": ("gauge", "1 while the state disk refuses the outbox's writes."),
        "adplayerd_playing": ("gauge", "1 while an episode plays (a post-roll included), 0 otherwise."),
        "adplayerd_item_info": ("gauge", "The episode in the player (1), by path and content id."),
        "adplayerd_video_frames_dropped_total": ("counter", "Video frames dropped, by stage (decoder, output)."),
        "adplayerd_video_hwdec_in_use": ("gauge", "1 while hardware decoding is in use, 0 while software decodes a video."),
        "adplayerd_video_fps": ("gauge", "The video's frame rate as the output sees it."),
        "adplayerd_display_on": ("gauge", "1 while the display is on, 0 while it is off (operating hours or an override)."),
        "adplayerd_uptime_seconds": ("gauge", "Seconds since the daemon started."),
        "adplayerd_build_info": ("gauge", "The daemon's version (1)."),
    ]

    private let state = Locked(State())
    private let started = MonotonicTime.now()
    /// Read when the text is made: the outbox's own figures.
    private let outbox: Locked<BeaconOutbox?> = Locked(nil)

    public init() {}

    /// The outbox whose figures are reported.
    public func report(_ outbox: BeaconOutbox?) { self.outbox.withLock { $0 = outbox } }

    public func increment(_ name: String, _ labels: [String: String] = [:], by value: Double = 1) {
        let key = Self.key(name, labels)
        state.withLock { $0.counters[key, default: 0] += value }
    }

    public func set(_ name: String, _ labels: [String: String] = [:], _ value: Double) {
        let key = Self.key(name, labels)
        state.withLock { $0.gauges[key] = value }
    }

    public var lastAdError: AdErrorNote? { state.withLock { $0.lastAdError } }

    /// Removes every sample of gauge `name` (an item that is no longer in).
    public func clear(_ name: String) {
        state.withLock { state in state.gauges = state.gauges.filter { $0.key.name != name } }
    }

    private static func key(_ name: String, _ labels: [String: String]) -> Key {
        Key(name: name, labels: labels.map { "\($0.key)=\($0.value)" }.sorted())
    }

    /// Every sample now, the outbox's and the uptime included, sorted by name then labels.
    public func samples() -> [Sample] {
        var samples = state.withLock { state in
            (state.counters.map { ($0.key, $0.value) } + state.gauges.map { ($0.key, $0.value) }).map { key, value in
                Sample(name: key.name, labels: Dictionary(uniqueKeysWithValues: key.labels.map { pair -> (String, String) in
                    let parts = pair.split(separator: "=", maxSplits: 1)
                    return (String(parts[0]), parts.count > 1 ? String(parts[1]) : "")
                }), value: value)
            }
        }
        if let status = outbox.withLock({ $0 })?.status() {
            samples += [Sample(name: "adplayerd_beacons_sent_total", labels: [:], value: Double(status.sent)),
                        Sample(name: "adplayerd_beacon_attempts_failed_total", labels: [:], value: Double(status.failedAttempts)),
                        Sample(name: "adplayerd_beacons_pending", labels: [:], value: Double(status.pending)),
                        Sample(name: "adplayerd_beacons_pending_in_memory", labels: [:], value: Double(status.pendingInMemory)),
                        Sample(name: "adplayerd_outbox_disk_failing", labels: [:], value: status.diskFailing ? 1 : 0)]
            samples += DropReason.allCases.map { reason in
                Sample(name: "adplayerd_beacons_dropped_total", labels: ["reason": reason.rawValue], value: Double(status.dropped[reason.rawValue] ?? 0))
            }
        }
        samples.append(Sample(name: "adplayerd_uptime_seconds", labels: [:], value: Double(MonotonicTime.now() - started) / 1e9))
        samples.append(Sample(name: "adplayerd_build_info", labels: ["version": UserAgent.version], value: 1))
        return samples.sorted { ($0.name, $0.labels.sorted { $0.key < $1.key }.description) < ($1.name, $1.labels.sorted { $0.key < $1.key }.description) }
    }

    /// The Prometheus text exposition format (version 0.0.4).
    public func text() -> String {
        var out = ""
        var current = ""
        for sample in samples() {
            if sample.name != current {
                current = sample.name
                if let (type, help) = Self.help[current] {
                    out += "# HELP \(current) \(help)\n# TYPE \(current) \(type)\n"
                }
            }
            let labels = sample.labels.sorted { $0.key < $1.key }.map { "\($0.key)=\"\(Self.escape($0.value))\"" }
            out += current + (labels.isEmpty ? "" : "{" + labels.joined(separator: ",") + "}") + " " + Self.format(sample.value) + "\n"
        }
        return out
    }

    static func escape(_ value: String) -> String {
        var out = ""
        for character in value.prefix(512) {
            switch character {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            default: out.append(character)
            }
        }
        return out
    }

    static func format(_ value: Double) -> String {
        guard value.isFinite else { return value.isNaN ? "NaN" : (value > 0 ? "+Inf" : "-Inf") }
        return value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    /// Writes the text to `path` atomically (a temporary file in the same folder, then a rename),
    /// as node_exporter's textfile collector wants it.
    public func write(to path: String) throws {
        // Read by node_exporter's user: 0644. Made again every interval: no flush.
        try AtomicFile.write(Data(text().utf8), to: path, mode: 0o644, durable: false)
    }
}

extension Metrics {
    /// Counts what an ad event says (requests, fills, no-fills, starts, ends, errors,
    /// viewability, time on screen).
    public func count(_ event: AdEvent) {
        switch event {
        case .requested(let kind, _, _): increment("adplayerd_ads_requested_total", ["kind": kind.protocolName])
        case .noFill(let kind, _, _): increment("adplayerd_ads_nofill_total", ["kind": kind.protocolName])
        case .loaded(let info, _): increment("adplayerd_ads_filled_total", ["kind": info.kind.protocolName])
        case .started(let info): increment("adplayerd_ads_started_total", ["kind": info.kind.protocolName])
        case .viewability(let info, let viewability):
            increment("adplayerd_ads_viewability_total", ["kind": info.kind.protocolName, "viewability": viewability.rawValue])
        case .ended(let info, let reason, _):
            increment("adplayerd_ads_ended_total", ["kind": info.kind.protocolName, "reason": reason.rawValue])
            if let seconds = info.onScreenSeconds { increment("adplayerd_ads_on_screen_seconds_total", ["kind": info.kind.protocolName], by: seconds) }
        case .error(let kind, _, let error):
            increment("adplayerd_ad_errors_total", ["kind": kind.protocolName, "code": error.code, "vast_error": error.vastCode.map(String.init) ?? ""])
            let note = AdErrorNote(wall: Date().timeIntervalSince1970, code: error.code, vastCode: error.vastCode,
                                   message: String(error.message.prefix(300)))
            state.withLock { $0.lastAdError = note }
        case .breakStarted(let kind, _, _): increment("adplayerd_ad_breaks_total", ["kind": kind.protocolName])
        case .quartile, .progress, .iconShown, .postrollPaused, .contentEnded, .breakEnded:
            break
        }
    }
}
