import AdRuntime
import AdTracking
import Foundation

/// Gathers each billable ad's display evidence while it is up (issue 36, docs/reporting.md
/// "What the screen showed"): the connector and the panel as `DisplayMonitor` last read them
/// (read again as the ad goes up), and grabs of the composed output — one for an image or a
/// text, `firstGrab` seconds after it went up; two for a video, `firstGrab` and `secondGrab` —
/// judged off the loop (`PixelCheck`), the verdict handed to `onEvidence` before the ad's end
/// is recorded. Headless (no output) is `unverified`, `no output`, at once; so is an output mpv cannot grab with the ads, with that reason.
///
/// The loop's part per grab is one request (`Output.grab`: mpv's `screenshot-to-file`, which
/// mpv writes on its own thread) and one dictionary read of what the surface drew; decoding,
/// scaling and comparing run on a thread of their own. Grabs are PNG files (JPEG would make mpv's swscale warn of a deprecated pixel format at every grab) in a private
/// folder of `folder` (a tmpfs where there is one), removed as soon as they are read.
///
/// Threading: `observe` on the player's loop (checked); the rest hops between the loop and
/// `worker`.
public final class DisplayWitness: @unchecked Sendable {
    // @unchecked: `pending` is touched only on the loop.

    /// What the surface drew for an ad, in the canvas's pixels (the daemon maps its surface's
    /// own description to it).
    public enum Drawn: Sendable {
        /// A bitmap (premultiplied BGRA) whose top-left corner is at `origin`; `part` is the
        /// creative within the output (`origin` plus the bitmap for an overlay).
        case image(bitmap: OutputGrab, origin: OutputGrab.Region, part: OutputGrab.Region, canvas: (width: Int, height: Int))
        case text(box: OutputGrab.Region, canvas: (width: Int, height: Int))
        /// Drawn elsewhere (an HTML creative: the page's browser).
        case elsewhere(String)
    }

    /// The output, as the daemon's player gives it.
    public struct Output: Sendable {
        /// Why the output cannot be grabbed with the ads, nil when it can: `no output` headless
        /// (`vo=null`), or a video output mpv grabs without what it draws over the video.
        public var ungrabbable: String?
        /// Writes the composed output (the video and the ads) to the file (on the loop; the
        /// completion on the loop).
        public var grab: @Sendable (String, @escaping @Sendable (Result<Void, any Error>) -> Void) -> Void
        /// What the surface drew for ad `id`, nil when it is not up (on the loop).
        public var drawn: @Sendable (UInt64) -> Drawn?
        /// Reads a grab, scaled to `size` (nil: at most `smallWidth` wide). Off the loop.
        public var decode: @Sendable (String, (width: Int, height: Int)?) throws -> OutputGrab

        public init(ungrabbable: String?, grab: @escaping @Sendable (String, @escaping @Sendable (Result<Void, any Error>) -> Void) -> Void,
                    drawn: @escaping @Sendable (UInt64) -> Drawn?,
                    decode: @escaping @Sendable (String, (width: Int, height: Int)?) throws -> OutputGrab) {
            self.ungrabbable = ungrabbable
            self.grab = grab
            self.drawn = drawn
            self.decode = decode
        }
    }

    /// Seconds after an ad went up of its grabs (a still's one, a video's two).
    public static let firstGrab = 0.35
    public static let secondGrab = 1.25
    /// A video's grabs are read this wide (black and frozen need no more).
    public static let smallWidth = 320

    struct Pending {
        let info: AdInfo
        let drawn: Drawn?
        var shots: [OutputGrab] = []
        let needed: Int
    }

    private let loop: any PlayerLoop
    private let output: Output
    private let monitor: DisplayMonitor?
    private let onEvidence: @Sendable (AdInfo, DisplayEvidence) -> Void
    private let folder: String?
    private let worker = Workers(name: "adplayerd-witness")
    private let wall: @Sendable () -> Double
    private var pending: [UInt64: Pending] = [:]
    /// Rounds judged, and what the last ones cost (for `docs/benchmarks.md`).
    private let costs = Locked(Costs())

    /// The cost of evidence rounds: on the loop per grab request, and from an ad going up to its
    /// verdict.
    public struct Costs: Sendable {
        public var grabRequests: [Double] = []
        public var rounds: [Double] = []
    }

    /// `folder`: where the private folder of grabs is made (nil: /dev/shm, else the temporary
    /// folder); it is removed by `close`.
    public init(loop: any PlayerLoop, output: Output, monitor: DisplayMonitor?, folder: String? = nil,
                wall: @escaping @Sendable () -> Double = { Date().timeIntervalSince1970 },
                onEvidence: @escaping @Sendable (AdInfo, DisplayEvidence) -> Void) {
        self.loop = loop
        self.output = output
        self.monitor = monitor
        self.onEvidence = onEvidence
        self.wall = wall
        let base = folder ?? (FileManager.default.fileExists(atPath: "/dev/shm") ? "/dev/shm" : NSTemporaryDirectory())
        var template = Array((base + "/adplayerd-evidence-XXXXXX").utf8CString)
        self.folder = output.ungrabbable == nil ? template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!).map { String(cString: $0) } } : nil
    }

    /// Removes the folder of grabs (at stop).
    public func close() {
        guard let folder else { return }
        try? FileManager.default.removeItem(atPath: folder)
    }

    public func costsSoFar() -> Costs { costs.withLock { $0 } }

    /// An ad event, on the loop: `.started` begins its evidence, `.ended` judges what is in.
    public func observe(_ event: AdEvent) {
        loop.requireInLoop()
        switch event {
        case .started(let info): begin(info)
        case .ended(let info, _, _): if pending[info.id] != nil { finish(info.id, .unavailable("the ad left the screen before it could be grabbed")) }
        default: break
        }
    }

    private func begin(_ info: AdInfo) {
        if let monitor { worker.execute { monitor.refresh() } }
        if let why = output.ungrabbable { return judge(info, .unavailable(why)) }
        guard folder != nil else { return judge(info, .unavailable("no folder for the grabs")) }
        let drawn: Drawn? = info.kind.isLinear ? nil : output.drawn(info.id)
        if case .elsewhere(let why)? = drawn { return judge(info, .unavailable(why)) }
        if !info.kind.isLinear && drawn == nil { return judge(info, .unavailable("the surface has no drawing of the ad")) }
        pending[info.id] = Pending(info: info, drawn: drawn, needed: info.kind.isLinear ? 2 : 1)
        let id = info.id
        _ = loop.schedule(after: Self.firstGrab) { [weak self] in self?.grab(id, 0) }
        if info.kind.isLinear { _ = loop.schedule(after: Self.secondGrab) { [weak self] in self?.grab(id, 1) } }
    }

    private func grab(_ id: UInt64, _ index: Int) {
        guard let entry = pending[id], let folder else { return }
        let path = folder + "/\(String(id, radix: 16))-\(index).png"
        // A still is read at the canvas's size (its drawing's coordinates); a video small.
        let size: (width: Int, height: Int)? = switch entry.drawn {
        case .image(_, _, _, let canvas)?, .text(_, let canvas)?: canvas
        default: nil
        }
        let begun = MonotonicTime.now()
        output.grab(path) { [weak self] result in
            guard let self else { return }
            switch result {
            case .failure(let error):
                worker.execute { unlink(path) }   // (a partial file, if any: the disk is not the loop's)
                finish(id, .unavailable("the output cannot be grabbed with the ads (\(error))"))
            case .success:
                worker.execute { [weak self] in
                    guard let self else { return }
                    let shot = Result { try output.decode(path, size) }
                    unlink(path)
                    _ = loop.execute { [weak self] in self?.shot(id, shot) }
                }
            }
        }
        let cost = Double(MonotonicTime.now() - begun) / 1e9
        costs.withLock { if $0.grabRequests.count < 10_000 { $0.grabRequests.append(cost) } }
    }

    private func shot(_ id: UInt64, _ shot: Result<OutputGrab, any Error>) {
        guard var entry = pending[id] else { return }
        switch shot {
        case .failure(let error): return finish(id, .unavailable("the grab could not be read (\(error))"))
        case .success(let grab): entry.shots.append(grab)
        }
        pending[id] = entry
        guard entry.shots.count >= entry.needed else { return }
        let complete = entry
        worker.execute { [weak self] in
            let pixels = Self.pixels(complete)
            _ = self?.loop.execute { [weak self] in self?.finish(id, pixels) }
        }
    }

    /// What the grabs say of the ad (off the loop).
    static func pixels(_ entry: Pending) -> DisplayEvidence.Pixels {
        switch entry.drawn {
        case nil:
            guard entry.shots.count >= 2 else { return .unavailable("one grab of two") }
            return PixelCheck.video(entry.shots[0], entry.shots[1])
        case .text(let box, _)?:
            return PixelCheck.text(entry.shots[0], box: box)
        case .image(let bitmap, let origin, let part, _)?:
            // The creative's part of the bitmap (a pause ad's image within its dimmed frame).
            let x = part.x - origin.x, y = part.y - origin.y
            guard x >= 0, y >= 0, x + part.width <= bitmap.width, y + part.height <= bitmap.height else {
                return .unavailable("the creative's place is outside its bitmap")
            }
            var cut = [UInt8]()
            cut.reserveCapacity(part.width * part.height * 4)
            for row in y..<(y + part.height) {
                let start = (row * bitmap.width + x) * 4
                cut += bitmap.pixels[start..<(start + part.width * 4)]
            }
            guard let drawn = OutputGrab(width: part.width, height: part.height, pixels: cut) else { return .unavailable("an empty creative") }
            return PixelCheck.still(entry.shots[0], region: part, drawn: drawn)
        case .elsewhere(let why)?:
            return .unavailable(why)
        }
    }

    private func finish(_ id: UInt64, _ pixels: DisplayEvidence.Pixels) {
        guard let entry = pending.removeValue(forKey: id) else { return }
        judge(entry.info, pixels)
    }

    /// The verdict of ad `info`: its pixels with the monitor's last reading.
    private func judge(_ info: AdInfo, _ pixels: DisplayEvidence.Pixels) {
        let reading = monitor?.latest()
        let evidence = DisplayEvidence.judge(connector: reading?.connector.map { ($0.state, $0.identity, $0.at) },
                                             panel: reading?.panel.map { ($0.panel, $0.at) }, pixels: (pixels, wall()))
        if info.at > 0 {
            let round = Double(MonotonicTime.now() &- info.at) / 1e9
            costs.withLock { if $0.rounds.count < 10_000 { $0.rounds.append(round) } }
        }
        onEvidence(info, evidence)
    }
}
