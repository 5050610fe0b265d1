import AdRuntime
import Foundation
import Synchronization

/// A rectangle of the output, in OSD pixels.
public struct AdRect: Sendable, Equatable {
    public var x: Int
    public var y: Int
    public var width: Int
    public var height: Int

    public init(x: Int, y: Int, width: Int, height: Int) {
        self.x = x
        self.y = y
        self.width = width
        self.height = height
    }
}

/// Where ads go, relative to the output (mpv's OSD size; the video's display size when
/// there is no OSD, as with `vo=null`).
///
/// - **Overlay**: fitted, aspect kept, into a box a quarter of the output's width and a
///   quarter of its height, in the bottom-right corner, `margin` (3 % of the output's height)
///   from the right and bottom edges. Never scaled above the creative's own size × 2.
/// - **Pause ad**: fitted into 60 % of the output's width and height, centred, over a black
///   layer at 50 % opacity that covers the whole output.
/// - **Text**: overlays bottom-right at the same margin, 4.5 % of the output's height tall;
///   pause ads centred, 7 % tall.
/// - **HTML** (a UI shell draws it): the overlay box, announced with its geometry.
/// Everything is placed again when the output's size changes.
public enum AdPlacement {
    public static func margin(_ output: (width: Int, height: Int)) -> Int { max(1, output.height * 3 / 100) }

    public static func overlay(source: (width: Int, height: Int), output: (width: Int, height: Int)) -> AdRect {
        let size = fit(source, into: (output.width / 4, output.height / 4), maxScale: 2)
        let m = margin(output)
        return AdRect(x: output.width - m - size.width, y: output.height - m - size.height, width: size.width, height: size.height)
    }

    public static func pauseAd(source: (width: Int, height: Int), output: (width: Int, height: Int)) -> AdRect {
        let size = fit(source, into: (output.width * 6 / 10, output.height * 6 / 10), maxScale: 4)
        return AdRect(x: (output.width - size.width) / 2, y: (output.height - size.height) / 2, width: size.width, height: size.height)
    }

    /// The box an overlay occupies when its size is not known (HTML).
    public static func overlayBox(output: (width: Int, height: Int)) -> AdRect {
        let m = margin(output)
        return AdRect(x: output.width * 3 / 4 - m, y: output.height * 3 / 4 - m, width: output.width / 4, height: output.height / 4)
    }

    static func fit(_ source: (width: Int, height: Int), into box: (width: Int, height: Int), maxScale: Double) -> (width: Int, height: Int) {
        let scale = min(Double(box.width) / Double(source.width), Double(box.height) / Double(source.height), maxScale)
        return (max(1, Int((Double(source.width) * scale).rounded())), max(1, Int((Double(source.height) * scale).rounded())))
    }
}

/// Text for mpv's ASS renderer, shown as written: a creative cannot inject override tags
/// (`{\an5}`) or escapes (`\N`). As mpv does for its own OSD: `{` becomes `\{`, and every
/// backslash is followed by U+2060 WORD JOINER so that it starts no escape. A real line
/// break becomes `\N`.
public func assEscape(_ text: String) -> String {
    var out = ""
    for character in text {
        switch character {
        case "\\": out += "\\\u{2060}"
        case "{": out += "\\{"
        case "\n": out += "\\N"
        case "\r": continue
        default: out.append(character)
        }
    }
    return out
}

/// An HTML creative for a UI shell to render over mpv's window (mpv cannot draw HTML).
public enum HTMLCreativeAnnouncement: Sendable, Equatable {
    case show(id: UInt64, url: String, rect: AdRect, output: AdRect, durationSeconds: Double?, shownAt: UInt64)
    case hide(id: UInt64)
}

/// The ad surface that draws into the content's own mpv output (SPEC §5): images through
/// `overlay-add` (decoded by `ImageDecoder`), text through `osd-overlay` (ASS, escaped),
/// pause ads over a dimmed frame, post-rolls played in the same output by `MpvPlayer`
/// without becoming an item (R8), HTML announced through `onHTML`.
///
/// Threading: the runtime calls it with its lock held (see `AdSurface`); mpv commands are
/// made right there, so an ad is removed in the step that ended it. Output size changes and
/// post-roll progress arrive on mpv's event thread.
public final class MpvAdSurface: AdSurface, MpvOutputListener {
    private struct Shown {
        let presentation: AdPresentation
        let slot: Int
        var kind: Drawn
    }

    private enum Drawn {
        case image(path: String, source: (width: Int, height: Int))
        case text(String)
        case html(String)
    }

    private struct State {
        var shown: [UInt64: Shown] = [:]
        var postroll: (id: UInt64, entry: Int64, reporter: PostrollReporter)?
    }

    private weak let player: MpvPlayer?
    private let handle: MpvHandle
    private let state = Mutex(State())
    private let redrawToggle = Mutex(false)
    private let onHTML: @Sendable (HTMLCreativeAnnouncement) -> Void

    public init(player: MpvPlayer, onHTML: @escaping @Sendable (HTMLCreativeAnnouncement) -> Void = { _ in }) {
        self.player = player
        self.handle = player.handle
        self.onHTML = onHTML
        player.attach(self)
    }

    /// What is on screen now, by presentation id and overlay slot.
    public var visibleSlots: [UInt64: Int] { state.withLock { $0.shown.mapValues(\.slot) } }

    // MARK: AdSurface

    public func present(_ presentation: AdPresentation) throws {
        let output = player?.outputSize ?? (1280, 720)
        try state.withLock { state in
            guard let slot = (1...63).first(where: { slot in !state.shown.values.contains { $0.slot == slot } }) else {
                throw MpvError(code: -12, operation: "overlay: all 63 slots of mpv are in use")
            }
            let drawn: Drawn
            switch presentation.creative.content {
            case .image(let location, _, _):
                guard !location.contains("://") else {
                    throw ImageDecodeError(path: location, reason: "remote creatives are fetched by the ad source, not drawn from a URL")
                }
                let probed = try ImageDecoder.probe(location)
                drawn = .image(path: location, source: (probed.width, probed.height))
            case .text(let text):
                drawn = .text(text)
            case .html(let url):
                drawn = .html(url)
            case .video:
                throw MpvError(code: -4, operation: "present: a video is a post-roll, not an overlay")
            }
            let shown = Shown(presentation: presentation, slot: slot, kind: drawn)
            try draw(shown, output: output)
            state.shown[presentation.id] = shown
        }
    }

    public func dismiss(_ id: UInt64) {
        state.withLock { state in
            guard let shown = state.shown.removeValue(forKey: id) else { return }
            erase(shown)
        }
    }

    public func playPostroll(_ presentation: AdPresentation, reporter: PostrollReporter) throws {
        guard case .video(let location) = presentation.creative.content else {
            throw MpvError(code: -4, operation: "playPostroll: the creative is not a video")
        }
        guard let player else { throw MpvError.shutDown("playPostroll") }
        try state.withLock { state in
            let entry = try player.playAd(location)
            state.postroll = (presentation.id, entry, reporter)
        }
    }

    public func stopPostroll(_ id: UInt64) {
        let entry = state.withLock { state -> Int64? in
            guard let postroll = state.postroll, postroll.id == id else { return nil }
            state.postroll = nil
            return postroll.entry
        }
        if let entry { try? player?.stopAd(entry) }
    }

    // MARK: From the player (event thread)

    func adPlayback(_ event: MpvPlayerMapping.AdPlayback) {
        let (reporter, ended) = state.withLock { state -> (PostrollReporter?, Bool) in
            guard let postroll = state.postroll else { return (nil, false) }
            switch event {
            case .started(let entry), .progress(let entry, _, _), .paused(let entry, _):
                return (entry == postroll.entry ? postroll.reporter : nil, false)
            case .ended(let entry, _):
                guard entry == postroll.entry else { return (nil, false) }
                state.postroll = nil
                return (postroll.reporter, true)
            }
        }
        guard let reporter else { return }
        switch event {
        case .progress(_, let position, let duration):
            reporter.progress(position, of: duration)
        case .ended(_, let error?):
            reporter.failed(error)
        case .ended:
            if ended { reporter.finished() }
        case .paused(_, let paused):
            reporter.paused(paused)
        case .started:
            break
        }
    }

    func outputResized(width: Int, height: Int) {
        state.withLock { state in
            for shown in state.shown.values.sorted(by: { $0.slot < $1.slot }) {
                try? draw(shown, output: (width, height))
            }
        }
    }

    // MARK: Drawing

    private func draw(_ shown: Shown, output: (width: Int, height: Int)) throws {
        let pause = shown.presentation.kind == .pauseAd
        let full = AdRect(x: 0, y: 0, width: output.width, height: output.height)
        switch shown.kind {
        case .image(let path, let source):
            let rect = pause ? AdPlacement.pauseAd(source: source, output: output) : AdPlacement.overlay(source: source, output: output)
            let image = try ImageDecoder.decode(path, width: rect.width, height: rect.height)
            if pause {
                // One bitmap, the dimmed output with the image in it: with `vo=x11` and a paused
                // frame, a separate dim layer plus the image showed only the dim layer
                // (measured; probably the lost redraw of `nudgeRedraw`), and one is cheaper.
                try bitmap(slot: shown.slot, dimLayer(output, with: image, at: rect), at: (0, 0))
            } else {
                try bitmap(slot: shown.slot, image, at: (rect.x, rect.y))
            }
            nudgeRedraw()   // a pause ad goes up over a paused frame
        case .text(let text):
            let m = AdPlacement.margin(output)
            if pause { try bitmap(slot: Self.dimSlot, dimLayer(output), at: (0, 0)) }
            let events = pause
                ? "{\\an5\\pos(\(output.width / 2),\(output.height / 2))\\fs\(output.height * 7 / 100)\\bord3\\shad0}" + assEscape(text)
                : "{\\an3\\pos(\(output.width - m),\(output.height - m))\\fs\(output.height * 45 / 1000)\\bord2\\shad0}" + assEscape(text)
            try ass(slot: shown.slot, events, output)
            nudgeRedraw()
        case .html(let url):
            onHTML(.show(id: shown.presentation.id, url: url, rect: AdPlacement.overlayBox(output: output), output: full,
                         durationSeconds: shown.presentation.creative.duration, shownAt: MonotonicTime.now()))
        }
    }

    private func erase(_ shown: Shown) {
        switch shown.kind {
        case .image:
            try? handle.command(["overlay-remove", String(shown.slot)])
            nudgeRedraw()
        case .text:
            try? ass(slot: shown.slot, nil, (0, 0))
            if shown.presentation.kind == .pauseAd { try? handle.command(["overlay-remove", String(Self.dimSlot)]) }
            nudgeRedraw()
        case .html:
            onHTML(.hide(id: shown.presentation.id))
        }
    }

    /// Sets (or, with nil, removes) an `osd-overlay` of ASS events in output pixels.
    private func ass(slot: Int, _ events: String?, _ output: (width: Int, height: Int)) throws {
        var args: [String: MpvValue] = ["name": .string("osd-overlay"), "id": .int(Int64(slot))]
        if let events {
            args["format"] = .string("ass-events")
            args["data"] = .string(events)
            args["res_x"] = .int(Int64(output.width))
            args["res_y"] = .int(Int64(output.height))
        } else {
            args["format"] = .string("none")
            args["data"] = .string("")
        }
        try handle.command(node: args)
    }

    /// Makes mpv draw the frame again. Measured with `vo=x11`: an `overlay-remove` right after a
    /// pause left the overlay on the paused frame (8 times in 12) — mpv's own redraw for the
    /// change was lost. Touching an OSD overlay of our own asks for another one. Used after
    /// every change of what is drawn.
    private func nudgeRedraw() {
        redrawOnce()
        // A frame already queued with the overlay in it can be shown after that redraw; ask
        // again once the queue has drained.
        for delay in [0.15, 0.4] {
            DispatchQueue.global().asyncAfter(deadline: .now() + delay) { [weak self] in self?.redrawOnce() }
        }
    }

    private func redrawOnce() {
        // Alternate between two empty events so that each call is a change mpv must draw.
        let flip = redrawToggle.withLock { toggle -> Bool in
            toggle.toggle()
            return toggle
        }
        try? ass(slot: Self.redrawSlot, flip ? "{}" : "", (1, 1))
    }

    /// `osd-overlay` id used only to make mpv redraw (see `nudgeRedraw`).
    static let redrawSlot = 999

    /// `overlay-add` slot of a text pause ad's dim layer (image pause ads carry their own).
    static let dimSlot = 0

    /// A black layer at 50 % opacity over the whole output (premultiplied: 0, 0, 0, 128),
    /// with `image` composited over it at `rect` when given.
    private func dimLayer(_ output: (width: Int, height: Int), with image: BGRAImage? = nil, at rect: AdRect? = nil) -> BGRAImage {
        var pixels = [UInt8](repeating: 0, count: output.width * output.height * 4)
        for i in stride(from: 3, to: pixels.count, by: 4) { pixels[i] = 128 }
        if let image, let rect {
            for row in 0..<image.height where rect.y + row >= 0 && rect.y + row < output.height {
                for column in 0..<image.width where rect.x + column >= 0 && rect.x + column < output.width {
                    let source = row * image.stride + column * 4
                    let target = ((rect.y + row) * output.width + rect.x + column) * 4
                    // Premultiplied "over": out = src + dst × (1 − src.alpha).
                    let keep = 255 - Int(image.pixels[source + 3])
                    for channel in 0..<4 {
                        pixels[target + channel] = UInt8(Int(image.pixels[source + channel]) + Int(pixels[target + channel]) * keep / 255)
                    }
                }
            }
        }
        return BGRAImage(width: output.width, height: output.height, pixels: pixels)
    }

    /// Puts `image` up in `overlay-add` slot `slot` (replacing what was there).
    private func bitmap(slot: Int, _ image: BGRAImage, at origin: (x: Int, y: Int)) throws {
        try image.pixels.withUnsafeBytes { bytes in
            // mpv copies the memory before the command returns (overlay-add, mpv ≥ 0.18.1).
            try handle.command(node: [
                "name": .string("overlay-add"), "id": .int(Int64(slot)),
                "x": .int(Int64(origin.x)), "y": .int(Int64(origin.y)),
                "file": .string("&\(UInt(bitPattern: bytes.baseAddress))"), "offset": .int(0), "fmt": .string("bgra"),
                "w": .int(Int64(image.width)), "h": .int(Int64(image.height)), "stride": .int(Int64(image.stride)),
            ])
        }
    }
}
