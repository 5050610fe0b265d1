import AdPlayerDaemon
import AdRuntime
import AdSources
import AdTracking
import ControlProtocol
import Foundation
import MpvPlayerAdapter

/// The daemon's stage (`BoxStage`): libmpv as the player, its event thread as the loop, mpv's
/// output as the ad surface and the screen whose pixels are grabbed for evidence, the DRM
/// connector and HDMI-CEC for the panel, the network for ads and beacons, the system's clocks.
public enum MpvStage {
    /// The stage, and the player (the daemon shuts it down last). `announce`: an HTML
    /// creative's show and hide, for a UI shell (the control socket's subscribers).
    public static func make(_ configuration: Configuration, stateFolder: String?, log: Logger,
                            announce: @escaping @Sendable (HTMLCreativeAnnouncement) -> Void) throws -> (stage: BoxStage, player: MpvPlayer) {
        var playerConfiguration = MpvPlayerConfiguration()
        playerConfiguration.vo = configuration.vo
        playerConfiguration.ao = configuration.ao
        playerConfiguration.inputBindings = configuration.vo != "null"
        playerConfiguration.ipcSocket = configuration.mpvIPCSocket
        // External subtitles next to an episode (episode.srt, episode.en.srt); the box's choices.
        playerConfiguration.extraOptions = [("title", "adplayerd"), ("sub-auto", "exact")]
        if let device = configuration.audioDevice { playerConfiguration.extraOptions.append(("audio-device", device)) }
        if let languages = configuration.audioLanguages { playerConfiguration.extraOptions.append(("alang", languages)) }
        if let languages = configuration.subtitleLanguages { playerConfiguration.extraOptions.append(("slang", languages)) }
        playerConfiguration.extraOptions += configuration.mpvOptions
        if configuration.mpvIPCSocket != nil {
            log.warning("--mpv-ipc-socket \(configuration.mpvIPCSocket!): mpv's own IPC is open; anyone who can reach it drives the player (unsafe, for tests and debugging)")
        }
        let player = try MpvPlayer(configuration: playerConfiguration) { message in log.mpv(message) }
        player.setAdAudio(volumePercent: configuration.adVolume)
        // HTML creatives (the slots API's) are for a UI shell to draw: announced on the socket,
        // a hide in the turn that takes the creative down (docs/benchmarks.md §5).
        let surface = MpvAdSurface(player: player, hideAtOnce: true, onHTML: announce)
        // The screen's own evidence (issue 36): the connector and the panel, read off the loop.
        let display = DisplayMonitor(connector: configuration.displayConnector, sysfsRoot: configuration.drmSysfsRoot,
                                     cecCommand: configuration.cecCommand, interval: configuration.displayCheckInterval, log: log)
        let output = DisplayWitness.Output.mpv(player: player, surface: surface, vo: configuration.vo)
        let loop = player.loop
        let screen = ScreenStage(dark: { display.dark() },
                                 witness: { record in DisplayWitness(loop: loop, output: output, monitor: display, onEvidence: record) },
                                 start: { display.start() }, stop: { display.stop() })
        // The display's power (operating hours, HDMI-CEC): switched off the loop.
        var displayPower: (@Sendable (Bool) -> Void)?
        if let command = configuration.cecCommand {
            let cec = CECControl(command: command, log: log)
            displayPower = { (on: Bool) in cec.set(on: on) }
        }
        let http = BoundedHTTP(threads: 4)
        let stage = BoxStage(environment: .system, loop: player.loop, player: player, surface: surface, fetcher: http,
                             beaconSender: HTTPBeaconSender(fetcher: http), trackingClock: SystemTrackingClock(), stateFolder: stateFolder,
                             screen: screen, measure: { MediaProbe.duration($0) },
                             viewabilityMeasurable: configuration.vo != "null",   // vo=null shows nothing to anyone
                             courierThread: true, backgroundChecks: true, displayPower: displayPower)
        return (stage, player)
    }
}
