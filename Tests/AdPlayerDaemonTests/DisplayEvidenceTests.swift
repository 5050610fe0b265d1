import AdRuntime
import AdPlayerDaemon
import AdTracking
import Foundation
import XCTest

/// What the screen says of itself (issue 36's evidence): a panel's EDID identity, the DRM
/// connectors in sysfs, the panel's power as `cec-ctl` reports it.
final class DisplayEvidenceTests: XCTestCase {
    /// An EDID base block as a panel sends it: header, `SAM`, product 0x0F1B, serial
    /// 0x01020304, a name and a serial-text descriptor, the checksum.
    static func edid(manufacturer: String = "SAM", serial: UInt32 = 0x0102_0304, name: String = "SyncMaster",
                     serialText: String = "H9XS900123") -> [UInt8] {
        var bytes = [UInt8](repeating: 0, count: 128)
        bytes[0..<8] = [0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x00]
        let letters = manufacturer.unicodeScalars.map { UInt16($0.value - 64) }
        let id = letters[0] << 10 | letters[1] << 5 | letters[2]
        bytes[8] = UInt8(id >> 8)
        bytes[9] = UInt8(id & 0xFF)
        bytes[10] = 0x1B
        bytes[11] = 0x0F
        for index in 0..<4 { bytes[12 + index] = UInt8((serial >> (8 * UInt32(index))) & 0xFF) }
        bytes[18] = 1
        bytes[19] = 4
        func descriptor(_ offset: Int, _ tag: UInt8, _ text: String) {
            bytes[offset + 3] = tag
            var field = Array(text.utf8.prefix(13))
            if field.count < 13 { field.append(0x0A) }
            while field.count < 13 { field.append(0x20) }
            bytes[(offset + 5)..<(offset + 18)] = field[...]
        }
        descriptor(54, 0xFC, name)
        descriptor(72, 0xFF, serialText)
        bytes[127] = UInt8((256 - Int(bytes[0..<127].reduce(UInt8(0), { $0 &+ $1 }))) & 0xFF)
        return bytes
    }

    /// A play's `display_evidence` is written out by hand (Foundation's writer was a few per cent
    /// of a simulated month): byte for byte what `JSONSerialization` writes (sorted keys,
    /// slashes as they are), for every control character, quotes, backslashes, slashes and text
    /// beyond ASCII — the ledger's rows keep the form they had.
    func testTheRecordedEvidenceIsWhatFoundationsWriterWrites() throws {
        let controls = String(String.UnicodeScalarView((0..<0x20).compactMap(Unicode.Scalar.init)))
        let texts = ["covered by \"a\" window", "back\\slash/and/slashes", controls, "écran 画面 🙂 \u{2028}\u{2029}\u{7F}", "", "no output"]
        let several = texts.map { text in
            DisplayEvidence(verdict: .verified, reason: nil, code: nil,
                            checks: [DisplayEvidence.Check(what: "connector", said: "connected (\(text))", at: 1_800_000_000),
                                     DisplayEvidence.Check(what: "pixels", said: text, at: 1_800_000_000.5)])
        }
        for (text, evidence) in zip(texts + texts, texts.map { DisplayEvidence.missing($0, at: 1_800_000_000.123) } + several) {
            var object: [String: Any] = ["checks": evidence.checks.map { ["what": $0.what, "said": $0.said, "at": ISO8601.format($0.at)] }]
            if let reason = evidence.reason { object["reason"] = reason }
            let foundation = String(decoding: try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]),
                                    as: UTF8.self)
            XCTAssertEqual(evidence.recorded, foundation, text.debugDescription)
        }
    }

    func testAnEDIDNamesThePanelAndAnythingElseIsNoEDID() throws {
        let identity = try XCTUnwrap(EDIDIdentity(Self.edid()))
        XCTAssertEqual(identity.manufacturer, "SAM")
        XCTAssertEqual(identity.productCode, 0x0F1B)
        XCTAssertEqual(identity.serial, 0x0102_0304)
        XCTAssertEqual(identity.name, "SyncMaster")
        XCTAssertEqual(identity.serialText, "H9XS900123")
        // Extension blocks after the base are allowed; a serial of 0 is none.
        let noSerial = try XCTUnwrap(EDIDIdentity(Self.edid(manufacturer: "DEL", serial: 0) + [UInt8](repeating: 7, count: 128)))
        XCTAssertEqual(noSerial.manufacturer, "DEL")
        XCTAssertNil(noSerial.serial)
        // A panel swapped behind the box: another identity.
        XCTAssertNotEqual(EDIDIdentity(Self.edid(serialText: "OTHER")), identity)

        var broken = Self.edid()
        broken[20] ^= 0xFF
        XCTAssertNil(EDIDIdentity(broken), "a checksum that does not add up")
        var header = Self.edid()
        header[1] = 0
        XCTAssertNil(EDIDIdentity(header), "not an EDID header")
        XCTAssertNil(EDIDIdentity(Array(Self.edid().prefix(127))), "short")
        XCTAssertNil(EDIDIdentity([]))
        // Text with control bytes and ASS-like braces stays printable ASCII, cut at the line feed.
        let hostile = try XCTUnwrap(EDIDIdentity(Self.edid(name: "A\u{1B}B{\\b1}\n")))
        XCTAssertEqual(hostile.name, "AB{\\b1}")
    }

    func testConnectorsAreReadFromSysfsAndAnUnreadableOneIsUnknownNotLeftOut() throws {
        let root = NSTemporaryDirectory() + "drm-\(UUID().uuidString.prefix(8))"
        defer { try? FileManager.default.removeItem(atPath: root) }
        func make(_ name: String, _ files: [String: Data]) throws {
            try FileManager.default.createDirectory(atPath: root + "/" + name, withIntermediateDirectories: true)
            for (file, data) in files { try data.write(to: URL(fileURLWithPath: root + "/" + name + "/" + file)) }
        }
        try make("card0", [:])
        try make("card0-HDMI-A-1", ["status": Data("connected\n".utf8), "enabled": Data("enabled\n".utf8), "edid": Data(Self.edid())])
        try make("card0-DP-1", ["status": Data("disconnected\n".utf8), "enabled": Data("disabled\n".utf8), "edid": Data()])
        try make("card0-HDMI-A-2", ["edid": Data(repeating: 0xAB, count: 256)])
        // Past its bound (32 KiB) an EDID is not read at all; a link is not followed.
        try make("card0-HDMI-A-3", ["status": Data("connected\n".utf8), "edid": Data(Self.edid() + [UInt8](repeating: 0, count: 40_000))])
        try make("card0-HDMI-A-4", ["status": Data("connected\n".utf8)])
        try FileManager.default.createSymbolicLink(atPath: root + "/card0-HDMI-A-4/edid", withDestinationPath: root + "/card0-HDMI-A-1/edid")
        let connectors = DRMConnector.all(root: root)
        XCTAssertEqual(connectors.map(\.name), ["card0-DP-1", "card0-HDMI-A-1", "card0-HDMI-A-2", "card0-HDMI-A-3", "card0-HDMI-A-4"])
        XCTAssertEqual(connectors[3].status, .connected)
        XCTAssertNil(connectors[3].edid, "an EDID past 32 KiB")
        XCTAssertNil(connectors[4].edid, "a link where the EDID should be")
        XCTAssertEqual(connectors[0].status, .disconnected)
        XCTAssertEqual(connectors[0].enabled, false)
        XCTAssertNil(connectors[0].edid)
        XCTAssertEqual(connectors[1].status, .connected)
        XCTAssertEqual(connectors[1].enabled, true)
        XCTAssertEqual(connectors[1].edid?.name, "SyncMaster")
        XCTAssertEqual(connectors[2].status, .unknown)
        XCTAssertNil(connectors[2].enabled)
        XCTAssertNil(connectors[2].edid)
        XCTAssertEqual(DRMConnector.all(root: root + "/missing"), [])
    }

    func testThePanelsPowerIsReadFromCecCtlsAnswer() {
        let answer = """
            Driver Info:
            \tDriver Name                : cec-gpio
            Transmit from Playback Device 1 to TV (4 to 0):
            CEC_MSG_GIVE_DEVICE_POWER_STATUS (0x8f)
            \tSequence: 42 Tx Timestamp: 1234.567s
            \tRx, OK (Timestamp: 1234.600s):
            CEC_MSG_REPORT_POWER_STATUS (0x90):
            \tpwr-state: standby (0x01)
            """
        XCTAssertEqual(CECPowerStatus(cecCtlOutput: answer), .standby)
        XCTAssertEqual(CECPowerStatus(cecCtlOutput: answer).panelOff, true)
        XCTAssertEqual(CECPowerStatus(cecCtlOutput: "\tpwr-state: on (0x00)\n"), .on)
        XCTAssertEqual(CECPowerStatus(cecCtlOutput: "\tpwr-state: to-on (0x02)"), .toOn)
        XCTAssertEqual(CECPowerStatus(cecCtlOutput: "\tpwr-state: to-on (0x02)").panelOff, false)
        XCTAssertEqual(CECPowerStatus(cecCtlOutput: "\tpwr-state: to-standby (0x03)"), .toStandby)
        let nack = CECPowerStatus(cecCtlOutput: "CEC_MSG_GIVE_DEVICE_POWER_STATUS (0x8f)\n\tTx, Not Acknowledged (1), Max Retries\n")
        XCTAssertEqual(nack, .unknown("no pwr-state in the answer"))
        XCTAssertNil(nack.panelOff, "nothing answered is not a panel that says it is off")
        if case .unknown(let reason) = CECPowerStatus(cecCtlOutput: "pwr-state: \u{1B}[31mweird") {
            XCTAssertFalse(reason.contains("\u{1B}"), reason)
        } else {
            XCTFail("an unknown state is unknown")
        }
    }

    /// The probe asks `cec-command --to 0 --give-device-power-status`, keeps the answer at most
    /// its age, says a missing tool once, and gives up on a command that hangs at its deadline.
    func testThePowerProbeAsksKeepsItsAnswerAndSaysAProblemOnce() throws {
        let folder = NSTemporaryDirectory() + "cec-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let calls = folder + "/calls"
        let script = folder + "/cec-ctl"
        try Data("""
            #!/bin/sh
            echo "$@" >> '\(calls)'
            printf 'CEC_MSG_REPORT_POWER_STATUS (0x90):\\n\\tpwr-state: standby (0x01)\\n'
            """.utf8).write(to: URL(fileURLWithPath: script))
        chmod(script, 0o755)
        let clock = Locked(100.0)
        let lines = Locked<[String]>([])
        let log = Logger(level: .debug) { _, line in lines.withLock { $0.append(line) } }
        let probe = CECPowerProbe(command: [script, "-d", "/dev/cec0"], log: log, maxAge: 60, now: { clock.withLock { $0 } })
        let first = probe.status()
        XCTAssertEqual(first.status, .standby)
        XCTAssertEqual(first.at, 100)
        clock.withLock { $0 = 159 }
        XCTAssertEqual(probe.status().at, 100, "kept under a minute")
        clock.withLock { $0 = 161 }
        XCTAssertEqual(probe.status().at, 161, "asked again past it")
        let asked = try String(contentsOfFile: calls, encoding: .utf8).split(separator: "\n").map(String.init)
        XCTAssertEqual(asked, ["-d /dev/cec0 --to 0 --give-device-power-status", "-d /dev/cec0 --to 0 --give-device-power-status"])

        let missing = CECPowerProbe(command: [folder + "/no-such-cec-ctl"], log: log, maxAge: 0, now: { clock.withLock { $0 } })
        for _ in 0..<3 {
            guard case .unknown(let reason) = missing.status().status else { return XCTFail("a missing tool is unknown") }
            XCTAssertTrue(reason.contains("no-such-cec-ctl"), reason)
        }
        XCTAssertEqual(lines.withLock { $0 }.filter { $0.contains("no-such-cec-ctl") }.count, 1, "said once")

        let hanging = folder + "/hanging"
        try Data("#!/bin/sh\nsleep 30\n".utf8).write(to: URL(fileURLWithPath: hanging))
        chmod(hanging, 0o755)
        let slow = CECPowerProbe(command: [hanging], log: log, timeout: 0.5)
        guard case .unknown(let reason) = slow.status().status else { return XCTFail("a command past its deadline is unknown") }
        XCTAssertTrue(reason.contains("did not answer"), reason)
    }

    /// The verdict's rules: verified only with pixels that show the ad, a connected output
    /// where it can be known and a panel not off; off on the panel's or connector's word;
    /// headless unverified with "no output"; every check kept with its time.
    func testTheVerdictNeedsEveryCheckThatCanBeMade() {
        let shown = (DisplayEvidence.Pixels.showTheAd, at: 3.0)
        var evidence = DisplayEvidence.judge(connector: (.connected, identity: nil, at: 1), panel: (panel(.on), at: 2), pixels: shown)
        XCTAssertEqual(evidence.verdict, .verified)
        XCTAssertNil(evidence.reason)
        XCTAssertEqual(evidence.checks, [.init(what: "connector", said: "connected", at: 1), .init(what: "panel", said: "on", at: 2),
                                         .init(what: "pixels", said: "the ad is shown", at: 3)])
        // Where the box cannot know its connector or has no CEC, the pixels decide.
        XCTAssertEqual(DisplayEvidence.judge(connector: nil, panel: nil, pixels: shown).verdict, .verified)
        XCTAssertEqual(DisplayEvidence.judge(connector: nil, panel: (panel(.toOn), at: 2), pixels: shown).verdict, .verified)

        evidence = DisplayEvidence.judge(connector: (.connected, identity: nil, at: 1), panel: (panel(.standby), at: 2), pixels: shown)
        XCTAssertEqual(evidence.verdict, .off, "the panel says standby, whatever the pixels")
        XCTAssertEqual(evidence.reason, "the panel reports standby")
        evidence = DisplayEvidence.judge(connector: (.disconnected, identity: nil, at: 1), panel: nil, pixels: shown)
        XCTAssertEqual(evidence.verdict, .off)
        XCTAssertEqual(evidence.reason, "the output is not connected")

        evidence = DisplayEvidence.judge(connector: nil, panel: nil, pixels: (.unavailable("no output"), at: 3))
        XCTAssertEqual(evidence.verdict, .unverified, "headless")
        XCTAssertEqual(evidence.reason, "no output")
        evidence = DisplayEvidence.judge(connector: (.connected, identity: nil, at: 1), panel: (panel(.unknown("no CEC device")), at: 2),
                                         pixels: (.doNotShowTheAd("the region is the background's colour"), at: 3))
        XCTAssertEqual(evidence.verdict, .unverified)
        XCTAssertEqual(evidence.reason, "the pixels do not show the ad: the region is the background's colour")
        XCTAssertEqual(evidence.checks[1].said, "unknown: no CEC device")
        evidence = DisplayEvidence.judge(connector: (.unknown, identity: nil, at: 1), panel: nil, pixels: shown)
        XCTAssertEqual(evidence.verdict, .unverified)
        XCTAssertEqual(evidence.reason, "the connector's state is unknown")
    }

    private func panel(_ status: CECPowerStatus) -> DisplayEvidence.Panel { DisplayEvidence.Panel(said: status.said, off: status.panelOff) }

    /// What a play keeps: the verdict's reason and each check with its time, one line of JSON;
    /// the connector's check names the panel it found.
    func testTheEvidenceAsRecorded() throws {
        let evidence = DisplayEvidence.judge(connector: (.connected, identity: "card0-HDMI-A-1: SAM 0xf1b \"SyncMaster\"", at: 1_764_900_000),
                                             panel: (panel(.standby), at: 1_764_900_001), pixels: (.showTheAd, at: 1_764_900_002.5))
        XCTAssertEqual(evidence.code, "panel_off")
        let object = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(evidence.recorded.utf8)) as? [String: Any])
        XCTAssertEqual(object["reason"] as? String, "the panel reports standby")
        let checks = try XCTUnwrap(object["checks"] as? [[String: String]])
        XCTAssertEqual(checks.map { $0["what"] }, ["connector", "panel", "pixels"])
        XCTAssertEqual(checks[0]["said"], "connected (card0-HDMI-A-1: SAM 0xf1b \"SyncMaster\")")
        XCTAssertEqual(checks[2]["at"], "2025-12-05T02:00:02.500Z")
        XCTAssertFalse(evidence.recorded.contains("\n"))
        XCTAssertEqual(DisplayEvidence.missing("no display evidence within 2 s", at: 0).code, "no_evidence")
    }

    private func grab(_ width: Int, _ height: Int, _ color: (Int) -> (UInt8, UInt8, UInt8)) -> OutputGrab {
        var pixels: [UInt8] = []
        for index in 0..<(width * height) {
            let (r, g, b) = color(index)
            pixels += [b, g, r, 255]
        }
        return OutputGrab(width: width, height: height, pixels: pixels)!
    }

    /// A video ad: black, or the same picture twice, is not shown; moving pictures are. An
    /// image ad: its region matches the creative as drawn, or it is covered or off the output.
    func testThePixelChecks() {
        let black = grab(32, 18) { _ in (8, 8, 8) }
        let frameA = grab(32, 18) { ($0 % 256 == 0 ? 200 : UInt8($0 % 200), 90, 40) }
        let frameB = grab(32, 18) { (UInt8(($0 * 7) % 200), 30, 160) }
        XCTAssertTrue(PixelCheck.isBlack(black))
        XCTAssertFalse(PixelCheck.isBlack(frameA))
        XCTAssertEqual(PixelCheck.video(black, black), .doNotShowTheAd("the output is black"))
        if case .doNotShowTheAd(let why) = PixelCheck.video(frameA, frameA) { XCTAssertTrue(why.contains("frozen"), why) } else { XCTFail("frozen") }
        XCTAssertEqual(PixelCheck.video(frameA, frameB), .showTheAd)
        XCTAssertEqual(PixelCheck.video(frameA, grab(16, 9) { _ in (1, 2, 3) }), .unavailable("the two grabs differ in size"))

        // A red 8×4 creative drawn at (20, 10) over a grey background.
        let creative = grab(8, 4) { _ in (220, 20, 20) }
        let region = OutputGrab.Region(x: 20, y: 10, width: 8, height: 4)
        let withAd = grab(32, 18) { index in
            let x = index % 32, y = index / 32
            return (20..<28).contains(x) && (10..<14).contains(y) ? (210, 28, 25) : (128, 128, 128)
        }
        XCTAssertEqual(PixelCheck.still(withAd, region: region, drawn: creative), .showTheAd, "within the tolerance")
        let covered = grab(32, 18) { _ in (128, 128, 128) }
        if case .doNotShowTheAd(let why) = PixelCheck.still(covered, region: region, drawn: creative) {
            XCTAssertTrue(why.contains("differs from the creative"), why)
        } else {
            XCTFail("a covered region does not show the ad")
        }
        XCTAssertEqual(PixelCheck.still(withAd, region: .init(x: 28, y: 10, width: 8, height: 4), drawn: creative),
                       .doNotShowTheAd("the ad's region is off the output"))
        XCTAssertEqual(PixelCheck.still(withAd, region: .init(x: 0, y: 0, width: 4, height: 4), drawn: creative),
                       .unavailable("the creative was drawn at another size"))
        // The creative the colour of what it is drawn over: it matches, and shows nothing.
        let grey = grab(8, 4) { _ in (128, 128, 128) }
        if case .doNotShowTheAd(let why) = PixelCheck.still(covered, region: region, drawn: grey) {
            XCTAssertTrue(why.contains("cannot be told from what is around it"), why)
        } else {
            XCTFail("an ad the colour of the background is not shown")
        }
        // Translucent pixels are not compared (what is under them is not known); a creative
        // with no opaque pixel cannot be judged by its region.
        var halfClear = creative.pixels
        for index in stride(from: 0, to: halfClear.count, by: 8) { halfClear[index + 3] = 0; halfClear[index] = 0; halfClear[index + 1] = 0; halfClear[index + 2] = 0 }
        XCTAssertEqual(PixelCheck.still(withAd, region: region, drawn: OutputGrab(width: 8, height: 4, pixels: halfClear)!), .showTheAd)
        let clear = OutputGrab(width: 8, height: 4, pixels: [UInt8](repeating: 0, count: 8 * 4 * 4))!
        XCTAssertEqual(PixelCheck.still(withAd, region: region, drawn: clear), .unavailable("the creative has no opaque pixel to compare"))

        // Text: white glyphs edged in black inside the box; a box of plain video is not text.
        let box = OutputGrab.Region(x: 8, y: 4, width: 20, height: 10)
        let texted = grab(32, 18) { index in
            let x = index % 32, y = index / 32
            if (12..<20).contains(x) && (8..<10).contains(y) { return (250, 250, 250) }
            if (9..<23).contains(x) && (5..<13).contains(y) { return (5, 5, 5) }
            return (90, 120, 60)
        }
        XCTAssertEqual(PixelCheck.text(texted, box: box), .showTheAd)
        if case .doNotShowTheAd(let why) = PixelCheck.text(frameA, box: box) { XCTAssertTrue(why.contains("no drawn text"), why) } else { XCTFail("no text") }
        XCTAssertEqual(PixelCheck.text(texted, box: .init(x: 40, y: 0, width: 5, height: 5)), .doNotShowTheAd("the ad's box is off the output"))

        XCTAssertNil(OutputGrab(width: 2, height: 2, pixels: [0, 0, 0]), "bytes that are not the size")
        XCTAssertNil(OutputGrab(width: 70_000, height: 1, pixels: []), "a side past 4096")
    }
}
