import AdRuntime
import ControlProtocol

/// The ads runtime's events as the control protocol's (docs/protocol.md, "Events"): mapped
/// here, in the daemon, so that the protocol module (and `adplayerctl`) knows no runtime.
extension ControlEvent {
    public static func adRequested(_ kind: AdKind, contentID: String, position: Double) -> ControlEvent {
        ControlEvent(.adRequested, ["kind": .string(kind.protocolName), "ad_id": .null, "content_id": .string(contentID),
                                    "position": .number(position)])
    }

    /// The source had nothing for a request: a normal outcome, not an error.
    public static func adNoFill(_ kind: AdKind, contentID: String, position: Double) -> ControlEvent {
        ControlEvent(.adNoFill, ["kind": .string(kind.protocolName), "content_id": .string(contentID), "position": .number(position)])
    }

    public static func adLoaded(_ info: AdInfo) -> ControlEvent {
        ControlEvent(.adLoaded, ["kind": .string(info.kind.protocolName), "ad_id": .string(info.creativeID), "instance": instance(info.id)])
    }

    public static func adStarted(_ info: AdInfo) -> ControlEvent {
        var fields: [String: JSONValue] = ["kind": .string(info.kind.protocolName), "ad_id": .string(info.creativeID),
                                           "instance": instance(info.id), "content_id": .string(info.contentID)]
        if let loudness = info.loudness { fields["loudness"] = describe(loudness) }
        return ControlEvent(.adStarted, fields)
    }

    /// An ad's level (R28) as `ad.started` and `simulate`'s timeline say it.
    static func describe(_ loudness: LoudnessDecision) -> JSONValue {
        func number(_ value: Double?) -> JSONValue { value.map { .number(($0 * 100).rounded() / 100) } ?? .null }
        return ["ad_lufs": number(loudness.ad?.integrated), "ad_peak_dbtp": number(loudness.ad?.truePeak), "content_lufs": number(loudness.content),
                "target_lufs": number(loudness.target), "gain_db": number(loudness.gain), "dynamic": .bool(loudness.dynamic),
                "rule": .string(loudness.rule.rawValue)]
    }

    public static func adQuartile(_ info: AdInfo, _ quartile: Int) -> ControlEvent {
        ControlEvent(.adQuartile, ["kind": .string(info.kind.protocolName), "ad_id": .string(info.creativeID), "quartile": .int(quartile)])
    }

    /// Whether the ad was viewable (MRC: 1 s on a visible output, 2 s for a video), once.
    public static func adViewability(_ info: AdInfo, _ viewability: AdViewability) -> ControlEvent {
        ControlEvent(.adViewability, ["kind": .string(info.kind.protocolName), "ad_id": .string(info.creativeID),
                                      "instance": instance(info.id), "viewability": .string(viewability.rawValue)])
    }

    /// A post-roll paused (true) or resumed (false) by the viewer.
    public static func adPaused(_ info: AdInfo, _ paused: Bool) -> ControlEvent {
        ControlEvent(paused ? .adPaused : .adResumed, ["kind": .string(info.kind.protocolName), "ad_id": .string(info.creativeID)])
    }

    public static func adEnded(_ info: AdInfo, reason: AdEndReason, latencyMicroseconds: UInt64?) -> ControlEvent {
        ControlEvent(.adEnded, ["kind": .string(info.kind.protocolName), "ad_id": .string(info.creativeID), "instance": instance(info.id),
                                "reason": .string(reason.rawValue), "latency_us": latencyMicroseconds.map { .int($0) } ?? .null,
                                "on_screen": info.onScreenSeconds.map { .number(($0 * 1000).rounded() / 1000) } ?? .null])
    }

    /// A linear break began (`midroll`: the content stopped at `position` for it, not a pause;
    /// `preroll`: the episode waits for it) or ended (the content resumes at `position`).
    public static func adBreak(_ kind: AdKind, started: Bool, contentID: String, position: Double) -> ControlEvent {
        ControlEvent(started ? .adBreakStarted : .adBreakEnded, ["kind": .string(kind.protocolName), "content_id": .string(contentID),
                                                                 "position": .number(position)])
    }

    public static func adError(_ kind: AdKind, adID: String?, error: AdError) -> ControlEvent {
        var fields: [String: JSONValue] = ["kind": .string(kind.protocolName), "ad_id": adID.map { .string($0) } ?? .null,
                                           "code": .string(error.code), "message": .string(error.message)]
        if let vast = error.vastCode { fields["vast_error"] = .int(vast) }
        return ControlEvent(.adError, fields)
    }

}
