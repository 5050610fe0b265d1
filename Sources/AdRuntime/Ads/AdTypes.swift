import Foundation
import Synchronization

/// The episode a `VideoAds` is for: an id that ad servers know it by.
public struct ContentInfo: Sendable, Equatable {
    /// The id ad servers know the episode by (a `title_id`).
    public var id: String
    public var title: String?
    /// Seconds, when known.
    public var duration: Double?
    public var tags: [String]
    /// The episode's cue points (its ad opportunities: a file's chapter starts), seconds in
    /// order, once known; nil: not known yet; empty: it has none. VMAP's `#n` positions.
    public var cuePoints: [Double]?
    /// Which viewing of the episode a request belongs to (R14): every `VideoAds`, and every
    /// pass of its episode (a loop), is a viewing of its own, numbered once in the process.
    /// Set by the runtime on what it hands a source; nil on what an app made itself.
    public var viewing: UInt64?
    /// The episode's file, where the box has one: what its loudness is measured and known by
    /// (R28: ads play at the loudness of the content they belong to).
    public var mediaPath: String?

    public init(id: String, title: String? = nil, duration: Double? = nil, tags: [String] = [], cuePoints: [Double]? = nil,
                mediaPath: String? = nil) {
        self.id = id
        self.mediaPath = mediaPath
        self.title = title
        self.duration = duration
        self.tags = tags
        self.cuePoints = cuePoints
    }

    /// What a source keys a viewing's own state by (a VMAP schedule and its breaks served, a
    /// pod): the content id, and the viewing when there is one.
    public var viewingKey: String { viewing.map { "\(id)\u{1}\($0)" } ?? id }
}

/// Viewings are numbered once in the process: two `VideoAds` of one episode (a replay, `repeat
/// all` coming round) never share a source's per-viewing state. A number is a key, never an
/// output: a simulation's files do not depend on it.
enum Viewings {
    private static let counter = Atomic<UInt64>(0)
    static func next() -> UInt64 { counter.add(1, ordering: .relaxed).newValue }
}

/// The ad kinds: non-linear ones over the content (overlay, pause ad) and linear ones that
/// take the content's place (pre-roll, mid-roll, post-roll).
public enum AdKind: String, Sendable, Equatable, CaseIterable {
    /// A non-linear creative over playing content, for a duration (R6).
    case overlay
    /// A creative shown while the content is paused (R7).
    case pauseAd = "pause_ad"
    /// A linear (video) ad after the episode played to its end (R8).
    case postroll
    /// A linear ad before the episode's first frame: the episode starts after it.
    case preroll
    /// A linear ad at a content time: the content stops there, the ad plays, the same item
    /// resumes where it stopped.
    case midroll
    /// The content shrunk into a window over playing content, the creative in the space it
    /// frees (R26): an overlay's rules, with the content's way in and out.
    case squeezeback
    /// A full-screen creative while the screen idles — the content paused longer than
    /// `screensaver-after` (R27): in the pause ad's place, each creative its own play.
    case screensaver

    /// Over playing content, for a duration, in the overlay chain: an overlay or a squeezeback.
    public var isOverPlayingContent: Bool { self == .overlay || self == .squeezeback }
    /// Its time on screen is billed by quartiles (`firstQuartile` … `complete`): linear ads
    /// over their video, squeezebacks over their duration.
    public var hasQuartiles: Bool { isLinear || self == .squeezeback }
    /// A source answering a request for `requested` may deliver this kind: the same, or a
    /// squeezeback for the overlay chain's slot (the chain's slots hold either).
    public func answers(_ requested: AdKind) -> Bool { self == requested || (requested == .overlay && self == .squeezeback) }

    /// A video that takes the content's place (pre-roll, mid-roll, post-roll).
    public var isLinear: Bool { self == .postroll || self == .preroll || self == .midroll }
}

extension AdKind {
    /// The kind's name where people and other programs read it — the control protocol, proof
    /// of play, metrics' labels: `overlay`, `pause`, `postroll`.
    public var protocolName: String {
        switch self {
        case .overlay: "overlay"
        case .pauseAd: "pause"
        case .postroll: "postroll"
        case .preroll: "preroll"
        case .midroll: "midroll"
        case .squeezeback: "squeezeback"
        case .screensaver: "screensaver"
        }
    }
}

/// What an ad shows.
public enum AdCreativeContent: Sendable, Equatable {
    /// An image file or http(s) URL (PNG, JPEG), with its size when the source knows it.
    case image(location: String, width: Int? = nil, height: Int? = nil)
    /// Text (drawn as text, never interpreted as markup).
    case text(String)
    /// A video file or URL (post-rolls).
    case video(location: String)
    /// An HTML creative that mpv cannot draw; announced for a UI shell.
    case html(url: String)

    var fits: Set<AdKind> {
        switch self {
        case .image: [.overlay, .pauseAd, .squeezeback, .screensaver]
        case .text: [.overlay, .pauseAd, .squeezeback]
        case .html: [.overlay]
        case .video: [.postroll, .preroll, .midroll]
        }
    }
}

/// An ad as a source delivers it.
public struct AdCreative: Sendable, Equatable {
    public var id: String
    public var kind: AdKind
    public var content: AdCreativeContent
    /// Overlays: seconds on screen while the content plays (default 10).
    public var duration: Double?
    /// Overlays: the content time at which a scheduled slot starts, if the source has one.
    public var slotStart: Double?
    /// Tracking URLs by event name (`impression`, `start`, `firstQuartile`, `viewable`,
    /// `progress:00:00:05`, …); the tracking layer sends them.
    public var tracking: [String: [String]]
    /// The ad server's id for this serving (VAST's `AdServingId`).
    public var adServingID: String?
    /// The creative's `UniversalAdId` (`registry value`).
    public var universalAdID: String?
    /// Which source served it (`catalog`, `vast`, `slots`, the first of a fallback chain…),
    /// for proof of play.
    public var source: String?
    /// Until when it may be shown from a cache (VAST's `Expires`, or the source's lifetime).
    public var expires: Date?
    /// Post-rolls: how many ads of its pod follow it (VAST `sequence`); the app asks for the
    /// next with `AdRequest.podPosition` one more.
    public var podRemaining = 0
    /// Proof of play for buyers who pay on time or not at all (`pop-deadline`): seconds after
    /// the ad went on screen within which its billable beacons must be delivered — later, they
    /// are dropped (`deadline`), never sent late. Nil: no deadline.
    public var popDeadline: Double?
    /// Its impression waits for the screen's own evidence (`pop-require-display`, issue 36):
    /// sent once the play is `verified`, else the source's "not used" signal instead. Nil:
    /// the daemon's default.
    public var requireDisplay: Bool?
    /// The request chain's id (`[TRANSACTIONID]`): the same from the first request through its
    /// wrappers to the ad's tracking URLs.
    public var transactionID: String?
    /// How many ads the answer held for the break (`[ADCOUNT]` in tracking URLs).
    public var adCount: Int?
    /// Who advertises, and the ad's categories (VAST `<Advertiser>`, `<Category>`; a catalog
    /// entry's `advertiser`, `categories`): for competitive separation (`AdSeparation`).
    public var advertiser: String?
    public var categories: [String] = []
    /// Linear ads: seconds of the video after which the viewer may skip it (VAST `skipoffset`,
    /// a percentage resolved against its duration); nil: it cannot be skipped.
    public var skipOffset: Double?
    /// Squeezebacks: how the screen is shared; nil: `SqueezebackLayout.standard`.
    public var squeezeback: SqueezebackLayout?
    /// Linear ads: their VAST icons, AdChoices first (R27).
    public var icons: [AdIcon] = []

    public init(id: String, kind: AdKind, content: AdCreativeContent, duration: Double? = nil,
                slotStart: Double? = nil, tracking: [String: [String]] = [:], adServingID: String? = nil,
                universalAdID: String? = nil, source: String? = nil, expires: Date? = nil) {
        self.id = id
        self.kind = kind
        self.content = content
        self.duration = duration
        self.slotStart = slotStart
        self.tracking = tracking
        self.adServingID = adServingID
        self.universalAdID = universalAdID
        self.source = source
        self.expires = expires
    }
}

/// Why something about an ad could not be done. A value with a code a program can match
/// (`code`) and a sentence a person can read (`message`).
public enum AdError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Invalidation: String, Sendable, Equatable {
        /// The player holds another item than the one this ad was for (R10, R14).
        case contentChanged
    }

    /// The ad belongs to another item than the one in the player (R10, R14).
    case invalidated(Invalidation)
    /// The source had no ad.
    case noFill
    /// The source did not answer in time.
    case timeout(seconds: Double)
    /// The source failed, or delivered something unusable.
    /// With the VAST error code when the source gave one (`VASTCoded`).
    case loadFailed(String, vastCode: Int? = nil)
    /// An overlay needs playing content.
    case notPlaying
    /// A pause ad needs paused content.
    case notPaused
    /// A post-roll needs the episode to have played to its end.
    case notEnded
    /// `show` needs a tracked player.
    case notTracking
    /// `destroy()` was called.
    case destroyed
    /// `show` was called twice.
    case alreadyShown
    /// The option does not apply to this kind of ad.
    case wrongKind(AdKind)
    /// The surface could not show the creative (a bad image, a video that does not play).
    case renderFailed(String)
    /// A time given to `show` is not a finite number of seconds in its bounds (`Seconds`).
    case invalidTime(Double)
    /// A pre-roll shows before the episode's content only.
    case contentStarted
    /// The linear ad cannot be skipped (yet): not skippable, or before its skip offset.
    case notSkippable(after: Double?)
    /// The player cannot stop its item for a linear break (it is no `BreakablePlayer`).
    case cannotHold

    public var code: String {
        switch self {
        case .invalidated(let why): "invalidated.\(why.rawValue)"
        case .noFill: "no_fill"
        case .timeout: "timeout"
        case .loadFailed: "load_failed"
        case .notPlaying: "not_playing"
        case .notPaused: "not_paused"
        case .notEnded: "not_ended"
        case .notTracking: "not_tracking"
        case .destroyed: "destroyed"
        case .alreadyShown: "already_shown"
        case .wrongKind: "wrong_kind"
        case .renderFailed: "render_failed"
        case .invalidTime: "invalid_time"
        case .contentStarted: "content_started"
        case .notSkippable: "not_skippable"
        case .cannotHold: "cannot_hold"
        }
    }

    public var message: String {
        switch self {
        case .invalidated: "the player holds another item than the one this ad was requested for; track the player again"
        case .noFill: "the ad source had no ad"
        case .timeout(let seconds): "the ad source did not answer within \(seconds) s"
        case .loadFailed(let why, _): "the ad could not be loaded: \(why)"
        case .notPlaying: "an overlay shows over playing content only"
        case .notPaused: "a pause ad shows while the content is paused only"
        case .notEnded: "a post-roll shows after the episode played to its end only"
        case .notTracking: "no player is tracked"
        case .destroyed: "this VideoAds was destroyed"
        case .alreadyShown: "this ad was shown already"
        case .wrongKind(let kind): "that does not apply to a \(kind.rawValue)"
        case .renderFailed(let why): "the creative could not be shown: \(why)"
        case .invalidTime(let seconds): "\(seconds) is not a usable number of seconds"
        case .contentStarted: "a pre-roll shows before the episode's content only"
        case .notSkippable(let after?): "the ad can be skipped after \(after) s of it only"
        case .notSkippable(nil): "the ad cannot be skipped"
        case .cannotHold: "the player cannot hold its content for a linear break"
        }
    }

    /// The VAST error code (IAB VAST 4.x §2.3.6.3) this failure is reported with, when it has
    /// one: a creative that cannot be shown (a corrupt image, a video that does not play) is 405.
    public var vastCode: Int? {
        switch self {
        case .renderFailed: 405
        case .loadFailed(_, let code): code
        default: nil
        }
    }

    public var description: String { "\(code): \(message)" }
}

/// Why an ad ended. `didEnd` delivers exactly one, once (R15).
public enum AdEndReason: String, Sendable, Equatable {
    /// It ran its course (overlay duration, a linear ad's video to its end).
    case completed
    /// Overlay: the content stopped playing (R6).
    case paused
    /// Pause ad: the content plays again (R7).
    case played
    /// The content jumped in time (R12).
    case seeked
    /// The player holds another item: another episode, the end of the item, a loop (R10, R14).
    case contentChanged
    /// Overlay: the output was hidden and the content did not play again within 1 s of its
    /// return (R13).
    case interrupted
    /// The viewer (or the app on their behalf) closed or skipped it.
    case closed
    /// `destroy()`.
    case destroyed
    /// The creative could not be shown or played.
    case failed
    /// Pause ad: it was on screen for its longest time (`pause-ad-max`, burn-in care).
    case limitReached
    /// A linear ad: the viewer skipped it past its skip offset (`skip`).
    case skipped
    /// Pause ad: a screensaver took its place, the pause having lasted `screensaver-after` (R27).
    case replaced
}

/// An error of an ad source that has a VAST error code (IAB VAST 4.x §2.3.6.3): a VAST
/// source's failures. The runtime carries the code in `AdError.loadFailed`, so that every
/// VAST failure says its code in `ad.error`'s `vast_error` and in the metrics' label.
public protocol VASTCoded: Error {
    var vastErrorCode: Int { get }
}
