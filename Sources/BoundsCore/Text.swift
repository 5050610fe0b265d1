#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The few text helpers the modules without the full Foundation need (`Bounds`, the protocol,
/// the clients: FoundationEssentials carries no ICU, and no `trimmingCharacters` or
/// `String(format:)`), with Foundation's meanings.
extension StringProtocol {
    /// Without whitespace and line breaks at either end (Foundation's `.whitespacesAndNewlines`).
    public func trimmed() -> String { trimming(where: Self.isWhitespaceOrNewline) }

    /// Without spaces and tabs at either end (Foundation's `.whitespaces`: a line break stays).
    public func trimmedSpaces() -> String { trimming(where: Self.isSpace) }

    /// Without line breaks at either end (Foundation's `.newlines`: spaces stay).
    public func trimmingLineBreaks() -> String {
        trimming { Self.isWhitespaceOrNewline($0) && !Self.isSpace($0) }
    }

    /// Without the scalars `cut` says at either end.
    private func trimming(where cut: (Unicode.Scalar) -> Bool) -> String {
        let scalars = String(self).unicodeScalars
        guard let first = scalars.firstIndex(where: { !cut($0) }) else { return "" }
        let last = scalars.lastIndex(where: { !cut($0) })!
        return String(Substring.UnicodeScalarView(scalars[first...last]))
    }

    /// Cut or filled with spaces to `width` characters (Foundation's `padding(toLength:withPad:" "…)`).
    public func padded(to width: Int) -> String {
        count >= width ? String(prefix(width)) : String(self) + String(repeating: " ", count: width - count)
    }

    static func isSpace(_ scalar: Unicode.Scalar) -> Bool {
        scalar == "\t" || scalar.properties.generalCategory == .spaceSeparator
    }

    static func isWhitespaceOrNewline(_ scalar: Unicode.Scalar) -> Bool {
        isSpace(scalar) || ("\n"..."\r").contains(scalar) || scalar == "\u{85}" || scalar == "\u{2028}" || scalar == "\u{2029}"
    }
}

extension StringProtocol {
    /// Every `target` replaced by `replacement` (Foundation's `replacingOccurrences(of:with:)`).
    public func replacingAll(_ target: String, with replacement: String) -> String {
        pieces(separatedBy: target).joined(separator: replacement)
    }

    /// The text between each `separator` (Foundation's `components(separatedBy:)` for a string).
    public func pieces(separatedBy separator: String) -> [String] {
        let text = Array(String(self).utf8)
        let mark = Array(separator.utf8)
        guard !mark.isEmpty else { return [String(self)] }
        var pieces: [String] = []
        var start = 0
        var index = 0
        while index + mark.count <= text.count {
            if text[index] == mark[0], Array(text[index..<(index + mark.count)]) == mark {
                pieces.append(String(decoding: text[start..<index], as: UTF8.self))
                index += mark.count
                start = index
            } else {
                index += 1
            }
        }
        pieces.append(String(decoding: text[start...], as: UTF8.self))
        return pieces
    }
}

/// A whole number in hexadecimal, at least `width` digits (`%02x`, `%04x`).
public func hex(_ value: some BinaryInteger, width: Int) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: max(0, width - digits.count)) + digits
}

/// Sleeps this thread for `seconds` (Foundation's `Thread.sleep(forTimeInterval:)`).
public func sleepThread(_ seconds: Double) {
    guard seconds > 0, seconds.isFinite else { return }
    var request = timespec(tv_sec: Int(seconds), tv_nsec: Int((seconds - seconds.rounded(.down)) * 1e9))
    var rest = timespec()
    while nanosleep(&request, &rest) != 0, errno == EINTR { request = rest }
}

/// printf's formatting of one number (`%g`, `%.3f`), as `String(format:)` does it.
public enum CFormat {
    public static func format(_ format: String, _ value: Double) -> String {
        var buffer = [CChar](repeating: 0, count: 64)
        let count = withVaList([value]) { vsnprintf(&buffer, buffer.count, format, $0) }
        guard count >= 0 else { return "" }
        if Int(count) >= buffer.count {
            buffer = [CChar](repeating: 0, count: Int(count) + 1)
            _ = withVaList([value]) { vsnprintf(&buffer, buffer.count, format, $0) }
        }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// Text to a file descriptor as it is, in as many writes as it takes (stdout unbuffered: a line
/// of `adplayerctl events` reaches a pipe when it is written).
public func writeAll(_ text: String, to descriptor: Int32) {
    var bytes = Array(text.utf8)[...]
    while !bytes.isEmpty {
        let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
        if written < 0 {
            if errno == EINTR { continue }
            return
        }
        bytes = bytes.dropFirst(written)
    }
}

/// A path's folder (`/a/b/c` → `/a/b`, `c` → ``), as `NSString.deletingLastPathComponent`.
public func folderOf(_ path: String) -> String {
    var path = Substring(path)
    while path.count > 1, path.hasSuffix("/") { path = path.dropLast() }
    guard let slash = path.lastIndex(of: "/") else { return "" }
    if slash == path.startIndex { return "/" }
    return String(path[..<slash])
}
