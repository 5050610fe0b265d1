/// How a squeezeback shares the screen (SPEC R26): the content shrunk into a window, the ad
/// in the space it frees. mpv draws the content into what its `video-margin-ratio-*`
/// properties leave of the output (its aspect kept inside it), so a layout is four margin
/// ratios; the creative is drawn over everything but the window.
///
/// ```
/// l-right (default)   l-left          frame            side-by-side
/// ┌──────┬──┐         ┌──┬──────┐     ┌──────────┐     ┌──────┬───┐
/// │ show │ad│         │ad│ show │     │ ┌──────┐ │     │      │   │
/// ├──────┘  │         │  └──────┤     │ │ show │ │     │ show │ad │
/// │   ad    │         │   ad    │     │ └──────┘ │     │      │   │
/// └─────────┘         └─────────┘     └──────────┘     └──────┴───┘
/// ```
public struct SqueezebackLayout: Sendable, Hashable {
    public enum Shape: String, Sendable, Hashable, CaseIterable {
        /// The content top-left, the ad in an L on its right and below (GumGum's, the default).
        case lRight = "l-right"
        /// The content top-right, the ad in an L on its left and below.
        case lLeft = "l-left"
        /// The content centred, the ad around it on four sides.
        case frame
        /// The content on the left, centred vertically; the ad on the right, full height.
        case sideBySide = "side-by-side"
    }

    /// The margins as ratios of the output's width (left, right) and height (top, bottom).
    public struct Margins: Sendable, Hashable {
        public var left = 0.0, right = 0.0, top = 0.0, bottom = 0.0

        public init(left: Double = 0, right: Double = 0, top: Double = 0, bottom: Double = 0) {
            self.left = left
            self.right = right
            self.top = top
            self.bottom = bottom
        }

        public static let none = Margins()

        /// The window they leave in an output of `width` × `height` pixels.
        public func window(width: Int, height: Int) -> (x: Int, y: Int, width: Int, height: Int) {
            let x = Int((left * Double(width)).rounded()), y = Int((top * Double(height)).rounded())
            let right = Int((self.right * Double(width)).rounded()), bottom = Int((self.bottom * Double(height)).rounded())
            return (x, y, max(1, width - x - right), max(1, height - y - bottom))
        }
    }

    public var shape: Shape
    /// The content's size in its window, a fraction of the output's on each side (its aspect
    /// kept): `scaleRange`.
    public var scale: Double
    /// Seconds the content takes into its window and back again: `transitionRange`.
    public var transition: Double
    /// What a text creative's L is filled with, `0xRRGGBB`.
    public var background: UInt32

    public static let scaleRange = 0.5...0.9
    public static let transitionRange = 0.0...5.0
    public static let defaultScale = 0.66
    public static let defaultTransition = 1.0
    public static let defaultBackground: UInt32 = 0x14_14_1E

    /// Values out of their ranges are brought into them (a source validates and says so first).
    public init(shape: Shape = .lRight, scale: Double = defaultScale, transition: Double = defaultTransition,
                background: UInt32 = defaultBackground) {
        self.shape = shape
        self.scale = scale.isFinite ? min(Self.scaleRange.upperBound, max(Self.scaleRange.lowerBound, scale)) : Self.defaultScale
        self.transition = transition.isFinite
            ? min(Self.transitionRange.upperBound, max(Self.transitionRange.lowerBound, transition)) : Self.defaultTransition
        self.background = background & 0xFF_FF_FF
    }

    public static let standard = SqueezebackLayout()

    /// The margins with the content fully in its window.
    public var margins: Margins { margins(at: 1) }

    /// The margins `progress` (0: none, 1: fully in) of the way into the window.
    public func margins(at progress: Double) -> Margins {
        let p = progress.isFinite ? min(1, max(0, progress)) : 1
        let free = (1 - scale) * p
        switch shape {
        case .lRight: return Margins(right: free, bottom: free)
        case .lLeft: return Margins(left: free, bottom: free)
        case .frame: return Margins(left: free / 2, right: free / 2, top: free / 2, bottom: free / 2)
        case .sideBySide: return Margins(right: free, top: free / 2, bottom: free / 2)
        }
    }

    /// `"l-right 0.66 1s"`: as `ads-check` and the logs say it.
    public var summary: String {
        let scale = (scale * 100).rounded() / 100, transition = (transition * 100).rounded() / 100
        return "\(shape.rawValue) \(scale) \(transition)s"
    }
}

extension SqueezebackLayout {
    /// A layout's fields as a source has them (a catalog's entry, a VAST creative extension's
    /// attributes), each checked against its range: the one place they are judged.
    public struct Refusal: Error, Sendable, Equatable {
        /// `layout`, `scale`, `transition` or `background`.
        public let field: String
        public let reason: String
    }

    public static func checked(layout: String?, scale: Double?, transition: Double?, background: String?) throws(Refusal) -> SqueezebackLayout {
        var shape = Shape.lRight
        if let layout {
            guard let named = Shape(rawValue: layout) else {
                throw Refusal(field: "layout", reason: "\"\(layout.prefix(32))\" is not a layout (\(Shape.allCases.map(\.rawValue).joined(separator: ", ")))")
            }
            shape = named
        }
        let scale = scale ?? defaultScale
        guard scaleRange.contains(scale) else {
            throw Refusal(field: "scale", reason: "must be the content's size in its window, \(scaleRange.lowerBound)–\(scaleRange.upperBound)")
        }
        let transition = transition ?? defaultTransition
        guard transitionRange.contains(transition) else {
            throw Refusal(field: "transition", reason: "must be seconds, 0–\(transitionRange.upperBound)")
        }
        var colour = defaultBackground
        if let background {
            let hex = background.hasPrefix("#") ? background.unicodeScalars.dropFirst() : Substring(background).unicodeScalars
            guard hex.count == 6, hex.allSatisfy({ ("0"..."9").contains($0) || ("a"..."f").contains($0) || ("A"..."F").contains($0) }),
                  let value = UInt32(String(hex), radix: 16) else {
                throw Refusal(field: "background", reason: "\"\(background.prefix(32))\" is not a colour as #RRGGBB")
            }
            colour = value
        }
        return SqueezebackLayout(shape: shape, scale: scale, transition: transition, background: colour)
    }
}

extension SqueezebackLayout {
    /// The same from text attributes (a VAST creative extension's): a number that is not one is refused.
    public static func checked(attributes: [String: String]) throws(Refusal) -> SqueezebackLayout {
        func number(_ field: String) throws(Refusal) -> Double? {
            guard let text = attributes[field] else { return nil }
            guard let value = Double(text), value.isFinite else {
                throw Refusal(field: field, reason: "\"\(text.prefix(32))\" is not a number")
            }
            return value
        }
        return try checked(layout: attributes["layout"], scale: number("scale"), transition: number("transition"),
                           background: attributes["background"])
    }
}
