import AdPlayerDaemon
import AdRuntime
import AdSources
import AdTracking
import Foundation

/// Where a simulation plays: the box's stage (`BoxStage`) — the same box the daemon assembles —
/// and how time moves there.
///
/// - `virtual(...)` (`--virtual`, the default): the virtual player on a `SimulationLoop`, the
///   simulated surface, a virtual screen; time jumps from deadline to deadline once nothing is
///   in flight, and everything runs on one thread: a run repeats byte for byte.
/// - a real one (`adplayerd simulate --speed X`, made where mpv is linked, `SimulationStage.init`):
///   libmpv on the real media, its loop's clock and mpv's speed X times real time; time flows.
///
/// Either way the network is the simulation's (`SimulationHTTP`: live, or a replay, recorded),
/// beacons go to a recorder (not sent unless asked), the state lives in a private folder.
public final class SimulationStage: @unchecked Sendable {
    // @unchecked: immutable after init.
    public let box: BoxStage
    public let http: SimulationHTTP
    public let beacons: RecordingBeaconSender
    public let surface: WatchedAdSurface
    /// The loop's instant of `from` (the simulated start).
    public let start: UInt64
    /// Time is virtual: it moves only when nothing is in flight, and runs are repeatable.
    public let isVirtual: Bool
    /// The virtual player (nil on mpv): its pause flag drives the simulated surface's videos.
    public let virtualPlayer: VirtualPlayer?
    /// Moves the loop's time to `end` (loop time), calling `step` whenever nothing else is under
    /// way (virtual: on the simulation's thread; real: every 50 ms, off the loop): `step` lets
    /// the outbox deliver what is due and judges ads done with, and says whether to call it
    /// again (it handed work over) or when the outbox wants to be looked at again.
    let drive: @Sendable (_ end: UInt64, _ step: @escaping () -> SimulationLoop.Step) -> Void
    /// Takes the player down once the run is over (off the loop).
    let shutdown: @Sendable () -> Void
    /// What went wrong in the player (mpv's errors), read at the end of the run.
    let problems: @Sendable () -> [String]

    public init(box: BoxStage, http: SimulationHTTP, beacons: RecordingBeaconSender, surface: WatchedAdSurface, start: UInt64, isVirtual: Bool,
                virtualPlayer: VirtualPlayer?, drive: @escaping @Sendable (UInt64, @escaping () -> SimulationLoop.Step) -> Void, shutdown: @escaping @Sendable () -> Void,
                problems: @escaping @Sendable () -> [String] = { [] }) {
        self.box = box
        self.http = http
        self.beacons = beacons
        self.surface = surface
        self.start = start
        self.isVirtual = isVirtual
        self.virtualPlayer = virtualPlayer
        self.drive = drive
        self.shutdown = shutdown
        self.problems = problems
    }

    /// What a stage is made of, besides its player: the simulated start, the seed, where the
    /// state goes, the network, whether beacons are sent, what the screen shows.
    public struct Parts: Sendable {
        public var from: Double
        public var seed: UInt64
        public var workFolder: String
        /// Ad requests: the network (`live`), or a recording (`replay`).
        public var network: SimulationHTTP.Source
        /// Beacons sent for real, once each attempt (`--send-beacons`); else recorded.
        public var sendBeacons: Bool
        /// What the virtual screen says it showed (`--screen`).
        public var screen: VirtualScreen.Verdict
        /// A media file's length as FFmpeg reads it.
        public var measure: @Sendable (String) -> Double?

        public init(from: Double, seed: UInt64, workFolder: String, network: SimulationHTTP.Source, sendBeacons: Bool,
                    screen: VirtualScreen.Verdict, measure: @escaping @Sendable (String) -> Double?) {
            self.from = from
            self.seed = seed
            self.workFolder = workFolder
            self.network = network
            self.sendBeacons = sendBeacons
            self.screen = screen
            self.measure = measure
        }
    }

    /// The virtual stage: the virtual player on a `SimulationLoop` — every file as long as it
    /// measures, an image as long as it is asked to show — the simulated surface, a virtual
    /// screen; one thread for all of it.
    public static func virtual(_ parts: Parts, requestWait: Double = 1) -> SimulationStage {
        let start: UInt64 = 1_000_000_000_000
        let reference = LoopReference()
        let from = parts.from
        let environment = AdEnvironment(simulatedClock: {
            let now = reference.now() ?? start
            return (from + Double(now &- start) / 1e9, Double(now) / 1e9)
        }, seed: parts.seed)
        let loop = SimulationLoop(environment: environment, startingAt: start)
        reference.loop = loop
        let measure = parts.measure
        let player = VirtualPlayer(loop: loop, media: { path in Self.length(of: path, measure: measure) })
        let simulated = SimulatedAdSurface(loop: loop, probe: measure)
        player.observePauseFlag { paused in simulated.viewerPaused(paused) }
        let surface = WatchedAdSurface(simulated)
        let (box, http, beacons) = boxStage(parts, environment: environment, loop: loop, player: player, surface: surface, requestWait: requestWait,
                                            virtualTime: true)
        return SimulationStage(box: box, http: http, beacons: beacons, surface: surface, start: start, isVirtual: true, virtualPlayer: player,
                               drive: { end, step in loop.run(until: end, step: step) },
                               shutdown: { loop.stop() })
    }

    /// What every simulation's stage shares around its player and surface (the virtual one's
    /// and `--speed`'s): the network recorded or replayed, beacons recorded, a virtual screen,
    /// simulated tracking time, the private state folder.
    public static func boxStage(_ parts: Parts, environment: AdEnvironment, loop: any PlayerLoop, player: any ContentPlayer, surface: WatchedAdSurface,
                                requestWait: Double, virtualTime: Bool = false) -> (BoxStage, SimulationHTTP, RecordingBeaconSender) {
        let http = SimulationHTTP(parts.network, environment: environment, realWait: requestWait)
        let beacons = RecordingBeaconSender(environment: environment, send: parts.sendBeacons ? BoundedHTTP(threads: 1) : nil)
        let screen = VirtualScreen(parts.screen, environment: environment)
        let box = BoxStage(environment: environment, loop: loop, player: player, surface: surface, fetcher: http, beaconSender: beacons,
                           trackingClock: SimulatedTrackingClock(environment), stateFolder: parts.workFolder,
                           screen: ScreenStage(dark: { screen.dark }, witness: { record in screen.witness(record) }),
                           measure: parts.measure, viewabilityMeasurable: true, courierThread: false, backgroundChecks: false, displayPower: nil,
                           virtualTime: virtualTime, durability: .runOnly)
        return (box, http, beacons)
    }

    /// A file's length for the virtual player: FFmpeg's reading of it; an image (a schedule's
    /// item, shown for its `seconds`) plays as long as it is asked to when it can be read.
    static func length(of path: String, measure: (String) -> Double?) -> Double? {
        let extensionName = (path as NSString).pathExtension.lowercased()
        if ["png", "jpg", "jpeg", "webp", "bmp", "gif"].contains(extensionName) {
            return access(path, R_OK) == 0 ? 10 : nil
        }
        return measure(path)
    }

    /// Real time on a real player: waits until the loop's clock reaches `end`, stepping every
    /// 50 ms of real time.
    public static func realTimeDrive(_ loop: any PlayerLoop) -> @Sendable (UInt64, @escaping () -> SimulationLoop.Step) -> Void {
        { end, step in
            while loop.now() < end {
                if case .again = step() { usleep(1000); continue }
                usleep(50_000)
            }
        }
    }
}

/// The simulation's loop, for the clock of its environment (made before the loop is).
private final class LoopReference: @unchecked Sendable {
    // @unchecked: set once, before the first read of the clock that matters.
    var loop: SimulationLoop?
    func now() -> UInt64? { loop?.now() }
}

/// The clocks tracking reads in a simulation: simulated, synchronised, one boot.
public struct SimulatedTrackingClock: TrackingClock {
    let environment: AdEnvironment
    public init(_ environment: AdEnvironment) { self.environment = environment }
    public var bootID: String { environment.bootID }
    public func wallNow() -> Date { environment.date() }
    public func monotonicNow() -> Double { environment.monotonic() }
    public func wallClockSynchronized() -> Bool { true }
}

/// A simulation's screen: what it says it showed of each ad — `verified` (it showed: the box's
/// evidence holds), `unverified` (the pixels do not show the ad) or `off` (the panel is in
/// standby) — so that `pop-require-display` and `notUsed` can be simulated (`--screen`).
public final class VirtualScreen: Sendable {
    public enum Verdict: String, Sendable, CaseIterable {
        case verified, unverified, off
    }

    public let verdict: Verdict
    private let environment: AdEnvironment

    public init(_ verdict: Verdict, environment: AdEnvironment) {
        self.verdict = verdict
        self.environment = environment
    }

    /// Why it is dark (`off`), nil otherwise: a source that requires the screen is not asked.
    public var dark: String? { verdict == .off ? "the virtual screen is off (--screen off)" : nil }

    public func witness(_ record: @escaping @Sendable (AdInfo, DisplayEvidence) -> Void) -> any ScreenWitness {
        Witness(screen: self, record: record)
    }

    /// The evidence of an ad that went up now.
    func evidence() -> DisplayEvidence {
        let at = environment.wall()
        switch verdict {
        case .verified:
            return DisplayEvidence.judge(connector: nil, panel: nil, pixels: (.showTheAd, at))
        case .unverified:
            return DisplayEvidence.judge(connector: nil, panel: nil, pixels: (.doNotShowTheAd("the virtual screen does not show it (--screen unverified)"), at))
        case .off:
            return DisplayEvidence.judge(connector: nil, panel: (DisplayEvidence.Panel(said: "standby (--screen off)", off: true), at),
                                         pixels: (.unavailable("the panel is off"), at))
        }
    }

    private struct Witness: ScreenWitness {
        let screen: VirtualScreen
        let record: @Sendable (AdInfo, DisplayEvidence) -> Void

        func observe(_ event: AdEvent) {
            if case .started(let info) = event { record(info, screen.evidence()) }
        }

        func close() {}
    }
}

/// Beacons as a simulation sends them — through the outbox's own delivery (its retries, its
/// deadlines, its wait for a synchronised clock), on the simulation's time — recorded with their
/// event and play: not sent (answered as delivered: a simulation never bills), or sent for real
/// (`--send-beacons`), each attempt recorded.
public final class RecordingBeaconSender: BeaconSender {
    private let environment: AdEnvironment
    private let fetcher: BoundedHTTP?
    /// Hears each attempt as it is made (the timeline, the HAR, the rules): nothing is kept here —
    /// a list of every attempt grew by 3 MiB every four simulated days of the busy box.
    private let listener = Hook<RecordedExchange>()

    public init(environment: AdEnvironment, send fetcher: BoundedHTTP?) {
        self.environment = environment
        self.fetcher = fetcher
    }

    public var sends: Bool { fetcher != nil }

    public func listen(_ listener: @escaping @Sendable (RecordedExchange) -> Void) { self.listener.set(listener) }

    public func send(_ url: String, timeout: Double) async -> Result<Int, any Error> {
        await send(Beacon(url: url, event: "", recorded: RecordedTime(wall: environment.wall(), monotonic: environment.monotonic(), boot: environment.bootID,
                                                                        trust: .synchronized)), url: url, timeout: timeout)
    }

    public func send(_ beacon: Beacon, url: String, timeout: Double) async -> Result<Int, any Error> {
        var exchange = RecordedExchange(kind: .beacon, started: environment.wall(), url: url)
        exchange.event = beacon.event
        exchange.play = beacon.play
        exchange.recordedAt = beacon.recorded.wall
        let result: Result<Int, any Error>
        if let fetcher {
            // Sent while the simulation's one thread waits: nothing else moves meanwhile.
            let sender = HTTPBeaconSender(fetcher: fetcher)
            switch Blocking.run({ await sender.send(url, timeout: timeout) }) {
            case .success(.success(let status)):
                exchange.status = status
                result = .success(status)
            case .success(.failure(let error)), .failure(let error):
                exchange.failure = String(describing: error)
                result = .failure(error)
            }
        } else {
            exchange.comment = "not sent"
            result = .success(204)
        }
        listener(exchange)
        return result
    }
}

/// The surface of a simulation, around the stage's: tells what went on screen and when it came
/// off (the rule that overlays end on every pause reads it).
public final class WatchedAdSurface: AdSurface, @unchecked Sendable {
    // @unchecked: `onScreen` is set before the box starts, then only read (on the loop).
    private let inner: any AdSurface
    private var onScreen: (@Sendable (UInt64, Bool) -> Void)?

    public init(_ inner: any AdSurface) { self.inner = inner }

    /// Hears each overlay or pause ad going up (true) and coming down. Before the box starts.
    public func watch(_ onScreen: @escaping @Sendable (UInt64, Bool) -> Void) { self.onScreen = onScreen }

    public func prepare(_ creative: AdCreative) async -> PreparedCreative { await inner.prepare(creative) }

    public func present(_ presentation: AdPresentation) throws {
        try inner.present(presentation)
        onScreen?(presentation.id, true)
    }

    public func dismiss(_ id: UInt64) throws {
        onScreen?(id, false)
        try inner.dismiss(id)
    }

    public func playPostroll(_ presentation: AdPresentation, reporter: PostrollReporter) throws {
        try inner.playPostroll(presentation, reporter: reporter)
    }

    public func stopPostroll(_ id: UInt64) { inner.stopPostroll(id) }
}
