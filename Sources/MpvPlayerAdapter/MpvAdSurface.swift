import AdRuntime
import Foundation

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
    /// The largest canvas ads are placed on. mpv aborts the whole process on a bitmap side
    /// over 65535 (`Invalid OSD / subtitle bitmap size`), and a pause ad is one bitmap the size
    /// of the canvas: headless, the canvas is the video's display size, which a file made with
    /// `-aspect 255:1` makes 91,800 px wide. A larger output is scaled down, aspect kept, to at
    /// most 4096 px a side and 3840 × 2160 pixels (a 4K screen's OSD is placed as it is).
    public static let maxCanvasSide = 4096
    public static let maxCanvasPixels = 3840 * 2160

    /// `output` bounded as above (each side at least 1): the one size every placement, bitmap
    /// and `osd-overlay` resolution is computed from.
    public static func canvas(_ output: (width: Int, height: Int)) -> (width: Int, height: Int) {
        let width = max(1, output.width), height = max(1, output.height)
        let bySide = Double(maxCanvasSide) / Double(max(width, height))
        let byArea = (Double(maxCanvasPixels) / (Double(width) * Double(height))).squareRoot()
        let scale = min(1, bySide, byArea)
        guard scale < 1 else { return (width, height) }
        return (max(1, min(maxCanvasSide, Int(Double(width) * scale))), max(1, min(maxCanvasSide, Int(Double(height) * scale))))
    }

    /// Whether a bitmap at (x, y) of w × h may be handed to mpv's `overlay-add`: each side
    /// within 1…`maxCanvasSide`, placed within a canvas's reach. Checked before every `overlay-add`.
    public static func isDrawable(x: Int, y: Int, width: Int, height: Int) -> Bool {
        (1...maxCanvasSide).contains(width) && (1...maxCanvasSide).contains(height)
            && (-maxCanvasSide...maxCanvasSide).contains(x) && (-maxCanvasSide...maxCanvasSide).contains(y)
    }

    public static func margin(_ output: (width: Int, height: Int)) -> Int { max(1, output.height * 3 / 100) }

    public static func overlay(source: (width: Int, height: Int), output: (width: Int, height: Int)) -> AdRect {
        let size = fit(source, into: (max(1, output.width / 4), max(1, output.height / 4)), maxScale: 2)
        let m = margin(output)
        return AdRect(x: output.width - m - size.width, y: output.height - m - size.height, width: size.width, height: size.height)
    }

    public static func pauseAd(source: (width: Int, height: Int), output: (width: Int, height: Int)) -> AdRect {
        let size = fit(source, into: (max(1, output.width * 6 / 10), max(1, output.height * 6 / 10)), maxScale: 4)
        return AdRect(x: (output.width - size.width) / 2, y: (output.height - size.height) / 2, width: size.width, height: size.height)
    }

    /// A screensaver (R27): fitted into 90 % of the output, centred, moved by `shift` (0–4:
    /// 2 % of the output a step, a different place each creative: burn-in care), over black.
    public static func screensaver(source: (width: Int, height: Int), output: (width: Int, height: Int), shift: Int) -> AdRect {
        let size = fit(source, into: (max(1, output.width * 9 / 10), max(1, output.height * 9 / 10)), maxScale: 4)
        let step = ((shift % 5) + 5) % 5
        let dx = [0, 1, -1, 1, -1][step] * output.width / 50, dy = [0, -1, 1, 1, -1][step] * output.height / 50
        return AdRect(x: (output.width - size.width) / 2 + dx, y: (output.height - size.height) / 2 + dy, width: size.width, height: size.height)
    }

    /// The box an overlay occupies when its size is not known (HTML, text).
    public static func overlayBox(output: (width: Int, height: Int)) -> AdRect {
        let m = margin(output)
        return AdRect(x: output.width * 3 / 4 - m, y: output.height * 3 / 4 - m, width: output.width / 4, height: output.height / 4)
    }

    /// The box a pause ad's text is drawn in: 60 % of the output, centred.
    public static func pauseBox(output: (width: Int, height: Int)) -> AdRect {
        AdRect(x: output.width * 2 / 10, y: output.height * 2 / 10, width: output.width * 6 / 10, height: output.height * 6 / 10)
    }

    static func fit(_ source: (width: Int, height: Int), into box: (width: Int, height: Int), maxScale: Double) -> (width: Int, height: Int) {
        let scale = min(Double(box.width) / Double(max(1, source.width)), Double(box.height) / Double(max(1, source.height)), maxScale)
        return (max(1, Int((Double(source.width) * scale).rounded())), max(1, Int((Double(source.height) * scale).rounded())))
    }
}

/// Text for mpv's ASS renderer, shown as written: a creative cannot inject override tags
/// (`{\an5}`) or escapes (`\N`, `\h`). Escaped per Unicode scalar, never per character — a
/// `{` or `\` joined to a prepended mark (U+0600 before it) is one character to Swift but
/// still a brace or a backslash to libass. As mpv does for its own OSD: `{` becomes `\{`,
/// and every backslash is followed by U+2060 WORD JOINER so that it starts no escape. Line
/// breaks (`\n`, `\r\n`, `\r`, U+2028, U+2029) become `\N`; other control characters a space.
public func assEscape(_ text: String) -> String {
    var out = String.UnicodeScalarView()
    var afterCR = false
    for scalar in text.unicodeScalars {
        defer { afterCR = scalar == "\r" }
        switch scalar {
        case "\\": out.append(contentsOf: "\\\u{2060}".unicodeScalars)
        case "{": out.append(contentsOf: "\\{".unicodeScalars)
        case "\n" where afterCR: continue   // the second half of \r\n
        case "\r", "\n", "\u{2028}", "\u{2029}": out.append(contentsOf: "\\N".unicodeScalars)
        default:
            if scalar.value < 0x20 || scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value) {
                out.append(" ")
            } else {
                out.append(scalar)
            }
        }
    }
    return String(out)
}

/// An HTML creative for a UI shell to render over mpv's window (mpv cannot draw HTML).
public enum HTMLCreativeAnnouncement: Sendable, Equatable {
    case show(id: UInt64, url: String, rect: AdRect, output: AdRect, durationSeconds: Double?, shownAt: UInt64, creativeID: String)
    case hide(id: UInt64)
}

/// The ad surface that draws into the content's own mpv output (SPEC §5): images through
/// `overlay-add` (decoded by `ImageDecoder`), text through `osd-overlay` (ASS, escaped),
/// pause ads over a dimmed frame, post-rolls played in the same output by `MpvPlayer`
/// without becoming an item (R8), HTML announced through `onHTML`.
///
/// Threading (SPEC R18): `prepare` runs off the loop and does everything slow — opens and
/// checks files, decodes and scales images, composites a pause ad's dimmed frame — for the
/// output's size at that moment. Everything else runs on the player's loop and makes only
/// mpv calls measured to cost microseconds (docs/benchmarks.md): a bitmap goes up with an
/// asynchronous `overlay-add` (its pixels kept until mpv answers), comes down with a
/// synchronous `overlay-remove`; text is set and cleared in an `osd-overlay` whose id stays
/// alive (destroying one tears down mpv's libass renderer: ~0.7 ms). When the output's size
/// changes, bitmaps are rendered again off the loop and put back from it. `onHTML` is called
/// on the loop in a turn of its own, so that a shell may call back into the runtime from it.
///
/// The player is held weakly: the surface never keeps mpv playing (R9).
public final class MpvAdSurface: AdSurface, MpvOutputListener, @unchecked Sendable {
    // @unchecked: `shown`, `postroll`, `redrawToggle` are touched only on the player's loop;
    // `output` is behind its lock (read by `prepare` off the loop); the rest is immutable.
    private struct Shown {
        let presentation: AdPresentation
        let slot: Int
        var drawn: Drawn
        /// The command that takes it down, built when it went up: nothing is allocated
        /// between mpv's pause event and the removal.
        let removal: MpvNode?
        /// Bumped whenever a new bitmap is being rendered for it: an older render is dropped.
        var generation = 0
        /// Its creative is on the output. A squeezeback's is not while the content moves (R26).
        var out = true
        var layout: SqueezebackLayout { presentation.creative.squeezeback ?? .standard }
    }

    private enum Drawn {
        case image(PreparedImage)
        case text(String)
        case html(String)
    }

    private weak let player: MpvPlayer?
    private let loop: any PlayerLoop
    private let onHTML: @Sendable (HTMLCreativeAnnouncement) -> Void
    private let hideAtOnce: Bool
    private let output: Locked<(width: Int, height: Int)>
    /// Decoding and compositing, off the loop (a thread of its own: see `Workers`).
    private let renderer = Workers(name: "adplayerd-render")
    /// Images already prepared, by file, kind and output (issue 23, item 9: a storm of pauses
    /// and plays asked for the same two images thousands of times, each decoded again).
    private let preparedImages = PreparedImages()
    private var shown: [UInt64: Shown] = [:]
    private var postroll: (id: UInt64, entry: Int64?, stopRequested: Bool, reporter: PostrollReporter)?
    private var redrawToggle = false
    /// The screensavers prepared so far: each next one is moved to another place (R27).
    private let screensaverTurn = Locked(0)
    /// The content's window for squeezebacks (R26).
    private let margins: MarginAnimator
    /// The playing linear ad's icons (R27): its prepared bitmaps, and the slots of those up.
    private var icons: (id: UInt64, icons: [AdIcon], bitmaps: [PixelBuffer?], up: [Int: Int])?

    /// `hideAtOnce`: a `hide` is announced in the turn that takes the creative down, before
    /// the ad's events — for a shell that only passes it on and never calls back into the
    /// runtime from `onHTML` (the daemon's control socket): the HTML leaves the screen as soon
    /// as a bitmap would. A `show` is always announced in a turn of its own.
    public init(player: MpvPlayer, hideAtOnce: Bool = false, onHTML: @escaping @Sendable (HTMLCreativeAnnouncement) -> Void = { _ in }) {
        self.player = player
        self.loop = player.loop
        self.onHTML = onHTML
        self.hideAtOnce = hideAtOnce
        output = Locked((1280, 720))
        margins = MarginAnimator(loop: player.loop, handle: { [weak player] in player?.drawingHandle })
        try? loop.sync { [self] in
            output.withLock { $0 = AdPlacement.canvas(player.outputSize) }
            player.attach(self)
        }
    }

    /// What ad `id` put on the output, for its display evidence (issue 36); nil when it is not
    /// shown. On the loop (a dictionary read: the pixels are shared, not copied).
    public func drawn(_ id: UInt64) -> DrawnAd? {
        loop.requireInLoop()
        guard let entry = shown[id], entry.out else { return nil }
        let size = output.withLock { $0 }
        let pause = entry.presentation.kind == .pauseAd
        let squeezeback = entry.presentation.kind == .squeezeback
        let screensaver = entry.presentation.kind == .screensaver
        switch entry.drawn {
        case .image(let image):
            let bitmap = image.bitmap
            // A pause ad's bitmap is the whole dimmed output: its image is the part compared.
            // A squeezeback's is the whole canvas around the content's window: its largest part is compared.
            let part = pause ? AdPlacement.pauseAd(source: (image.source.width, image.source.height), output: bitmap.output)
                : screensaver ? AdPlacement.screensaver(source: (image.source.width, image.source.height), output: bitmap.output, shift: image.shift)
                : squeezeback ? SqueezebackDrawing.mainPart(entry.layout, bitmap.output)
                : AdRect(x: bitmap.origin.x, y: bitmap.origin.y, width: bitmap.image.width, height: bitmap.image.height)
            return .image(bitmap: BGRAImage(width: bitmap.image.width, height: bitmap.image.height, pixels: bitmap.image.pixels),
                          origin: AdRect(x: bitmap.origin.x, y: bitmap.origin.y, width: bitmap.image.width, height: bitmap.image.height),
                          part: part, canvas: bitmap.output)
        case .text:
            let box = pause ? AdPlacement.pauseBox(output: size)
                : squeezeback ? SqueezebackDrawing.mainPart(entry.layout, size) : AdPlacement.overlayBox(output: size)
            return .text(box: box, canvas: size)
        case .html:
            return .html
        }
    }

    /// What is on screen now, by presentation id and overlay slot.
    public var visibleSlots: [UInt64: Int] { (try? loop.sync { shown.mapValues(\.slot) }) ?? [:] }

    // MARK: AdSurface: off the loop

    public func prepare(_ creative: AdCreative) async -> PreparedCreative {
        switch creative.content {
        case .image(let location, _, _):
            guard !location.contains("://") else {
                return PreparedCreative(PreparedFailure(message: "\(location): remote creatives are fetched by the ad source, not drawn from a URL"))
            }
            let size = output.withLock { $0 }
            let kind = creative.kind
            let layout = kind == .squeezeback ? creative.squeezeback ?? .standard : nil
            let shift = kind == .screensaver ? screensaverTurn.withLock { turn in defer { turn += 1 }; return turn % 5 } : 0
            let key = PreparedImages.key(location, kind: kind, layout: layout, shift: shift, output: size)
            if let key, let cached = preparedImages[key] { return PreparedCreative(cached) }
            let preparedImages = self.preparedImages
            // The pixels cross threads through a `Handover` (a pthread mutex), not through the
            // continuation alone: whoever reads them — the awaiting task, then the loop — is
            // ordered after the renderer's writes in a way ThreadSanitizer sees, whatever
            // executor the awaiting task runs on.
            let prepared = Handover<PreparedCreative>()
            await withCheckedContinuation { continuation in
                renderer.execute {
                    do {
                        let source = try ImageDecoder.decode(ImageDecoder.readFile(location), path: location)
                        let bitmap = try Self.render(source, kind: kind, layout: layout, shift: shift, output: size, path: location)
                        let image = PreparedImage(path: location, source: source, bitmap: bitmap, shift: shift)
                        if let key { preparedImages.keep(image, as: key) }
                        prepared.fulfil(PreparedCreative(image))
                    } catch {
                        prepared.fulfil(PreparedCreative(PreparedFailure(message: "\(error)")))
                    }
                    continuation.resume()
                }
            }
            return prepared.current!
        case .video(let location):
            if location.contains("://") {
                let scheme = location.prefix { $0 != ":" }.lowercased()
                guard scheme == "http" || scheme == "https" else {
                    return PreparedCreative(PreparedFailure(message: "\(location): only http(s) and local post-roll videos are played"))
                }
                return PreparedCreative(PreparedVideo(location: location, icons: await prepareIcons(creative.icons)))
            }
            do {
                try MpvPlayer.checkLocalFile(location)
                return PreparedCreative(PreparedVideo(location: location, icons: await prepareIcons(creative.icons)))
            } catch {
                return PreparedCreative(PreparedFailure(message: "\(error)"))
            }
        case .text, .html:
            return .nothing
        }
    }

    /// A linear ad's icons decoded and scaled off the loop (R27): each at its declared size (its
    /// own when none), aspect kept, within `AdIcon.maxSide` and a third of the output; one
    /// that cannot be read is nil (the ad plays without it).
    private func prepareIcons(_ icons: [AdIcon]) async -> [PixelBuffer?] {
        guard !icons.isEmpty else { return [] }
        let size = output.withLock { $0 }
        let prepared = Handover<[PixelBuffer?]>()
        await withCheckedContinuation { continuation in
            renderer.execute {
                prepared.fulfil(icons.map { icon in
                    guard let source = try? ImageDecoder.decode(ImageDecoder.readFile(icon.image), path: icon.image) else { return nil }
                    let wanted = (icon.width > 0 ? icon.width : source.width, icon.height > 0 ? icon.height : source.height)
                    let bound = (min(AdIcon.maxSide, max(1, size.width / 3)), min(AdIcon.maxSide, max(1, size.height / 3)))
                    let fitted = AdPlacement.fit(wanted, into: (min(wanted.0, bound.0), min(wanted.1, bound.1)), maxScale: 1)
                    return (try? ImageDecoder.scale(source, width: fitted.width, height: fitted.height, path: icon.image)).map(PixelBuffer.init)
                })
                continuation.resume()
            }
        }
        return prepared.current ?? []
    }

    /// A bitmap for `kind` in `output`: an overlay fitted to its box, or a pause ad
    /// composited over the dimmed output. Off the loop.
    private static func render(_ source: BGRAImage, kind: AdKind, layout: SqueezebackLayout?, shift: Int = 0,
                               output: (width: Int, height: Int), path: String) throws -> RenderedBitmap {
        let sourceSize = (source.width, source.height)
        if kind == .screensaver {
            let rect = AdPlacement.screensaver(source: sourceSize, output: output, shift: shift)
            let image = try ImageDecoder.scale(source, width: rect.width, height: rect.height, path: path)
            return RenderedBitmap(output: output, origin: (0, 0),
                                  image: PixelBuffer(ImageDecoder.dimmed(output, with: image, at: rect, backdrop: 255)))
        }
        if kind == .squeezeback {
            let image = try SqueezebackDrawing.bitmap(source, layout ?? .standard, canvas: output, path: path)
            return RenderedBitmap(output: output, origin: (0, 0), image: PixelBuffer(image))
        }
        if kind == .pauseAd {
            let rect = AdPlacement.pauseAd(source: sourceSize, output: output)
            let image = try ImageDecoder.scale(source, width: rect.width, height: rect.height, path: path)
            return RenderedBitmap(output: output, origin: (0, 0), image: PixelBuffer(ImageDecoder.dimmed(output, with: image, at: rect)))
        }
        let rect = AdPlacement.overlay(source: sourceSize, output: output)
        let image = try ImageDecoder.scale(source, width: rect.width, height: rect.height, path: path)
        return RenderedBitmap(output: output, origin: (rect.x, rect.y), image: PixelBuffer(image))
    }

    // MARK: AdSurface: on the loop

    public func present(_ presentation: AdPresentation) throws {
        loop.requireInLoop()
        if let failure = presentation.prepared.payload as? PreparedFailure { throw failure }
        // An episode with no video (audio only) is on no screen: an ad over it would be billed
        // as seen by nobody. It is refused — no impression, no proof of play.
        if let player, !player.showsVideo {
            throw PreparedFailure(message: "the episode shows no video (audio only): there is no picture to show an ad over")
        }
        guard let slot = (1...63).first(where: { slot in !shown.values.contains { $0.slot == slot } }) else {
            throw MpvError(code: -12, operation: "overlay: all 63 slots of mpv are in use")
        }
        let drawn: Drawn
        switch presentation.creative.content {
        case .image:
            guard let image = presentation.prepared.payload as? PreparedImage else {
                throw PreparedFailure(message: "the image was not prepared")
            }
            drawn = .image(image)
        case .text(let text):
            drawn = .text(text)
        case .html(let url):
            drawn = .html(url)
        case .video:
            throw MpvError(code: -4, operation: "present: a video is a post-roll, not an overlay")
        }
        let removal: MpvNode? = switch drawn {
        case .image: MpvNode(.array([.string("overlay-remove"), .string(String(slot))]))
        case .text: Self.assNode(slot: slot, "", (1, 1))   // cleared; the id stays alive
        case .html: nil
        }
        var entry = Shown(presentation: presentation, slot: slot, drawn: drawn, removal: removal)
        if presentation.kind == .squeezeback {
            // The content moves into its window first; the creative goes up when it is in (`squeeze(.out)`).
            if case .html = drawn { throw PreparedFailure(message: "an HTML creative cannot fill a squeezeback") }
            entry.out = false
            shown[presentation.id] = entry
            margins.animate(to: entry.layout.margins, over: entry.layout.transition)
            return
        }
        shown[presentation.id] = entry
        do {
            try draw(entry)
        } catch {
            shown[presentation.id] = nil
            throw error
        }
        if presentation.kind == .overlay { keepSubtitlesClear() }
    }

    public func squeeze(_ id: UInt64, _ step: SqueezeStep) {
        loop.requireInLoop()
        guard var entry = shown[id], entry.presentation.kind == .squeezeback else { return }
        switch step {
        case .out:
            margins.animate(to: entry.layout.margins, over: 0)   // exactly in, whatever the steps' timing
            entry.out = true
            shown[id] = entry
            try? draw(entry)
        case .back:
            if entry.out, let removal = entry.removal, let handle = player?.drawingHandle {
                try? handle.command(removal, operation: "remove squeezeback")
            }
            entry.out = false
            shown[id] = entry
            margins.animate(to: .none, over: entry.layout.transition)
        }
    }

    /// Where subtitles sit: mpv's `sub-pos`, % of the output's height (100: their usual place).
    private var subtitlePosition = 100

    /// An overlay never covers subtitles: while one is on screen, subtitles are raised above
    /// its box (`sub-pos`, set asynchronously: no wait for mpv's core; `sub-margin-y` is not
    /// applied by mpv 0.35 to subtitles already on screen); back down after.
    private func keepSubtitlesClear() {
        let size = output.withLock { $0 }
        let boxes: [AdRect] = shown.values.filter { $0.presentation.kind == .overlay }.map { entry in
            switch entry.drawn {
            case .image(let image): AdPlacement.overlay(source: (image.source.width, image.source.height), output: size)
            case .text, .html: AdPlacement.overlayBox(output: size)
            }
        }
        var position = 100
        if let top = boxes.map(\.y).min(), size.height > 0 {
            position = max(0, min(100, (top - AdPlacement.margin(size)) * 100 / size.height))
        }
        guard position != subtitlePosition, let handle = player?.drawingHandle else { return }
        subtitlePosition = position
        handle.commandAsync(["set", "sub-pos", String(position)])
    }

    public func dismiss(_ id: UInt64) throws {
        loop.requireInLoop()
        guard let entry = shown.removeValue(forKey: id), let handle = player?.drawingHandle else { return }
        defer { if entry.presentation.kind == .overlay { keepSubtitlesClear() } }
        if entry.presentation.kind == .squeezeback {
            // The content restored at once, from wherever it was (never animated on a pause), then the creative.
            defer { nudgeRedraw() }
            try margins.restoreAtOnce(then: entry.out ? entry.removal : nil)
            return
        }
        if let removal = entry.removal {
            defer { nudgeRedraw() }
            try handle.command(removal, operation: "remove ad")
        } else {
            announce(.hide(id: id))
        }
    }

    public func playPostroll(_ presentation: AdPresentation, reporter: PostrollReporter) throws {
        loop.requireInLoop()
        if let failure = presentation.prepared.payload as? PreparedFailure { throw failure }
        guard let video = presentation.prepared.payload as? PreparedVideo else {
            throw PreparedFailure(message: "the post-roll's video was not prepared")
        }
        guard let player else { throw MpvError.shutDown("playPostroll") }
        let id = presentation.id
        postroll = (id, nil, false, reporter)
        takeDownIcons()
        if !video.icons.isEmpty { icons = (id, presentation.creative.icons, video.icons, [:]) }
        player.playAd(video.location, loudness: presentation.loudness) { [weak self] result in
            guard let self, let current = postroll, current.id == id else { return }
            switch result {
            case .success(let entry):
                if current.stopRequested {
                    postroll = nil
                    self.player?.stopAd(entry)
                } else {
                    postroll?.entry = entry
                }
            case .failure(let error):
                postroll = nil
                reporter.failed("\(error)")
            }
        }
    }

    public func stopPostroll(_ id: UInt64) {
        loop.requireInLoop()
        if icons?.id == id { takeDownIcons() }
        guard let current = postroll, current.id == id else { return }
        if let entry = current.entry {
            postroll = nil
            player?.stopAd(entry)
        } else {
            postroll?.stopRequested = true   // mpv has not answered the load yet
        }
    }

    public func icon(_ id: UInt64, _ index: Int, shown: Bool) {
        loop.requireInLoop()
        guard let current = icons, current.id == id, current.icons.indices.contains(index), let handle = player?.drawingHandle else { return }
        if !shown {
            if let slot = current.up[index] {
                icons?.up[index] = nil
                try? handle.command(["overlay-remove", String(slot)])
                nudgeRedraw()
            }
            return
        }
        guard current.up[index] == nil, let bitmap = current.bitmaps[index] else { return }
        let taken = Set(self.shown.values.map(\.slot)).union(current.up.values)
        guard let slot = (1...63).first(where: { !taken.contains($0) }) else { return }
        let size = output.withLock { $0 }
        // Over the ad's picture, not the bars beside it: the video's rectangle in the output.
        let video = Self.videoRect(handle, canvas: size)
        let icon = current.icons[index], m = AdPlacement.margin(size)
        func place(_ position: AdIcon.Position, _ side: Int, _ start: Int, _ extent: Int) -> Int {
            switch position {
            case .start: start + m
            case .end: max(start, start + extent - side - m)
            case .pixels(let n): start + max(0, min(n, extent - side))
            }
        }
        let origin = (place(icon.x, bitmap.width, video.x, video.width), place(icon.y, bitmap.height, video.y, video.height))
        if putUp(RenderedBitmap(output: size, origin: origin, image: bitmap), slot: slot, handle) { icons?.up[index] = slot }
    }

    /// Where mpv draws the video in the output (`osd-dimensions`: the OSD's size and the
    /// margins around the picture), scaled to `canvas`; the whole canvas when mpv has no output
    /// size (`vo=null`). One synchronous read, when an icon goes up (a few tens of µs: §1).
    static func videoRect(_ handle: MpvHandle, canvas: (width: Int, height: Int)) -> AdRect {
        let whole = AdRect(x: 0, y: 0, width: canvas.width, height: canvas.height)
        guard case .map(let d)? = try? handle.get("osd-dimensions", as: .node) else { return whole }
        func number(_ key: String) -> Double? {
            switch d[key] {
            case .int(let v)?: Double(v)
            case .double(let v)?: v
            default: nil
            }
        }
        guard let w = number("w"), let h = number("h"), w >= 1, h >= 1, let ml = number("ml"), let mr = number("mr"),
              let mt = number("mt"), let mb = number("mb"), ml >= 0, mr >= 0, mt >= 0, mb >= 0, ml + mr < w, mt + mb < h else { return whole }
        let sx = Double(canvas.width) / w, sy = Double(canvas.height) / h
        return AdRect(x: Int((ml * sx).rounded()), y: Int((mt * sy).rounded()),
                      width: max(1, Int(((w - ml - mr) * sx).rounded())), height: max(1, Int(((h - mt - mb) * sy).rounded())))
    }

    /// The playing ad's icons down, with the ad.
    private func takeDownIcons() {
        guard let current = icons else { return }
        icons = nil
        guard !current.up.isEmpty, let handle = player?.drawingHandle else { return }
        for slot in current.up.values { try? handle.command(["overlay-remove", String(slot)]) }
        nudgeRedraw()
    }

    // MARK: From the player (on the loop)

    /// How long a post-roll's last frame may wait for the next file (the daemon loads it in
    /// milliseconds): then the ad's file is stopped and nothing of it stays on screen.
    static let heldFrameGrace = 0.5

    func adPlayback(_ event: MpvPlayerMapping.AdPlayback) {
        loop.requireInLoop()
        guard let current = postroll, let entry = current.entry else { return }
        switch event {
        case .started(let e) where e == entry:
            current.reporter.began()   // its first frame on the output: the ad starts (and bills) now
        case .progress(let e, let position, let duration) where e == entry:
            current.reporter.progress(position, of: duration)
        case .paused(let e, let paused) where e == entry:
            current.reporter.paused(paused)
        case .ended(let e, let how) where e == entry:
            postroll = nil
            takeDownIcons()
            switch how {
            case .finished:
                current.reporter.finished()
                // Its last frame stays for the next file to replace (no black frame between
                // items); when none comes within `heldFrameGrace`, nothing of the ad remains.
                _ = loop.schedule(after: Self.heldFrameGrace) { [weak self] in self?.player?.stopAd(entry) }
            case .stopped: current.reporter.stopped()
            case .failed(let message): current.reporter.failed(message)
            }
        default:
            break
        }
    }

    func outputResized(width: Int, height: Int) {
        loop.requireInLoop()
        output.withLock { $0 = AdPlacement.canvas((width, height)) }
        for entry in shown.values.sorted(by: { $0.slot < $1.slot }) where entry.out {
            try? draw(entry)
        }
        keepSubtitlesClear()
    }

    // MARK: Drawing (on the loop)

    private func draw(_ entry: Shown) throws {
        guard let handle = player?.drawingHandle else { throw MpvError.shutDown("draw") }
        let size = output.withLock { $0 }
        let pause = entry.presentation.kind == .pauseAd
        switch entry.drawn {
        case .image(let image):
            if image.bitmap.output == size {
                guard putUp(image.bitmap, slot: entry.slot, handle) else {
                    throw PreparedFailure(message: "\(image.path): a bitmap of \(image.bitmap.image.width)×\(image.bitmap.image.height) cannot be drawn")
                }
            } else {
                renderAgain(entry, image, for: size)
            }
        case .text(let text):
            if entry.presentation.kind == .squeezeback {
                try ass(handle, slot: entry.slot, SqueezebackDrawing.textEvents(text, entry.layout, canvas: size), size)
                nudgeRedraw()
                return
            }
            let text = AdText.bounded(text)   // never more than the renderer is measured to take
            // Drawn inside its box and clipped to it: however long, it never leaves the box.
            let box = pause ? AdPlacement.pauseBox(output: size) : AdPlacement.overlayBox(output: size)
            let clip = "\\clip(\(box.x),\(box.y),\(box.x + box.width),\(box.y + box.height))"
            let events = pause
                ? Self.dimEvent(size) + "\n{\\an5\\pos(\(size.width / 2),\(size.height / 2))\\fs\(size.height * 7 / 100)\\bord3\\shad0\(clip)}" + assEscape(text)
                : "{\\an3\\pos(\(box.x + box.width),\(box.y + box.height))\\fs\(size.height * 45 / 1000)\\bord2\\shad0\(clip)}" + assEscape(text)
            try ass(handle, slot: entry.slot, events, size)
            nudgeRedraw()
        case .html(let url):
            let full = AdRect(x: 0, y: 0, width: size.width, height: size.height)
            announce(.show(id: entry.presentation.id, url: url, rect: AdPlacement.overlayBox(output: size), output: full,
                           durationSeconds: entry.presentation.creative.duration, shownAt: MonotonicTime.now(),
                           creativeID: entry.presentation.creative.id))
        }
    }

    /// `overlay-add`, asynchronous: the call costs ~20 µs where a synchronous one waits for
    /// mpv's core (~0.6 ms while it decodes; notes §7b). mpv copies the pixels when it runs
    /// the command; they are kept until it answers.
    @discardableResult
    private func putUp(_ bitmap: RenderedBitmap, slot: Int, _ handle: MpvHandle) -> Bool {
        let image = bitmap.image
        // Never a value mpv aborts on: every bitmap is checked here, before `overlay-add`.
        guard AdPlacement.isDrawable(x: bitmap.origin.x, y: bitmap.origin.y, width: image.width, height: image.height),
              image.pixels.count == image.width * image.height * 4 else { return false }
        let address = image.pixels.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
        handle.commandAsync(node: [
            "name": .string("overlay-add"), "id": .int(Int64(slot)),
            "x": .int(Int64(bitmap.origin.x)), "y": .int(Int64(bitmap.origin.y)),
            "file": .string("&\(address)"), "offset": .int(0), "fmt": .string("bgra"),
            "w": .int(Int64(image.width)), "h": .int(Int64(image.height)), "stride": .int(Int64(image.width * 4)),
        ], keepAlive: image)
        nudgeRedraw()   // a pause ad goes up over a paused frame
        return true
    }

    /// Renders `image` for a new output size off the loop, then puts it up from the loop if
    /// the ad is still shown and nothing newer was asked for.
    private func renderAgain(_ entry: Shown, _ image: PreparedImage, for size: (width: Int, height: Int)) {
        let id = entry.presentation.id
        let generation = entry.generation + 1
        shown[id]?.generation = generation
        let kind = entry.presentation.kind, layout = entry.presentation.creative.squeezeback
        renderer.execute { [weak self, loop] in
            guard let bitmap = try? Self.render(image.source, kind: kind, layout: layout, shift: image.shift, output: size, path: image.path) else { return }
            loop.execute { [weak self] in
                guard let self, let current = shown[id], current.generation == generation,
                      let handle = player?.drawingHandle else { return }
                let updated = PreparedImage(path: image.path, source: image.source, bitmap: bitmap, shift: image.shift)
                shown[id]?.drawn = .image(updated)
                putUp(bitmap, slot: current.slot, handle)
            }
        }
    }

    /// Sets an `osd-overlay` of ASS events in output pixels ("" clears it; the id stays).
    private func ass(_ handle: MpvHandle, slot: Int, _ events: String, _ output: (width: Int, height: Int)) throws {
        try handle.command(Self.assNode(slot: slot, events, output), operation: "osd-overlay")
    }

    private static func assNode(slot: Int, _ events: String, _ output: (width: Int, height: Int)) -> MpvNode {
        MpvNode(.map([
            "name": .string("osd-overlay"), "id": .int(Int64(slot)), "format": .string("ass-events"),
            "data": .string(events), "res_x": .int(Int64(output.width)), "res_y": .int(Int64(output.height)),
        ]))
    }

    /// A black rectangle at 50 % over the whole output, as an ASS drawing (a text pause ad's
    /// dimmed frame, drawn by libass in the same overlay as its text).
    private static func dimEvent(_ size: (width: Int, height: Int)) -> String {
        "{\\an7\\pos(0,0)\\bord0\\shad0\\1c&H000000&\\1a&H80&\\p1}m 0 0 l \(size.width) 0 \(size.width) \(size.height) 0 \(size.height){\\p0}"
    }

    /// Makes mpv draw the frame again. Measured with `vo=x11`: an `overlay-remove` right after a
    /// pause left the overlay on the paused frame (8 times in 12) — mpv's own redraw for the
    /// change was lost. Touching an OSD overlay of our own asks for another one; a frame
    /// already queued with the overlay in it can be shown after that redraw, so ask again
    /// once the queue has drained. Loop timers: the first runs in the loop's next turn, right
    /// after the one that removed the ad (so the removal itself is not held up by it).
    private func nudgeRedraw() {
        nudge(after: [0, 0.15, 0.25])
    }

    private func nudge(after delays: ArraySlice<Double>) {
        guard let delay = delays.first else { return }
        _ = loop.schedule(after: delay) { [weak self] in
            self?.redrawOnce()
            self?.nudge(after: delays.dropFirst())
        }
    }

    private func redrawOnce() {
        guard let handle = player?.drawingHandle else { return }
        // Alternate between two empty events so that each call is a change mpv must draw.
        redrawToggle.toggle()
        try? handle.command(redrawToggle ? Self.redrawOn : Self.redrawOff, operation: "osd-overlay")
    }

    private static let redrawOn = assNode(slot: redrawSlot, "{}", (1, 1))
    private static let redrawOff = assNode(slot: redrawSlot, "", (1, 1))

    /// Announces to the UI shell in a turn of its own (see the type), a hide at once if asked
    /// (`hideAtOnce`).
    private func announce(_ announcement: HTMLCreativeAnnouncement) {
        if hideAtOnce, case .hide = announcement { return onHTML(announcement) }
        let onHTML = self.onHTML
        loop.execute { onHTML(announcement) }
    }

    /// `osd-overlay` id used only to make mpv redraw (see `nudgeRedraw`).
    static let redrawSlot = 999

    /// Before the loop runs: an `osd-overlay` of ASS makes mpv build its libass renderer once
    /// (3.2 ms holding its core lock), so that no text overlay on the loop pays for it.
    static func warmUpTextRenderer(_ handle: MpvHandle) throws {
        try handle.command(node: [
            "name": .string("osd-overlay"), "id": .int(Int64(redrawSlot)), "format": .string("ass-events"),
            "data": .string("{}"), "res_x": .int(1), "res_y": .int(1),
        ])
    }
}

/// A decoded image creative and its bitmap for one output size.
/// What an ad put on the output (`MpvAdSurface.drawn`), in the canvas's pixels.
public enum DrawnAd: Sendable {
    /// A bitmap (premultiplied BGRA) at `origin`; `part` is the creative within it (the whole
    /// bitmap for an overlay, the image inside a pause ad's dimmed frame).
    case image(bitmap: BGRAImage, origin: AdRect, part: AdRect, canvas: (width: Int, height: Int))
    /// Text drawn by libass inside `box`.
    case text(box: AdRect, canvas: (width: Int, height: Int))
    /// An HTML creative: drawn by the page's browser, not in mpv's output.
    case html
}

struct PreparedImage: Sendable {
    let path: String
    let source: BGRAImage
    let bitmap: RenderedBitmap
    /// A screensaver's place (`AdPlacement.screensaver`).
    var shift = 0
}

struct RenderedBitmap: Sendable {
    let output: (width: Int, height: Int)
    let origin: (x: Int, y: Int)
    let image: PixelBuffer
}

/// Prepared images kept for the next request of the same creative: keyed by the file (path,
/// device, inode, size, modification time: a file replaced in place is prepared again), the
/// ad's kind and the output's size. Bounded: at most 16 images and 48 MiB of pixels, the
/// oldest dropped first; an image over 16 MiB is not kept. What is kept is immutable, so an
/// ad on screen and the next one share it. Threading: any thread (one lock).
final class PreparedImages: Sendable {
    struct Key: Hashable, Sendable {
        let path: String
        let kind: AdKind
        /// A squeezeback's: its bitmap is cut for its layout.
        let layout: SqueezebackLayout?
        /// A screensaver's place.
        var shift = 0
        let width: Int
        let height: Int
        let device: UInt64
        let inode: UInt64
        let size: Int64
        let modified: Int
        let modifiedNanoseconds: Int
    }

    static let maxImages = 16
    static let maxBytes = 48 << 20
    static let maxImageBytes = 16 << 20
    private let state = Locked<(images: [Key: PreparedImage], order: [Key], bytes: Int)>(([:], [], 0))

    /// The key of `path` now (a `stat`: off the loop), nil if it cannot be read.
    static func key(_ path: String, kind: AdKind, layout: SqueezebackLayout? = nil, shift: Int = 0, output: (width: Int, height: Int)) -> Key? {
        var info = stat()
        guard stat(path, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else { return nil }
        return Key(path: path, kind: kind, layout: layout, shift: shift, width: output.width, height: output.height, device: UInt64(info.st_dev), inode: UInt64(info.st_ino),
                   size: Int64(info.st_size), modified: Int(info.st_mtim.tv_sec), modifiedNanoseconds: Int(info.st_mtim.tv_nsec))
    }

    subscript(key: Key) -> PreparedImage? { state.withLock { $0.images[key] } }

    func keep(_ image: PreparedImage, as key: Key) {
        let bytes = image.source.pixels.count + image.bitmap.image.pixels.count
        guard bytes <= Self.maxImageBytes else { return }
        state.withLock { state in
            guard state.images[key] == nil else { return }
            state.images[key] = image
            state.order.append(key)
            state.bytes += bytes
            while state.order.count > Self.maxImages || state.bytes > Self.maxBytes, !state.order.isEmpty {
                let oldest = state.order.removeFirst()
                if let dropped = state.images.removeValue(forKey: oldest) {
                    state.bytes -= dropped.source.pixels.count + dropped.bitmap.image.pixels.count
                }
            }
        }
    }

    var count: Int { state.withLock { $0.images.count } }
}

/// Pixels that mpv reads from memory until it has answered an `overlay-add`.
final class PixelBuffer: Sendable {
    let width: Int
    let height: Int
    let pixels: [UInt8]

    init(_ image: BGRAImage) {
        width = image.width
        height = image.height
        pixels = image.pixels
    }
}

/// A post-roll video that was checked off the loop.
struct PreparedVideo: Sendable {
    let location: String
    /// Its icons' bitmaps (R27), by index; nil: that one could not be read.
    var icons: [PixelBuffer?] = []
}

/// Why a creative cannot be shown, found while preparing it.
struct PreparedFailure: Error, Sendable, CustomStringConvertible {
    let message: String
    var description: String { message }
}
