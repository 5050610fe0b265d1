import AdPlayerDaemon
import AdPlayerMpv
import AdRuntime
import ControlProtocol
import Foundation
import MpvPlayerAdapter

/// `adplayerd-dev off-loop WHAT`: calls one loop-owned entry point from a thread that is not
/// the player's loop, as a bug would. In every build — release included — the process must
/// trap there (SIGILL/SIGTRAP) with "called off the player's loop"; exiting normally means
/// the check is missing. What the release-build test of loop affinity runs.
struct OffLoopCommand {
    static let usage = """
        usage: adplayerd-dev off-loop controller|surface|feed|timer
          Calls a loop-owned entry point off the loop; it must trap (exit status 0 means it did not).
        """

    let arguments: [String]

    func run() throws -> Int32 {
        guard arguments.count == 1, let what = arguments.first else { throw UsageError("off-loop takes one of controller, surface, feed, timer") }
        switch what {
        case "controller", "surface":
            var configuration = MpvPlayerConfiguration()
            configuration.vo = "null"
            configuration.ao = "null"
            let player = try MpvPlayer(configuration: configuration) { _ in }
            let surface = MpvAdSurface(player: player)
            let store = try StateStore(path: ":memory:", log: Logger(level: .warning))
            let controller = Controller(player: player, surface: surface, store: store, log: Logger(level: .warning), source: nil,
                                        pauseAdDelay: 1, adsConfiguration: VideoAdsConfiguration(), emit: { _ in })
            if what == "controller" {
                _ = controller.status()   // off the loop: must trap
            } else {
                try surface.dismiss(1)    // off the loop: must trap
            }
            player.shutdown()
        case "feed":
            let loop = VirtualLoop()
            let feed = PlayerChangeFeed(loop: loop)
            _ = feed.observerCount        // off the loop: must trap
        case "timer":
            let loop = VirtualLoop()
            let timer = try loop.sync { loop.schedule(after: 1) {} }
            timer.cancel()                // off the loop: must trap
        default:
            throw UsageError("off-loop takes one of controller, surface, feed, timer")
        }
        print("off-loop \(what): no trap")
        return 0
    }
}
