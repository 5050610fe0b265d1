// swift-tools-version:6.0
import PackageDescription

let strict: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
]

/// The Swift runtime and Foundation linked into each executable, section GC keeping what it
/// uses: the daemon's peak RSS beside a bare libmpv client +23.8 → +16.5–17.5 MiB with ads, the
/// page's and the bridge's 73 → 17 MiB (docs/benchmarks.md §2, §7, §8). A module compiled
/// against the shared runtime names only Foundation for the linker, so the static archives
/// Foundation stands on are named here. The sanitizers' builds (`make tsan`, `make asan`) set
/// ADPLAYERD_SHARED_SWIFT_RUNTIME: their runtimes interpose the shared libraries.
///
/// `essentials`: a program whose modules import FoundationEssentials only (no `import
/// Foundation`: the page, the bridge) links that and no ICU; `core`: one that imports no
/// Foundation at all (`adplayerctl`) links the Swift runtime alone (docs/benchmarks.md §15).
func staticRuntime(xml: Bool = false, essentials: Bool = false, core: Bool = false) -> [LinkerSetting] {
    guard Context.environment["ADPLAYERD_SHARED_SWIFT_RUNTIME"] == nil else { return [] }
    if core {
        return [.unsafeFlags(["-static-stdlib", "-Xlinker", "--gc-sections", "-lswiftSynchronization", "-lstdc++"])]
    }
    if essentials {
        let libraries = ["FoundationEssentials", "_FoundationCShims", "_FoundationCollections", "swiftSynchronization", "swiftDispatch", "dispatch",
                         "BlocksRuntime", "stdc++"]
        return [.unsafeFlags(["-static-stdlib", "-Xlinker", "--gc-sections"] + libraries.map { "-l" + $0 })]
    }
    var libraries = ["Foundation"]
    if xml { libraries += ["FoundationXML", "_CFXMLInterface", "xml2"] }
    libraries += ["FoundationInternationalization", "FoundationEssentials", "_FoundationICU", "_FoundationCollections",
                  "_FoundationCShims", "CoreFoundation", "_FoundationICU", "swiftSynchronization", "swiftDispatch", "dispatch",
                  "BlocksRuntime", "stdc++"]
    return [.unsafeFlags(["-static-stdlib", "-Xlinker", "--gc-sections"] + libraries.map { "-l" + $0 })]
}

let package = Package(
    name: "adplayerd",
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "AdRuntime", targets: ["AdRuntime"]),
        .library(name: "AdSources", targets: ["AdSources"]),
        .library(name: "MpvPlayerAdapter", targets: ["MpvPlayerAdapter"]),
        .library(name: "AdPlayerDaemon", targets: ["AdPlayerDaemon"]),
        .executable(name: "adplayerd", targets: ["adplayerd"]),
        .executable(name: "adplayerctl", targets: ["adplayerctl"]),
        .executable(name: "adplayerd-web", targets: ["adplayerd-web"]),
        .executable(name: "adplayerd-mqtt", targets: ["adplayerd-mqtt"]),
        .executable(name: "adplayerd-dev", targets: ["adplayerd-dev"]),
    ],
    targets: [
        // The C API of libmpv. No pkgConfig: Debian puts <mpv/client.h> in /usr/include, and
        // pkg-config's Requires.private makes SwiftPM warn about -D flags (see notes/libmpv.md §6).
        .systemLibrary(name: "CMpv", path: "Sources/CMpv", providers: [.apt(["libmpv-dev"])]),
        // FFmpeg's libavformat/libavcodec/libswscale (pulled in by libmpv-dev): ad images to BGRA.
        .systemLibrary(name: "CFFmpeg", path: "Sources/CFFmpeg",
                       providers: [.apt(["libavformat-dev", "libavcodec-dev", "libswscale-dev", "libswresample-dev"])]),
        // libebur128 (ITU-R BS.1770 / EBU R128): each creative's and episode's loudness (R28).
        .systemLibrary(name: "CEbur128", path: "Sources/CEbur128", providers: [.apt(["libebur128-dev"])]),
        // MPRIS2 and logind's PrepareForSleep over sd-bus (libsystemd): its vtables are C macros.
        .target(name: "CMpris", path: "Sources/CMpris", linkerSettings: [.linkedLibrary("systemd")]),
        // accept4 and SO_PEERCRED, which glibc declares only with _GNU_SOURCE (the control socket);
        // glibc's malloc tuning; sd_notify and the watchdog (libsystemd).
        .target(name: "CSystem", path: "Sources/CSystem", linkerSettings: [.linkedLibrary("systemd")]),
        // SQLite, the embedded database: the beacon outbox (R17) and the daemon's state.
        .systemLibrary(name: "CSQLite", path: "Sources/CSQLite", providers: [.apt(["libsqlite3-dev"])]),
        // libcurl's easy interface: the one bounded HTTP reader (ad sources, post-roll probe, beacons).
        .systemLibrary(name: "CCurl", path: "Sources/CCurl", providers: [.apt(["libcurl4-openssl-dev"])]),
        // What every module stands on, without Foundation (the protocol and adplayerctl link it
        // alone): seconds from outside checked in one place, times, text, addresses, locks, threads.
        .target(name: "BoundsCore", swiftSettings: strict),
        // BoundsCore re-exported, with the files and a box's environment (FoundationEssentials).
        .target(name: "Bounds", dependencies: ["BoundsCore"], swiftSettings: strict),
        // The SDK core: VideoAds, the player model and its loop, the lifecycles. Foundation only.
        .target(name: "AdRuntime", dependencies: ["Bounds"], swiftSettings: strict),
        // Where ads come from: the local catalog, VAST, the slots API, and their HTTP reader.
        .target(name: "AdSources", dependencies: ["AdRuntime", "CCurl", "CFFmpeg", "CEbur128"], swiftSettings: strict),
        // What is sent and recorded of the ads: beacons (the outbox), proof of play, metrics.
        .target(name: "AdTracking", dependencies: ["CSQLite", "CSystem", "CSign", "AdRuntime", "AdSources"], swiftSettings: strict),
        .target(name: "MpvPlayerAdapter", dependencies: ["CMpv", "CFFmpeg", "AdRuntime"], swiftSettings: strict),
        // The control protocol (docs/protocol.md), for the daemon and its clients: commands,
        // their validation, replies, events, error codes; JSON; the command-line parser.
        // It knows no ads runtime: adplayerctl links the protocol alone.
        .target(name: "ControlProtocol", dependencies: ["BoundsCore"], swiftSettings: strict),
        // What every adplayerd process does alike: its log, its signals, the host's names.
        .target(name: "ProcessSupport", dependencies: ["Bounds", "CSystem"], swiftSettings: strict),
        // The clients' side: the configuration file's reader (the daemon's too) and the settings
        // of the web process and the bridge, the link that follows the daemon, process set-up.
        .target(name: "ClientSupport", dependencies: ["Bounds", "ControlProtocol", "ProcessSupport", "CSystem"], swiftSettings: strict),
        // `adplayerd web`: its own small HTTP/1.1 server, the page, the endpoints — a client of
        // the control protocol only (no runtime, no mpv, no database).
        .target(name: "AdPlayerWeb", dependencies: ["Bounds", "ControlProtocol", "ClientSupport", "ProcessSupport", "CSystem"], swiftSettings: strict),
        // libmosquitto (Debian's libmosquitto-dev): MQTT 5 for `adplayerd mqtt`, its callbacks
        // and v5 properties wrapped in a few plain C calls.
        .target(name: "CMqtt", path: "Sources/CMqtt", linkerSettings: [.linkedLibrary("mosquitto")]),
        // The ledger's crypto, one library (OpenSSL's libcrypto, Debian's libssl-dev; libcurl maps
        // it already): SHA-256 of the play chain, Ed25519 signatures of its exports.
        .target(name: "CSign", path: "Sources/CSign", linkerSettings: [.linkedLibrary("crypto")]),
        // `adplayerd mqtt`: the fleet bridge — the control protocol on one side, a broker on the other.
        .target(name: "AdPlayerFleet", dependencies: ["Bounds", "ControlProtocol", "ClientSupport", "ProcessSupport", "CMqtt"], swiftSettings: strict),
        // What plays when: the library's files as the daemon checks them, and the schedule
        // (parsed, resolved, its timeline and its decisions) — no player, no loop, no clock.
        .target(name: "AdSchedule", dependencies: ["Bounds", "AdRuntime", "ControlProtocol"], swiftSettings: strict),
        // The daemon as a library: controller, episode policy, state, control socket, desktop,
        // and the one assembly of a box (`Box`) on a stage. It knows no mpv: the controller's
        // virtual-time tests build without libmpv.
        .target(name: "AdPlayerDaemon", dependencies: ["AdRuntime", "AdSources", "AdTracking", "AdSchedule", "CSystem", "CMpris", "ControlProtocol",
                                                            "ClientSupport", "ProcessSupport"],
                swiftSettings: strict),
        // `adplayerd simulate` and `schedule-check`: the box's own assembly on a virtual stage
        // (virtual player, clock and screen; live, recorded or replayed network), the viewer,
        // the rules, the reports.
        .target(name: "AdPlayerSimulation", dependencies: ["AdPlayerDaemon", "AdSchedule", "AdRuntime", "AdSources", "AdTracking", "ControlProtocol",
                                                                "ClientSupport", "ProcessSupport"],
                swiftSettings: strict),
        // Where the daemon is assembled: mpv as its content player, mpv's log as its log.
        .target(name: "AdPlayerMpv", dependencies: ["AdPlayerDaemon", "AdRuntime", "AdSources", "AdTracking", "MpvPlayerAdapter", "ControlProtocol"], swiftSettings: strict),
        // main (the services in order) and the tool commands.
        .executableTarget(name: "adplayerd", dependencies: ["AdPlayerDaemon", "AdPlayerMpv", "AdPlayerSimulation", "AdSchedule", "AdRuntime", "AdSources", "AdTracking",
                                                            "MpvPlayerAdapter", "ControlProtocol", "ClientSupport", "ProcessSupport", "CSign"],
                          swiftSettings: strict, linkerSettings: staticRuntime(xml: true)),
        // The operator's processes, apart from the player: they link the protocol and their own
        // parts only (no libmpv, FFmpeg, SQLite or curl), the Swift runtime statically (section
        // GC keeps what they use): docs/benchmarks.md has their memory beside the daemon's.
        .executableTarget(name: "adplayerd-web", dependencies: ["AdPlayerWeb", "ClientSupport", "ProcessSupport", "ControlProtocol", "CSystem"],
                          swiftSettings: strict, linkerSettings: staticRuntime(essentials: true)),
        .executableTarget(name: "adplayerd-mqtt", dependencies: ["AdPlayerFleet", "Bounds", "ClientSupport", "ProcessSupport", "ControlProtocol"],
                          swiftSettings: strict, linkerSettings: staticRuntime(essentials: true)),
        // The developer's tools, out of the production executable: play, the benchmarks, the
        // loop-affinity probe.
        .executableTarget(name: "adplayerd-dev", dependencies: ["AdPlayerDaemon", "AdPlayerMpv", "AdSchedule", "AdRuntime", "AdSources", "AdTracking",
                                                                "MpvPlayerAdapter", "ControlProtocol"],
                          swiftSettings: strict, linkerSettings: staticRuntime(xml: true)),
        // The control socket's client: the protocol only (docs/protocol.md).
        .executableTarget(name: "adplayerctl", dependencies: ["ControlProtocol", "BoundsCore"], swiftSettings: strict, linkerSettings: staticRuntime(core: true)),
        // Test doubles shared by the test targets: a scripted ad source and a recording surface.
        .target(name: "AdTestSupport", dependencies: ["AdRuntime"], swiftSettings: strict),
        .testTarget(name: "AdRuntimeTests", dependencies: ["AdRuntime", "AdTestSupport"], swiftSettings: strict),
        .testTarget(name: "AdSourcesTests", dependencies: ["AdRuntime", "AdSources", "AdTestSupport"], swiftSettings: strict),
        .testTarget(name: "AdTrackingTests", dependencies: ["AdTracking", "AdRuntime", "AdSources", "AdTestSupport"],
                    swiftSettings: strict),
        // The daemon's controller, policy, state and protocol in process, on virtual time.
        .testTarget(name: "AdPlayerDaemonTests", dependencies: ["AdPlayerDaemon", "AdPlayerSimulation", "AdSchedule", "ControlProtocol", "AdRuntime",
                                                               "AdSources", "AdTestSupport", "AdTracking"],
                    swiftSettings: strict),
        // The daemon and adplayerctl as processes, through the control socket.
        .testTarget(name: "DaemonTests", dependencies: ["AdRuntime", "AdTestSupport", "AdTracking", "Bounds"], swiftSettings: strict),
        // The web server alone: parsing, limits, hostile requests, tokens and roles.
        .testTarget(name: "AdPlayerWebTests", dependencies: ["AdPlayerWeb", "ClientSupport", "Bounds", "ControlProtocol", "AdTestSupport"], swiftSettings: strict),
        .testTarget(name: "MpvIntegrationTests", dependencies: ["AdRuntime", "AdSources", "AdTestSupport", "MpvPlayerAdapter", "CMpv"],
                    swiftSettings: strict),
    ]
)
