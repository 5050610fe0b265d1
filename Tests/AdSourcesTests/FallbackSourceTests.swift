import AdRuntime
import AdSources
import Foundation
import XCTest

/// `ads` given more than once: each request asks the sources in order until one fills.
final class FallbackSourceTests: XCTestCase {
    /// A source that answers as told and records what it was asked.
    private final class Scripted: AdSource, @unchecked Sendable {
        // @unchecked: `asked` behind its lock; `answer` fixed.
        enum Answer { case fill(String, pod: Int), none, fail }
        let answer: Answer
        let asked = Locked<[AdRequest]>([])
        let prefetched = Locked<[AdRequest]>([])
        let fills: Set<AdKind>

        init(_ answer: Answer, fills: Set<AdKind> = Set(AdKind.allCases)) {
            self.answer = answer
            self.fills = fills
        }

        func ad(for request: AdRequest) async throws -> AdCreative? {
            asked.withLock { $0.append(request) }
            switch answer {
            case .fill(let id, let pod):
                var creative = AdCreative(id: "\(id)-\(request.podPosition)", kind: request.kind, content: .video(location: "/x.mp4"))
                creative.podRemaining = max(0, pod - request.podPosition)
                return creative
            case .none: return nil
            case .fail: throw VASTError(code: .undefined, message: "down")
            }
        }

        func mayFill(_ kind: AdKind, content: ContentInfo, at position: Double) -> Bool { fills.contains(kind) }
        func prefetch(_ request: AdRequest) { prefetched.withLock { $0.append(request) } }
    }

    private func request(_ kind: AdKind = .postroll, pod: Int = 0) -> AdRequest {
        AdRequest(content: ContentInfo(id: "e1"), kind: kind, position: 4, podPosition: pod)
    }

    private func chain(_ sources: Scripted...) -> (FallbackSource, Locked<[String]>) {
        let problems = Locked<[String]>([])
        let members = sources.enumerated().map { FallbackSource.Member(name: "source-\($0.offset + 1)", source: $0.element) }
        return (FallbackSource(members, onProblem: { message in problems.withLock { $0.append(message) } }), problems)
    }

    func testTheFirstSourceThatFillsServesAndTheOnesAfterItAreNotAsked() async throws {
        let (first, second, third) = (Scripted(.fail), Scripted(.none), Scripted(.fill("c", pod: 0)))
        let fourth = Scripted(.fill("d", pod: 0))
        let (fallback, problems) = chain(first, second, third, fourth)
        let creative = try await fallback.ad(for: request())
        XCTAssertEqual(creative?.id, "c-0")
        XCTAssertEqual([first, second, third, fourth].map { $0.asked.withLock(\.count) }, [1, 1, 1, 0])
        XCTAssertEqual(problems.withLock { $0.count }, 1, "the failing source is reported")
        XCTAssertTrue(problems.withLock { $0[0] }.hasPrefix("ad source source-1:"))
    }

    func testNoFillWhenOneHadNothingAndAFailureOnlyWhenAllFailed() async throws {
        let (noFill, _) = chain(Scripted(.fail), Scripted(.none))
        let none = try await noFill.ad(for: request())
        XCTAssertNil(none)
        let (allFail, _) = chain(Scripted(.fail), Scripted(.fail))
        do {
            _ = try await allFail.ad(for: request())
            XCTFail("every source failed")
        } catch let error as VASTError {
            XCTAssertEqual(error.code, .undefined)
        }
    }

    /// A source that cannot fill a kind (a catalog with no pause ad) is not asked for it; the
    /// chain may fill a kind when any source may.
    func testASourceThatCannotFillAKindIsSkipped() async throws {
        let catalog = Scripted(.fill("cat", pod: 0), fills: [.overlay])
        let vast = Scripted(.fill("vast", pod: 0))
        let (fallback, _) = chain(catalog, vast)
        let pauseAd = try await fallback.ad(for: request(.pauseAd))
        XCTAssertEqual(pauseAd?.id, "vast-0")
        XCTAssertEqual(catalog.asked.withLock(\.count), 0)
        XCTAssertTrue(fallback.mayFill(.pauseAd, content: ContentInfo(id: "e1"), at: 0))
        let (neither, _) = chain(Scripted(.none, fills: [.overlay]), Scripted(.none, fills: [.overlay]))
        XCTAssertFalse(neither.mayFill(.postroll, content: ContentInfo(id: "e1"), at: 0))
    }

    /// The rest of a pod comes from the source that served its first ad; a prefetch goes to the
    /// first source that may fill.
    func testThePodContinuesFromItsSourceAndAPrefetchGoesToTheFirst() async throws {
        let first = Scripted(.none), second = Scripted(.fill("pod", pod: 2))
        let (fallback, _) = chain(first, second)
        let ads = [try await fallback.ad(for: request(pod: 0)), try await fallback.ad(for: request(pod: 1)),
                   try await fallback.ad(for: request(pod: 2))]
        XCTAssertEqual(ads.map { $0?.id }, ["pod-0", "pod-1", "pod-2"])
        XCTAssertEqual(ads.map { $0?.podRemaining }, [2, 1, 0])
        XCTAssertEqual(first.asked.withLock(\.count), 1, "asked for the first ad only")
        fallback.prefetch(request(.pauseAd))
        XCTAssertEqual(first.prefetched.withLock(\.count), 1)
        XCTAssertEqual(second.prefetched.withLock(\.count), 0)
    }
}
