import AdRuntime
import AdTestSupport
import Foundation
@_spi(Foreign) import MpvPlayerAdapter
import XCTest

/// One suite of the player model (SPEC §2) for every player: the test double and the real
/// thing answer to the same tests (as SwiftNIO checks its EmbeddedChannel against a real
/// one), so that `VirtualPlayer` cannot drift from `MpvPlayer` again. Each test is written
/// once here; `VirtualPlayerConformanceTests` and `MpvPlayerConformanceTests` run them.
protocol PlayerDriver {
    var player: any TrackablePlayer { get }
    var events: ConformanceRecorder { get }
    /// Puts `media` in and returns its entry id.
    func load(_ media: ConformanceMedia) throws -> Int64
    func play() throws
    func pause() throws
    func seek(to seconds: Double) throws
    func setRate(_ rate: Double) throws
    func setLoop(_ on: Bool) throws
    func stop() throws
    /// Makes the player play an entry again once it has played to its end (mpv:
    /// `loop-playlist`, set by another client; the double: `replay()`).
    func replayEntriesAtTheirEnd() throws
    /// Lets the player run until `condition` holds for the recorded events: virtual time for
    /// the double, real time (bounded, for a failing test only) for mpv.
    func run(until condition: @escaping ([PlayerEvent]) -> Bool) -> Bool
}

/// What a conformance test plays: a 1 s clip or a 30 s episode (for mpv, generated files).
enum ConformanceMedia {
    case clip, episode

    var file: String { self == .clip ? "clip-1s.mp4" : "episode-long.mp4" }
    var duration: Double { self == .clip ? 1 : 30 }
}

/// Records the changes a player delivers, on its loop.
final class ConformanceRecorder: PlayerObserver {
    private let list = Locked<[PlayerEvent]>([])

    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) { list.withLock { $0.append(event) } }

    var all: [PlayerEvent] { list.withLock { $0 } }
    var changes: [PlayerChange] { all.map(\.change) }
    var count: Int { all.count }
}

enum PlayerConformance {
    static func loadPlays(_ d: any PlayerDriver) throws {
        let entry = try d.load(.episode)
        XCTAssertTrue(d.run { $0.contains { $0.change.isPlaying } }, "never played: \(d.events.changes)")
        let item = try XCTUnwrap(d.events.changes.compactMap { $0.newItem ?? nil }.first)
        XCTAssertEqual(item.entry, entry)
        XCTAssertEqual(item.loop, 0)
        XCTAssertTrue(item.path.hasSuffix(ConformanceMedia.episode.file), item.path)
        XCTAssertEqual(Array(d.events.changes.suffix(2)), [.item(item), .playing(rate: 1)])
        XCTAssertEqual(d.player.snapshot().item, item)
        XCTAssertTrue(d.player.snapshot().playing)
        try everyChangeCarriesItsFacts(d)
    }

    static func pauseAndPlay(_ d: any PlayerDriver) throws {
        _ = try d.load(.episode)
        XCTAssertTrue(d.run { $0.contains { $0.change.isPlaying } })
        let before = d.events.count
        try d.pause()
        XCTAssertTrue(d.run { $0.dropFirst(before).contains { $0.change == .paused } })
        let paused = try XCTUnwrap(d.events.all.dropFirst(before).first { $0.change == .paused })
        XCTAssertFalse(paused.snapshot.playing)
        XCTAssertEqual(paused.snapshot.rate, 0)
        XCTAssertNotNil(paused.snapshot.item)
        let resumed = d.events.count
        try d.play()
        XCTAssertTrue(d.run { $0.dropFirst(resumed).contains { $0.change.isPlaying } })
        XCTAssertEqual(d.events.changes.dropFirst(resumed).filter { $0 == .paused || $0.isPlaying }, [.playing(rate: 1)])
        try everyChangeCarriesItsFacts(d)
    }

    /// R12: 2× is a rate, and the position running at 2× is no seek.
    static func rateIsNotASeek(_ d: any PlayerDriver) throws {
        _ = try d.load(.episode)
        XCTAssertTrue(d.run { $0.contains { $0.change.isPlaying } })
        let before = d.events.count
        try d.setRate(2)
        XCTAssertTrue(d.run { $0.dropFirst(before).contains { $0.change == .rate(2) } })
        XCTAssertEqual(d.player.snapshot().rate, 2)
        let start = d.player.snapshot().position
        XCTAssertTrue(d.run { _ in d.player.snapshot().position >= start + 4 }, "2x playback stalled")
        XCTAssertEqual(d.events.changes.filter(\.isSeek), [], "2x playback reported as a seek")
        try everyChangeCarriesItsFacts(d)
    }

    static func seek(_ d: any PlayerDriver) throws {
        _ = try d.load(.episode)
        XCTAssertTrue(d.run { $0.contains { $0.change.isPlaying } })
        XCTAssertTrue(d.run { _ in d.player.snapshot().position > 0.5 })
        let before = d.events.count
        try d.seek(to: 12)
        XCTAssertTrue(d.run { $0.dropFirst(before).contains { $0.change.isSeek } })
        let seek = try XCTUnwrap(d.events.all.dropFirst(before).first { $0.change.isSeek })
        guard case .seeked(let from, let to) = seek.change else { return XCTFail() }
        XCTAssertGreaterThan(from, 0.4)
        XCTAssertLessThan(from, 12)
        XCTAssertEqual(to, 12, accuracy: 0.2)
        XCTAssertEqual(seek.snapshot.position, to, accuracy: 0.2, "the facts after the seek")
        XCTAssertEqual(d.events.changes.dropFirst(before).filter(\.isSeek).count, 1)
        try everyChangeCarriesItsFacts(d)
    }

    /// The end: `.ended` with the ended item at its duration, not playing (a post-roll request
    /// sends that position, R11); then `.item(nil)`. Never a pause (R2).
    static func playedToTheEnd(_ d: any PlayerDriver) throws {
        let entry = try d.load(.clip)
        XCTAssertTrue(d.run { $0.contains { $0.change == .item(nil) && $0.snapshot == .empty } }, "\(d.events.changes)")
        let ended = try XCTUnwrap(d.events.all.first { $0.change.isEnded })
        guard case .ended(let item) = ended.change else { return XCTFail() }
        XCTAssertEqual(item.entry, entry)
        XCTAssertEqual(ended.snapshot.item, item, "the facts at the end name the ended item")
        XCTAssertEqual(ended.snapshot.position, ConformanceMedia.clip.duration, accuracy: 0.1, "where it ended")
        XCTAssertFalse(ended.snapshot.playing)
        XCTAssertEqual(ended.snapshot.rate, 0)
        let index = try XCTUnwrap(d.events.changes.firstIndex { $0.isEnded })
        XCTAssertEqual(d.events.changes[index + 1], .item(nil))
        XCTAssertFalse(d.events.changes.contains(.paused), "the end is not a pause: \(d.events.changes)")
        XCTAssertEqual(d.events.changes.filter(\.isEnded).count, 1)
        XCTAssertEqual(d.player.snapshot(), .empty)
        try everyChangeCarriesItsFacts(d)
    }

    /// R14: with the file looping, each pass is another item of the same entry; no end, no seek.
    static func loopPassesAreItems(_ d: any PlayerDriver) throws {
        try d.setLoop(true)
        let entry = try d.load(.clip)
        XCTAssertTrue(d.run { events in
            guard let wrap = events.firstIndex(where: { $0.change.newItem??.loop == 2 }) else { return false }
            return events[wrap...].contains { $0.change.isPlaying }
        }, "\(d.events.changes)")
        let passes = d.events.changes.compactMap { $0.newItem ?? nil }
        XCTAssertEqual(passes.prefix(3).map(\.loop), [0, 1, 2])
        XCTAssertTrue(passes.allSatisfy { $0.entry == entry })
        XCTAssertEqual(d.events.changes.filter(\.isSeek), [], "a wrap is not a seek")
        XCTAssertFalse(d.events.changes.contains { $0.isEnded }, "a wrap is not the end")
        try everyChangeCarriesItsFacts(d)
    }

    /// R10, R14: an entry played again after its end is its next pass, not the item that ended.
    static func anEntryPlayedAgainIsItsNextPass(_ d: any PlayerDriver) throws {
        try d.replayEntriesAtTheirEnd()
        _ = try d.load(.clip)
        XCTAssertTrue(d.run { events in
            guard let again = events.firstIndex(where: { $0.change.newItem??.loop == 1 }) else { return false }
            return events[again...].contains { $0.change.isPlaying }
        }, "\(d.events.changes)")
        let first = try XCTUnwrap(d.events.changes.compactMap { $0.newItem ?? nil }.first)
        let start = try XCTUnwrap(d.events.changes.firstIndex(of: .ended(first)))
        XCTAssertEqual(Array(d.events.changes[start...].prefix(4)),
                       [.ended(first), .item(nil), .item(first.nextLoop()), .playing(rate: 1)])
        try everyChangeCarriesItsFacts(d)
    }

    /// Like mpv's `pause`, the flag persists across items: a paused player loads paused.
    static func thePauseFlagPersistsAcrossItems(_ d: any PlayerDriver) throws {
        _ = try d.load(.episode)
        XCTAssertTrue(d.run { $0.contains { $0.change.isPlaying } })
        try d.pause()
        XCTAssertTrue(d.run { $0.contains { $0.change == .paused } })
        let before = d.events.count
        let second = try d.load(.episode)
        XCTAssertTrue(d.run { $0.dropFirst(before).contains { $0.change.newItem??.entry == second } })
        let afterLoad = d.events.count
        XCTAssertTrue(d.run { _ in d.player.snapshot().item?.entry == second })
        XCTAssertFalse(d.events.changes.dropFirst(before).contains { $0.isPlaying }, "loaded paused, so not playing")
        try d.play()
        XCTAssertTrue(d.run { $0.dropFirst(afterLoad).contains { $0.change.isPlaying } })
        try everyChangeCarriesItsFacts(d)
    }

    static func stopTakesTheItemOut(_ d: any PlayerDriver) throws {
        _ = try d.load(.episode)
        XCTAssertTrue(d.run { $0.contains { $0.change.isPlaying } })
        let before = d.events.count
        try d.stop()
        XCTAssertTrue(d.run { $0.dropFirst(before).contains { $0.change == .item(nil) } })
        XCTAssertFalse(d.events.changes.dropFirst(before).contains { $0.isEnded }, "stopped is not played to the end")
        XCTAssertEqual(d.player.snapshot(), .empty)
        try everyChangeCarriesItsFacts(d)
    }

    /// Every change carries the facts right after it.
    static func everyChangeCarriesItsFacts(_ d: any PlayerDriver, file: StaticString = #filePath, line: UInt = #line) throws {
        for event in d.events.all {
            let s = event.snapshot
            switch event.change {
            case .item(let item):
                XCTAssertEqual(s.item, item, "\(event)", file: file, line: line)
                XCTAssertFalse(s.playing, "a new item starts not playing: \(event)", file: file, line: line)
            case .playing(let rate):
                XCTAssertTrue(s.playing && s.rate == rate && s.item != nil, "\(event)", file: file, line: line)
            case .paused, .held:
                XCTAssertTrue(!s.playing && s.rate == 0 && s.item != nil, "\(event)", file: file, line: line)
            case .rate(let rate):
                XCTAssertTrue(s.playing && s.rate == rate, "\(event)", file: file, line: line)
            case .ended(let item):
                XCTAssertTrue(s.item == item && !s.playing, "\(event)", file: file, line: line)
            case .seeked(_, let to):
                XCTAssertEqual(s.position, to, accuracy: 0.25, "\(event)", file: file, line: line)
            case .failed:
                XCTAssertNil(s.item, "\(event)", file: file, line: line)
            }
        }
    }
}
