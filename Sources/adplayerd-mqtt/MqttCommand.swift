import AdPlayerFleet
import Bounds
import ClientSupport
import ControlProtocol
import ProcessSupport
import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// `adplayerd mqtt [--config FILE] [--socket PATH] [--state-dir DIR] [--mqtt-… VALUE]…`: the
/// fleet bridge (docs/fleet.md), a process apart from the daemon that reaches it only through
/// the control socket. SIGTERM/SIGINT stop it: `{"online": false, "reason": "stopped"}` is
/// published first. Without `mqtt-broker` it refuses to start (exit 2).
struct MqttCommand {
    static let usage = """
        usage: adplayerd mqtt [--config FILE] [--socket PATH] [--state-dir DIR] [--mqtt-broker URL] [--mqtt-box-id ID]
                              [--mqtt-groups G,G] [--mqtt-… VALUE]…
                                                                  the fleet bridge to an MQTT broker (docs/fleet.md)
        """

    let arguments: [String]

    func run() throws -> Int32 {
        var spec: [String: CommandLineArguments.Kind] = ["config": .value, "socket": .value, "state-dir": .value, "log-level": .value]
        for key in ConfigurationFile.keys where key.hasPrefix("mqtt-") { spec[key] = .value }
        let parsed = try CommandLineArguments(arguments, spec: spec)
        guard parsed.positional.isEmpty else { throw UsageError("mqtt takes no argument \(parsed.positional[0].prefix(64))") }
        var keys: [String] = []
        for key in spec.keys.sorted() { for value in parsed.values(key) { keys += ["--\(key)", value] } }
        let configuration = try ClientConfiguration.load(arguments: keys)
        let log = Logger(level: configuration.logLevel)
        guard let broker = configuration.mqtt.broker else {
            throw ConfigurationError(source: "mqtt-broker", reason: "no broker: mqtt-broker = mqtt://HOST:PORT (or mqtts://)")
        }
        guard let boxID = configuration.mqtt.boxID ?? HostInfo.machineID() else {
            throw ConfigurationError(source: "mqtt-box-id", reason: "no /etc/machine-id: set mqtt-box-id")
        }
        var password: String?
        if let file = configuration.mqtt.passwordFile {
            do {
                try SafeFile.requirePrivate(file)
            } catch {
                throw ConfigurationError(source: "mqtt-password-file", reason: error.description)
            }
            let data = try SafeFile.read(file, maxBytes: 4096)
            password = String(String(decoding: data, as: UTF8.self).trimmingLineBreaks())
        }
        do {
            try FileManager.default.createDirectory(atPath: configuration.stateDir, withIntermediateDirectories: true)
        } catch {
            log.warning("mqtt: \(configuration.stateDir): \(error); the plays cursor cannot be kept (rows are sent again after a restart)")
        }
        let link = DaemonLink(socket: configuration.socket)
        let bridge = FleetBridge(settings: FleetBridge.Settings(mqtt: configuration.mqtt, broker: broker, boxID: boxID, password: password,
                                                                cursorFile: configuration.stateDir + "/mqtt-plays.cursor", version: Product.version),
                                 link: link) { log.notice($0) }
        let stopped = DispatchSemaphore(value: 0)
        Signals.watch { signal in
            if signal != SIGHUP { stopped.signal() }
        }
        bridge.start()
        log.notice("mqtt: bridging \(configuration.socket) to \(broker.tls ? "mqtts" : "mqtt")://\(broker.host):\(broker.port) as \(configuration.mqtt.prefix)/\(boxID)")
        stopped.wait()
        bridge.stop()
        log.notice("mqtt: stopped (\(bridge.summary))")
        log.flush()
        return 0
    }
}
