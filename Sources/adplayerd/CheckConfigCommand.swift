import AdPlayerDaemon
import AdPlayerMpv
import AdRuntime
import AdSchedule
import AdSources
import ControlProtocol
import Foundation
import MpvPlayerAdapter

/// `adplayerd check-config [--config FILE] [FLAG…]`: the configuration the daemon would run
/// with, checked without starting it — the file and flags parsed, the library folders, the
/// state and metrics folders, each ad source resolved as `ads-check` does (bounded by its
/// timeouts), and mpv started headless with the options (an `mpv-option` value mpv refuses,
/// an `audio-device` it does not list). Exit 0 when all is well; 2 with one line per problem.
/// The system unit's `ExecReload` runs it first: a configuration that fails is not reloaded.
struct CheckConfigCommand {
    static let usage = """
        usage: adplayerd check-config [--config FILE] [FLAG...]
          checks the configuration (the file, then the flags, as the daemon reads them) without starting
          the daemon; exit 0 when all is well, 2 with one line per problem
        """

    let arguments: [String]

    func run() throws -> Int32 {
        // Every problem of the file and the flags, one line each, then what the usable settings
        // meet on this machine.
        let configuration: Configuration
        var invalid: [ConfigurationError] = []
        do {
            configuration = try Configuration.load(arguments: arguments, problems: &invalid)
        } catch {
            print("\(error)")
            return 2
        }
        var problems = invalid.map(\.description) + configuration.localProblems()
        problems += adProblems(configuration)
        problems += mpvProblems(configuration)
        // The schedule as the daemon reads it: every problem with its JSON path (docs/schedule.md).
        if let file = configuration.schedule {
            do {
                _ = try ScheduleLoader.load(path: file, library: configuration.library, timeZone: configuration.timeZone)
            } catch {
                problems += error.problems.prefix(50).map { "schedule: \(file): \($0)" }
            }
        }
        for problem in problems { print(problem) }
        if problems.isEmpty {
            print("\(configuration.configFile ?? "the flags"): all is well (\(configuration.library.count) library folder(s), "
                  + "\(configuration.ads.count) ad source(s))")
            return 0
        }
        return 2
    }

    /// Each source as `ads-check` resolves it: a catalog that does not load, a VAST server
    /// that cannot be reached or answers nonsense. A source with nothing to give right now (no
    /// fill) is no problem of the configuration.
    private func adProblems(_ configuration: Configuration) -> [String] {
        var problems: [String] = []
        for source in configuration.ads {
            let report: AdsCheckCommand.Report
            do {
                report = try AdsCheckCommand(arguments: []).report(for: source, content: "check-config")
            } catch {
                problems.append("ads: \(error)")
                continue
            }
            let real = report.problems.filter { $0.code != "vast-303" }
            if report.type == "catalog" {
                problems += real.map { "ads: \(source): \($0.id.map { "\($0): " } ?? "")\($0.message) [\($0.code)]" }
            } else if report.ads.isEmpty, let first = real.first {
                problems.append("ads: \(source): \(first.message) [\(first.code)]")
            }
        }
        return problems
    }

    /// mpv with the configured options, headless: what it refuses, and whether the audio device
    /// is one it knows.
    private func mpvProblems(_ configuration: Configuration) -> [String] {
        var mpvConfiguration = MpvPlayerConfiguration()
        mpvConfiguration.extraOptions = configuration.mpvOptions.filter { !["fs", "gpu-context", "gpu-api", "drm-connector", "drm-mode"].contains($0.0) }
        do {
            let player = try MpvPlayer(configuration: mpvConfiguration) { _ in }
            defer { player.shutdown() }
            if let device = configuration.audioDevice, !player.audioDevices().contains(where: { $0.name == device }) {
                return ["audio-device: \(device): mpv lists no such device (adplayerctl audio-devices, or mpv --audio-device=help)"]
            }
            return []
        } catch {
            return ["mpv-option: mpv refuses the options: \(error)"]
        }
    }
}
