import AdRuntime
@testable import AdSources
import AdTestSupport
import Foundation
import Synchronization
import XCTest

/// R28's measurements: libebur128 over FFmpeg's decoding agrees with FFmpeg's own EBU R128
/// meter; the book measures a file once, keeps it across a restart, measures it again when the
/// file changes, and refuses what is not media without losing anything.
final class LoudnessMeterTests: XCTestCase {
    private var folder: URL!

    override func setUpWithError() throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("lufs-\(UUID().uuidString.prefix(8))")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(at: folder) }

    private func path(_ name: String) -> String { folder.appendingPathComponent(name).path }

    /// The meter against FFmpeg's `ebur128` on the same files: integrated loudness within
    /// 0.1 LU, true peak within 0.3 dB, from quiet to loud, for PCM and for AAC in MP4 (a
    /// decoder's delay and padding); a file without audio is silent; a paced measurement (the
    /// background's) gives the same answer.
    func testR28TheMeterAgreesWithFFmpegsEBUR128() throws {
        for (name, lufs, codec) in [("quiet.mkv", -38.0, "pcm"), ("episode.mkv", -31.0, "pcm"), ("loud.mkv", -14.0, "pcm")] {
            let file = try LoudnessFixture.make(path(name), lufs: lufs, seconds: 3, frequency: 440)
            let reference = try LoudnessFixture.read(file)
            let measured = try LoudnessMeter.measure(file)
            XCTAssertEqual(try XCTUnwrap(measured.integrated), reference.integrated, accuracy: 0.1, "\(name) (\(codec))")
            XCTAssertEqual(try XCTUnwrap(measured.truePeak), reference.truePeak, accuracy: 0.3, name)
        }
        let aac = path("aac.mp4")
        let (status, output) = try runToEnd("/usr/bin/ffmpeg", ["-v", "error", "-y", "-i", path("episode.mkv"), "-c:v", "copy", "-c:a", "aac", "-b:a", "160k", aac])
        XCTAssertEqual(status, 0, output)
        XCTAssertEqual(try XCTUnwrap(LoudnessMeter.measure(aac).integrated), try LoudnessFixture.read(aac).integrated, accuracy: 0.1, "AAC")
        XCTAssertEqual(try LoudnessMeter.measure(path("episode.mkv"), pace: 0.3), try LoudnessMeter.measure(path("episode.mkv")), "paced, the same")
        try LoudnessFixture.make(path("mute.mkv"), lufs: 0, seconds: 1, frequency: 0, audio: false)
        XCTAssertEqual(try LoudnessMeter.measure(path("mute.mkv")), .silent, "no audio stream: no sound to match")
    }

    /// Not media (text, an empty file, a truncated one, a folder, nothing there): a clear
    /// error naming the file, never a trap; the book says it once and answers nil.
    func testR28WhatIsNotMediaIsRefusedClearly() throws {
        try Data("not a video".utf8).write(to: URL(fileURLWithPath: path("text.mp4")))
        try Data().write(to: URL(fileURLWithPath: path("empty.mp4")))
        let whole = try Data(contentsOf: URL(fileURLWithPath: try LoudnessFixture.make(path("whole.mkv"), lufs: -20, seconds: 2, frequency: 440)))
        try whole.prefix(whole.count / 3).write(to: URL(fileURLWithPath: path("truncated.mkv")))
        for name in ["text.mp4", "empty.mp4", "missing.mp4"] {
            XCTAssertThrowsError(try LoudnessMeter.measure(path(name)), name) { error in
                XCTAssertTrue("\(error)".contains(name) && "\(error)".contains("loudness not measured"), "\(error)")
            }
        }
        // A file cut short: what is there is measured (as mpv plays what is there).
        XCTAssertNotNil(try LoudnessMeter.measure(path("truncated.mkv")).integrated)
        let notes = Mutex<[String]>([])
        let book = LoudnessBook(path: nil, note: { note in notes.withLock { $0.append(note) } })
        XCTAssertNil(book.known(path("text.mp4")))
        book.settle()
        XCTAssertNil(book.known(path("text.mp4")))
        book.refresh(path("text.mp4"))
        book.settle()
        XCTAssertEqual(notes.withLock { $0.count }, 1, "said once for the file as it is: \(notes.withLock { $0 })")
        XCTAssertEqual(book.counts.failed, 1)
        XCTAssertNil(book.known(folder.path), "a folder is not measured")
    }

    /// The book: an episode measured once (in the background, asked on the loop by `known`),
    /// kept in its file and known at the next start without measuring; the file replaced under
    /// the same name (a new master) is measured again at its next `refresh`; a damaged book is
    /// measured again, never trusted.
    func testR28TheBookMeasuresAFileOnceAndAgainWhenItChanges() async throws {
        let episode = try LoudnessFixture.make(path("episode.mkv"), lufs: -31, seconds: 2, frequency: 330)
        let kept = path("loudness.tsv")
        do {
            let book = LoudnessBook(path: kept)
            XCTAssertNil(book.known(episode), "not known yet: the loop does not wait")
            book.settle()
            XCTAssertEqual(try XCTUnwrap(book.known(episode)?.integrated), -31, accuracy: 0.2)
            XCTAssertNil(book.known(episode)?.truePeak, "an episode: its integrated loudness only")
            XCTAssertEqual(book.counts.measured, 1, "measured once")
            // Played as a creative, its true peak is needed (it limits the gain): measured once more.
            let creative = await book.measure(episode)
            XCTAssertNotNil(creative?.truePeak)
            XCTAssertEqual(try XCTUnwrap(creative?.integrated), -31, accuracy: 0.2)
            _ = await book.measure(episode)
            XCTAssertEqual(book.counts.measured, 2)
        }
        do {
            let book = LoudnessBook(path: kept)
            XCTAssertEqual(try XCTUnwrap(book.known(episode)?.integrated), -31, accuracy: 0.2, "known at the next start")
            book.settle()
            XCTAssertEqual(book.counts.measured, 0, "and not measured again")
            // A new master under the same name.
            try LoudnessFixture.make(episode, lufs: -20, seconds: 2, frequency: 330)
            book.refresh(episode)
            book.settle()
            XCTAssertEqual(try XCTUnwrap(book.known(episode)?.integrated), -20, accuracy: 0.2, "measured again when the file changed")
            XCTAssertEqual(book.counts.measured, 1)
        }
        let text = try String(contentsOfFile: kept, encoding: .utf8)
        XCTAssertTrue(text.contains("\t-20.") && text.hasSuffix("\t\(episode)\n"), text)
        try Data((text.replacingOccurrences(of: "\t-20.", with: "\tloud") + "garbage\tline\n").utf8).write(to: URL(fileURLWithPath: kept))
        let book = LoudnessBook(path: kept)
        XCTAssertNil(book.known(episode), "a line that does not parse is not trusted")
        book.settle()
        XCTAssertEqual(try XCTUnwrap(book.known(episode)?.integrated), -20, accuracy: 0.2)
    }

    /// The creative cache touches an object's times at every use (its LRU order); an object is
    /// named by the SHA-256 of its bytes, so it is the same file: measured once, not at every
    /// ad (a simulated day measured one post-roll 400 times before).
    func testR28ACachedCreativeIsMeasuredOnceWhateverItsTimes() async throws {
        try FileManager.default.createDirectory(atPath: path("objects"), withIntermediateDirectories: true)
        let object = path("objects/" + String(repeating: "ab", count: 32))
        try LoudnessFixture.make(object + ".mkv", lufs: -18, seconds: 1, frequency: 440)
        try FileManager.default.moveItem(atPath: object + ".mkv", toPath: object)
        let book = LoudnessBook(path: nil)
        for _ in 0..<3 {
            let measured = await book.measure(object)
            XCTAssertEqual(try XCTUnwrap(measured?.integrated), -18, accuracy: 0.3)
            let now = (1 << 30) - 1   // UTIME_NOW, a macro Swift does not import
            var times = [timespec(tv_sec: 0, tv_nsec: now), timespec(tv_sec: 0, tv_nsec: now)]
            XCTAssertEqual(utimensat(AT_FDCWD, object, &times, 0), 0)
        }
        XCTAssertEqual(book.counts.measured, 1)
        XCTAssertTrue(LoudnessBook.isContentAddressed(object))
        XCTAssertFalse(LoudnessBook.isContentAddressed(path("episode.mkv")))
        XCTAssertFalse(LoudnessBook.isContentAddressed(path("objects/" + String(repeating: "AB", count: 32))), "lowercase hex only")
    }
}
