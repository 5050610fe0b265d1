@testable import AdPlayerDaemon
import AdRuntime
import Foundation
import XCTest

/// The state writer behind a slow disk: settings are coalesced (the latest wins, one write),
/// so a burst of `volume` lines neither grows a queue without bound nor loses the last value.
final class StateStoreTests: XCTestCase {
    func testSettingsSavedBehindASlowDiskAreOneWriteAndTheLatestWins() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("state-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("adplayerd.sqlite").path
        let store = try StateStore(path: path, log: Logger(level: .error))
        _ = store.load()
        let release = store.holdWriter()   // the disk is slow: nothing is taken meanwhile
        let before = store.writesTaken
        for value in 0...10_000 { store.saveSetting("volume", String(value % 100)) }   // ends on 0
        store.saveSetting("volume", "37")
        store.saveSetting("mute", "yes")
        store.saveSetting("repeat", "all")
        store.saveCurrent(nil)
        release.fulfil(true)
        store.flush()
        XCTAssertEqual(store.writesTaken - before, 1, "10,004 saves behind a slow disk are one write")

        let saved = try StateStore(path: path, log: Logger(level: .error)).load()
        XCTAssertEqual(saved.volume, 37, "the value the client was told last")
        XCTAssertTrue(saved.mute)
        XCTAssertEqual(saved.repeatMode, .all)
    }

    /// A disk that refuses writes is said once — then when the reason changes, and when it
    /// takes writes again — not once a write for as long as it lasts (issue 23).
    func testAFullDiskIsSaidOnceNotOnceAWrite() throws {
        let lines = Locked<[String]>([])
        let log = Logger(level: .info) { _, line in lines.withLock { $0.append(line) } }
        let store = try StateStore(path: ":memory:", log: log)
        _ = store.load()
        store.injectWriteFailures(true)
        for n in 0..<20 {
            store.saveSetting("volume", String(n))
            store.flush()   // each its own write, each refused
        }
        store.injectWriteFailures(false)
        store.saveSetting("volume", "37")
        store.flush()
        log.flush()
        let said = lines.withLock { $0 }
        XCTAssertEqual(said.filter { $0.contains("cannot save") }.count, 1, "\(said)")
        XCTAssertEqual(said.filter { $0.contains("saving again") }.count, 1, "\(said)")
    }
}
