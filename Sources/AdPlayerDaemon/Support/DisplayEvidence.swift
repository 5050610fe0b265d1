import AdRuntime
import AdTracking
import Foundation

// What the screen itself says, for the display evidence of each play (issue 36): the
// connector the box drives and the panel's identity (DRM/KMS in sysfs, EDID), and the panel's
// power as HDMI-CEC reports it. Readers and parsers only: they touch the disk or a child
// process, so they run off the loop; what a play records of them is issue 36's wiring.

/// A panel's identity from its EDID (VESA E-EDID 1.3/1.4, the 128-byte base block): who made
/// it, its product code and serial, the name and serial text it announces — so that a panel
/// swapped behind a box shows in its plays.
public struct EDIDIdentity: Sendable, Equatable {
    /// The three-letter PNP id (`SAM`, `DEL`, `GSM`).
    public let manufacturer: String
    public let productCode: UInt16
    /// The numeric serial; nil when the panel leaves it 0.
    public let serial: UInt32?
    /// Display descriptors 0xFC (the monitor's name) and 0xFF (its serial as text).
    public let name: String?
    public let serialText: String?

    /// The base block's bytes (extensions after it are ignored); nil when they are not an
    /// EDID: too short, a wrong header, a checksum that does not add up, a manufacturer id
    /// outside A–Z.
    public init?(_ bytes: [UInt8]) {
        guard bytes.count >= 128, Array(bytes[0..<8]) == [0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00] else { return nil }
        guard bytes[0..<128].reduce(UInt8(0), { $0 &+ $1 }) == 0 else { return nil }
        let id = UInt16(bytes[8]) << 8 | UInt16(bytes[9])
        let letters = [(id >> 10) & 0x1F, (id >> 5) & 0x1F, id & 0x1F]
        guard letters.allSatisfy({ (1...26).contains($0) }) else { return nil }
        manufacturer = String(String.UnicodeScalarView(letters.map { Unicode.Scalar(UInt8(64 + $0)) }))
        productCode = UInt16(bytes[10]) | UInt16(bytes[11]) << 8
        let number = UInt32(bytes[12]) | UInt32(bytes[13]) << 8 | UInt32(bytes[14]) << 16 | UInt32(bytes[15]) << 24
        serial = number == 0 ? nil : number
        var name: String?, serialText: String?
        for offset in stride(from: 54, to: 126, by: 18) where bytes[offset] == 0 && bytes[offset + 1] == 0 {
            let text = Self.descriptorText(bytes[(offset + 5)..<(offset + 18)])
            switch bytes[offset + 3] {
            case 0xFC: name = text
            case 0xFF: serialText = text
            default: break
            }
        }
        self.name = name
        self.serialText = serialText
    }

    /// A descriptor's 13 bytes of text: up to the line feed, printable ASCII only, trimmed.
    private static func descriptorText(_ bytes: ArraySlice<UInt8>) -> String? {
        let text = String(decoding: bytes.prefix { $0 != 0x0A }.filter { (0x20..<0x7F).contains($0) }, as: UTF8.self)
            .trimmingCharacters(in: .whitespaces)
        return text.isEmpty ? nil : text
    }
}

/// One output of the graphics card as DRM/KMS tells it in sysfs
/// (`/sys/class/drm/card0-HDMI-A-1/{status,enabled,edid}`).
public struct DRMConnector: Sendable, Equatable {
    public typealias Status = ConnectorState

    /// `card0-HDMI-A-1`.
    public let name: String
    public let status: Status
    /// Whether a CRTC drives it (`enabled`); nil when the file is missing.
    public let enabled: Bool?
    public let edid: EDIDIdentity?

    /// Every connector under `root` (the sysfs class folder), by name. Files are read bounded
    /// (`bounded`: 4 KiB of text, an EDID's base and extensions at most 32 KiB); a connector whose
    /// `status` cannot be read is `unknown`, never left out. Blocking: never on the loop.
    public static func all(root: String = "/sys/class/drm") -> [DRMConnector] {
        let names = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
            .filter { $0.hasPrefix("card") && $0.contains("-") }.sorted()
        return names.map { read(root + "/" + $0, name: $0) }
    }

    static func read(_ folder: String, name: String) -> DRMConnector {
        func text(_ file: String) -> String? {
            bounded(folder + "/" + file, maxBytes: 4096).map {
                String(decoding: $0, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            }
        }
        let status = text("status").flatMap(Status.init(rawValue:)) ?? .unknown
        let enabled = text("enabled").map { $0 == "enabled" }
        let edid = bounded(folder + "/edid", maxBytes: 32 * 1024).flatMap(EDIDIdentity.init)
        return DRMConnector(name: name, status: status, enabled: enabled, edid: edid)
    }

    /// A sysfs attribute's bytes, read to its end and at most `maxBytes` (nil past it, or when
    /// it is not a regular file): sysfs gives a binary attribute such as `edid` a size of 0 in
    /// `stat`, so its size cannot be known before reading, as `SafeFile` would want.
    static func bounded(_ path: String, maxBytes: Int) -> [UInt8]? {
        let fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        var bytes = [UInt8](repeating: 0, count: maxBytes + 1)
        var filled = 0
        while filled < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress! + filled, $0.count - filled) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            filled += n
        }
        return filled <= maxBytes ? Array(bytes[..<filled]) : nil
    }
}

/// The panel's power as HDMI-CEC reports it (`<Report Power Status>`, answered to `cec-ctl --to 0
/// --give-device-power-status`: a line `pwr-state: on`, `standby`, `to-on`, `to-standby`).
public enum CECPowerStatus: Sendable, Equatable {
    case on
    case standby
    /// Waking or going to standby: CEC's "in transition".
    case toOn
    case toStandby
    /// No answer could be read (no adapter, no reply, another tool's output): the reason.
    case unknown(String)

    /// Reads `cec-ctl`'s output: the first `pwr-state:` line decides.
    public init(cecCtlOutput output: String) {
        for line in output.split(whereSeparator: \.isNewline) {
            let trimmed = line.trimmingCharacters(in: .whitespaces).lowercased()
            guard let range = trimmed.range(of: "pwr-state:") else { continue }
            let value = trimmed[range.upperBound...].trimmingCharacters(in: .whitespaces)
            let word = value.prefix { !$0.isWhitespace && $0 != "(" }
            switch word {
            case "on": self = .on
            case "standby": self = .standby
            case "to-on": self = .toOn
            case "to-standby": self = .toStandby
            default: self = .unknown("pwr-state \(OneLine.escape(String(value.prefix(40))))")
            }
            return
        }
        self = .unknown("no pwr-state in the answer")
    }

    /// What a play's evidence says of it: `off` only for a panel that says it is in standby
    /// (or going there); waking counts as on.
    public var panelOff: Bool? {
        switch self {
        case .standby, .toStandby: true
        case .on, .toOn: false
        case .unknown: nil
        }
    }
}

/// Asks the panel its power over HDMI-CEC (`cec-command` with `--to 0
/// --give-device-power-status` appended, as standby appends `--standby`): off the loop, the
/// command bounded by a deadline (`ChildProcess`: its group killed at it, always reaped), the
/// answer kept at most `maxAge` seconds, a missing tool or adapter said once and answered
/// `unknown` with the reason.
///
/// Threading: `status()` from any thread but the player's loop (it may run the command); calls
/// made while a query runs get the last answer (or `unknown`, "a query is under way").
public final class CECPowerProbe: Sendable {
    private let command: [String]
    private let log: Logger
    private let maxAge: Double
    private let timeout: Double
    private let now: @Sendable () -> Double
    private let state = Locked(State())

    private struct State {
        var last: (status: CECPowerStatus, at: Double)?
        var running = false
        var said: String?
    }

    public init(command: [String], log: Logger, maxAge: Double = 60, timeout: Double = 5,
                now: @escaping @Sendable () -> Double = { Double(MonotonicTime.now()) / 1e9 }) {
        self.command = command
        self.log = log
        self.maxAge = max(0, min(maxAge, 60))
        self.timeout = max(0.1, min(timeout, 10))
        self.now = now
    }

    /// The panel's power and when it was read (this probe's clock): the kept answer while it is
    /// younger than `maxAge`, else a new one.
    public func status() -> (status: CECPowerStatus, at: Double) {
        let time = now()
        enum Step { case kept(CECPowerStatus, Double), ask }
        let step: Step = state.withLock { state in
            if let last = state.last, time - last.at < maxAge { return .kept(last.status, last.at) }
            if state.running { return .kept(state.last?.status ?? .unknown("a query is under way"), state.last?.at ?? time) }
            state.running = true
            return .ask
        }
        if case .kept(let status, let at) = step { return (status, at) }
        let answer = ask()
        let at = now()
        state.withLock { state in
            state.last = (answer, at)
            state.running = false
        }
        return (answer, at)
    }

    private func ask() -> CECPowerStatus {
        guard let program = command.first, let path = CECControl.find(program) else {
            return unknown("no \(command.first ?? "cec-command") on PATH (Debian: apt-get install v4l-utils)")
        }
        let outcome: ChildProcess.Outcome
        do {
            outcome = try ChildProcess.run(path, Array(command.dropFirst()) + ["--to", "0", "--give-device-power-status"], timeout: timeout)
        } catch {
            return unknown("\(error)")
        }
        if outcome.timedOut { return unknown("\(path) did not answer within \(timeout) s") }
        let answer = CECPowerStatus(cecCtlOutput: outcome.output)
        if case .unknown = answer, outcome.status != 0 {
            let text = outcome.output.trimmingCharacters(in: .whitespacesAndNewlines)
            let last = OneLine.escape(String((text.split(separator: "\n").last.map(String.init) ?? "no output").prefix(200)))
            let noDevice = text.contains("/dev/cec") || text.lowercased().contains("no such file")
            return unknown(noDevice ? "no CEC device (\(last))" : "\(path) failed (\(outcome.status.map { "status \($0)" } ?? "a signal")): \(last)")
        }
        state.withLock { $0.said = nil }
        return answer
    }

    /// `unknown(reason)`, the reason logged once until it changes.
    private func unknown(_ reason: String) -> CECPowerStatus {
        let new = state.withLock { state in defer { state.said = reason }; return state.said != reason }
        if new { log.notice("display: the panel's power cannot be read: \(reason)") }
        return .unknown(reason)
    }
}

/// A grab of the composed output, decoded to 8-bit BGRA rows (`ImageDecoder`'s format), low
/// resolution: what the pixel checks read.
public struct OutputGrab: Sendable, Equatable {
    public let width: Int
    public let height: Int
    /// width × height × 4 bytes, B G R A, rows top to bottom.
    public let pixels: [UInt8]

    /// nil when the bytes are not width × height × 4 or a side is outside 1…4096.
    public init?(width: Int, height: Int, pixels: [UInt8]) {
        guard (1...4096).contains(width), (1...4096).contains(height), pixels.count == width * height * 4 else { return nil }
        self.width = width
        self.height = height
        self.pixels = pixels
    }

    /// A rectangle of it, in its pixels.
    public struct Region: Sendable, Equatable {
        public let x: Int, y: Int, width: Int, height: Int
        public init(x: Int, y: Int, width: Int, height: Int) {
            self.x = x
            self.y = y
            self.width = width
            self.height = height
        }
    }
}

/// The pixel checks of the display evidence (issue 36), on grabs of the composed output: a
/// video ad's output neither black nor frozen across two grabs; an image or text ad's region
/// matching the creative as drawn, within a stated tolerance.
public enum PixelCheck {
    /// A pixel is dark when its luma (BT.601, 0–255) is at most this: video black is 16.
    public static let darkLuma = 24
    /// The output is black when at least this share of its pixels is dark.
    public static let blackShare = 0.98
    /// Two grabs are the same picture when their mean difference per channel is below this.
    public static let frozenMeanDifference = 1.0
    /// A region shows the creative when its mean difference per channel from the creative as
    /// drawn is at most this (scaling, chroma subsampling and blending move pixels a little).
    public static let matchMeanDifference = 24.0

    /// The grab is black (a panel showing nothing, a video that never drew).
    public static func isBlack(_ grab: OutputGrab) -> Bool {
        var dark = 0
        for index in stride(from: 0, to: grab.pixels.count, by: 4) {
            let b = Int(grab.pixels[index]), g = Int(grab.pixels[index + 1]), r = Int(grab.pixels[index + 2])
            if (299 * r + 587 * g + 114 * b) / 1000 <= darkLuma { dark += 1 }
        }
        return Double(dark) >= blackShare * Double(grab.width * grab.height)
    }

    /// The mean difference per colour channel of two grabs of one size (nil when the sizes differ).
    public static func meanDifference(_ a: OutputGrab, _ b: OutputGrab) -> Double? {
        guard a.width == b.width, a.height == b.height else { return nil }
        return mean(a.pixels, b.pixels)
    }

    /// A video ad's verdict from two grabs taken apart while it plays.
    public static func video(_ first: OutputGrab, _ second: OutputGrab) -> DisplayEvidence.Pixels {
        if isBlack(first) && isBlack(second) { return .doNotShowTheAd("the output is black") }
        guard let difference = meanDifference(first, second) else { return .unavailable("the two grabs differ in size") }
        if difference < frozenMeanDifference { return .doNotShowTheAd("the output is frozen (mean difference \(format(difference)))") }
        return .showTheAd
    }

    /// A creative's pixel takes part in the comparison when it is at least this opaque
    /// (what is under a translucent pixel is not known).
    public static let opaqueAlpha: UInt8 = 250
    /// The ad can be told from what is around it when its opaque edge differs from the
    /// output just outside it (`edgeGap` pixels out) by at least this mean per channel.
    public static let edgeContrast = 8.0
    public static let edgeGap = 3

    /// An image ad's verdict: `region` of `grab` against `drawn`, the creative as the surface
    /// drew it at that size (premultiplied BGRA: its opaque pixels are compared); and the ad
    /// must be told apart from what is around it — a creative the colour of what it is drawn
    /// over shows nothing (its opaque edge against the output just outside it).
    public static func still(_ grab: OutputGrab, region: OutputGrab.Region, drawn: OutputGrab) -> DisplayEvidence.Pixels {
        guard region.width == drawn.width, region.height == drawn.height else { return .unavailable("the creative was drawn at another size") }
        guard region.x >= 0, region.y >= 0, region.x + region.width <= grab.width, region.y + region.height <= grab.height else {
            return .doNotShowTheAd("the ad's region is off the output")
        }
        func at(_ image: OutputGrab, _ x: Int, _ y: Int) -> Int { (y * image.width + x) * 4 }
        func difference(_ a: [UInt8], _ i: Int, _ b: [UInt8], _ j: Int) -> Int {
            abs(Int(a[i]) - Int(b[j])) + abs(Int(a[i + 1]) - Int(b[j + 1])) + abs(Int(a[i + 2]) - Int(b[j + 2]))
        }
        var total = 0, compared = 0
        for y in 0..<drawn.height {
            for x in 0..<drawn.width {
                let d = at(drawn, x, y)
                guard drawn.pixels[d + 3] >= opaqueAlpha else { continue }
                total += difference(drawn.pixels, d, grab.pixels, at(grab, region.x + x, region.y + y))
                compared += 3
            }
        }
        guard compared > 0 else { return .unavailable("the creative has no opaque pixel to compare") }
        let mean = Double(total) / Double(compared)
        guard mean <= matchMeanDifference else {
            return .doNotShowTheAd("the region differs from the creative (mean difference \(format(mean)), at most \(format(matchMeanDifference)))")
        }
        // Its opaque edge against the output just outside it, where the output has room.
        var edge = 0, edgeCompared = 0
        func compare(_ x: Int, _ y: Int, _ ox: Int, _ oy: Int) {
            let d = at(drawn, x, y)
            let gx = region.x + x + ox, gy = region.y + y + oy
            guard drawn.pixels[d + 3] >= opaqueAlpha, gx >= 0, gy >= 0, gx < grab.width, gy < grab.height else { return }
            edge += difference(drawn.pixels, d, grab.pixels, at(grab, gx, gy))
            edgeCompared += 3
        }
        for x in 0..<drawn.width {
            compare(x, 0, 0, -edgeGap)
            compare(x, drawn.height - 1, 0, edgeGap)
        }
        for y in 0..<drawn.height {
            compare(0, y, -edgeGap, 0)
            compare(drawn.width - 1, y, edgeGap, 0)
        }
        if edgeCompared > 0, Double(edge) / Double(edgeCompared) < edgeContrast {
            return .doNotShowTheAd("the ad cannot be told from what is around it (edge difference \(format(Double(edge) / Double(edgeCompared))), "
                                   + "at least \(format(edgeContrast))): covered, or the colour of what it is drawn over")
        }
        return .showTheAd
    }

    /// A text ad's glyphs, as libass draws them (white, with a black border): a pixel of luma
    /// at least `glyphLuma` with one of luma at most `borderLuma` within `borderReach` pixels.
    public static let glyphLuma = 200
    public static let borderLuma = 60
    public static let borderReach = 3
    /// At least this share of the text's box is such glyph pixels.
    public static let glyphShare = 0.002

    /// A text ad's verdict: its box in the grab holds bordered glyphs (the text is drawn by
    /// mpv's libass, so there is no bitmap of it to compare; white glyphs edged in black are
    /// what it draws).
    public static func text(_ grab: OutputGrab, box: OutputGrab.Region) -> DisplayEvidence.Pixels {
        let x0 = max(0, box.x), y0 = max(0, box.y)
        let x1 = min(grab.width, box.x + box.width), y1 = min(grab.height, box.y + box.height)
        guard x1 > x0, y1 > y0 else { return .doNotShowTheAd("the ad's box is off the output") }
        func luma(_ x: Int, _ y: Int) -> Int {
            let i = (y * grab.width + x) * 4
            return (299 * Int(grab.pixels[i + 2]) + 587 * Int(grab.pixels[i + 1]) + 114 * Int(grab.pixels[i])) / 1000
        }
        var glyphs = 0
        for y in y0..<y1 {
            for x in x0..<x1 where luma(x, y) >= glyphLuma {
                let bordered = [(borderReach, 0), (-borderReach, 0), (0, borderReach), (0, -borderReach)].contains { dx, dy in
                    let nx = x + dx, ny = y + dy
                    return nx >= 0 && ny >= 0 && nx < grab.width && ny < grab.height && luma(nx, ny) <= borderLuma
                }
                if bordered { glyphs += 1 }
            }
        }
        let share = Double(glyphs) / Double((x1 - x0) * (y1 - y0))
        return share >= glyphShare ? .showTheAd
            : .doNotShowTheAd("no drawn text in the ad's box (\(format(share * 100)) % of it, at least \(format(glyphShare * 100)) %)")
    }

    /// Mean absolute difference of the B, G, R channels (alpha left out).
    private static func mean(_ a: [UInt8], _ b: [UInt8]) -> Double {
        var total = 0, count = 0
        for index in stride(from: 0, to: min(a.count, b.count), by: 4) {
            for channel in 0..<3 { total += abs(Int(a[index + channel]) - Int(b[index + channel])) }
            count += 3
        }
        return count == 0 ? 0 : Double(total) / Double(count)
    }

    private static func format(_ value: Double) -> String { String(format: "%.1f", value) }
}
