import AdRuntime

/// A squeezeback in mpv's output (SPEC R26), with no second decoder: the content is drawn
/// into what `video-margin-ratio-left/right/top/bottom` leave of the output (mpv keeps its
/// aspect inside), the creative is one bitmap over the whole canvas with the content's
/// window cut out (or, for text, an ASS drawing of the same shape in the layout's colour and
/// the text in its largest part).
enum SqueezebackDrawing {
    /// The content's window in a canvas, fully in.
    static func window(_ layout: SqueezebackLayout, _ canvas: (width: Int, height: Int)) -> AdRect {
        let w = layout.margins.window(width: canvas.width, height: canvas.height)
        return AdRect(x: w.x, y: w.y, width: w.width, height: w.height)
    }

    /// The parts of the canvas around `window` (top, bottom, left, right; the empty ones left out).
    static func parts(around window: AdRect, _ canvas: (width: Int, height: Int)) -> [AdRect] {
        let right = window.x + window.width, bottom = window.y + window.height
        return [
            AdRect(x: 0, y: 0, width: canvas.width, height: window.y),
            AdRect(x: 0, y: bottom, width: canvas.width, height: canvas.height - bottom),
            AdRect(x: 0, y: window.y, width: window.x, height: window.height),
            AdRect(x: right, y: window.y, width: canvas.width - right, height: window.height),
        ].filter { $0.width > 0 && $0.height > 0 }
    }

    /// The part where the creative shows whole (its text, its evidence): the largest.
    static func mainPart(_ layout: SqueezebackLayout, _ canvas: (width: Int, height: Int)) -> AdRect {
        let window = window(layout, canvas)
        return parts(around: window, canvas).max { $0.width * $0.height < $1.width * $1.height }
            ?? AdRect(x: 0, y: 0, width: canvas.width, height: canvas.height)
    }

    /// The creative scaled to cover the canvas (aspect kept, centred, the overflow cropped —
    /// cropped before scaling, so that no aspect ratio makes a bitmap larger than the canvas),
    /// the content's window transparent. Off the loop.
    static func bitmap(_ source: BGRAImage, _ layout: SqueezebackLayout, canvas: (width: Int, height: Int),
                       path: String) throws(ImageDecodeError) -> BGRAImage {
        let sw = max(1, source.width), sh = max(1, source.height)
        let aspect = Double(canvas.width) / Double(max(1, canvas.height))
        var crop = (x: 0, y: 0, width: sw, height: sh)
        if Double(sw) / Double(sh) > aspect {
            crop.width = max(1, min(sw, Int((Double(sh) * aspect).rounded())))
            crop.x = (sw - crop.width) / 2
        } else {
            crop.height = max(1, min(sh, Int((Double(sw) / aspect).rounded())))
            crop.y = (sh - crop.height) / 2
        }
        var cropped = [UInt8](repeating: 0, count: crop.width * crop.height * 4)
        cropped.withUnsafeMutableBufferPointer { target in
            source.pixels.withUnsafeBufferPointer { from in
                for row in 0..<crop.height {
                    let s = (row + crop.y) * source.stride + crop.x * 4, t = row * crop.width * 4
                    for i in 0..<(crop.width * 4) { target[t + i] = from[s + i] }
                }
            }
        }
        let scaled = try ImageDecoder.scale(BGRAImage(width: crop.width, height: crop.height, pixels: cropped),
                                            width: canvas.width, height: canvas.height, path: path)
        let window = window(layout, canvas)
        var pixels = scaled.pixels
        pixels.withUnsafeMutableBufferPointer { target in
            // The window stays transparent (premultiplied zeros): the content shows there.
            for row in max(0, window.y)..<min(canvas.height, window.y + window.height) {
                let t = (row * canvas.width + max(0, window.x)) * 4
                for i in 0..<(max(0, min(canvas.width, window.x + window.width) - max(0, window.x)) * 4) { target[t + i] = 0 }
            }
        }
        return BGRAImage(width: canvas.width, height: canvas.height, pixels: pixels)
    }

    /// A text creative: the parts around the window filled with the layout's colour, the text
    /// (escaped: never markup) centred in the largest, clipped to it.
    static func textEvents(_ text: String, _ layout: SqueezebackLayout, canvas: (width: Int, height: Int)) -> String {
        let window = window(layout, canvas)
        let shape = parts(around: window, canvas).map { r in
            "m \(r.x) \(r.y) l \(r.x + r.width) \(r.y) \(r.x + r.width) \(r.y + r.height) \(r.x) \(r.y + r.height)"
        }.joined(separator: " ")
        let c = layout.background
        let bgr = hex6((c & 0xFF) << 16 | (c & 0xFF00) | (c >> 16) & 0xFF)
        let main = mainPart(layout, canvas)
        let size = max(8, min(main.height * 35 / 100, canvas.height * 7 / 100))
        let clip = "\\clip(\(main.x),\(main.y),\(main.x + main.width),\(main.y + main.height))"
        return "{\\an7\\pos(0,0)\\bord0\\shad0\\1c&H\(bgr)&\\1a&H00&\\p1}\(shape){\\p0}\n"
            + "{\\an5\\pos(\(main.x + main.width / 2),\(main.y + main.height / 2))\\fs\(size)\\bord2\\shad0\(clip)}" + assEscape(AdText.bounded(text))
    }
}

/// Six upper-case hex digits.
private func hex6(_ value: UInt32) -> String {
    let digits = String(value & 0xFF_FF_FF, radix: 16, uppercase: true)
    return String(repeating: "0", count: max(0, 6 - digits.count)) + digits
}

/// Moves the content's window: the four margin properties stepped on loop timers (25 a
/// second, each step four asynchronous `set`s: no wait for mpv's core), or set at once. On the loop.
final class MarginAnimator {
    static let stepsPerSecond = 25.0
    private let loop: any PlayerLoop
    private let handle: () -> MpvHandle?
    private(set) var current = SqueezebackLayout.Margins.none
    private var timer: LoopTimer?

    init(loop: any PlayerLoop, handle: @escaping () -> MpvHandle?) {
        self.loop = loop
        self.handle = handle
    }

    /// From where it is to `target` over `seconds` (0: at once).
    func animate(to target: SqueezebackLayout.Margins, over seconds: Double) {
        stop()
        let from = current
        guard seconds > 0 else { return set(target) }
        let steps = max(1, Int((seconds * Self.stepsPerSecond).rounded()))
        step(1, of: steps, from: from, to: target, every: seconds / Double(steps))
    }

    private func step(_ n: Int, of steps: Int, from: SqueezebackLayout.Margins, to: SqueezebackLayout.Margins, every interval: Double) {
        timer = loop.schedule(after: interval) { [weak self] in
            guard let self else { return }
            let p = Double(n) / Double(steps)
            // Eased (smoothstep): it starts and lands gently, as a person expects a window to move.
            let e = p * p * (3 - 2 * p)
            set(SqueezebackLayout.Margins(left: from.left + (to.left - from.left) * e, right: from.right + (to.right - from.right) * e,
                                          top: from.top + (to.top - from.top) * e, bottom: from.bottom + (to.bottom - from.bottom) * e))
            if n < steps { step(n + 1, of: steps, from: from, to: to, every: interval) } else { timer = nil }
        }
    }

    /// No more steps; the margins stay where they are.
    func stop() {
        timer?.cancel()
        timer = nil
    }

    /// Sets the margins that changed, asynchronously.
    func set(_ margins: SqueezebackLayout.Margins) {
        guard let handle = handle() else { return }
        for (name, _, new) in Self.changes(current, margins) { handle.commandAsync(["set", name, Self.text(new)]) }
        current = margins
    }

    /// The content back to the whole output at once: the margins that are not 0 set to 0
    /// asynchronously, then one synchronous command — `barrier` (the creative's removal), or
    /// the last margin's — after them. mpv's core runs a client's requests in the order they
    /// came (one dispatch queue), so when this returns the whole picture is back in its state
    /// (what a pause's latency is measured to), for one wait on the core instead of three.
    func restoreAtOnce(then barrier: MpvNode?) throws {
        stop()
        guard let handle = handle() else { return }
        var changes = Self.changes(current, .none)
        current = .none
        let last = barrier == nil ? changes.popLast() : nil
        for (name, _, _) in changes { handle.commandAsync(["set", name, "0"]) }
        if let barrier {
            try handle.command(barrier, operation: "remove squeezeback")
        } else if let (name, _, _) = last {
            try handle.command(["set", name, "0"])
        }
    }

    private static func changes(_ a: SqueezebackLayout.Margins, _ b: SqueezebackLayout.Margins) -> [(String, Double, Double)] {
        [("video-margin-ratio-left", a.left, b.left), ("video-margin-ratio-right", a.right, b.right),
         ("video-margin-ratio-top", a.top, b.top), ("video-margin-ratio-bottom", a.bottom, b.bottom)].filter { $0.1 != $0.2 }
    }

    private static func text(_ value: Double) -> String {
        String((max(0, min(1, value)) * 10_000).rounded() / 10_000)
    }
}
