import AdRuntime
import Foundation

/// Where a simulation plays: the loop, the content player and the ad surface, and how time
/// moves there.
///
/// - `virtual()`: the scripted player on a `VirtualLoop` and a simulated surface; time jumps
///   from deadline to deadline once nothing is in flight (`--virtual`, the default).
/// - a real one (`adplayerd simulate --speed X`, made where mpv is linked): libmpv on the real
///   media, its loop's clock and mpv's speed X times real time; time flows.
public struct SimulationStage: Sendable {
    public let loop: any PlayerLoop
    public let player: any ContentPlayer
    public let surface: any AdSurface
    /// Sets a file's length (the scripted player); nil where the player reads its files itself.
    public let setMedia: (@Sendable (String, Double?) -> Void)?
    /// The viewer paused (true) or played: a scripted surface's linear video follows (mpv's
    /// pauses its own). On the loop.
    public let viewerPaused: (@Sendable (Bool) -> Void)?
    /// Time is virtual: it moves only when nothing is in flight, and runs are repeatable.
    public let isVirtual: Bool
    /// Moves the loop's time to `end` (loop time), calling `settle` between steps (off the loop).
    public let drive: @Sendable (_ end: UInt64, _ settle: () -> Void) -> Void
    /// Takes the player down once the run is over (off the loop).
    public let shutdown: @Sendable () -> Void
    /// What went wrong in the player (mpv's errors), read at the end of the run.
    public let problems: @Sendable () -> [String]

    public init(loop: any PlayerLoop, player: any ContentPlayer, surface: any AdSurface, setMedia: (@Sendable (String, Double?) -> Void)?,
                viewerPaused: (@Sendable (Bool) -> Void)?, isVirtual: Bool,
                drive: @escaping @Sendable (UInt64, () -> Void) -> Void, shutdown: @escaping @Sendable () -> Void,
                problems: @escaping @Sendable () -> [String] = { [] }) {
        self.problems = problems
        self.loop = loop
        self.player = player
        self.surface = surface
        self.setMedia = setMedia
        self.viewerPaused = viewerPaused
        self.isVirtual = isVirtual
        self.drive = drive
        self.shutdown = shutdown
    }

    /// The scripted player on virtual time, starting at an arbitrary non-zero instant; `probe`
    /// measures a video creative that does not say its duration.
    public static func virtual(probe: @escaping @Sendable (String) -> Double? = { _ in nil }) -> SimulationStage {
        let loop = VirtualLoop(startingAt: 1_000_000_000_000)
        let player = ScriptedPlayer(loop: loop)
        let surface = SimulatedAdSurface(loop: loop, probe: probe)
        return SimulationStage(loop: loop, player: player, surface: surface, setMedia: { player.setMedia($0, duration: $1) },
                               viewerPaused: { surface.viewerPaused($0) }, isVirtual: true,
                               drive: { end, settle in
                                   while true {
                                       settle()
                                       guard let next = loop.nextDeadline, next <= end else { break }
                                       loop.advance(by: Double(next &- loop.now()) / 1e9)
                                   }
                                   loop.advance(by: Double(end &- min(end, loop.now())) / 1e9)
                               },
                               shutdown: {})
    }

    /// Real time on a real player: waits until the loop's clock reaches `end`, settling
    /// (taking the beacons recorded) every 50 ms of real time.
    public static func realTimeDrive(_ loop: any PlayerLoop) -> @Sendable (UInt64, () -> Void) -> Void {
        { end, settle in
            while loop.now() < end {
                settle()
                usleep(50_000)
            }
        }
    }
}

/// The surface of a simulation, around the stage's: tells what went on screen and when it
/// came off (the rule that overlays end on every pause reads it).
final class WatchedAdSurface: AdSurface, @unchecked Sendable {
    // @unchecked: immutable after init; the inner surface has its own threading.
    private let inner: any AdSurface
    private let onScreen: @Sendable (UInt64, Bool) -> Void

    init(_ inner: any AdSurface, onScreen: @escaping @Sendable (UInt64, Bool) -> Void) {
        self.inner = inner
        self.onScreen = onScreen
    }

    func prepare(_ creative: AdCreative) async -> PreparedCreative { await inner.prepare(creative) }

    func present(_ presentation: AdPresentation) throws {
        try inner.present(presentation)
        onScreen(presentation.id, true)
    }

    func dismiss(_ id: UInt64) throws {
        onScreen(id, false)
        try inner.dismiss(id)
    }

    func playPostroll(_ presentation: AdPresentation, reporter: PostrollReporter) throws {
        try inner.playPostroll(presentation, reporter: reporter)
    }

    func stopPostroll(_ id: UInt64) { inner.stopPostroll(id) }
}
