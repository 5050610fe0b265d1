/// A linear ad's VAST icon (R27): AdChoices, the EU's "why am I seeing this", a sponsor's
/// mark — drawn over the ad's video at its place, from its offset for its duration, its view
/// tracked once (`tracking["iconView:N"]` of its creative, N its index in `AdCreative.icons`).
/// No pointer on a box: its click-through is kept (a shell may show it as a QR code), its
/// fallback images are not fetched.
public struct AdIcon: Sendable, Equatable {
    /// Where on an axis: the start (left, top), the end (right, bottom), or pixels from the start.
    public enum Position: Sendable, Equatable {
        case start
        case end
        case pixels(Int)
    }

    /// VAST's `program` (`AdChoices`, …); nil when not given.
    public var program: String?
    /// The icon's image, a local file (fetched with the ad).
    public var image: String
    /// Its size in pixels as the ad server declared it; 0: the image's own.
    public var width: Int
    public var height: Int
    public var x: Position
    public var y: Position
    /// Seconds into the ad's video it appears.
    public var offset: Double
    /// Seconds it stays; nil: until the ad ends.
    public var duration: Double?
    /// `IconClickThrough`, when given.
    public var clickThrough: String?

    /// The most icons a creative keeps (AdChoices first).
    public static let maxPerCreative = 8
    /// The largest side an icon is drawn at, pixels (and never over a third of the output's).
    public static let maxSide = 600

    public init(program: String? = nil, image: String, width: Int = 0, height: Int = 0, x: Position = .end, y: Position = .start,
                offset: Double = 0, duration: Double? = nil, clickThrough: String? = nil) {
        self.program = program
        self.image = image
        self.width = width
        self.height = height
        self.x = x
        self.y = y
        self.offset = offset
        self.duration = duration
        self.clickThrough = clickThrough
    }

    /// Whether it is up at `position` seconds into the ad's video.
    public func isUp(at position: Double) -> Bool {
        position >= offset - 0.001 && (duration.map { position < offset + $0 } ?? true)
    }

    /// `left`/`right` (x) or `top`/`bottom` (y), or whole pixels 0…100000; nil: not a position.
    public static func position(_ text: String?, start: String, end: String) -> Position? {
        guard let text = text?.lowercased() else { return nil }
        if text == start { return .start }
        if text == end { return .end }
        guard let pixels = Int(text), (0...100_000).contains(pixels) else { return nil }
        return .pixels(pixels)
    }

    /// The tracking event of icon `index`'s view.
    public static func viewEvent(_ index: Int) -> String { "iconView:\(index)" }
}
