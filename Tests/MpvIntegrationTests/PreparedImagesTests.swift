@testable import AdRuntime
import AdTestSupport
import Foundation
@testable import MpvPlayerAdapter
import XCTest

/// The prepared-image cache (issue 23, item 9): the same creative asked for again is not
/// decoded again; a file replaced in place is; the cache stays within its bounds.
final class PreparedImagesTests: XCTestCase {
    private func image(_ side: Int) -> PreparedImage {
        let pixels = BGRAImage(width: side, height: side, pixels: [UInt8](repeating: 7, count: side * side * 4))
        return PreparedImage(path: "/x.png", source: pixels,
                             bitmap: RenderedBitmap(output: (side, side), origin: (0, 0), image: PixelBuffer(pixels)))
    }

    func testTheSameFileKindAndOutputAreOneEntryAndAReplacedFileIsAnother() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("prepared-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent("ad.png").path
        try FileManager.default.copyItem(atPath: try Media.path("overlay.png"), toPath: path)
        let cache = PreparedImages()
        let key = try XCTUnwrap(PreparedImages.key(path, kind: .overlay, output: (1280, 720)))
        XCTAssertNil(cache[key])
        cache.keep(image(8), as: key)
        XCTAssertNotNil(cache[PreparedImages.key(path, kind: .overlay, output: (1280, 720))!], "asked again: kept")
        XCTAssertNil(cache[PreparedImages.key(path, kind: .pauseAd, output: (1280, 720))!], "another kind: another image")
        XCTAssertNil(cache[PreparedImages.key(path, kind: .overlay, output: (640, 360))!], "another output: another image")
        // Replaced in place (a new file under the same name): prepared again.
        try FileManager.default.removeItem(atPath: path)
        try FileManager.default.copyItem(atPath: try Media.path("pause.png"), toPath: path)
        XCTAssertNil(cache[PreparedImages.key(path, kind: .overlay, output: (1280, 720))!])
        XCTAssertNil(PreparedImages.key(folder.path, kind: .overlay, output: (1280, 720)), "a folder is not an image")
        XCTAssertNil(PreparedImages.key(folder.appendingPathComponent("missing.png").path, kind: .overlay, output: (1, 1)))
    }

    func testTheCacheKeepsItsBounds() {
        let cache = PreparedImages()
        func key(_ n: Int) -> PreparedImages.Key {
            PreparedImages.Key(path: "/a\(n).png", kind: .overlay, layout: nil, width: 1, height: 1, device: 1, inode: UInt64(n), size: 1, modified: 0,
                               modifiedNanoseconds: 0)
        }
        for n in 0..<40 { cache.keep(image(8), as: key(n)) }
        XCTAssertEqual(cache.count, PreparedImages.maxImages)
        XCTAssertNil(cache[key(0)], "the oldest went first")
        XCTAssertNotNil(cache[key(39)])
        // 1200 × 1200 BGRA twice (source and bitmap): 11 MiB an image; 48 MiB hold 4 of them.
        for n in 100..<110 { cache.keep(image(1200), as: key(n)) }
        XCTAssertLessThanOrEqual(cache.count, 4)
        cache.keep(image(2100), as: key(200))   // 33 MiB: over 16 MiB, not kept
        XCTAssertNil(cache[key(200)])
    }
}

/// R26, bounded like every image: a squeezeback's creative of any aspect ratio becomes one
/// bitmap the size of the canvas (cropped before it is scaled), its window transparent.
final class SqueezebackBitmapTests: XCTestCase {
    func testR26ACreativeOfAnyAspectIsCroppedToTheCanvasBeforeScaling() throws {
        for (width, height) in [(4000, 1), (1, 4000), (1280, 720), (300, 200)] {
            let source = BGRAImage(width: width, height: height, pixels: [UInt8](repeating: 255, count: width * height * 4))
            let bitmap = try SqueezebackDrawing.bitmap(source, .standard, canvas: (640, 360), path: "x.png")
            XCTAssertEqual(bitmap.width, 640, "\(width)×\(height)")
            XCTAssertEqual(bitmap.height, 360, "\(width)×\(height)")
            XCTAssertEqual(bitmap.pixels.count, 640 * 360 * 4)
            XCTAssertEqual(bitmap.pixels[(10 * 640 + 10) * 4 + 3], 0, "the content's window is transparent")
            XCTAssertEqual(bitmap.pixels[(350 * 640 + 630) * 4 + 3], 255, "the L is the creative")
        }
    }
}
