#if canImport(Glibc)
import Glibc
#endif
/// Numbers written as text by hand — hex of a digest, zero-padded fields of a time — where
/// `String(format:)` went through Foundation's formatter: a fifth of a simulated day's time
/// went there (issue 46), and the daemon writes them at every beacon and play too.
package enum Digits {
    private static let lower = Array("0123456789abcdef".utf8)
    private static let upper = Array("0123456789ABCDEF".utf8)

    /// `bytes` in hex, two digits each.
    package static func hex(_ bytes: some Sequence<UInt8>, uppercase: Bool = false) -> String {
        let digits = uppercase ? upper : lower
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// `value` (0 and up; a negative one as 0) in at least `width` decimal digits, zero-padded.
    package static func append(_ value: Int, width: Int, to bytes: inout [UInt8]) {
        var rest = max(0, value)
        var scratch: [UInt8] = []
        repeat {
            scratch.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        } while rest > 0
        if scratch.count < width { bytes.append(contentsOf: repeatElement(UInt8(ascii: "0"), count: width - scratch.count)) }
        bytes.append(contentsOf: scratch.reversed())
    }

    package static func padded(_ value: Int, _ width: Int) -> String {
        var bytes: [UInt8] = []
        append(value, width: width, to: &bytes)
        return String(decoding: bytes, as: UTF8.self)
    }

    /// `YYYY-MM-DDTHH:MM:SS.mmmZ` of broken-down UTC fields.
    package static func timestamp(year: Int, month: Int, day: Int, hour: Int, minute: Int, second: Int, millisecond: Int) -> String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        if year < 0 || year > 9999 { bytes.append(contentsOf: Array(String(year).utf8)) } else { append(year, width: 4, to: &bytes) }
        for (separator, value) in [(UInt8(ascii: "-"), month), (UInt8(ascii: "-"), day), (UInt8(ascii: "T"), hour), (UInt8(ascii: ":"), minute),
                                   (UInt8(ascii: ":"), second)] {
            bytes.append(separator)
            append(value, width: 2, to: &bytes)
        }
        bytes.append(UInt8(ascii: "."))
        append(millisecond, width: 3, to: &bytes)
        bytes.append(UInt8(ascii: "Z"))
        return String(decoding: bytes, as: UTF8.self)
    }
}
