import Foundation

/// XML's whitespace (space, tab, line feed, carriage return: XML 1.0 §2.3) trimmed from both ends
/// of a text node, on its UTF-8 bytes — Foundation's `trimmingCharacters` bridges through
/// NSString and copied every VAST document inlined in a VMAP whole (3 % of a simulated month).
enum XMLText {
    static func isSpace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }

    static func trimmed(_ text: String) -> String {
        let bytes = text.utf8
        guard let first = bytes.first, let last = bytes.last, isSpace(first) || isSpace(last) else { return text }
        guard let start = bytes.firstIndex(where: { !isSpace($0) }), let end = bytes.lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(text[start...end])
    }

    /// The bytes of `data` without XML whitespace at either end.
    static func trimmed(_ data: Data) -> Data {
        guard let start = data.firstIndex(where: { !isSpace($0) }), let end = data.lastIndex(where: { !isSpace($0) }) else { return Data() }
        return data[start...end]
    }
}
