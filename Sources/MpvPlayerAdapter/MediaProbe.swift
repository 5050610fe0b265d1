import CFFmpeg
import Foundation

/// A media file's length as mpv plays it, read by FFmpeg's libavformat (the container's
/// header, then the streams when the header does not say): what the virtual player plays a file
/// for (`simulate`, `schedule-check`) and what the schedule measures an item by. mpv ends a
/// video at its last frame's time — one frame before the container's duration (a 4 s file at
/// 25 fps ends at 3.96 s; measured against a daemon under libfaketime, ScheduleDaemonTests) — so
/// a file with video is that much shorter; without that frame a forecast drifted about 0.1 s an
/// item with its pre- and post-roll. Blocking (the disk): never on the player's loop.
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
        let seconds = Double(duration) / Double(AV_TIME_BASE)
        return seconds - lastFrame(opened, within: seconds)
    }

    /// One frame of the first video stream that is not a cover picture (0 without one).
    private static func lastFrame(_ context: UnsafeMutablePointer<AVFormatContext>, within seconds: Double) -> Double {
        for index in 0..<Int(context.pointee.nb_streams) {
            guard let stream = context.pointee.streams[index], let parameters = stream.pointee.codecpar,
                  parameters.pointee.codec_type == AVMEDIA_TYPE_VIDEO,
                  stream.pointee.disposition & AV_DISPOSITION_ATTACHED_PIC == 0 else { continue }
            let rate = stream.pointee.avg_frame_rate
            guard rate.num > 0, rate.den > 0 else { return 0 }
            let frame = Double(rate.den) / Double(rate.num)
            return frame < seconds / 2 ? frame : 0
        }
        return 0
    }
}
