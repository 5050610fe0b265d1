import AdRuntime
import AdTestSupport
import Synchronization
import XCTest

/// R28: an ad is never louder than the content it belongs to — the level decided from measured
/// loudness (a static gain, bounded), on virtual time against a scripted player and surface.
final class LoudnessTests: XCTestCase {
    /// The rule's arithmetic: the gain that lands the ad on the content's loudness, a boost
    /// at most `maximumBoost`, a true peak never over `peakCeiling`; the fixed target while the
    /// content is not measured; an ad without sound decides nothing; one not measured is
    /// normalised as it plays.
    func testR28TheGainLandsTheAdOnTheContentsLoudnessWithinItsBounds() {
        let episode = Loudness(integrated: -31, truePeak: -12)
        let loud = Loudness(integrated: -14, truePeak: -10)
        var decision = LoudnessDecision.decide(.match, ad: loud, content: episode)
        XCTAssertEqual(decision, LoudnessDecision(ad: loud, content: -31, target: -31, gain: -17, rule: .matched))
        decision = LoudnessDecision.decide(.match, ad: Loudness(integrated: -38, truePeak: -30), content: episode)
        XCTAssertEqual(decision?.gain, 7, "a quiet ad is raised to the episode")
        decision = LoudnessDecision.decide(.match, ad: Loudness(integrated: -38, truePeak: -4), content: episode)
        XCTAssertEqual(decision?.gain, 3, "raised no further than its true peak allows (-4 + 3 = -1 dBTP)")
        decision = LoudnessDecision.decide(.match, ad: Loudness(integrated: -60, truePeak: -50), content: Loudness(integrated: -20, truePeak: -3))
        XCTAssertEqual(decision?.gain, LoudnessDecision.maximumBoost, "a boost is bounded")
        decision = LoudnessDecision.decide(.match, ad: Loudness(integrated: -38, truePeak: nil), content: episode)
        XCTAssertEqual(decision?.gain, 0, "a true peak not known: never raised")
        decision = LoudnessDecision.decide(.match, ad: Loudness(integrated: -14, truePeak: nil), content: episode)
        XCTAssertEqual(decision?.gain, -17, "but lowered")
        decision = LoudnessDecision.decide(.match, ad: loud, content: nil)
        XCTAssertEqual(decision?.target, LoudnessDecision.fallbackTarget, "the episode not measured yet: the fixed target")
        XCTAssertNil(decision?.content)
        XCTAssertEqual(decision?.gain, -10)
        XCTAssertEqual(decision?.rule, .target)
        decision = LoudnessDecision.decide(.target(-23), ad: loud, content: episode)
        XCTAssertEqual(decision?.gain, -9)
        XCTAssertEqual(decision?.content, -31, "the content's level is recorded whatever the policy")
        decision = LoudnessDecision.decide(.off, ad: loud, content: episode)
        XCTAssertEqual(decision, LoudnessDecision(ad: loud, content: -31, target: nil, gain: nil), "as mastered, measured")
        XCTAssertEqual(decision?.rule, .asMastered)
        XCTAssertNil(LoudnessDecision.decide(.match, ad: .silent, content: episode), "no sound: nothing to match")
        decision = LoudnessDecision.decide(.match, ad: nil, content: episode)
        XCTAssertEqual(decision, LoudnessDecision(ad: nil, content: -31, target: -31, gain: nil, rule: .normalised))
        XCTAssertEqual(decision?.rule, .normalised)
        XCTAssertEqual(LoudnessDecision.decide(.target(-500), ad: loud, content: nil)?.target, AdLoudnessPolicy.targetRange.lowerBound)
        XCTAssertEqual(Loudness(integrated: -.infinity, truePeak: .nan), .silent, "no number that is not finite")
    }

    /// R28 through the runtime: the creative is measured off the loop with its preparation,
    /// the episode's loudness is what is known of it when the ad starts — the fixed target on
    /// the first viewing, before the background measured it; the episode's own on the second —
    /// and the surface and the `started` event both carry the decision.
    func testR28APostrollPlaysAtTheEpisodesLoudnessOnceItIsKnown() throws {
        let book = ScriptedLoudness(["postroll.mp4": Loudness(integrated: -14, truePeak: -10)])
        let h = Harness(mediaPath: "/media/episode.mp4") {
            $0.loudness = .match
            $0.loudnessSource = book
        }
        h.start(duration: 10)
        var postroll = try h.ad(.postroll)
        XCTAssertEqual(book.measured, ["postroll.mp4"], "the creative measured with its preparation")
        h.loop.advance(by: 10)
        try h.show(postroll)
        var played = try XCTUnwrap(h.surface.video(postroll.id)?.loudness)
        XCTAssertEqual(played.target, LoudnessDecision.fallbackTarget, "the episode is not measured yet")
        XCTAssertEqual(played.gain, -10)
        XCTAssertEqual(book.asked, ["/media/episode.mp4"], "asked of the episode, without waiting")
        h.surface.reporter(postroll.id)?.began()
        h.surface.reporter(postroll.id)?.finished()
        XCTAssertEqual(h.ends(postroll), [.completed])
        let started = h.settled.all.compactMap { if case .started(let info) = $0 { info.loudness } else { nil } }
        XCTAssertEqual(started, [played], "the decision is in the play's start")

        // The background has measured the episode: its next viewing's post-roll matches it.
        book.learn("/media/episode.mp4", Loudness(integrated: -31, truePeak: -12))
        h.start(duration: 10)
        postroll = try h.ad(.postroll)
        h.loop.advance(by: 10)
        try h.show(postroll)
        played = try XCTUnwrap(h.surface.video(postroll.id)?.loudness)
        XCTAssertEqual(played, LoudnessDecision(ad: Loudness(integrated: -14, truePeak: -10), content: -31, target: -31, gain: -17,
                                                rule: .matched))
    }

    /// An overlay has no sound: no decision, nothing measured for it.
    func testR28AnImageIsNeitherMeasuredNorLevelled() throws {
        let book = ScriptedLoudness([:])
        let h = Harness(mediaPath: "/media/episode.mp4") {
            $0.loudness = .match
            $0.loudnessSource = book
        }
        h.start()
        let overlay = try h.ad(.overlay)
        try h.show(overlay)
        XCTAssertEqual(book.measured, [])
        let started = h.settled.all.compactMap { if case .started(let info) = $0 { info } else { nil } }
        XCTAssertEqual(started.count, 1)
        XCTAssertNil(started.first?.loudness)
    }
}

/// A loudness book whose answers the test gives: what was measured (off the loop) and asked.
final class ScriptedLoudness: LoudnessSource {
    private let state: Mutex<(levels: [String: Loudness], measured: [String], asked: [String])>

    init(_ levels: [String: Loudness]) { state = Mutex((levels, [], [])) }

    var measured: [String] { state.withLock { $0.measured } }
    var asked: [String] { state.withLock { Array(Set($0.asked)).sorted() } }
    func learn(_ path: String, _ loudness: Loudness) { state.withLock { $0.levels[path] = loudness } }

    func measure(_ path: String) async -> Loudness? {
        state.withLock { state in
            state.measured.append(path)
            return state.levels[path]
        }
    }

    func known(_ path: String) -> Loudness? {
        state.withLock { state in
            state.asked.append(path)
            return state.levels[path]
        }
    }

    func refresh(_ path: String) {}
}
