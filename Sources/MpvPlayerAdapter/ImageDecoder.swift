import AdRuntime
import CFFmpeg
import Foundation

/// An image in mpv's `overlay-add` format: BGRA in memory order, premultiplied alpha.
public struct BGRAImage: Sendable, Equatable {
    public let width: Int
    public let height: Int
    public var stride: Int { width * 4 }
    public let pixels: [UInt8]

    public init(width: Int, height: Int, pixels: [UInt8]) {
        self.width = width
        self.height = height
        self.pixels = pixels
    }

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

/// Decodes PNG and JPEG creatives with FFmpeg (libavcodec, from memory) and scales them with
/// libswscale. Everything about the file is checked before anything is decoded: it is opened
/// without blocking and must be a regular file (a FIFO or a device is refused, never waited
/// on), its size is bounded, the format's signature and the dimensions it claims are checked
/// (a 30000×30000 header is refused, not allocated).
///
/// Threading: any thread but the player's loop — decoding takes milliseconds (SPEC R18);
/// each call uses FFmpeg contexts of its own.
public enum ImageDecoder {
    public enum Format: String, Sendable { case png, jpeg }

    /// Refused above these: no ad creative needs more, and a hostile header must not make
    /// us allocate gigabytes.
    public static let maxFileBytes = 16 * 1024 * 1024
    public static let maxSide = 8192
    public static let maxPixels = 16_777_216   // 4096 × 4096

    /// The format and size a file's header claims, or why it is not a usable image.
    public static func probe(_ path: String) throws(ImageDecodeError) -> (format: Format, width: Int, height: Int) {
        try probe(readFile(path), path: path)
    }

    /// Decodes `path` and scales it to `width`×`height` (the source's size when nil).
    public static func decode(_ path: String, width: Int? = nil, height: Int? = nil) throws(ImageDecodeError) -> BGRAImage {
        let image = try decode(readFile(path), path: path)
        guard let width, let height, (width, height) != (image.width, image.height) else { return image }
        return try scale(image, width: width, height: height, path: path)
    }

    /// The bytes of a creative file, through `SafeFile` (the one file check): a regular file of
    /// at most `maxFileBytes`, opened without blocking, its size taken from the open file.
    public static func readFile(_ path: String) throws(ImageDecodeError) -> [UInt8] {
        do {
            return Array(try SafeFile.read(path, maxBytes: maxFileBytes))
        } catch {
            throw ImageDecodeError(path: path, reason: error.reason)
        }
    }

    /// The format and size `data`'s header claims, checked against the limits.
    static func probe(_ data: [UInt8], path: String) throws(ImageDecodeError) -> (format: Format, width: Int, height: Int) {
        func fail(_ reason: String) -> ImageDecodeError { ImageDecodeError(path: path, reason: reason) }
        guard !data.isEmpty else { throw fail("the file is empty") }
        // The whole file (already read, bounded by `maxFileBytes`): a JPEG's metadata may come
        // before its frame size by megabytes, and walking its segments costs a hop each.
        let (format, width, height) = try header(data, fail)
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
                if marker == 0xD9 { break }   // the end of the image, before any frame
                let length = Int(b[i + 2]) << 8 | Int(b[i + 3])
                if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) {
                    return (.jpeg, Int(b[i + 7]) << 8 | Int(b[i + 8]), Int(b[i + 5]) << 8 | Int(b[i + 6]))
                }
                guard length >= 2 else { throw fail("a JPEG with a broken segment at byte \(i)") }
                i += 2 + length
            }
            throw fail("a JPEG with no frame header (SOF) in its \(b.count) bytes")
        }
        throw fail("not a PNG or JPEG image")
    }

    private static func be32(_ b: [UInt8], _ at: Int) -> Int {
        Int(b[at]) << 24 | Int(b[at + 1]) << 16 | Int(b[at + 2]) << 8 | Int(b[at + 3])
    }

    /// Decodes an image file's bytes at its own size.
    public static func decode(_ data: [UInt8], path: String) throws(ImageDecodeError) -> BGRAImage {
        func fail(_ reason: String) -> ImageDecodeError { ImageDecodeError(path: path, reason: reason) }
        let probed = try probe(data, path: path)
        try ImageIntegrity.check(data, format: probed.format, path: path)
        guard let codec = avcodec_find_decoder(probed.format == .png ? AV_CODEC_ID_PNG : AV_CODEC_ID_MJPEG) else {
            throw fail("no decoder for it")
        }
        guard let context = avcodec_alloc_context3(codec) else { throw fail("out of memory") }
        defer { var c: UnsafeMutablePointer<AVCodecContext>? = context; avcodec_free_context(&c) }
        context.pointee.max_pixels = Int64(maxPixels)
        context.pointee.thread_count = 1
        // Decoded completely and checked, or refused: CRCs checked, and any error — a lying
        // header, missing rows, a bad checksum — fails the decode instead of giving half an
        // image (FFmpeg otherwise conceals it and returns what it has).
        context.pointee.err_recognition = AV_EF_CRCCHECK | AV_EF_BITSTREAM | AV_EF_BUFFER | AV_EF_EXPLODE
        guard avcodec_open2(context, codec, nil) == 0 else { throw fail("the decoder refused it") }
        guard let frame = av_frame_alloc() else { throw fail("out of memory") }
        defer { var f: UnsafeMutablePointer<AVFrame>? = frame; av_frame_free(&f) }
        guard let packet = av_packet_alloc() else { throw fail("out of memory") }
        defer { var p: UnsafeMutablePointer<AVPacket>? = packet; av_packet_free(&p) }
        // The whole file is one packet (PNG and JPEG are single images); FFmpeg copies it.
        guard av_new_packet(packet, Int32(data.count)) == 0 else { throw fail("out of memory") }
        data.withUnsafeBytes { packet.pointee.data.update(from: $0.bindMemory(to: UInt8.self).baseAddress!, count: data.count) }
        let sent = avcodec_send_packet(context, packet)
        guard sent >= 0 else { throw fail("the image data is corrupt") }
        avcodec_send_packet(context, nil)   // flush: a decoder may hold the frame back
        guard avcodec_receive_frame(context, frame) == 0 else {
            throw fail("the image data is corrupt or truncated")
        }
        // Header and decoder must agree; a file that lies about its size is corrupt.
        guard frame.pointee.width == probed.width, frame.pointee.height == probed.height else {
            throw fail("the header says \(probed.width)×\(probed.height), the data \(frame.pointee.width)×\(frame.pointee.height)")
        }
        if frame.pointee.decode_error_flags != 0 || (frame.pointee.flags & AV_FRAME_FLAG_CORRUPT) != 0 {
            throw fail("the image data is corrupt")
        }
        var pixels = try convert(frame, width: probed.width, height: probed.height, fail)
        premultiply(&pixels)
        return BGRAImage(width: probed.width, height: probed.height, pixels: pixels)
    }

    /// Scales a (premultiplied) BGRA image; scaling premultiplied pixels channel by channel is right.
    public static func scale(_ image: BGRAImage, width: Int, height: Int, path: String = "") throws(ImageDecodeError) -> BGRAImage {
        guard width > 0, height > 0, width <= maxSide, height <= maxSide else {
            throw ImageDecodeError(path: path, reason: "cannot scale to \(width)×\(height)")
        }
        guard let scaler = sws_getContext(Int32(image.width), Int32(image.height), AV_PIX_FMT_BGRA,
                                          Int32(width), Int32(height), AV_PIX_FMT_BGRA, Int32(SWS_BILINEAR), nil, nil, nil)
        else { throw ImageDecodeError(path: path, reason: "cannot scale it") }
        defer { sws_freeContext(scaler) }
        var out = [UInt8](repeating: 0, count: width * height * 4)
        let rows = image.pixels.withUnsafeBufferPointer { source -> Int32 in
            out.withUnsafeMutableBufferPointer { target -> Int32 in
                var sourcePlanes: [UnsafePointer<UInt8>?] = [source.baseAddress, nil, nil, nil]
                var sourceStrides: [Int32] = [Int32(image.stride), 0, 0, 0]
                var targetPlanes: [UnsafeMutablePointer<UInt8>?] = [target.baseAddress, nil, nil, nil]
                var targetStrides: [Int32] = [Int32(width * 4), 0, 0, 0]
                return sws_scale(scaler, &sourcePlanes, &sourceStrides, 0, Int32(image.height), &targetPlanes, &targetStrides)
            }
        }
        guard rows == Int32(height) else { throw ImageDecodeError(path: path, reason: "scaling failed") }
        return BGRAImage(width: width, height: height, pixels: out)
    }

    /// The decoded frame, whatever its pixel format, as BGRA at its own size.
    private static func convert(_ frame: UnsafeMutablePointer<AVFrame>, width: Int, height: Int,
                                _ fail: (String) -> ImageDecodeError) throws(ImageDecodeError) -> [UInt8] {
        guard let scaler = sws_getContext(Int32(width), Int32(height), AVPixelFormat(frame.pointee.format),
                                          Int32(width), Int32(height), AV_PIX_FMT_BGRA, Int32(SWS_BILINEAR), nil, nil, nil)
        else { throw fail("cannot convert its pixel format") }
        defer { sws_freeContext(scaler) }
        var pixels = [UInt8](repeating: 0, count: width * height * 4)
        let rows = pixels.withUnsafeMutableBufferPointer { buffer -> Int32 in
            var planes: [UnsafeMutablePointer<UInt8>?] = [buffer.baseAddress, nil, nil, nil]
            var strides: [Int32] = [Int32(width * 4), 0, 0, 0]
            return withUnsafePointer(to: &frame.pointee.data) { data in
                withUnsafePointer(to: &frame.pointee.linesize) { linesize in
                    data.withMemoryRebound(to: UnsafePointer<UInt8>?.self, capacity: 8) { src in
                        linesize.withMemoryRebound(to: Int32.self, capacity: 8) { srcStride in
                            sws_scale(scaler, src, srcStride, 0, Int32(height), &planes, &strides)
                        }
                    }
                }
            }
        }
        guard rows == Int32(height) else { throw fail("converting its pixels failed") }
        return pixels
    }

    /// mpv wants premultiplied alpha (see overlay-add).
    private static func premultiply(_ pixels: inout [UInt8]) {
        pixels.withUnsafeMutableBufferPointer { p in
            var i = 0
            while i < p.count {
                let alpha = UInt16(p[i + 3])
                if alpha < 255 {
                    p[i] = UInt8(UInt16(p[i]) * alpha / 255)
                    p[i + 1] = UInt8(UInt16(p[i + 1]) * alpha / 255)
                    p[i + 2] = UInt8(UInt16(p[i + 2]) * alpha / 255)
                }
                i += 4
            }
        }
    }

    /// A black layer at 50 % opacity over `output` (premultiplied: 0, 0, 0, 128), with
    /// `image` composited over it at `rect`: a pause ad as one bitmap.
    /// `backdrop`: the black layer's opacity (255: a screensaver's black screen).
    public static func dimmed(_ output: (width: Int, height: Int), with image: BGRAImage, at rect: AdRect, backdrop: UInt8 = 128) -> BGRAImage {
        var pixels = [UInt8](repeating: 0, count: output.width * output.height * 4)
        pixels.withUnsafeMutableBufferPointer { target in
            image.pixels.withUnsafeBufferPointer { source in
                for i in stride(from: 3, to: target.count, by: 4) { target[i] = backdrop }
                for row in 0..<image.height where rect.y + row >= 0 && rect.y + row < output.height {
                    for column in 0..<image.width where rect.x + column >= 0 && rect.x + column < output.width {
                        let s = row * image.stride + column * 4
                        let t = ((rect.y + row) * output.width + rect.x + column) * 4
                        // Premultiplied "over": out = src + dst × (1 − src.alpha).
                        let keep = 255 - Int(source[s + 3])
                        for channel in 0..<4 {
                            target[t + channel] = UInt8(Int(source[s + channel]) + Int(target[t + channel]) * keep / 255)
                        }
                    }
                }
            }
        }
        return BGRAImage(width: output.width, height: output.height, pixels: pixels)
    }
}

/// A creative's bytes checked to be whole before they are decoded: FFmpeg conceals damage and
/// hands back what it has (a PNG whose data ends after half its rows decodes "fine", the rest
/// left blank), so a PNG is walked chunk by chunk — every CRC right, an IHDR, IDAT data that
/// inflates to every row the header promises, an IEND — and a JPEG must end with its EOI
/// marker. Anything else is refused as corrupt: never half an image on screen.
enum ImageIntegrity {
    static func check(_ data: [UInt8], format: ImageDecoder.Format, path: String) throws(ImageDecodeError) {
        func fail(_ reason: String) -> ImageDecodeError { ImageDecodeError(path: path, reason: "the image data is corrupt: \(reason)") }
        switch format {
        case .jpeg:
            var end = data.count
            while end > 2, data[end - 1] == 0 { end -= 1 }   // zero padding after the image is harmless
            guard end >= 4, data[end - 2] == 0xFF, data[end - 1] == 0xD9 else { throw fail("the JPEG has no end-of-image marker (truncated)") }
        case .png:
            try checkPNG(data, fail)
        }
    }

    private static func checkPNG(_ b: [UInt8], _ fail: (String) -> ImageDecodeError) throws(ImageDecodeError) {
        var at = 8
        var header: (width: Int, height: Int, bits: Int, color: Int, interlaced: Bool)?
        var idat: [UInt8] = []
        var ended = false
        while at + 12 <= b.count, !ended {
            let length = Int(b[at]) << 24 | Int(b[at + 1]) << 16 | Int(b[at + 2]) << 8 | Int(b[at + 3])
            guard length >= 0, at + 12 + length <= b.count else { throw fail("a chunk runs past the end of the file") }
            let type = Array(b[(at + 4)..<(at + 8)])
            let stored = UInt32(b[at + 8 + length]) << 24 | UInt32(b[at + 9 + length]) << 16 | UInt32(b[at + 10 + length]) << 8
                | UInt32(b[at + 11 + length])
            let computed = b[(at + 4)..<(at + 8 + length)].withUnsafeBytes { UInt32(crc32(0, $0.baseAddress, UInt32($0.count))) }
            guard stored == computed else { throw fail("chunk \(String(decoding: type, as: UTF8.self)) has a bad CRC") }
            let body = b[(at + 8)..<(at + 8 + length)]
            switch String(decoding: type, as: UTF8.self) {
            case "IHDR":
                guard length == 13 else { throw fail("a bad IHDR") }
                let s = body.startIndex
                header = (Int(b[s]) << 24 | Int(b[s + 1]) << 16 | Int(b[s + 2]) << 8 | Int(b[s + 3]),
                          Int(b[s + 4]) << 24 | Int(b[s + 5]) << 16 | Int(b[s + 6]) << 8 | Int(b[s + 7]),
                          Int(b[s + 8]), Int(b[s + 9]), b[s + 12] == 1)
            case "IDAT": idat += body
            case "IEND": ended = true
            default: break
            }
            at += 12 + length
        }
        guard let header else { throw fail("no IHDR") }
        guard ended else { throw fail("no IEND (truncated)") }
        let channels: Int
        switch header.color {
        case 0, 3: channels = 1
        case 2: channels = 3
        case 4: channels = 2
        case 6: channels = 4
        default: throw fail("an unknown colour type \(header.color)")
        }
        let bitsPerPixel = channels * header.bits
        func rowBytes(_ width: Int) -> Int { (width * bitsPerPixel + 7) / 8 }
        var expected = 0
        if header.interlaced {
            // Adam7: seven passes, each (starting column, step) × (starting row, step).
            for (x0, dx, y0, dy) in [(0, 8, 0, 8), (4, 8, 0, 8), (0, 4, 4, 8), (2, 4, 0, 4), (0, 2, 2, 4), (1, 2, 0, 2), (0, 1, 1, 2)] {
                let w = (header.width - x0 + dx - 1) / dx, h = (header.height - y0 + dy - 1) / dy
                if w > 0 && h > 0 { expected += h * (1 + rowBytes(w)) }
            }
        } else {
            expected = header.height * (1 + rowBytes(header.width))
        }
        let inflated = try inflatedSize(idat, atMost: expected + 1, fail)
        guard inflated >= expected else {
            throw fail("its data holds \(inflated) of the \(expected) bytes its \(header.width)×\(header.height) header promises (rows are missing)")
        }
    }

    /// How many bytes `data` inflates to, counting at most `limit` (nothing is kept).
    private static func inflatedSize(_ data: [UInt8], atMost limit: Int, _ fail: (String) -> ImageDecodeError) throws(ImageDecodeError) -> Int {
        var stream = z_stream()
        guard inflateInit_(&stream, ZLIB_VERSION, Int32(MemoryLayout<z_stream>.size)) == Z_OK else { throw fail("zlib could not start") }
        defer { inflateEnd(&stream) }
        var total = 0
        var chunk = [UInt8](repeating: 0, count: 64 * 1024)
        var input = data
        var status = Z_OK
        input.withUnsafeMutableBufferPointer { inputBuffer in
            stream.next_in = inputBuffer.baseAddress
            stream.avail_in = UInt32(inputBuffer.count)
            chunk.withUnsafeMutableBufferPointer { out in
                while total < limit {
                    stream.next_out = out.baseAddress
                    stream.avail_out = UInt32(out.count)
                    status = inflate(&stream, Z_NO_FLUSH)
                    total += out.count - Int(stream.avail_out)
                    if status != Z_OK { break }
                    if stream.avail_in == 0 && stream.avail_out != 0 { break }
                }
            }
        }
        guard status == Z_OK || status == Z_STREAM_END || status == Z_BUF_ERROR else { throw fail("its image data does not inflate") }
        return total
    }
}
