import AdRuntime
import Foundation
import XCTest

/// The one file check compares paths as the file system names them: bytes.
final class SafeFileTests: XCTestCase {
    /// A sibling folder `lib-café` spelled in NFD is not the library `lib-café` in NFC (Swift's
    /// strings call them equal); a file inside whose name starts with a combining mark is inside.
    func testALibraryIsComparedByteForByte() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("safefile-\(UUID().uuidString.prefix(8))").path
        let nfc = root + "/lib-caf\u{E9}"
        let nfd = root + "/lib-cafe\u{301}"
        XCTAssertEqual(nfc, nfd, "Swift calls them equal")
        XCTAssertFalse(nfc.utf8.elementsEqual(nfd.utf8), "the file system does not")
        defer { try? FileManager.default.removeItem(atPath: root) }
        for folder in [nfc, nfd] {
            // Made by bytes: Foundation might normalise a String path.
            XCTAssertEqual(mkdir(root, 0o755) == 0 || errno == EEXIST, true)
            XCTAssertEqual(folder.withCString { mkdir($0, 0o755) }, 0, "mkdir \(folder)")
        }
        let outside = nfd + "/secret.mp4"
        let inside = nfc + "/\u{301}mark.mp4"
        for file in [outside, inside] {
            let fd = file.withCString { open($0, O_CREAT | O_WRONLY, 0o644) }
            XCTAssertGreaterThanOrEqual(fd, 0, file)
            close(fd)
        }
        XCTAssertThrowsError(try SafeFile.check(outside, inside: nfc)) { error in
            XCTAssertEqual((error as? FileRefusal)?.kind, .outside, "\(error)")
        }
        XCTAssertEqual(try SafeFile.check(inside, inside: nfc).size, 0, "a name that starts with a combining mark is inside")
        XCTAssertTrue(SafeFile.isInside(nfc, nfc, orEqual: true))
        XCTAssertFalse(SafeFile.isInside(nfd, nfc, orEqual: true))
        XCTAssertFalse(SafeFile.isInside(nfc + "x/a", nfc))
        XCTAssertTrue(SafeFile.isInside("/any/thing", "/"))
    }

    /// Text is bounded in what it costs the renderer: bytes, characters, marks a character,
    /// lines; what passes the catalog is drawn as given, what does not is cut at the surface.
    func testAdTextIsBoundedInBytesMarksAndLines() {
        let stacked = String(repeating: "a" + String(repeating: "\u{301}", count: 49), count: 1000)   // 1,000 characters, 99 KB
        XCTAssertEqual(stacked.count, 1000)
        XCTAssertNotNil(AdText.refusal(stacked))
        XCTAssertNotNil(AdText.refusal(String(repeating: "é", count: 1100)), "2,200 bytes")
        XCTAssertNotNil(AdText.refusal(String(repeating: "line\n", count: 8) + "ninth"))
        XCTAssertNotNil(AdText.refusal("a" + String(repeating: "\u{301}", count: 8)), "eight marks on one letter")
        XCTAssertNil(AdText.refusal("Sponsored: example.com — café 👩‍👩‍👧"))
        XCTAssertNil(AdText.refusal(String(repeating: "x", count: 1000)))
        let cut = AdText.bounded(stacked)
        XCTAssertNil(AdText.refusal(cut))
        XCTAssertLessThanOrEqual(cut.utf8.count, AdText.maxBytes)
        XCTAssertTrue(cut.unicodeScalars.starts(with: ("a" + String(repeating: "\u{301}", count: 7)).unicodeScalars), "each character cut to 8 scalars")
        XCTAssertEqual(AdText.bounded("short"), "short")
    }
}
