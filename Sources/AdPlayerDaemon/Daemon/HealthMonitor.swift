import AdRuntime
import AdTracking
import ControlProtocol
import CSystem
import Foundation

/// The box's verdict on itself (`health`, docs/web.md): ok, degraded or failing, with the
/// check that says so. A thread of its own samples what needs a window — the ads' counters
/// over the last 15 minutes, the dropped frames over the last minute, the position — every
/// `every` seconds (one hop to the loop: a few property reads); a verdict is made on the
/// asker's thread (the router's worker), never on the loop: it waits at most `loopTimeout`
/// for the loop's part, and a loop that does not answer is itself the verdict.
///
/// Degraded is worth a look, failing is a box that is not doing its job. Deliberately idle is
/// healthy. The thresholds are in `Thresholds` and docs/web.md.
///
/// Threading: any thread.
public final class HealthMonitor: Sendable {
    public enum Status: String, Sendable, Comparable {
        case ok, degraded, failing

        private var rank: Int { self == .ok ? 0 : self == .degraded ? 1 : 2 }
        public static func < (a: Status, b: Status) -> Bool { a.rank < b.rank }
    }

    public struct Check: Sendable, Equatable {
        public var name: String
        public var status: Status
        public var reason: String

        public init(_ name: String, _ status: Status, _ reason: String) {
            self.name = name
            self.status = status
            self.reason = reason
        }

        var json: JSONValue { ["name": .string(name), "status": .string(status.rawValue), "reason": .string(reason)] }
    }

    /// Where the monitor looks.
    public struct Sources: Sendable {
        public var loop: any PlayerLoop
        public var controller: Controller
        public var metrics: Metrics
        public var outbox: BeaconOutbox?
        /// The folders the daemon writes, by name (`state`, `creative cache`); nil path: none.
        public var folders: [(name: String, path: String)]
        /// The configuration file's problems now (read again: nil if it parses and nothing is wrong).
        public var configurationProblems: @Sendable () -> [String]
        /// The kernel's word on the clock.
        public var clockSynchronized: @Sendable () -> Bool
        /// Hears what an operator should read in the log once (hardware decoding asked for and not in use).
        public var onWarning: @Sendable (String) -> Void = { _ in }
        /// Why the screen is known dark (`DisplayMonitor.dark`): the panel in standby, the output
        /// unplugged; nil when it is not known to be.
        public var screenDark: @Sendable () -> String? = { nil }

        public init(loop: any PlayerLoop, controller: Controller, metrics: Metrics, outbox: BeaconOutbox?, folders: [(name: String, path: String)],
                    configurationProblems: @escaping @Sendable () -> [String], clockSynchronized: @escaping @Sendable () -> Bool) {
            self.loop = loop
            self.controller = controller
            self.metrics = metrics
            self.outbox = outbox
            self.folders = folders
            self.configurationProblems = configurationProblems
            self.clockSynchronized = clockSynchronized
        }
    }

    public struct Thresholds: Sendable {
        /// The window of the ads' error and no-fill rates.
        public var adWindow: Double = 15 * 60
        /// Errors over requests in the window from which the ad pipeline is degraded.
        public var adErrorRate = 0.5
        /// Dropped frames over frames shown, over the last minute, from which frames are degraded.
        public var droppedRate = 0.1
        /// The oldest waiting beacon's age from which beacons are degraded.
        public var beaconAge: Double = 3600
        /// Free space below which a folder is failing, and below which it is degraded.
        public var failingFreeBytes: Int64 = 16 << 20
        public var degradedFreeBytes: Int64 = 256 << 20
        public init() {}
    }

    /// A sample of what needs a window.
    struct Sample: Sendable {
        var time: Double
        var requested = 0.0, filled = 0.0, nofill = 0.0, errors = 0.0
        var droppedDecoder = 0, droppedOutput = 0
        var fps: Double?
        var position: Double?
        var playing = false
        var contentID: String?
    }

    private struct State {
        var history: [Sample] = []
        /// The item's dropped counts last seen (they start again with each item).
        var lastDropped: (decoder: Int, output: Int)?
        var hwdecWarned = false
        var lastContentID: String?
        /// The last sample a verdict took: verdicts asked within a second share it (a flood of
        /// `health` costs the loop one hop a second at most).
        var lastVerdict: (sample: Sample, snapshot: HealthSnapshot?)?
    }

    private let sources: Sources
    private let thresholds: Thresholds
    private let state = Locked(State())
    private let stopping = Locked(false)
    private let started = MonotonicTime.now()
    let loopTimeout: Double

    public init(_ sources: Sources, thresholds: Thresholds = Thresholds(), loopTimeout: Double = 2) {
        self.sources = sources
        self.thresholds = thresholds
        self.loopTimeout = loopTimeout
    }

    /// Samples now and every `every` seconds on a thread of its own, until `stop`.
    public func start(every seconds: Double = 10) {
        let stopping = self.stopping
        startThread(named: "adplayerd-health") { [weak self] in
            while true {
                self?.sample()
                if stopping.wait(timeout: seconds, until: { $0 ? true : nil }) == true { return }
            }
        }
    }

    public func stop() { stopping.signal { $0 = true } }

    private static func now() -> Double { Double(MonotonicTime.now()) / 1e9 }

    /// The loop's part, waited for at most `loopTimeout` (nil: the loop did not answer).
    private func loopSnapshot() -> HealthSnapshot? {
        let answer = Handover<HealthSnapshot>()
        let controller = sources.controller
        guard sources.loop.execute({ answer.fulfil(controller.healthSnapshot()) }) else { return nil }
        return answer.wait(timeout: loopTimeout)
    }

    /// The ads' counters now: requests, fills, no-fills, and the pipeline's errors (a request
    /// that failed, timed out, or a creative that could not be shown; not an ad the rules
    /// refused, such as an overlay asked for while paused).
    private func counters(into sample: inout Sample) {
        for metric in sources.metrics.samples() {
            switch metric.name {
            case "adplayerd_ads_requested_total": sample.requested += metric.value
            case "adplayerd_ads_filled_total": sample.filled += metric.value
            case "adplayerd_ads_nofill_total": sample.nofill += metric.value
            case "adplayerd_ad_errors_total" where ["load_failed", "timeout", "render_failed"].contains(metric.labels["code"] ?? ""):
                sample.errors += metric.value
            default: break
            }
        }
    }

    /// Takes a sample (the sampling thread; a verdict takes one too): the counters, and the
    /// output's dropped frames turned into the metrics' totals.
    @discardableResult
    func sample() -> (Sample, HealthSnapshot?) {
        var sample = Sample(time: Self.now())
        counters(into: &sample)
        let snapshot = loopSnapshot()
        if let snapshot {
            sample.droppedDecoder = snapshot.output.droppedByDecoder ?? 0
            sample.droppedOutput = snapshot.output.droppedByOutput ?? 0
            sample.fps = snapshot.output.fps
            sample.position = snapshot.itemInPlayer ? snapshot.position : nil
            sample.playing = snapshot.playing && !snapshot.postroll
            sample.contentID = snapshot.contentID
        }
        let metrics = sources.metrics
        // Hardware decoding asked for and software decoding a video: said once in the log
        // (`status`, the metrics and the `frames` check say it all the time).
        if let output = snapshot?.output, snapshot?.itemInPlayer == true, output.vo != nil, let asked = output.hwdecRequested, asked != "no",
           output.hwdecCurrent == "no", state.withLock({ state in defer { state.hwdecWarned = true }; return !state.hwdecWarned }) {
            sources.onWarning("hardware decoding was asked for (hwdec=\(asked)) and is not in use: software decodes the video "
                              + "(a driver or a codec the hardware does not take; mpv's log at debug level says why) — said once")
        }
        state.withLock { state in
            if snapshot != nil {
                // Counts start again with each item: a count lower than the last is a new item's.
                let last = state.lastDropped ?? (0, 0)
                let newItem = sample.contentID != state.lastContentID
                let decoder = sample.droppedDecoder >= last.decoder && !newItem ? sample.droppedDecoder - last.decoder : sample.droppedDecoder
                let output = sample.droppedOutput >= last.output && !newItem ? sample.droppedOutput - last.output : sample.droppedOutput
                if state.lastDropped != nil || newItem {
                    metrics.increment("adplayerd_video_frames_dropped_total", ["stage": "decoder"], by: Double(decoder))
                    metrics.increment("adplayerd_video_frames_dropped_total", ["stage": "output"], by: Double(output))
                }
                state.lastDropped = (sample.droppedDecoder, sample.droppedOutput)
                state.lastContentID = sample.contentID
                if let output = snapshot?.output {
                    if let fps = output.fps { metrics.set("adplayerd_video_fps", [:], fps) } else { metrics.clear("adplayerd_video_fps") }
                    if let current = output.hwdecCurrent { metrics.set("adplayerd_video_hwdec_in_use", [:], current == "no" ? 0 : 1) }
                }
            }
            state.history.append(sample)
            // Kept: the adWindow and a sample before it (the window's start).
            let horizon = sample.time - thresholds.adWindow
            if let firstInside = state.history.firstIndex(where: { $0.time >= horizon }), firstInside > 1 {
                state.history.removeFirst(firstInside - 1)
            }
            if state.history.count > 2000 { state.history.removeFirst(state.history.count - 2000) }
        }
        return (sample, snapshot)
    }

    /// The verdict now (on the asker's thread: the folders are probed, the loop asked).
    public func verdict() -> (status: Status, checks: [Check]) {
        let cached = state.withLock { state in state.lastVerdict.flatMap { Self.now() - $0.sample.time < 1 ? $0 : nil } }
        let (now, snapshot) = cached.map { ($0.sample, $0.snapshot) } ?? sample()
        if cached == nil { state.withLock { $0.lastVerdict = (now, snapshot) } }
        let history = state.withLock { $0.history }
        var checks = [Check("daemon", .ok, "answers (pid \(getpid()), up \(Self.duration(Double(MonotonicTime.now() - started) / 1e9)))")]
        if let snapshot {
            // Deliberately off (operating hours, `display off`) is healthy: said, not judged.
            checks.append(display(snapshot))
            checks.append(playback(snapshot, now, history))
            if let problem = snapshot.scheduleProblem { checks.append(Check("schedule", .degraded, problem)) }
            checks.append(frames(snapshot, now, history))
            checks.append(ads(snapshot.adsConfigured, now, history))
        } else {
            checks.append(Check("playback", .failing, "the player's loop did not answer within \(Self.format(loopTimeout)) s"))
        }
        checks.append(beacons())
        checks += sources.folders.map { folder($0.name, $0.path) }
        checks.append(clock())
        let problems = sources.configurationProblems()
        checks.append(problems.isEmpty ? Check("configuration", .ok, "passes check-config")
                      : Check("configuration", .degraded, problems.prefix(3).joined(separator: "; ")))
        return (checks.map(\.status).max() ?? .ok, checks)
    }

    public func verdictJSON() -> JSONValue {
        let (status, checks) = verdict()
        return ["status": .string(status.rawValue), "checks": .array(checks.map(\.json))]
    }

    // MARK: The checks

    /// Deliberately off (operating hours, `display off`) is healthy: said, not judged. On, with
    /// content playing and the screen known dark, the box plays to nobody.
    private func display(_ s: HealthSnapshot) -> Check {
        if let off = s.displayOff { return Check("display", .ok, "off (\(off)): the episode waits, paused, for the display to come on") }
        guard let dark = sources.screenDark() else { return Check("display", .ok, "on") }
        guard s.itemInPlayer, s.playing || s.postroll else { return Check("display", .ok, "on; the screen is dark (\(dark)) and nothing plays") }
        return Check("display", .degraded, "playing to a dark panel: \(dark)")
    }

    private func playback(_ s: HealthSnapshot, _ now: Sample, _ history: [Sample]) -> Check {
        if !s.itemInPlayer {
            if let failure = s.lastFailure { return Check("playback", .degraded, "nothing plays: the last item could not be played (\(failure.prefix(300)))") }
            return Check("playback", .ok, s.queueLength == 0 ? "idle: the queue is empty" : "stopped (\(s.queueLength) in the queue)")
        }
        let what = s.contentID.map { "\"\($0.prefix(100))\"" } ?? "the episode"
        if s.postroll { return Check("playback", .ok, "a linear ad or its break has the screen (\(what) waits or is done)") }
        guard s.playing else { return Check("playback", .ok, "paused at \(Self.format(s.position)) s in \(what)") }
        // Playing, yet the position has not moved over the last two samples (20 s): stuck.
        let recent = history.filter { now.time - $0.time <= 25 && $0.contentID == now.contentID }
        if recent.count >= 3, recent.allSatisfy({ $0.playing && $0.position != nil }),
           let first = recent.first?.position, let last = now.position, abs(last - first) < 0.01, now.time - recent[0].time >= 15 {
            return Check("playback", .failing, "\(what) is playing but its position has stayed at \(Self.format(last)) s for \(Int(now.time - recent[0].time)) s")
        }
        return Check("playback", .ok, "playing \(what) at \(Self.format(s.position)) s")
    }

    private func frames(_ s: HealthSnapshot, _ now: Sample, _ history: [Sample]) -> Check {
        let output = s.output
        if output.vo == "null" { return Check("frames", .ok, "no video output (vo=null): nothing is rendered") }
        guard s.itemInPlayer, s.playing else { return Check("frames", .ok, "nothing plays now") }
        guard let vo = output.vo else { return Check("frames", .ok, "no video on the output (audio only)") }
        if let asked = output.hwdecRequested, asked != "no", output.hwdecCurrent == "no" {
            return Check("frames", .degraded, "hardware decoding was asked for (hwdec=\(asked)) but software decodes (\(vo))")
        }
        // The last minute: frames dropped over frames due.
        if let start = history.last(where: { now.time - $0.time >= 50 && $0.contentID == now.contentID }), let fps = now.fps, fps > 0 {
            let seconds = now.time - start.time
            let dropped = max(0, now.droppedDecoder - start.droppedDecoder) + max(0, now.droppedOutput - start.droppedOutput)
            let rate = Double(dropped) / max(1, fps * seconds)
            if rate >= thresholds.droppedRate {
                return Check("frames", .degraded, "\(dropped) frames dropped in the last \(Int(seconds)) s (\(Int(rate * 100)) % of \(Self.format(fps)) fps)")
            }
            return Check("frames", .ok, "rendering on \(vo): \(dropped) frames dropped in the last \(Int(seconds)) s")
        }
        return Check("frames", .ok, "rendering on \(vo) (\(output.droppedByDecoder ?? 0) + \(output.droppedByOutput ?? 0) frames dropped this item)")
    }

    private func ads(_ configured: Bool, _ now: Sample, _ history: [Sample]) -> Check {
        guard configured else { return Check("ads", .ok, "no ad source is configured") }
        // From the last sample at the window's start (or the first: the daemon's start).
        let start = history.last { now.time - $0.time >= thresholds.adWindow } ?? history.first ?? now
        let requested = Int(now.requested - start.requested), errors = Int(now.errors - start.errors)
        let nofill = Int(now.nofill - start.nofill), filled = Int(now.filled - start.filled)
        let minutes = Int(((now.time - start.time) / 60).rounded(.up))
        var last = ""
        if let error = sources.metrics.lastAdError {
            last = "; last error \(error.vastCode.map { "VAST \($0), " } ?? "")\(error.code): \(error.message.prefix(160))"
        }
        let counts = "\(requested) requests, \(filled) filled, \(nofill) no fill, \(errors) errors in the last \(max(1, minutes)) min"
        if errors > 0, Double(errors) >= thresholds.adErrorRate * Double(max(requested, 1)) {
            return Check("ads", .degraded, counts + last)
        }
        return Check("ads", .ok, counts + (errors > 0 ? last : ""))
    }

    private func beacons() -> Check {
        guard let outbox = sources.outbox else { return Check("beacons", .ok, "no outbox") }
        let status = outbox.status()
        if status.diskFailing {
            return Check("beacons", .degraded, "the state disk refuses writes: \(status.pendingInMemory) beacons wait in memory")
        }
        guard let age = outbox.oldestPendingAge() else { return Check("beacons", .ok, "none waiting; \(status.sent) sent") }
        let words = "\(status.pending) waiting, the oldest for \(Self.duration(age))"
        return age >= thresholds.beaconAge ? Check("beacons", .degraded, words) : Check("beacons", .ok, words)
    }

    /// A folder the daemon writes: written to for real (a file made, written, removed: a
    /// read-only mount, a full disk and missing permissions all show), and its free space.
    private func folder(_ name: String, _ path: String) -> Check {
        let check = "storage:\(name)"
        var info = stat()
        var path = path
        var note = ""
        // Not made yet (a cache before its first creative): the folder it will be made in.
        while stat(path, &info) != 0 {
            guard errno == ENOENT, path.count > 1 else { return Check(check, .failing, "\(path): \(String(cString: strerror(errno)))") }
            note = " (\(name) folder not made yet)"
            path = (path as NSString).deletingLastPathComponent
        }
        let probe = path + "/.health-probe-\(getpid())"
        let fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0o600)
        guard fd >= 0 else { return Check(check, .failing, "\(path) cannot be written: \(String(cString: strerror(errno)))") }
        let byte: [UInt8] = [0x0A]
        let wrote = write(fd, byte, 1)
        let code = errno
        close(fd)
        unlink(probe)
        guard wrote == 1 else { return Check(check, .failing, "\(path) cannot be written: \(String(cString: strerror(code)))") }
        var fs = statvfs()
        guard statvfs(path, &fs) == 0 else { return Check(check, .ok, "\(path) is writable") }
        let free = Int64(fs.f_bavail) * Int64(fs.f_frsize)
        let total = Int64(fs.f_blocks) * Int64(fs.f_frsize)
        let words = "\(path): \(Self.bytes(free)) free of \(Self.bytes(total))" + note
        if free < thresholds.failingFreeBytes { return Check(check, .failing, words + " (full)") }
        if free < thresholds.degradedFreeBytes { return Check(check, .degraded, words + " (nearly full)") }
        return Check(check, .ok, words)
    }

    private func clock() -> Check {
        let wall = Date().timeIntervalSince1970
        if wall < ClockEvidence.notBefore {
            return Check("clock", .degraded, "the wall clock says \(ISO8601.format(wall)), before this release was built: it is wrong")
        }
        if sources.clockSynchronized() { return Check("clock", .ok, "synchronised") }
        return Check("clock", .ok, "not synchronised by NTP, with no evidence that it is wrong (beacons are sent)")
    }

    // MARK: Words

    static func format(_ value: Double) -> String { String(format: "%.1f", value) }

    static func duration(_ seconds: Double) -> String {
        let s = Int(seconds)
        if s < 120 { return "\(s) s" }
        if s < 7200 { return "\(s / 60) min" }
        return "\(s / 3600) h \(s % 3600 / 60) min"
    }

    static func bytes(_ value: Int64) -> String {
        let mib = Double(value) / 1_048_576
        return mib >= 1024 ? String(format: "%.1f GiB", mib / 1024) : String(format: "%.0f MiB", mib)
    }
}
