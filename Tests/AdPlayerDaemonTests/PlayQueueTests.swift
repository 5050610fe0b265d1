import AdPlayerDaemon
import ControlProtocol
import XCTest

/// The queue's rules alone: no player, no loop, no disk.
final class PlayQueueTests: XCTestCase {
    private func entries(_ names: String...) -> [QueueEntry] { names.map { QueueEntry(path: "/lib/\($0).mp4") } }

    func testOpenInsertsAfterTheCurrentEntryAndQueueAppends() throws {
        var queue = PlayQueue()
        XCTAssertEqual(try queue.append(entries("a", "b")), 0, "nothing played: the first added plays")
        queue.current = 0
        XCTAssertEqual(try queue.insertAfterCurrent(entries("x", "y")), 1)
        XCTAssertEqual(queue.entries.map(\.contentID), ["a", "x", "y", "b"])
        XCTAssertEqual(try queue.append(entries("c")), 4)
        queue.removeAll()
        XCTAssertTrue(queue.isEmpty)
        XCTAssertNil(queue.current)
    }

    func testTheBoundsRefuseWholeAndAddNothing() throws {
        var queue = PlayQueue(entries: (0..<QueueEntry.maxEntries - 1).map { QueueEntry(path: "/lib/\($0).mp4") })
        XCTAssertThrowsError(try queue.append(entries("one", "two"))) { error in
            XCTAssertEqual((error as? ControlError)?.code, .queueFull)
        }
        XCTAssertEqual(queue.count, QueueEntry.maxEntries - 1, "nothing added")
        XCTAssertNoThrow(try queue.append(entries("last")))
        XCTAssertThrowsError(try queue.insertAfterCurrent(entries("more")))
    }

    func testNextPreviousAndRepeat() {
        var queue = PlayQueue(entries: entries("a", "b", "c"), current: 0)
        XCTAssertEqual(queue.next(after: 0), 1)
        XCTAssertEqual(queue.next(after: 2), nil, "repeat off: the end")
        XCTAssertFalse(queue.hasNext(after: 2))
        XCTAssertEqual(queue.previous(before: 0), nil)
        XCTAssertEqual(queue.previous(before: 2), 1)
        queue.repeatMode = .all
        XCTAssertEqual(queue.next(after: 2), 0, "repeat all: over again")
        XCTAssertTrue(queue.hasNext(after: 2))
        queue.repeatMode = .one
        XCTAssertTrue(queue.loopsEpisode)
        var empty = PlayQueue()
        XCTAssertEqual(empty.next(after: 0), nil)
    }

    func testRemoveAndMoveKeepTheCurrentEntry() throws {
        var queue = PlayQueue(entries: entries("a", "b", "c", "d"), current: 2)
        try queue.remove(at: 0)
        XCTAssertEqual(queue.current, 1)
        XCTAssertEqual(queue[1].contentID, "c")
        try queue.move(from: 1, to: 2)
        XCTAssertEqual(queue.current, 2)
        XCTAssertEqual(queue.entries.map(\.contentID), ["b", "d", "c"])
        try queue.move(from: 0, to: 2)
        XCTAssertEqual(queue.current, 1, "an entry moved from before to after it")
        XCTAssertEqual(queue[queue.current!].contentID, "c")
        try queue.remove(at: 1)
        XCTAssertNil(queue.current, "the current entry removed: none plays until the caller says")
        XCTAssertThrowsError(try queue.remove(at: 5)) { XCTAssertEqual(($0 as? ControlError)?.code, .badArgs) }
        XCTAssertThrowsError(try queue.move(from: 0, to: 9))
        XCTAssertThrowsError(try queue.jump(to: -1))
    }

    /// Shuffled: every entry once a pass, the one that plays first, never an episode twice in
    /// a row across passes; previous walks the same order back.
    func testShuffleVisitsEachOnceAPassAndNeverRepeatsAcrossPasses() {
        for _ in 0..<200 {
            var queue = PlayQueue(entries: entries("a", "b", "c", "d", "e"), current: 2, repeatMode: .all, shuffle: true)
            XCTAssertEqual(queue.playOrder.first, 2)
            XCTAssertEqual(Set(queue.playOrder), Set(0..<5))
            var index = 2
            var played = [2]
            for _ in 0..<14 {
                let upcoming = queue.upcoming(after: index)   // what is measured ahead (R28), drawing nothing
                let next = queue.next(after: index)!
                if played.count % 5 != 0 { XCTAssertEqual(upcoming, next, "the upcoming one is the one that plays") }
                XCTAssertNotEqual(next, index, "twice in a row")
                if played.count % 5 != 0 { XCTAssertEqual(queue.previous(before: next), index) }
                played.append(next)
                index = next
            }
            for pass in 0..<3 { XCTAssertEqual(Set(played[pass * 5..<pass * 5 + 5]), Set(0..<5), "pass \(pass): each once") }
        }
        var queue = PlayQueue(entries: entries("a", "b"), current: 1, shuffle: true)
        queue.setShuffle(false)
        XCTAssertEqual(queue.playOrder, [0, 1])
        XCTAssertNil(queue.upcoming(after: 1), "the end, repeat off")
        queue.repeatMode = .all
        XCTAssertEqual(queue.upcoming(after: 1), 0)
    }

    /// The positions kept on the loop forget the least recently saved, as the store does (it
    /// keeps the newest rows) — not an arbitrary one.
    func testPositionsForgetTheLeastRecentlySaved() {
        var positions = RecentPositions(["/old.mp4": 5], limit: 3)
        positions.set("/a.mp4", 1)
        positions.set("/b.mp4", 2)
        positions.set("/old.mp4", 6)   // saved again: now the newest
        positions.set("/c.mp4", 3)     // at the bound: /a.mp4 is the least recently saved
        XCTAssertNil(positions["/a.mp4"])
        XCTAssertEqual(positions["/old.mp4"], 6)
        XCTAssertEqual(positions["/b.mp4"], 2)
        XCTAssertEqual(positions["/c.mp4"], 3)
        XCTAssertEqual(positions.count, 3)
        positions.remove("/b.mp4")
        positions.set("/d.mp4", 4)
        XCTAssertEqual(positions.count, 3, "a removal makes room: nothing else is forgotten")
        XCTAssertEqual(positions["/old.mp4"], 6)
    }
}
