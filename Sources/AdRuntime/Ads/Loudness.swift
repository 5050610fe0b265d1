/// A file's measured loudness (ITU-R BS.1770-4, EBU R128): what SPEC R28 matches an ad by.
public struct Loudness: Sendable, Equatable, Hashable {
    /// Integrated loudness, LUFS; nil when the file has no sound (no audio stream, or silence
    /// below R128's absolute gate).
    public var integrated: Double?
    /// The highest true peak of any channel, dBTP (4× oversampled); nil with no sound.
    public var truePeak: Double?

    public init(integrated: Double?, truePeak: Double?) {
        self.integrated = integrated.flatMap { $0.isFinite ? $0 : nil }
        self.truePeak = truePeak.flatMap { $0.isFinite ? $0 : nil }
    }

    /// A file with no sound to match.
    public static let silent = Loudness(integrated: nil, truePeak: nil)
}

/// How loud an ad with sound plays (`ad-loudness`, SPEC R28).
public enum AdLoudnessPolicy: Sendable, Equatable {
    /// At the loudness of the content it belongs to (the episode it interrupts or follows);
    /// the fixed `LoudnessDecision.fallbackTarget` while the episode is not measured yet.
    case match
    /// At a fixed integrated loudness, LUFS (`ad-loudnorm = yes` is `target -24`).
    case target(Double)
    /// As mastered (the measurement is still recorded).
    case off

    /// The bounds a configured target is held to, LUFS.
    public static let targetRange: ClosedRange<Double> = -70 ... -5
}

/// What an ad with sound was played at, and why: chosen on the loop when its video starts,
/// applied by the surface as one static gain for the whole ad (no pumping), recorded with its
/// play (ledger columns `ad_lufs`, `content_lufs`, `target_lufs`, `gain_db`).
public struct LoudnessDecision: Sendable, Equatable {
    /// The ad's measured loudness; nil when it could not be measured (a stream, a file that
    /// failed to decode): then `dynamic`.
    public var ad: Loudness?
    /// The content's measured integrated loudness, LUFS; nil while not known.
    public var content: Double?
    /// The integrated loudness aimed at, LUFS; nil under `off`.
    public var target: Double?
    /// The static gain applied to the ad's audio, dB; nil when none is (`off`, `dynamic`).
    public var gain: Double?
    /// How the level was chosen, as the ledger's `audio` column says it.
    public var rule: Rule
    /// The ad could not be measured ahead: a single-pass loudness normaliser (libavfilter's
    /// `loudnorm`) toward `target` plays it instead of a static gain.
    public var dynamic: Bool { rule == .normalised }

    public enum Rule: String, Sendable, Equatable {
        /// A static gain to the content's measured loudness (`match`).
        case matched
        /// A static gain to a fixed target: `target LUFS`, or `match` before the episode was measured.
        case target
        /// Not measured ahead: normalised as it played (`loudnorm`).
        case normalised
        /// `off`: as mastered.
        case asMastered = "as-mastered"
    }

    /// The most an ad is raised, dB: a quiet creative is not lifted into its own noise floor.
    public static let maximumBoost = 12.0
    /// The most it is lowered, dB.
    public static let maximumCut = 40.0
    /// The highest true peak an ad may reach after its gain, dBTP.
    public static let peakCeiling = -1.0
    /// The target while the content's loudness is not known (EBU R128's broadcast −23 is
    /// ATSC A/85's −24 within a tolerance; −24 is what `ad-loudnorm` always aimed at).
    public static let fallbackTarget = -24.0

    /// `rule` nil: `asMastered` without a target, else `target`.
    public init(ad: Loudness?, content: Double?, target: Double?, gain: Double?, rule: Rule? = nil) {
        self.ad = ad
        self.content = content
        self.target = target
        self.gain = gain
        self.rule = rule ?? (target == nil ? .asMastered : .target)
    }

    /// The decision for an ad measured `ad` (nil: not measured) in content measured `content`
    /// under `policy`. Nil when there is nothing to decide: the ad has no sound.
    public static func decide(_ policy: AdLoudnessPolicy, ad: Loudness?, content: Loudness?) -> LoudnessDecision? {
        if let ad, ad.integrated == nil { return nil }   // no sound: nothing to match, nothing to record
        let contentLevel = content?.integrated
        let matched = policy == .match && contentLevel != nil
        let target: Double?
        switch policy {
        case .off: target = nil
        case .target(let value): target = max(AdLoudnessPolicy.targetRange.lowerBound, min(AdLoudnessPolicy.targetRange.upperBound, value))
        case .match: target = contentLevel ?? fallbackTarget
        }
        guard let target else { return LoudnessDecision(ad: ad, content: contentLevel, target: nil, gain: nil) }
        guard let level = ad?.integrated else {
            return LoudnessDecision(ad: ad, content: contentLevel, target: target, gain: nil, rule: .normalised)
        }
        var gain = min(target - level, maximumBoost)
        // Its true peak bounds a boost; without it (not measured), the ad is never raised.
        if let peak = ad?.truePeak { gain = min(gain, peakCeiling - peak) } else { gain = min(gain, 0) }
        gain = max(gain, -maximumCut)
        return LoudnessDecision(ad: ad, content: contentLevel, target: target, gain: (gain * 100).rounded() / 100,
                                rule: matched ? .matched : .target)
    }
}

/// Where the runtime learns files' loudness (SPEC R28): measured once, off the player's loop,
/// kept by the file's identity (the daemon's `LoudnessBook`, or a test's).
public protocol LoudnessSource: AnyObject, Sendable {
    /// Off the loop: the file's loudness, measuring it now if it is not known (seconds for a
    /// creative). Nil when it cannot be measured.
    func measure(_ path: String) async -> Loudness?
    /// On the loop, without waiting: what is known of the file now. When nothing is, its
    /// measurement is asked for in the background (paced: playback never waits for it).
    func known(_ path: String) -> Loudness?
    /// On the loop, without waiting: checks in the background that what is known of the file
    /// is still its loudness (a file replaced under the same name), measuring it if not.
    func refresh(_ path: String)
}
