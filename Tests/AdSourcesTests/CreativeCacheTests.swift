import AdRuntime
import AdSources
import AdTestSupport
import Foundation
import XCTest

/// The creative cache on a real disk, fed by the loopback VAST server's media: private,
/// content-addressed, bounded, kept across restarts, and never handing out a damaged file.
final class CreativeCacheTests: XCTestCase {
    private var server: FixtureServer!
    private var folder: String!
    private let http = BoundedHTTP(threads: 2)
    private let limits = HTTPLimits(maxBytes: 64 << 20, deadline: 20)

    override func setUpWithError() throws {
        _ = try Media.path("overlay.png")
        server = try FixtureServer(script: "vast_server.py")
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("cache-\(UUID().uuidString.prefix(8))").path
    }

    override func tearDownWithError() throws {
        server.stop()
        try? FileManager.default.removeItem(atPath: folder)
    }

    private func media(_ name: String) -> String { "\(server.base)/media/\(name)" }

    private func bytes(_ name: String) throws -> Data { try Data(contentsOf: repositoryRoot.appendingPathComponent("media/\(name)")) }

    /// The folder is made 0700; a file is named by the SHA-256 of its bytes (as sha256sum says).
    func testAFileIsNamedByItsContentInAPrivateFolder() async throws {
        let cache = try CreativeCache(folder: folder)
        let path = try await cache.fetch(media("overlay.png"), with: http, limits: limits)
        var info = stat()
        XCTAssertEqual(stat(folder, &info), 0)
        XCTAssertEqual(info.st_mode & 0o777, 0o700)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), try bytes("overlay.png"))
        let (_, sum) = try runToEnd("/usr/bin/sha256sum", [path])
        XCTAssertEqual(URL(fileURLWithPath: path).lastPathComponent, String(sum.prefix(64)))
        XCTAssertEqual(cache.totalBytes, try bytes("overlay.png").count)
    }

    /// A folder that is a symlink, or someone else's, is refused (the old /tmp cache could be
    /// made by another user first).
    func testAFolderThatIsASymlinkOrSomeoneElsesIsRefused() throws {
        guard getuid() == 0 else { throw XCTSkip("giving a folder to another user (chown) needs root (CI runs as root)") }
        let target = folder + "-target"
        try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: target) }
        XCTAssertEqual(symlink(target, folder), 0)
        XCTAssertThrowsError(try CreativeCache(folder: folder)) { XCTAssertTrue("\($0)".contains("not a directory"), "\($0)") }
        unlink(folder)
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        XCTAssertEqual(chown(folder, 65534, 65534), 0, "the tests run as root")
        XCTAssertThrowsError(try CreativeCache(folder: folder)) { XCTAssertTrue("\($0)".contains("not to this user"), "\($0)") }
    }

    /// A file damaged on disk is never handed out: it is deleted and fetched again.
    func testADamagedFileIsFetchedAgainNeverUsed() async throws {
        let cache = try CreativeCache(folder: folder)
        let path = try await cache.fetch(media("pause.png"), with: http, limits: limits)
        let handle = try XCTUnwrap(FileHandle(forUpdatingAtPath: path))
        try handle.seek(toOffset: 100)
        try handle.write(contentsOf: Data(repeating: 0xFF, count: 16))
        try handle.close()
        XCTAssertNil(cache.file(for: media("pause.png")), "damaged: not used")
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
        let again = try await cache.fetch(media("pause.png"), with: http, limits: limits)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: again)), try bytes("pause.png"))
        XCTAssertEqual(try server.requests()["/media/pause.png"], 2)
    }

    /// Past the byte bound the least recently used files go; what is kept survives a restart,
    /// and a temporary file a crash left is removed.
    func testTheBoundEvictsTheLeastRecentlyUsedAndTheRestSurvivesARestart() async throws {
        let sizes = try ["overlay.png", "pause.png", "overlay.jpg"].map { try bytes($0).count }
        // Room for the two largest, not for all three.
        let bound = sizes.sorted().suffix(2).reduce(0, +)
        var cache = try CreativeCache(folder: folder, maxBytes: bound)
        _ = try await cache.fetch(media("overlay.png"), with: http, limits: limits)
        _ = try await cache.fetch(media("pause.png"), with: http, limits: limits)
        XCTAssertNotNil(cache.file(for: media("overlay.png")), "used again: pause.png is now the least recently used")
        _ = try await cache.fetch(media("overlay.jpg"), with: http, limits: limits)
        XCTAssertLessThanOrEqual(cache.totalBytes, bound)
        XCTAssertNil(cache.file(for: media("pause.png")), "evicted")
        XCTAssertNotNil(cache.file(for: media("overlay.jpg")))
        XCTAssertTrue(FileManager.default.createFile(atPath: folder + "/objects/.tmp-crash", contents: Data("half".utf8)))
        cache = try CreativeCache(folder: folder, maxBytes: bound)
        XCTAssertFalse(FileManager.default.fileExists(atPath: folder + "/objects/.tmp-crash"))
        let requests = try server.requests()
        XCTAssertNotNil(cache.file(for: media("overlay.jpg")), "kept across the restart")
        _ = try await cache.fetch(media("overlay.jpg"), with: http, limits: limits)
        XCTAssertEqual(try server.requests(), requests, "not fetched again")
    }

    /// A file larger than the bound of a download is refused, and nothing of it stays.
    func testADownloadPastItsLimitLeavesNothing() async throws {
        let cache = try CreativeCache(folder: folder)
        do {
            _ = try await cache.fetch(media("postroll.mp4"), with: http, limits: HTTPLimits(maxBytes: 1000, deadline: 20))
            XCTFail("over the limit")
        } catch let error as FetchError {
            XCTAssertEqual(error.kind, .tooLarge)
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: folder + "/objects"), [])
    }

    /// Issue 23 item 5: a full disk does not keep an image ad off the screen. The cache's disk
    /// (a real tmpfs, full) refuses the creative: it is held in memory (a private folder on
    /// /dev/shm), within its bound, said once; once there is space it moves to the disk at its
    /// next use, said once. Without `inMemory` (a post-roll video) the refusal is the error.
    func testOnAFullDiskAnImageIsHeldInMemoryBoundedThenMovedToTheDisk() async throws {
        let disk: FullDisk
        do { disk = try FullDisk(kib: 256, folders: ["creatives/objects", "creatives/urls"]) } catch let why as FullDisk.Unavailable {
            throw XCTSkip("\(why)")
        }
        defer { disk.unmount() }
        let said = Locked<[String]>([])
        let sizes = try ["overlay.png", "pause.png", "overlay.jpg"].map { try bytes($0).count }
        let bound = sizes.sorted().suffix(2).reduce(0, +)   // room for two of the three in memory
        let cache = try CreativeCache(folder: disk.path + "/creatives", memoryMaxBytes: bound, retryInterval: 0,
                                      onProblem: { line in said.withLock { $0.append(line) } })
        defer { cache.releaseMemory() }

        do {
            _ = try await cache.fetch(media("postroll.mp4"), with: http, limits: limits)
            XCTFail("the disk is full and a video is not held in memory")
        } catch let error as FetchError {
            guard case .cannotStore(_, let code) = error.kind else { return XCTFail("\(error)") }
            XCTAssertEqual(code, ENOSPC, "\(error)")
        }

        var held: [String: String] = [:]
        for name in ["overlay.png", "pause.png", "overlay.jpg"] {
            let path = try await cache.fetch(media(name), with: http, limits: limits, inMemory: true)
            XCTAssertTrue(path.hasPrefix("/dev/shm/adplayerd-creatives-\(getpid())-"), path)
            XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), try bytes(name), "the creative's bytes, whole")
            held[name] = path
            XCTAssertLessThanOrEqual(cache.memoryBytes, bound)
        }
        XCTAssertEqual(cache.totalBytes, 0, "nothing on the full disk")
        XCTAssertFalse(FileManager.default.fileExists(atPath: held["overlay.png"]!), "the least recently used left memory")
        XCTAssertEqual(cache.memoryBytes, sizes[1] + sizes[2])
        XCTAssertEqual(said.withLock { $0 }.count, 1, "said once: \(said.withLock { $0 })")
        XCTAssertTrue(said.withLock { $0 }.first?.contains("No space left on device") == true, "\(said.withLock { $0 })")
        // Still full: the next use hands out the memory copy.
        XCTAssertEqual(cache.file(for: media("pause.png")), held["pause.png"])

        disk.free()
        let onDisk = try XCTUnwrap(cache.file(for: media("pause.png")))
        XCTAssertTrue(onDisk.hasPrefix(disk.path + "/creatives/objects/"), onDisk)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: onDisk)), try bytes("pause.png"))
        XCTAssertFalse(FileManager.default.fileExists(atPath: held["pause.png"]!), "gone from memory")
        XCTAssertEqual(cache.memoryBytes, sizes[2])
        XCTAssertEqual(said.withLock { $0 }.count, 2, "\(said.withLock { $0 })")
        XCTAssertTrue(said.withLock { $0 }.last?.contains("takes them again") == true, "\(said.withLock { $0 })")
        let requests = try server.requests()
        let jpg = try await cache.fetch(media("overlay.jpg"), with: http, limits: limits, inMemory: true)
        XCTAssertTrue(jpg.hasPrefix(disk.path + "/creatives/objects/"), "moved from memory, not fetched: \(jpg)")
        XCTAssertEqual(try server.requests(), requests)
        XCTAssertEqual(cache.memoryBytes, 0)
        cache.releaseMemory()
        XCTAssertFalse(FileManager.default.fileExists(atPath: (held["overlay.jpg"]! as NSString).deletingLastPathComponent))
    }
}

/// The offline store of a VAST tag (issue 39): what it keeps is on disk when `remember`
/// returns, and the last list made is the one a restart reads — with ads of two kinds kept at
/// once from two threads, as an overlay and a pause ad resolved together are.
final class OfflineAdsTests: XCTestCase {
    func testAdsKeptAtOnceAreAllThereAfterARestart() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("offline-\(UUID().uuidString.prefix(8))").path
        defer { try? FileManager.default.removeItem(atPath: folder) }
        let cache = try CreativeCache(folder: folder)
        let expires = Date().timeIntervalSince1970 + 3600
        for round in 0..<200 {
            let tag = "https://ads.example/tag-\(round)"
            let store = OfflineAds(cache: cache, tag: tag)
            let kinds = ["overlay", "pause"]
            DispatchQueue.concurrentPerform(iterations: kinds.count) { index in
                store.remember(OfflineAds.Entry(kind: kinds[index], id: "ad-\(kinds[index])", media: "https://ads.example/\(kinds[index]).png",
                                                expires: expires))
            }
            let restarted = OfflineAds(cache: cache, tag: tag)
            XCTAssertEqual(Set(restarted.kept().map(\.kind)), Set(kinds), "round \(round): both kept across a restart")
            if Set(restarted.kept().map(\.kind)) != Set(kinds) { break }
        }
    }
}
