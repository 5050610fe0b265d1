import AdPlayerDaemon
import AdRuntime
import AdSources
import AdTestSupport
import AdTracking
import ControlProtocol
import Foundation
import XCTest

/// The scripted player as the controller's content player: loads take the script's media.
extension ScriptedPlayer: ContentPlayer {
    public func load(_ path: String, start: Double?, completion: @escaping @Sendable (Result<Int64, any Error>) -> Void) {
        let entry = load(path, start: start ?? 0)
        loop.run { completion(.success(entry)) }
    }

    public func seek(_ seconds: Double, relative: Bool) throws {
        seek(to: relative ? snapshot().position + seconds : seconds)
    }

    public func setSpeed(_ speed: Double) throws { setRate(speed) }
    // The controller's tests look at the queue and the modes; audio and the screen are mpv's
    // (DaemonTests check them on real mpv).
    public func setVolume(_ percent: Double) throws {}
    public func setMute(_ muted: Bool) throws {}
    public func tracks() -> [PlayerTrack] { [] }
    public func selectTrack(audio: Bool, _ choice: TrackSelection) throws {}
    public func audioDevices() -> [PlayerAudioDevice] { [] }
    public func screenshot(to path: String, withOverlays: Bool, completion: @escaping @Sendable (Result<Void, any Error>) -> Void) {
        loop.run { completion(.failure(ControlError(.unavailable, "no screen"))) }
    }
    public func duration() -> Double? { itemDuration }
    /// The script's media have no chapters.
    public func cuePoints() -> [Double]? { snapshot().item == nil ? nil : [] }
    /// The script's rule: an item whose name is an audio file's shows no video.
    public var videoShown: Bool? {
        guard let path = snapshot().item?.path else { return nil }
        return !["m4a", "mp3", "wav", "flac", "ogg", "opus"].contains((path as NSString).pathExtension)
    }
    public func output() -> PlayerOutput { PlayerOutput(vo: "scripted", hwdecRequested: "no", hwdecCurrent: "no", droppedByDecoder: 0, droppedByOutput: 0) }
    public func showLabel(_ text: String, seconds: Double) throws { ScriptedLabels.shown.withLock { $0.append((text, seconds)) } }
    public func setBlanked(_ blanked: Bool) throws { ScriptedLabels.blanked.withLock { $0.append(blanked) } }
    public func onDetailChange(_ handler: @escaping @Sendable (PlayerDetailChange) -> Void) {}
}

/// The labels `identify` put on the scripted player's screen.
enum ScriptedLabels {
    static let shown = Locked<[(text: String, seconds: Double)]>([])
    /// Each `setBlanked` call, in order.
    static let blanked = Locked<[Bool]>([])
}

/// A controller on a scripted player and virtual time, with a recording surface: the daemon's
/// episode logic in process, in milliseconds. Loop-only calls off the loop are recorded.
final class ControllerHarness: @unchecked Sendable {
    // @unchecked: used from the test's thread; what the loop hands back is behind locks.
    let offLoop = OffLoopCalls()
    let loop: VirtualLoop
    let player: ScriptedPlayer
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

    convenience init(source: (any AdSource)?, statePath: String = ":memory:", pauseAdDelay: Double = 1,
                     adsConfiguration: VideoAdsConfiguration = VideoAdsConfiguration()) throws {
        try self.init(statePath: statePath, pauseAdDelay: pauseAdDelay, adsConfiguration: adsConfiguration) { _ in source }
    }

    /// `makeSource` gets the store: a catalog counts its frequency caps there, as the daemon's does.
    init(statePath: String = ":memory:", pauseAdDelay: Double = 1, adsConfiguration: VideoAdsConfiguration = VideoAdsConfiguration(),
         makeSource: (StateStore) throws -> (any AdSource)?) throws {
        loop = VirtualLoop(recordingOffLoopCallsIn: offLoop)
        player = ScriptedPlayer(loop: loop)
        store = try StateStore(path: statePath, log: log)
        let source = try makeSource(store)
        let emitted = self.emitted, adEvents = self.adEvents, batches = self.batches
        let metrics = self.metrics
        controller = Controller(player: player, surface: surface, store: store, log: log, source: source, pauseAdDelay: pauseAdDelay,
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
