import AdRuntime
import AdSources
import AdTracking
import ControlProtocol
import Foundation

/// Where a box plays — everything that differs between the daemon, `adplayerd simulate` and
/// `schedule-check`, each an explicit parameter, and nothing else (STYLE: "our box is one
/// assembly"): the player and its loop (libmpv, or the virtual player on virtual time), the
/// clocks, randomness and worker threads (`AdEnvironment`), the network (live, recorded or
/// replayed), the ad surface, the screen and its evidence, where the state is kept. `Box`
/// builds the rest — the same for every stage.
public struct BoxStage: Sendable {
    /// The clocks, the randomness and the worker threads of the box.
    public var environment: AdEnvironment
    public var loop: any PlayerLoop
    public var player: any ContentPlayer
    public var surface: any AdSurface
    /// Ad requests and creatives: the network, or a recording of it, or a replay.
    public var fetcher: any BoundedFetcher
    /// Where beacons go: the network, or a recorder (a simulation records and does not send
    /// unless asked).
    public var beaconSender: any BeaconSender
    /// The clocks tracking reads (the run clock, the wall clock and its synchronisation).
    public var trackingClock: any TrackingClock
    /// The state folder (the database, the creative cache, screenshots); nil: memory only, and
    /// creatives in a private temporary folder.
    public var stateFolder: String?
    /// What the state folder's files must survive: the daemon's a `kill -9` and a power cut
    /// (`.crashSafe`); a simulation's private folder nothing (`.runOnly`: no syncs, no writes
    /// made only to survive a crash, each file locked once by its one connection).
    public var durability: StateDurability
    /// The screen: whether it is known dark, and the witness of what it showed.
    public var screen: ScreenStage
    /// A media file's length as FFmpeg reads it (nil: unknown), off the loop.
    public var measure: @Sendable (String) -> Double?
    /// Whether the output shows anything to anyone (viewability can be measured).
    public var viewabilityMeasurable: Bool
    /// The courier delivers the outbox on a thread of its own (the daemon); false: the stage
    /// drives `BeaconOutbox.deliverDue` itself, on its time (a simulation).
    public var courierThread: Bool
    /// Background checks on threads of their own, in real time (the health verdict's sampling,
    /// the display monitor): the daemon's. A simulation asks for them when it needs them.
    public var backgroundChecks: Bool
    /// Switches the display's power (HDMI-CEC, off the loop); nil: nothing to switch.
    public var displayPower: (@Sendable (Bool) -> Void)?
    /// Time stands still while work is under way (the virtual simulation): files' loudness is
    /// measured on the simulation's thread, flat out. False (the daemon, `--speed`): on threads
    /// of their own in real time, an episode's in the background at nice 19 and half a core.
    public var virtualTime: Bool

    public init(environment: AdEnvironment, loop: any PlayerLoop, player: any ContentPlayer, surface: any AdSurface, fetcher: any BoundedFetcher,
                beaconSender: any BeaconSender, trackingClock: any TrackingClock, stateFolder: String?, screen: ScreenStage,
                measure: @escaping @Sendable (String) -> Double?, viewabilityMeasurable: Bool, courierThread: Bool, backgroundChecks: Bool,
                displayPower: (@Sendable (Bool) -> Void)?, virtualTime: Bool = false, durability: StateDurability = .crashSafe) {
        self.environment = environment
        self.durability = durability
        self.virtualTime = virtualTime
        self.loop = loop
        self.player = player
        self.surface = surface
        self.fetcher = fetcher
        self.beaconSender = beaconSender
        self.trackingClock = trackingClock
        self.stateFolder = stateFolder
        self.screen = screen
        self.measure = measure
        self.viewabilityMeasurable = viewabilityMeasurable
        self.courierThread = courierThread
        self.backgroundChecks = backgroundChecks
        self.displayPower = displayPower
    }
}

/// The screen of a stage: why it is known dark now (the panel in standby, the output
/// unplugged; nil: not known to be), and the witness of what it showed while each ad was up.
public struct ScreenStage: Sendable {
    public var dark: @Sendable () -> String?
    /// Makes the witness, which reports each ad's evidence to `record` (before its end).
    public var witness: @Sendable (_ record: @escaping @Sendable (AdInfo, DisplayEvidence) -> Void) -> any ScreenWitness
    public var start: @Sendable () -> Void
    public var stop: @Sendable () -> Void

    public init(dark: @escaping @Sendable () -> String?, witness: @escaping @Sendable (@escaping @Sendable (AdInfo, DisplayEvidence) -> Void) -> any ScreenWitness,
                start: @escaping @Sendable () -> Void = {}, stop: @escaping @Sendable () -> Void = {}) {
        self.dark = dark
        self.witness = witness
        self.start = start
        self.stop = stop
    }
}

/// What gathers each ad's display evidence (issue 36): told of every ad's start and end, on the
/// loop, the end before tracking records it. The daemon's grabs the output (`DisplayWitness`);
/// a simulation's says what its virtual screen was set to show.
public protocol ScreenWitness: Sendable {
    func observe(_ event: AdEvent)
    func close()
}

extension DisplayWitness: ScreenWitness {}

/// Where a box's events go: a control socket's subscribers, or a simulation's timeline.
public struct BoxEvents: Sendable {
    public var one: @Sendable (ControlEvent) -> Void
    /// Events in order, each client's share in one write.
    public var many: @Sendable ([ControlEvent]) -> Void

    public init(one: @escaping @Sendable (ControlEvent) -> Void, many: @escaping @Sendable ([ControlEvent]) -> Void) {
        self.one = one
        self.many = many
    }
}
