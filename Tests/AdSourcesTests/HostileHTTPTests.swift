import AdRuntime
import AdSources
import AdTestSupport
import Foundation
import XCTest

/// The one bounded HTTP reader and the VAST client against a server that misbehaves on
/// purpose (Tests/Fixtures/hostile_http.py). Each case asserts what happens — the kind of
/// error, the VAST code, memory bounded — not only that nothing crashed.
final class HostileHTTPTests: XCTestCase {
    private var server: FixtureServer!
    private let http = BoundedHTTP(threads: 2)

    override func setUpWithError() throws {
        _ = try Media.path("postroll.flv")
        server = try FixtureServer(script: "hostile_http.py")
    }

    override func tearDownWithError() throws { server.stop() }

    private func fetchError(_ path: String, maxBytes: Int = 1024 * 1024, deadline: Double = 3,
                            file: StaticString = #filePath, line: UInt = #line) async -> FetchError.Kind? {
        do {
            let data = try await http.fetch(server.base + path, limits: HTTPLimits(maxBytes: maxBytes, deadline: deadline))
            XCTFail("\(path): \(data.count) bytes and no error", file: file, line: line)
            return nil
        } catch let error as FetchError {
            XCTAssertEqual(error.url, server.base + path, "the error names the URL", file: file, line: line)
            return error.kind
        } catch {
            XCTFail("\(path): \(error)", file: file, line: line)
            return nil
        }
    }

    /// An endless chunked answer and a 50 MB one stop at the limit as bytes arrive: the
    /// process's memory stays bounded (the old reader read 2.6 GB of an endless answer).
    func testEndlessAndHugeAnswersStopAtTheLimitAsTheyArrive() async throws {
        let peakBefore = Self.peakResidentBytes()
        let endless = await fetchError("/endless-chunked", deadline: 20)
        XCTAssertEqual(endless, .tooLarge)
        let announced = await fetchError("/big/\(50 * 1024 * 1024)", deadline: 20)
        XCTAssertEqual(announced, .tooLarge, "refused from its Content-Length")
        let unannounced = await fetchError("/big-chunked/\(50 * 1024 * 1024)", deadline: 20)
        XCTAssertEqual(unannounced, .tooLarge)
        let grown = Self.peakResidentBytes() - peakBefore
        XCTAssertLessThan(grown, 64 * 1024 * 1024, "peak memory grew by \(grown / 1_048_576) MiB")
    }

    /// A server that never answers and one that sends a byte a second are cut at the deadline.
    func testSilentAndTricklingServersAreCutAtTheDeadline() async throws {
        let silent = await fetchError("/never", deadline: 1)
        XCTAssertEqual(silent, .timeout)
        let trickle = await fetchError("/trickle", deadline: 1.5)
        XCTAssertEqual(trickle, .timeout)
    }

    /// Only http(s), also when redirected: no file:// or ftp:// behind a redirect.
    func testRedirectsToOtherSchemesAreRefused() async throws {
        let file = await fetchError("/redirect-file")
        XCTAssertEqual(file, .notHTTP)
        let ftp = await fetchError("/redirect-ftp")
        XCTAssertEqual(ftp, .notHTTP)
        do {
            _ = try await http.fetch("file:///etc/passwd", limits: HTTPLimits(maxBytes: 1000, deadline: 1))
            XCTFail("a file:// URL was fetched")
        } catch let error as FetchError {
            XCTAssertEqual(error.kind, .notHTTP)
        }
    }

    func testCancellingTheTaskAbortsTheTransfer() async throws {
        let http = self.http, url = server.base + "/never"
        let task = Task { try await http.fetch(url, limits: HTTPLimits(maxBytes: 100, deadline: 60)) }
        // The transfer is under way once the server holds the request (no sleep as synchronisation).
        let server = self.server!
        XCTAssertTrue(waitUntil(timeout: 30) { ((try? server.counts()) ?? [:])["/never"] == 1 })
        task.cancel()
        do {
            _ = try await task.value
            XCTFail("no error")
        } catch let error as FetchError {
            XCTAssertEqual(error.kind, .cancelled)
        }
    }

    // MARK: VAST

    private func vast(_ tag: String, _ kind: AdKind = .overlay) async -> Result<AdCreative?, any Error> {
        guard let cache = try? CreativeCache.temporary() else { return .failure(CreativeCache.Problem(description: "no cache")) }
        let client = VASTClient(tag: server.base + tag, cache: cache, fetcher: http)
        defer { try? FileManager.default.removeItem(atPath: cache.folder) }
        do {
            return .success(try await client.ad(for: AdRequest(content: ContentInfo(id: "e"), kind: kind, position: 0)))
        } catch {
            return .failure(error)
        }
    }

    private func expectVAST(_ code: VASTErrorCode, _ tag: String, _ kind: AdKind = .overlay, mentioning fragment: String? = nil,
                            file: StaticString = #filePath, line: UInt = #line) async {
        guard case .failure(let error) = await vast(tag, kind) else { return XCTFail("\(tag): served", file: file, line: line) }
        guard let vastError = error as? VASTError else { return XCTFail("\(tag): \(error)", file: file, line: line) }
        XCTAssertEqual(vastError.code, code, "\(tag): \(vastError)", file: file, line: line)
        if let fragment { XCTAssertTrue(vastError.message.contains(fragment), "\(tag): \(vastError)", file: file, line: line) }
    }

    /// Well-formed or nothing: a document cut short is XML error 100 (it was served as an ad),
    /// a mismatched tag is 100 (it was reported as 303, no ads), and no DTD gets in.
    func testMalformedXMLIsError100() async {
        await expectVAST(.xmlParsing, "/vast/truncated.xml", mentioning: "</VAST>")
        await expectVAST(.xmlParsing, "/vast/mismatched.xml")
        await expectVAST(.xmlParsing, "/vast/billion-laughs.xml", mentioning: "DOCTYPE")
        await expectVAST(.xmlParsing, "/vast/external-entity.xml", mentioning: "DOCTYPE")
    }

    /// A time from an ad server passes `Seconds`: `inf`, NaN, negative, more than a day or not
    /// a time is VAST 101 naming the field — the ad dropped, never a trap or a 0 s overlay.
    func testAbsurdDurationsAreError101NamingTheField() async {
        for name in ["inf", "nan", "negative", "huge", "text"] {
            await expectVAST(.schemaValidation, "/vast/duration-\(name).xml", mentioning: "minSuggestedDuration")
        }
    }

    func testWrapperChainsDeeperThanFiveAreError302() async {
        guard case .success(let five?) = await vast("/wrapper-chain/5") else { return XCTFail("five wrappers are allowed") }
        XCTAssertEqual(five.id, "end")
        await expectVAST(.wrapperLimit, "/wrapper-chain/6")
    }

    /// Real tags name FLV post-rolls: mpv plays FLV, so they are taken.
    func testAnFLVPostrollIsTaken() async throws {
        guard case .success(let creative?) = await vast("/vast/flv.xml", .postroll) else { return XCTFail("refused") }
        XCTAssertEqual(creative.content, .video(location: server.base + "/media/postroll.flv"))
    }

    /// A post-roll whose server never answers fails in seconds (VAST 402) instead of stalling
    /// mpv for its minute-long network timeout between episodes; a missing one is 401.
    func testADeadPostrollServerIsError402AndAMissingFile401() async {
        await expectVAST(.mediaTimeout, "/vast/dead-media.xml", .postroll)
        await expectVAST(.fileNotFound, "/vast/missing-media.xml", .postroll)
    }

    func testAnEndlessImageIs502() async {
        await expectVAST(.nonLinearFetchFailed, "/vast/endless-image.xml", mentioning: "larger than allowed")
    }

    static func peakResidentBytes() -> Int {
        guard let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }) else { return 0 }
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }
}
