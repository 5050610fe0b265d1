import AdTestSupport
import Foundation
@_spi(Foreign) import MpvPlayerAdapter
import XCTest

/// PNG and JPEG creatives to mpv's BGRA, and every class of bad creative refused with a reason.
final class ImageDecoderTests: XCTestCase {
    func testAPNGDecodesToBGRAAndScales() throws {
        let path = try Media.path("overlay.png")
        let probe = try ImageDecoder.probe(path)
        XCTAssertEqual(probe.format, .png)
        XCTAssertEqual(probe.width, 200)
        XCTAssertEqual(probe.height, 100)
        let image = try ImageDecoder.decode(path)
        XCTAssertEqual(image.width, 200)
        XCTAssertEqual(image.pixels.count, 200 * 100 * 4)
        // lavfi made the PNG through YUV: within a few levels of pure magenta.
        XCTAssertTrue(near(image.rgba(x: 100, y: 50), (255, 0, 255, 255)), "\(image.rgba(x: 100, y: 50))")
        let first = Array(image.pixels[0..<4])
        XCTAssertTrue(first[0] > 250 && first[1] < 5 && first[2] > 250 && first[3] == 255, "memory order is B G R A: \(first)")
        let scaled = try ImageDecoder.decode(path, width: 50, height: 25)
        XCTAssertEqual(scaled.width, 50)
        XCTAssertEqual(scaled.height, 25)
        XCTAssertTrue(near(scaled.rgba(x: 25, y: 12), (255, 0, 255, 255)))
    }

    /// A PNG whose header lies — IHDR says 100×100, a bad CRC, only 50 rows of data — or that
    /// is merely short of rows is refused, never decoded into half an image (FFmpeg would
    /// otherwise conceal the damage and hand back what it has).
    func testAPNGThatLiesOrIsShortOfRowsIsRefused() throws {
        for name in ["lying-crc.png", "missing-rows.png"] {
            let path = repositoryRoot.appendingPathComponent("Tests/Fixtures/images/\(name)").path
            XCTAssertEqual(try ImageDecoder.probe(path).width, 100, "the header claims 100×100")
            XCTAssertThrowsError(try ImageDecoder.decode(path), name) { error in
                XCTAssertTrue("\(error)".contains("corrupt") || "\(error)".contains("truncated"), "\(name): \(error)")
            }
        }
    }

    func testAJPEGDecodes() throws {
        let image = try ImageDecoder.decode(Media.path("overlay.jpg"))
        XCTAssertEqual(ImageDecoder.probeFormat(try Media.path("overlay.jpg")), .jpeg)
        XCTAssertEqual(image.width, 160)
        XCTAssertEqual(image.height, 90)
        let (r, g, b, a) = image.rgba(x: 80, y: 45)
        XCTAssertTrue(r < 20 && g > 235 && b < 20 && a == 255, "\((r, g, b, a))")
    }

    /// A valid JPEG with 1.3 MB of metadata (APP1 segments) before its frame header decodes:
    /// the segments are walked to the frame, however far it is (was: refused as "header ends
    /// before its frame size" after 256 KiB).
    func testAJPEGWithMegabytesOfMetadataBeforeItsFrameDecodes() throws {
        let plain = try ImageDecoder.readFile(try Media.path("overlay.jpg"))
        var padded: [UInt8] = [0xFF, 0xD8]
        let segment = [UInt8](repeating: 0x41, count: 65_533)
        for _ in 0..<20 { padded += [0xFF, 0xE1, 0xFF, 0xFF] + segment }   // 20 × 64 KiB of APP1
        padded += plain.dropFirst(2)
        XCTAssertGreaterThan(padded.count, 1_300_000)
        let image = try ImageDecoder.decode(padded, path: "metadata.jpg")
        XCTAssertEqual(image.width, 160)
        XCTAssertEqual(image.height, 90)
        // A JPEG that has no frame header at all says that.
        XCTAssertThrowsError(try ImageDecoder.decode([0xFF, 0xD8] + [0xFF, 0xE1, 0x00, 0x10] + [UInt8](repeating: 0, count: 14) + [0xFF, 0xD9, 0, 0, 0, 0, 0, 0, 0, 0],
                                                     path: "frameless.jpg")) { error in
            XCTAssertTrue("\(error)".contains("no frame header"), "\(error)")
        }
    }

    func testAlphaIsPremultiplied() throws {
        let image = try ImageDecoder.decode(Media.path("translucent.png"))
        let (r, g, b, a) = image.rgba(x: 10, y: 10)
        XCTAssertEqual(a, 128)
        XCTAssertEqual(Int(r), 128, accuracy: 1)
        XCTAssertEqual(g, 0)
        XCTAssertEqual(b, 0)
    }

    func testBadCreativesAreRefusedWithAReason() throws {
        let cases: [(String, String)] = [
            ("empty.png", "empty"),
            ("not-an-image.png", "not a PNG or JPEG"),
            ("huge-header.png", "30000×30000"),
            ("truncated.png", "corrupt"),
            ("corrupt.png", "corrupt"),
            ("episode-1.mp4", "not a PNG or JPEG"),
            ("no-such-file.png", "does not exist"),
        ]
        for (name, fragment) in cases {
            let path = repositoryRoot.appendingPathComponent("media/\(name)").path
            XCTAssertThrowsError(try ImageDecoder.decode(path), name) { error in
                let decodeError = error as? ImageDecodeError
                XCTAssertEqual(decodeError?.path, path)
                XCTAssertTrue(decodeError?.reason.contains(fragment) == true, "\(name): \(error)")
            }
        }
    }
}

func near(_ a: (UInt8, UInt8, UInt8, UInt8), _ b: (UInt8, UInt8, UInt8, UInt8), tolerance: Int = 4) -> Bool {
    abs(Int(a.0) - Int(b.0)) <= tolerance && abs(Int(a.1) - Int(b.1)) <= tolerance
        && abs(Int(a.2) - Int(b.2)) <= tolerance && abs(Int(a.3) - Int(b.3)) <= tolerance
}

extension ImageDecoder {
    static func probeFormat(_ path: String) -> Format? { try? probe(path).format }
}
