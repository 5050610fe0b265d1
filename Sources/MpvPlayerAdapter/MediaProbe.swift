import CFFmpeg
import Foundation

/// A media file's length, read by FFmpeg's libavformat (the container's header, then the
/// streams when the header does not say): what `adplayerd schedule-check` plays an item for.
/// Blocking (the disk): never on the player's loop.
public enum MediaProbe {
    /// Seconds, or nil when the file cannot be read or has no length (an image: mpv shows it
    /// for its `seconds`).
    public static func duration(_ path: String) -> Double? {
        var context: UnsafeMutablePointer<AVFormatContext>?
        guard avformat_open_input(&context, path, nil, nil) == 0, let opened = context else { return nil }
        defer { avformat_close_input(&context) }
        if opened.pointee.duration <= 0 { _ = avformat_find_stream_info(opened, nil) }
        let duration = opened.pointee.duration
        guard duration > 0, duration != Int64(bitPattern: 0x8000_0000_0000_0000) else { return nil }
        return Double(duration) / Double(AV_TIME_BASE)
    }
}
