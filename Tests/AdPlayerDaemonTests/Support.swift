import AdPlayerDaemon
import AdRuntime
import AdSources
import AdTestSupport
import AdTracking
import ControlProtocol
import AdPlayerSimulation
import AdSchedule
import Foundation
import XCTest

/// A controller on a virtual player and virtual time, with a recording surface: the daemon's
/// episode logic in process, in milliseconds. Loop-only calls off the loop are recorded.
final class ControllerHarness: @unchecked Sendable {
    // @unchecked: used from the test's thread; what the loop hands back is behind locks.
    let offLoop = OffLoopCalls()
    let loop: VirtualLoop
    let player: VirtualPlayer
    let surface = RecordingAdSurface()
    let store: StateStore
    let log = Logger(level: .error)
    let metrics = Metrics()
    let controller: Controller
    private let emitted = Locked<[ControlEvent]>([])
    /// The events told in one go (one write a client), in order.
    private let batches = Locked<[[ControlEvent]]>([])
    var writes: [[ControlEvent]] { batches.withLock { $0 } }
    private let adEvents = Locked<[AdEvent]>([])

    convenience init(source: (any AdSource)?, statePath: String = ":memory:", durability: StateDurability = .crashSafe, pauseAdDelay: Double = 1,
                     adsConfiguration: VideoAdsConfiguration = VideoAdsConfiguration()) throws {
        try self.init(statePath: statePath, durability: durability, pauseAdDelay: pauseAdDelay, adsConfiguration: adsConfiguration) { _ in source }
    }

    /// `makeSource` gets the store: a catalog counts its frequency caps there, as the daemon's does.
    /// `videos`: linear ads play on the loop's virtual time (the simulator's surface) instead of
    /// the recording surface, whose videos a test drives by hand.
    init(statePath: String = ":memory:", durability: StateDurability = .crashSafe, pauseAdDelay: Double = 1,
         adsConfiguration: VideoAdsConfiguration = VideoAdsConfiguration(), videos: Bool = false,
         makeSource: (StateStore) throws -> (any AdSource)?) throws {
        loop = VirtualLoop(recordingOffLoopCallsIn: offLoop)
        player = VirtualPlayer(loop: loop)
        store = try StateStore(path: statePath, log: log, durability: durability)
        let source = try makeSource(store)
        let emitted = self.emitted, adEvents = self.adEvents, batches = self.batches
        let metrics = self.metrics
        let adSurface: any AdSurface = videos ? SimulatedAdSurface(loop: loop) : surface
        controller = Controller(player: player, surface: adSurface, store: store, log: log, source: source, pauseAdDelay: pauseAdDelay,
                                adsConfiguration: adsConfiguration, emit: { event in emitted.withLock { $0.append(event) } },
                                emitMany: { events in
                                    emitted.withLock { $0 += events }
                                    batches.withLock { $0.append(events) }
                                },
                                reporting: AdReporting(record: { event in
                                    adEvents.withLock { $0.append(event) }
                                    metrics.count(event)
                                }), metrics: metrics)
    }

    /// Starts the controller with what the store saved.
    func start() {
        let saved = store.load()
        onLoop { controller.start(resuming: saved) }
    }

    /// Runs `body` on the loop and returns what it returned.
    @discardableResult
    /// Waits for the loop when another thread runs it at that moment (a source's answer).
    func onLoop<T>(_ body: () throws -> T) rethrows -> T {
        try withoutActuallyEscaping(body) { body in
            let job = Unchecked(body)
            let result = (try? loop.sync { Result { try job.value() } })!
            return try result.get() as T
        }
    }

    /// Moves virtual time on, running what falls due.
    func advance(_ seconds: Double) { loop.advance(by: seconds) }

    /// The control events emitted so far.
    var events: [ControlEvent] { emitted.withLock { $0 } }
    var eventNames: [EventName] { events.map(\.name) }
    var ads: [AdEvent] { adEvents.withLock { $0 } }

    /// Waits (in real time, for the source's task) until an event matches.
    @discardableResult
    func wait(for name: EventName, file: StaticString = #filePath, line: UInt = #line,
              _ match: (ControlEvent) -> Bool = { _ in true }) -> ControlEvent? {
        var found: ControlEvent?
        _ = waitUntil(timeout: 10) {
            loop.execute {}
            found = events.first { $0.name == name && match($0) }
            return found != nil
        }
        if found == nil { XCTFail("no \(name.rawValue); saw \(eventNames.map(\.rawValue))", file: file, line: line) }
        return found
    }
}

/// A catalog folder of text creatives (no files needed) and its source.
func textCatalog(_ json: String, counters: any FrequencyCounters = MemoryFrequencyCounters()) throws -> LocalCatalog {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("daemon-catalog-\(UUID().uuidString.prefix(8))")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    try Data(json.utf8).write(to: folder.appendingPathComponent("catalog.json"))
    return try LocalCatalog(folder: folder, counters: counters)
}
