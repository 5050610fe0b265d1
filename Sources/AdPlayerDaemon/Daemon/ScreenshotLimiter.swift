import ControlProtocol
import Foundation

/// `screenshot` for every client at once (issue 34, 10): at most one grab of each kind (with
/// the ads, the video alone) per `interval` whoever asks — the socket, the page's endpoints,
/// the fleet bridge. A request within the interval of the last grab gets that grab's answer;
/// one that comes while a grab is under way waits for it (at most `maxWaiting`, the others
/// refused `unavailable`). A failed grab is not kept: the next request grabs again.
///
/// Threading: any thread; one lock, never held while grabbing.
package final class ScreenshotLimiter: Sendable {
    package typealias Reply = @Sendable (Result<JSONValue, ControlError>) -> Void

    package static let interval = 1.0
    package static let maxWaiting = 64

    private struct Kind {
        var last: (at: Double, value: JSONValue)?
        var waiting: [Reply]?
    }

    private let kinds = Locked([Bool: Kind]())

    /// Answers `reply` from the last grab of this kind, or joins the grab under way, or runs
    /// `grab` (which must call its argument exactly once).
    package init() {}

    package func shot(withAds: Bool, _ reply: @escaping Reply, grab: (@escaping Reply) -> Void) {
        let now = Double(MonotonicTime.now()) / 1e9
        enum Step { case answer(JSONValue), wait, refuse, grab }
        let step = kinds.withLock { kinds -> Step in
            var kind = kinds[withAds] ?? Kind()
            defer { kinds[withAds] = kind }
            if let last = kind.last, now - last.at < Self.interval { return .answer(last.value) }
            if var waiting = kind.waiting {
                guard waiting.count < Self.maxWaiting else { return .refuse }
                waiting.append(reply)
                kind.waiting = waiting
                return .wait
            }
            kind.waiting = [reply]
            return .grab
        }
        switch step {
        case .answer(let value): reply(.success(value))
        case .refuse: reply(.failure(ControlError(.unavailable, "too many screenshots asked for at once")))
        case .wait: break
        case .grab:
            grab { [kinds] result in
                let waiting = kinds.withLock { kinds -> [Reply] in
                    let waiting = kinds[withAds]?.waiting ?? []
                    kinds[withAds]?.waiting = nil
                    if case .success(let value) = result { kinds[withAds]?.last = (Double(MonotonicTime.now()) / 1e9, value) }
                    return waiting
                }
                for reply in waiting { reply(result) }
            }
        }
    }
}
