import AdRuntime
import AdTracking
import Foundation

/// What the box knows of its screen between plays and at each play (issue 36): the DRM/KMS
/// connector it drives and the panel's power over HDMI-CEC, read off the loop every
/// `interval` seconds and whenever an ad goes on screen (`refresh`). Its last reading is what
/// a play's evidence cites, what health calls "playing to a dark panel", and what keeps a
/// source that requires display evidence from being asked while the screen is dark.
///
/// Threading: `refresh` runs blocking reads (sysfs, a child process): never on the loop.
/// `latest` and `dark` are a lock and a copy, from any thread (the loop included).
public final class DisplayMonitor: Sendable {
    /// The last reading: each part nil where the box cannot know it.
    public struct Reading: Sendable {
        /// The connector's state and the panel's identity from its EDID, when read.
        public var connector: (state: ConnectorState, identity: String?, at: Double)?
        public var panel: (panel: DisplayEvidence.Panel, at: Double)?
    }

    private let connectorName: String
    private let sysfsRoot: String
    private let cec: CECPowerProbe?
    private let interval: Double
    private let log: Logger
    private let wall: @Sendable () -> Double
    private let reading = Locked(Reading())
    private let stopping = Locked(false)
    private let said = Locked<String?>(nil)

    /// `connector`: a DRM connector's name (`card0-HDMI-A-1`, or its part after the card:
    /// `HDMI-A-1`), `auto` (any connected one counts) or `none`; `cecCommand`: the configured
    /// `cec-command`, nil for none.
    public init(connector: String, sysfsRoot: String, cecCommand: [String]?, interval: Double, log: Logger,
                wall: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 }) {
        connectorName = connector
        self.sysfsRoot = sysfsRoot
        self.interval = max(1, min(interval, 3600))
        cec = cecCommand.map { CECPowerProbe(command: $0, log: log, maxAge: min(60, max(1, interval) - 0.5)) }
        self.log = log
        self.wall = wall
    }

    /// Reads every `interval` seconds on a thread of its own until `stop`.
    public func start() {
        let stopping = self.stopping, interval = self.interval
        startThread(named: "adplayerd-display") { [weak self] in
            while true {
                self?.refresh()
                if stopping.wait(timeout: interval, until: { $0 ? true : nil }) == true { return }
            }
        }
    }

    public func stop() { stopping.signal { $0 = true } }

    /// Reads the connector and the panel now (the panel's answer is kept up to a minute). Blocking.
    public func refresh() {
        var next = Reading()
        if let connector = readConnector() { next.connector = (connector.state, connector.identity, wall()) }
        if let cec {
            let (status, at) = cec.status()
            let age = max(0, Double(MonotonicTime.now()) / 1e9 - at)
            next.panel = (DisplayEvidence.Panel(said: status.said, off: status.panelOff), wall() - age)
        }
        reading.withLock { $0 = next }
        let dark = Self.darkness(next)
        let changed = said.withLock { said in defer { said = dark }; return said != dark }
        if changed { log.notice(dark.map { "display: the screen is dark: \($0)" } ?? "display: the screen is lit (connector and panel)") }
    }

    public func latest() -> Reading { reading.withLock { $0 } }

    /// Why the screen is known dark now (the panel reports standby, the output is not
    /// connected), nil when it is not known to be.
    public func dark() -> String? { Self.darkness(latest()) }

    private static func darkness(_ reading: Reading) -> String? {
        if reading.connector?.state == .disconnected { return "the output is not connected" }
        if reading.panel?.panel.off == true { return "the panel reports standby" }
        return nil
    }

    /// The configured connector's state: `auto` — connected if any is, else unknown if any
    /// is, else disconnected; nil where there is no DRM connector (or `none`).
    private func readConnector() -> (state: ConnectorState, identity: String?)? {
        guard connectorName != "none" else { return nil }
        let all = DRMConnector.all(root: sysfsRoot)
        guard !all.isEmpty else { return nil }
        let chosen: [DRMConnector]
        if connectorName == "auto" {
            chosen = all
        } else {
            chosen = all.filter { $0.name == connectorName || $0.name.hasSuffix("-" + connectorName) }
            if chosen.isEmpty { return (.unknown, "no connector \(connectorName) under \(sysfsRoot)") }
        }
        let driven = chosen.first { $0.status == .connected } ?? chosen.first { $0.status == .unknown } ?? chosen[0]
        return (driven.status, driven.edid.map { Self.identity($0, of: driven.name) } ?? driven.name)
    }

    /// `card0-HDMI-A-1: SAM 0x0e4d "S24F350" serial H4ZK`.
    static func identity(_ edid: EDIDIdentity, of name: String) -> String {
        var words = ["\(name): \(edid.manufacturer) 0x" + String(edid.productCode, radix: 16)]
        if let model = edid.name { words.append("\"\(model)\"") }
        if let serial = edid.serialText ?? edid.serial.map(String.init) { words.append("serial \(serial)") }
        return words.joined(separator: " ")
    }
}

extension CECPowerStatus {
    /// What a play's evidence says the panel said.
    public var said: String {
        switch self {
        case .on: "on"
        case .standby: "standby"
        case .toOn: "to-on"
        case .toStandby: "to-standby"
        case .unknown(let reason): "unknown: \(reason)"
        }
    }
}
