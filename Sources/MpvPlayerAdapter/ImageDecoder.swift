import CFFmpeg
import Foundation

/// An image in mpv's `overlay-add` format: BGRA in memory order, premultiplied alpha.
public struct BGRAImage: Sendable, Equatable {
    public let width: Int
    public let height: Int
    public var stride: Int { width * 4 }
    public let pixels: [UInt8]

    /// The pixel at (x, y) as (r, g, b, a), premultiplied.
    public func rgba(x: Int, y: Int) -> (UInt8, UInt8, UInt8, UInt8) {
        let i = y * stride + x * 4
        return (pixels[i + 2], pixels[i + 1], pixels[i], pixels[i + 3])
    }
}

/// Why a creative image cannot be used.
public struct ImageDecodeError: Error, Sendable, Equatable, CustomStringConvertible {
    public let path: String
    public let reason: String
    public var description: String { "\(path): \(reason)" }
}

/// Decodes PNG and JPEG creatives with FFmpeg (libavformat/libavcodec) and scales them with
/// libswscale. The header is checked before anything is decoded: size on disk, the format's
/// signature, and the dimensions it claims (a 30000×30000 header is refused, not allocated).
///
/// Threading: any thread; each call uses FFmpeg contexts of its own.
public enum ImageDecoder {
    public enum Format: String, Sendable { case png, jpeg }

    /// Refused above these: no ad creative needs more, and a hostile header must not make
    /// us allocate gigabytes.
    public static let maxFileBytes = 16 * 1024 * 1024
    public static let maxSide = 8192
    public static let maxPixels = 16_777_216   // 4096 × 4096

    /// The format and size a file's header claims, or why it is not a usable image.
    public static func probe(_ path: String) throws(ImageDecodeError) -> (format: Format, width: Int, height: Int) {
        func fail(_ reason: String) -> ImageDecodeError { ImageDecodeError(path: path, reason: reason) }
        guard let handle = FileHandle(forReadingAtPath: path) else { throw fail("cannot open the file") }
        defer { try? handle.close() }
        let size = (try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
        guard size > 0 else { throw fail("the file is empty") }
        guard size <= maxFileBytes else { throw fail("the file is \(size) bytes; the limit is \(maxFileBytes)") }
        let head = [UInt8]((try? handle.read(upToCount: min(size, 256 * 1024))) ?? Data())
        let (format, width, height) = try header(head, fail)
        guard width > 0, height > 0 else { throw fail("the header claims an empty image (\(width)×\(height))") }
        guard width <= maxSide, height <= maxSide, width * height <= maxPixels else {
            throw fail("the header claims \(width)×\(height) pixels; the limit is \(maxSide) a side and \(maxPixels) in all")
        }
        return (format, width, height)
    }

    private static func header(_ b: [UInt8], _ fail: (String) -> ImageDecodeError) throws(ImageDecodeError) -> (Format, Int, Int) {
        let png: [UInt8] = [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]
        if b.count >= 24, Array(b[0..<8]) == png {
            guard Array(b[12..<16]) == Array("IHDR".utf8) else { throw fail("a PNG without its IHDR header") }
            return (.png, be32(b, 16), be32(b, 20))
        }
        if b.count >= 4, b[0] == 0xFF, b[1] == 0xD8, b[2] == 0xFF {
            // Walk the markers to the first start-of-frame (SOF0…SOF15 but DHT, JPG, DAC).
            var i = 2
            while i + 9 < b.count {
                guard b[i] == 0xFF else { throw fail("a JPEG with a broken marker at byte \(i)") }
                let marker = b[i + 1]
                if marker == 0xFF { i += 1; continue }
                if marker == 0xD8 || (0xD0...0xD7).contains(marker) || marker == 0x01 { i += 2; continue }
                let length = Int(b[i + 2]) << 8 | Int(b[i + 3])
                if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) {
                    return (.jpeg, Int(b[i + 7]) << 8 | Int(b[i + 8]), Int(b[i + 5]) << 8 | Int(b[i + 6]))
                }
                guard length >= 2 else { throw fail("a JPEG with a broken segment at byte \(i)") }
                i += 2 + length
            }
            throw fail("a JPEG whose header ends before its frame size")
        }
        throw fail("not a PNG or JPEG image")
    }

    private static func be32(_ b: [UInt8], _ at: Int) -> Int {
        Int(b[at]) << 24 | Int(b[at + 1]) << 16 | Int(b[at + 2]) << 8 | Int(b[at + 3])
    }

    /// Decodes `path` and scales it to `width`×`height` (the source's size when nil).
    public static func decode(_ path: String, width: Int? = nil, height: Int? = nil) throws(ImageDecodeError) -> BGRAImage {
        func fail(_ reason: String) -> ImageDecodeError { ImageDecodeError(path: path, reason: reason) }
        let probed = try probe(path)
        let outW = width ?? probed.width, outH = height ?? probed.height
        guard outW > 0, outH > 0, outW <= maxSide, outH <= maxSide else { throw fail("cannot scale to \(outW)×\(outH)") }

        var format: UnsafeMutablePointer<AVFormatContext>?
        let inputFormat = av_find_input_format(probed.format == .png ? "png_pipe" : "jpeg_pipe")
        guard avformat_open_input(&format, path, inputFormat, nil) == 0, let format else { throw fail("FFmpeg cannot open it") }
        defer { var f: UnsafeMutablePointer<AVFormatContext>? = format; avformat_close_input(&f) }
        let stream = av_find_best_stream(format, AVMEDIA_TYPE_VIDEO, -1, -1, nil, 0)
        guard stream >= 0, let parameters = format.pointee.streams[Int(stream)]?.pointee.codecpar,
              let codec = avcodec_find_decoder(parameters.pointee.codec_id) else { throw fail("no decoder for it") }
        guard let context = avcodec_alloc_context3(codec) else { throw fail("out of memory") }
        defer { var c: UnsafeMutablePointer<AVCodecContext>? = context; avcodec_free_context(&c) }
        guard avcodec_parameters_to_context(context, parameters) >= 0 else { throw fail("bad codec parameters") }
        context.pointee.max_pixels = Int64(maxPixels)
        context.pointee.thread_count = 1
        guard avcodec_open2(context, codec, nil) == 0 else { throw fail("the decoder refused it") }

        guard let frame = av_frame_alloc() else { throw fail("out of memory") }
        defer { var f: UnsafeMutablePointer<AVFrame>? = frame; av_frame_free(&f) }
        guard let packet = av_packet_alloc() else { throw fail("out of memory") }
        defer { var p: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&p) }

        var decoded = false
        while !decoded {
            let read = av_read_frame(format, packet)
            if read < 0 {
                avcodec_send_packet(context, nil)   // flush: a decoder may hold the frame back
            } else if packet.pointee.stream_index == stream {
                let sent = avcodec_send_packet(context, packet)
                av_packet_unref(packet)
                guard sent >= 0 || sent == cffmpeg_error_again() else { throw fail("the image data is corrupt") }
            } else {
                av_packet_unref(packet)
                continue
            }
            let received = avcodec_receive_frame(context, frame)
            if received == 0 {
                decoded = true
            } else if read < 0 || received != cffmpeg_error_again() {
                throw fail(read < 0 ? "the file ends before the image does (truncated)" : "the image data is corrupt")
            }
        }
        // Header and decoder must agree; a file that lies about its size is corrupt.
        guard frame.pointee.width == probed.width, frame.pointee.height == probed.height else {
            throw fail("the header says \(probed.width)×\(probed.height), the data \(frame.pointee.width)×\(frame.pointee.height)")
        }
        if frame.pointee.decode_error_flags != 0 || (frame.pointee.flags & AV_FRAME_FLAG_CORRUPT) != 0 {
            throw fail("the image data is corrupt")
        }

        guard let scaler = sws_getContext(frame.pointee.width, frame.pointee.height, AVPixelFormat(frame.pointee.format),
                                          Int32(outW), Int32(outH), AV_PIX_FMT_BGRA, Int32(SWS_BILINEAR), nil, nil, nil)
        else { throw fail("cannot convert its pixel format") }
        defer { sws_freeContext(scaler) }
        var pixels = [UInt8](repeating: 0, count: outW * outH * 4)
        let scaled = pixels.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var planes: [UnsafeMutablePointer<UInt8>?] = [buffer.baseAddress, nil, nil, nil]
            var strides: [Int32] = [Int32(outW * 4), 0, 0, 0]
            return withUnsafePointer(to: &frame.pointee.data) { data in
                withUnsafePointer(to: &frame.pointee.linesize) { linesize in
                    data.withMemoryRebound(to: UnsafePointer<UInt8>?.self, capacity: 8) { src in
                        linesize.withMemoryRebound(to: Int32.self, capacity: 8) { srcStride in
                            sws_scale(scaler, src, srcStride, 0, frame.pointee.height, &planes, &strides)
                        }
                    }
                }
            }
        }
        guard scaled == Int32(outH) else { throw fail("scaling failed") }
        // mpv wants premultiplied alpha (see overlay-add).
        var i = 0
        while i < pixels.count {
            let alpha = UInt16(pixels[i + 3])
            if alpha < 255 {
                pixels[i] = UInt8(UInt16(pixels[i]) * alpha / 255)
                pixels[i + 1] = UInt8(UInt16(pixels[i + 1]) * alpha / 255)
                pixels[i + 2] = UInt8(UInt16(pixels[i + 2]) * alpha / 255)
            }
            i += 4
        }
        return BGRAImage(width: outW, height: outH, pixels: pixels)
    }
}
