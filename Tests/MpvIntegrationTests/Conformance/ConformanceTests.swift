import AdRuntime
import AdTestSupport
import Foundation
@_spi(Foreign) import MpvPlayerAdapter
import XCTest

/// The player-model conformance suite on the test double, on virtual time.
final class VirtualPlayerConformanceTests: XCTestCase {
    private final class Driver: PlayerDriver {
        let loop = VirtualLoop()
        let scripted: VirtualPlayer
        let events = ConformanceRecorder()
        private var observation: PlayerObservation?
        private var replays = false

        init() {
            scripted = VirtualPlayer(loop: loop)
            observation = scripted.addObserver(events)
        }

        var player: any TrackablePlayer { scripted }
        func load(_ media: ConformanceMedia) throws -> Int64 { scripted.load("/media/\(media.file)", duration: media.duration).entry }
        func play() throws { scripted.play() }
        func pause() throws { scripted.pause() }
        func seek(to seconds: Double) throws { scripted.seek(to: seconds) }
        func setRate(_ rate: Double) throws { scripted.setRate(rate) }
        func setLoop(_ on: Bool) throws { scripted.setLoop(on) }
        func stop() throws { scripted.stop() }
        func replayEntriesAtTheirEnd() throws { replays = true }

        func run(until condition: @escaping ([PlayerEvent]) -> Bool) -> Bool {
            // Virtual time in 10 ms steps, at most 2 minutes of it.
            for _ in 0..<12_000 {
                if condition(events.all) { return true }
                loop.advance(by: 0.01)
                if replays, events.changes.last == .item(nil), player.snapshot().item == nil { scripted.replay() }
            }
            return condition(events.all)
        }
    }

    func testLoadPlays() throws { try PlayerConformance.loadPlays(Driver()) }
    func testPauseAndPlay() throws { try PlayerConformance.pauseAndPlay(Driver()) }
    func testRateIsNotASeek() throws { try PlayerConformance.rateIsNotASeek(Driver()) }
    func testSeek() throws { try PlayerConformance.seek(Driver()) }
    func testPlayedToTheEnd() throws { try PlayerConformance.playedToTheEnd(Driver()) }
    func testLoopPassesAreItems() throws { try PlayerConformance.loopPassesAreItems(Driver()) }
    func testAnEntryPlayedAgainIsItsNextPass() throws { try PlayerConformance.anEntryPlayedAgainIsItsNextPass(Driver()) }
    func testThePauseFlagPersistsAcrossItems() throws { try PlayerConformance.thePauseFlagPersistsAcrossItems(Driver()) }
    func testStopTakesTheItemOut() throws { try PlayerConformance.stopTakesTheItemOut(Driver()) }
}

/// The same suite on real libmpv playing generated media.
final class MpvPlayerConformanceTests: MpvTestCase {
    private final class Driver: PlayerDriver {
        let mpv: MpvPlayer
        let events: ConformanceRecorder
        init(_ mpv: MpvPlayer, _ events: ConformanceRecorder) {
            self.mpv = mpv
            self.events = events
        }

        var player: any TrackablePlayer { mpv }
        func load(_ media: ConformanceMedia) throws -> Int64 { try mpv.load(Media.path(media.file)) }
        func play() throws { try mpv.play() }
        func pause() throws { try mpv.pause() }
        func seek(to seconds: Double) throws { try mpv.seek(seconds) }
        func setRate(_ rate: Double) throws { try mpv.setSpeed(rate) }
        func setLoop(_ on: Bool) throws { try mpv.setLoop(on) }
        func stop() throws { try mpv.stop() }

        func replayEntriesAtTheirEnd() throws {
            // Another client does it: the adapter must see it whoever asks.
            let client = try mpv.makeForeignClient(name: "playlist-looper")
            defer { client.close() }
            try client.command(["set", "loop-playlist", "inf"])
        }

        func run(until condition: @escaping ([PlayerEvent]) -> Bool) -> Bool {
            waitUntil(timeout: 60) { condition(self.events.all) }
        }
    }

    /// Without keep-open: at the end mpv moves on (to nothing, or to the replayed entry).
    private func driver(keepOpen: Bool = true) throws -> Driver {
        let (player, _) = try makePlayer { $0.keepOpen = keepOpen }
        let events = ConformanceRecorder()
        let observation = player.addObserver(events)
        addTeardownBlock { observation.cancel() }
        return Driver(player, events)
    }

    func testLoadPlays() throws { try PlayerConformance.loadPlays(driver()) }
    func testPauseAndPlay() throws { try PlayerConformance.pauseAndPlay(driver()) }
    func testRateIsNotASeek() throws { try PlayerConformance.rateIsNotASeek(driver()) }
    func testSeek() throws { try PlayerConformance.seek(driver()) }
    func testPlayedToTheEnd() throws { try PlayerConformance.playedToTheEnd(driver()) }
    func testPlayedToTheEndWithoutKeepOpen() throws { try PlayerConformance.playedToTheEnd(driver(keepOpen: false)) }
    func testLoopPassesAreItems() throws { try PlayerConformance.loopPassesAreItems(driver()) }
    func testAnEntryPlayedAgainIsItsNextPass() throws {
        try PlayerConformance.anEntryPlayedAgainIsItsNextPass(driver(keepOpen: false))
    }
    func testThePauseFlagPersistsAcrossItems() throws {
        // mpv's ao=null complains when a file loaded paused is resumed; harmless here.
        logs.expectError(containing: "start() while paused")
        try PlayerConformance.thePauseFlagPersistsAcrossItems(driver())
    }
    func testStopTakesTheItemOut() throws { try PlayerConformance.stopTakesTheItemOut(driver()) }
}
