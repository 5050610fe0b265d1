import ClientSupport
import Foundation
import XCTest

/// `adplayerd-web` and `adplayerd-mqtt` read the shared configuration file with the daemon's
/// reader, interpret their keys as the daemon does, leave the daemon's to it, and name a key
/// nobody knows.
final class ClientConfigurationTests: XCTestCase {
    func testTheClientsReadTheirKeysLeaveTheDaemonsAndRefuseUnknownOnes() throws {
        let file = NSTemporaryDirectory() + "client-\(UUID().uuidString.prefix(8)).conf"
        defer { unlink(file) }
        try Data("""
            # the box's one file
            library = /srv/media
            ads = /srv/ads
            vo = gpu
            socket = /run/x/control.sock
            web-listen = "[::1]:8081"
            mqtt-broker = mqtt://broker.example:1884
            mqtt-groups = lobby,floor-2
            log-level = info

            """.utf8).write(to: URL(fileURLWithPath: file))
        var configuration = try ClientConfiguration.load(arguments: ["--config", file, "--socket", "/run/y/control.sock"], environment: [:])
        XCTAssertEqual(configuration.socket, "/run/y/control.sock", "a flag wins over the file")
        XCTAssertEqual(configuration.webListen.description, "[::1]:8081")
        XCTAssertTrue(configuration.webListen.isLoopback)
        XCTAssertEqual(configuration.mqtt.broker?.host, "broker.example")
        XCTAssertEqual(configuration.mqtt.broker?.port, 1884)
        XCTAssertEqual(configuration.mqtt.groups, ["lobby", "floor-2"])
        XCTAssertEqual(configuration.logLevel, .info)

        try Data("mqtt-brokr = mqtt://x:1\n".utf8).write(to: URL(fileURLWithPath: file))
        XCTAssertThrowsError(try ClientConfiguration.load(arguments: ["--config", file], environment: [:])) { error in
            XCTAssertEqual((error as? ConfigurationError)?.source, "\(file):1")
            XCTAssertTrue("\(error)".contains("unknown key \"mqtt-brokr\""), "\(error)")
        }
        try Data("web-listen = 10.0.0.1:99999\n".utf8).write(to: URL(fileURLWithPath: file))
        XCTAssertThrowsError(try ClientConfiguration.load(arguments: ["--config", file], environment: [:])) { error in
            XCTAssertTrue("\(error)".hasPrefix("\(file):1: web-listen:"), "\(error)")
        }
        configuration = try ClientConfiguration.load(arguments: [], environment: ["RUNTIME_DIRECTORY": "/run/adplayerd", "STATE_DIRECTORY": "/var/lib/a"])
        XCTAssertEqual(configuration.socket, "/run/adplayerd/control.sock")
        XCTAssertEqual(configuration.stateDir, "/var/lib/a")
    }
}
