@testable import AdPlayerDaemon
import ControlProtocol
import Foundation
import XCTest

/// The daemon's one screenshot limit for every client (issue 34, 10), the mechanism alone.
final class ScreenshotLimiterTests: XCTestCase {
    /// While a grab is under way every request of its kind waits for it (up to the bound; the
    /// rest refused), one grab answers them all; a request within the interval gets the last
    /// answer without a grab; a failed grab is not kept.
    func testOneGrabAnswersEveryoneWithinTheInterval() {
        let limiter = ScreenshotLimiter()
        let grabs = Locked(0)
        let pending = Locked<ScreenshotLimiter.Reply?>(nil)
        let answers = Locked<[Result<JSONValue, ControlError>]>([])
        let record: ScreenshotLimiter.Reply = { result in answers.withLock { $0.append(result) } }
        for _ in 0..<(ScreenshotLimiter.maxWaiting + 10) {
            limiter.shot(withAds: true, record) { done in
                grabs.withLock { $0 += 1 }
                pending.withLock { $0 = done }
            }
        }
        XCTAssertEqual(grabs.withLock { $0 }, 1, "one grab under way")
        XCTAssertEqual(answers.withLock { $0 }.count, 10, "past the bound: refused at once")
        XCTAssertTrue(answers.withLock { $0 }.allSatisfy { if case .failure(let e) = $0 { e.code == .unavailable } else { false } })
        pending.withLock { $0 }?(.success(["path": "/shot-1.png"]))
        XCTAssertEqual(answers.withLock { $0 }.count, ScreenshotLimiter.maxWaiting + 10)
        limiter.shot(withAds: true, record) { _ in grabs.withLock { $0 += 1 } }
        XCTAssertEqual(grabs.withLock { $0 }, 1, "within the interval: the last answer")
        XCTAssertEqual(answers.withLock { $0 }.last.flatMap { try? $0.get()["path"]?.string }, "/shot-1.png")
        // The other kind is its own; a failure is not kept.
        limiter.shot(withAds: false, record) { done in
            grabs.withLock { $0 += 1 }
            done(.failure(ControlError(.player, "no")))
        }
        limiter.shot(withAds: false, record) { done in
            grabs.withLock { $0 += 1 }
            done(.success(["path": "/shot-2.png"]))
        }
        XCTAssertEqual(grabs.withLock { $0 }, 3)
    }
}
