import AdRuntime
import CEbur128
import CFFmpeg
#if canImport(Glibc)
import Glibc
#endif

/// Measures a media file's integrated loudness and true peak (ITU-R BS.1770-4, EBU R128;
/// SPEC R28): its first audio stream decoded by FFmpeg's libavformat/libavcodec (those libmpv
/// plays it with), converted to float by libswresample, measured by libebur128 (gated
/// integrated loudness, histogram mode: constant memory however long the file; true peak 4×
/// oversampled). Why libebur128 and not libavfilter's `ebur128` filter (also linked): the
/// library answers in numbers through a typed API; the filter reports through frame metadata
/// strings and its log. Blocking (the disk, seconds of CPU for an episode): never on the
/// player's loop.
///
/// Hostile files: at most `maximumSeconds` of audio are measured (a file that claims more is
/// refused, not truncated: a measurement of part of it would be wrong), channels 1…8, rates
/// 8–384 kHz; a stream that decodes to nothing is silent.
public enum LoudnessMeter {
    public static let maximumSeconds = 6.0 * 3600
    public static let maximumChannels: Int32 = 8

    public struct Failure: Error, CustomStringConvertible, Sendable {
        public let description: String
        init(_ path: String, _ why: String) { description = "\(path): loudness not measured: \(why)" }
    }

    /// `pace`: the share of one core the measurement may take (0 < pace ≤ 1): after each stretch
    /// of work it sleeps in proportion (an episode measured in the background); 1: flat out (a
    /// creative, which an ad's preparation waits for).
    ///
    /// `truePeak` false: the integrated loudness only (an episode's: what an ad is matched to),
    /// without the 4× oversampling that is most of the cost.
    public static func measure(_ path: String, pace: Double = 1, truePeak: Bool = true) throws -> Loudness {
        var context: UnsafeMutablePointer<AVFormatContext>?
        guard avformat_open_input(&context, path, nil, nil) == 0, let format = context else { throw Failure(path, "cannot be opened as media") }
        defer { avformat_close_input(&context) }
        guard avformat_find_stream_info(format, nil) >= 0 else { throw Failure(path, "its streams cannot be read") }
        var decoderPointer: UnsafePointer<AVCodec>?
        let index = av_find_best_stream(format, AVMEDIA_TYPE_AUDIO, -1, -1, &decoderPointer, 0)
        guard index >= 0 else { return .silent }   // no audio stream: no sound to match
        guard let decoder = decoderPointer, let stream = format.pointee.streams[Int(index)], let parameters = stream.pointee.codecpar else {
            throw Failure(path, "no decoder for its audio")
        }
        if format.pointee.duration > 0, Double(format.pointee.duration) / Double(AV_TIME_BASE) > maximumSeconds {
            throw Failure(path, "longer than \(Int(maximumSeconds / 3600)) hours")
        }
        var codecContext = avcodec_alloc_context3(decoder)
        guard let codec = codecContext else { throw Failure(path, "out of memory") }
        defer { avcodec_free_context(&codecContext) }
        guard avcodec_parameters_to_context(codec, parameters) >= 0, avcodec_open2(codec, decoder, nil) >= 0 else {
            throw Failure(path, "its audio decoder cannot be opened")
        }
        let meter = try Meter(path: path, channels: codec.pointee.ch_layout.nb_channels, rate: codec.pointee.sample_rate, truePeak: truePeak)
        var packet = av_packet_alloc(), frame = av_frame_alloc()
        defer { av_packet_free(&packet); av_frame_free(&frame) }
        guard let packet, let frame else { throw Failure(path, "out of memory") }
        var pacer = Pacer(share: pace)
        var ended = false
        while !ended {
            let read = av_read_frame(format, packet)
            if read < 0 {
                avcodec_send_packet(codec, nil)   // end of file: flush the decoder
                ended = true
            } else {
                defer { av_packet_unref(packet) }
                guard packet.pointee.stream_index == index else { continue }
                if avcodec_send_packet(codec, packet) < 0 { continue }   // a damaged packet: skipped, as mpv does
            }
            while avcodec_receive_frame(codec, frame) >= 0 {
                defer { av_frame_unref(frame) }
                try meter.add(frame)
                pacer.worked()
            }
            if meter.seconds > maximumSeconds { throw Failure(path, "more than \(Int(maximumSeconds / 3600)) hours of audio") }
        }
        return meter.result()
    }

    /// libebur128's state and the converter to interleaved float.
    private final class Meter {
        let path: String
        let channels: Int32
        let rate: Int32
        var state: UnsafeMutablePointer<ebur128_state>?
        var resampler: OpaquePointer?
        var buffer: [Float] = []
        var frames = 0

        var seconds: Double { Double(frames) / Double(rate) }

        let truePeak: Bool

        init(path: String, channels: Int32, rate: Int32, truePeak: Bool) throws {
            guard channels >= 1, channels <= LoudnessMeter.maximumChannels else { throw Failure(path, "\(channels) audio channels (at most \(LoudnessMeter.maximumChannels))") }
            guard rate >= 8_000, rate <= 384_000 else { throw Failure(path, "a sample rate of \(rate) Hz") }
            self.path = path
            self.channels = channels
            self.rate = rate
            self.truePeak = truePeak
            let mode = Int32(EBUR128_MODE_I.rawValue | EBUR128_MODE_HISTOGRAM.rawValue | (truePeak ? EBUR128_MODE_TRUE_PEAK.rawValue : 0))
            guard let state = ebur128_init(UInt32(channels), UInt(rate), mode) else { throw Failure(path, "out of memory") }
            self.state = state
        }

        deinit {
            if state != nil { ebur128_destroy(&state) }
            if resampler != nil { swr_free(&resampler) }
        }

        /// One decoded frame, converted to interleaved float in its own layout and rate.
        func add(_ frame: UnsafeMutablePointer<AVFrame>) throws {
            let count = Int(frame.pointee.nb_samples)
            guard count > 0 else { return }
            guard frame.pointee.ch_layout.nb_channels == channels, frame.pointee.sample_rate == rate else {
                throw Failure(path, "its audio changes format midway")
            }
            if resampler == nil {
                var output = frame.pointee.ch_layout, input = frame.pointee.ch_layout
                guard swr_alloc_set_opts2(&resampler, &output, AV_SAMPLE_FMT_FLT, rate, &input,
                                          AVSampleFormat(frame.pointee.format), rate, 0, nil) >= 0,
                      swr_init(resampler) >= 0 else { throw Failure(path, "its audio cannot be converted") }
            }
            if buffer.count < count * Int(channels) { buffer = [Float](repeating: 0, count: count * Int(channels)) }
            let converted = buffer.withUnsafeMutableBufferPointer { out -> Int32 in
                var target: UnsafeMutablePointer<UInt8>? = UnsafeMutableRawPointer(out.baseAddress!).assumingMemoryBound(to: UInt8.self)
                return withUnsafeMutablePointer(to: &target) { targets in
                    frame.pointee.extended_data.withMemoryRebound(to: Optional<UnsafePointer<UInt8>>.self, capacity: Int(channels)) { sources in
                        swr_convert(resampler, targets, Int32(count), sources, Int32(count))
                    }
                }
            }
            guard converted >= 0 else { throw Failure(path, "its audio cannot be converted") }
            let status = buffer.withUnsafeBufferPointer { ebur128_add_frames_float(state, $0.baseAddress, Int(converted)) }
            guard status == 0 else { throw Failure(path, "the meter refused its samples") }
            frames += Int(converted)
        }

        func result() -> Loudness {
            var integrated = -Double.infinity
            guard frames > 0, ebur128_loudness_global(state, &integrated) == 0, integrated.isFinite else { return .silent }
            var peak = 0.0
            for channel in 0..<UInt32(truePeak ? channels : 0) {
                var value = 0.0
                if ebur128_true_peak(state, channel, &value) == 0, value.isFinite { peak = max(peak, value) }
            }
            let truePeak = peak > 0 ? 20 * log10(peak) : nil
            return Loudness(integrated: (integrated * 100).rounded() / 100, truePeak: truePeak.map { ($0 * 100).rounded() / 100 })
        }
    }

    /// Keeps a measurement to its share of a core: after each 50 ms of work, a sleep as long
    /// as the share asks.
    private struct Pacer {
        let share: Double
        var since = Pacer.cpuSeconds()

        init(share: Double) { self.share = share.isFinite ? max(0.05, min(1, share)) : 1 }

        mutating func worked() {
            guard share < 1 else { return }
            let spent = Pacer.cpuSeconds() - since
            guard spent >= 0.05 else { return }
            let rest = spent * (1 / share - 1)
            var interval = timespec(tv_sec: Int(rest), tv_nsec: Int((rest - rest.rounded(.down)) * 1e9))
            nanosleep(&interval, nil)
            since = Pacer.cpuSeconds()
        }

        /// This thread's CPU time.
        static func cpuSeconds() -> Double {
            var now = timespec()
            clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now)
            return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
        }
    }
}
