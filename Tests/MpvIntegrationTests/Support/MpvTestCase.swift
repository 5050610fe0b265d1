import AdRuntime
import Foundation
import MpvPlayerAdapter
import XCTest

/// Collects mpv's log lines; a test fails on any error it did not declare as expected.
final class MpvLogGuard: Sendable {
    private let lines = Locked<[MpvLogMessage]>([])
    private let expected = Locked<[String]>([])

    func record(_ message: MpvLogMessage) { lines.withLock { $0.append(message) } }

    /// Declares that an error whose text contains `fragment` is part of the test.
    func expectError(containing fragment: String) { expected.withLock { $0.append(fragment) } }

    var all: [MpvLogMessage] { lines.withLock { $0 } }

    var unexpectedErrors: [MpvLogMessage] {
        let fragments = expected.withLock { $0 }
        return all.filter { line in line.isError && !fragments.contains { line.text.contains($0) } }
    }
}

/// A test that plays real media through real libmpv (`vo=null`, `ao=null`). Every player it
/// makes is shut down at the end, and the test fails on an unexpected mpv error log line.
class MpvTestCase: XCTestCase {
    private(set) var players: [MpvPlayer] = []
    private(set) var logs = MpvLogGuard()
    private var observations: [PlayerObservation] = []

    override func setUp() {
        super.setUp()
        players = []
        logs = MpvLogGuard()
        observations = []
    }

    override func tearDown() {
        observations.forEach { $0.cancel() }
        players.forEach { $0.shutdown() }
        players = []
        for line in logs.unexpectedErrors {
            XCTFail("unexpected mpv error log: \(line)")
        }
        super.tearDown()
    }

    /// A headless player with a recorder attached.
    func makePlayer(_ configure: (inout MpvPlayerConfiguration) -> Void = { _ in }) throws -> (MpvPlayer, PlayerRecorder) {
        var configuration = MpvPlayerConfiguration()
        configure(&configuration)
        let logs = self.logs
        let player = try MpvPlayer(configuration: configuration) { logs.record($0) }
        let recorder = PlayerRecorder()
        observations.append(player.addObserver(recorder))
        players.append(player)
        return (player, recorder)
    }
}
