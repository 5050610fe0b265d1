import Foundation

/// Media at a chosen loudness for R28's tests, made by FFmpeg's lavfi sources, and loudness
/// read back by FFmpeg's own EBU R128 meter (`ebur128=peak=true`): the reference the product's
/// meter (libebur128) and its output are held to.
public enum LoudnessFixture {
    public struct Reading: Sendable {
        public var integrated: Double
        public var truePeak: Double
    }

    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// A video (160×120, MPEG-4 Part 2) with a stereo sine of `frequency` Hz at `lufs` LUFS
    /// integrated, PCM in Matroska (no lossy codec between the level made and the level read):
    /// made once at a known gain, measured, and made again corrected.
    @discardableResult
    public static func make(_ path: String, lufs: Double, seconds: Double, frequency: Int, audio: Bool = true) throws -> String {
        func write(gain: Double) throws {
            var arguments = ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=size=160x120:rate=25:duration=\(seconds)"]
            if audio {
                arguments += ["-f", "lavfi", "-i", "sine=frequency=\(frequency):sample_rate=48000:duration=\(seconds)",
                              "-af", String(format: "volume=%.3fdB", gain), "-ac", "2", "-c:a", "pcm_s16le"]
            }
            arguments += ["-c:v", "mpeg4", "-shortest", path]
            let (status, output) = try runToEnd("/usr/bin/ffmpeg", arguments)
            guard status == 0 else { throw Failure(description: "ffmpeg could not make \(path): \(output.suffix(600))") }
        }
        try write(gain: -20)
        guard audio else { return path }
        let first = try read(path)
        try write(gain: -20 + lufs - first.integrated)
        return path
    }

    /// FFmpeg's reading of the audio of `path` between `from` and `to` seconds (all of it
    /// without them).
    public static func read(_ path: String, from: Double? = nil, to: Double? = nil) throws -> Reading {
        var filter = "ebur128=peak=true"
        if let from { filter = "atrim=start=\(from)" + (to.map { ":end=\($0)" } ?? "") + "," + filter }
        let (status, output) = try runToEnd("/usr/bin/ffmpeg", ["-hide_banner", "-nostats", "-i", path, "-vn", "-af", filter, "-f", "null", "-"])
        guard status == 0 else { throw Failure(description: "ffmpeg could not measure \(path): \(output.suffix(600))") }
        let summary = output.components(separatedBy: "Summary:").last ?? ""
        func value(_ label: String) -> Double? {
            summary.components(separatedBy: "\n").first { $0.trimmingCharacters(in: .whitespaces).hasPrefix(label) }
                .flatMap { line in line.split(separator: " ").compactMap { Double($0) }.first }
        }
        guard let integrated = value("I:"), let peak = value("Peak:") else {
            throw Failure(description: "no EBU R128 summary for \(path): \(output.suffix(800))")
        }
        return Reading(integrated: integrated, truePeak: peak)
    }
}
