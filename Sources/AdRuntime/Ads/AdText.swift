/// The one bound on an ad's text, in what costs: bytes, characters, combining marks a
/// character, lines. Grapheme clusters alone are no bound — 1,000 clusters of a letter and 49
/// combining marks are 99 KB that libass re-renders every frame (the player froze for seconds
/// and a pause ended the overlay late). Checked where text comes in (the catalog: refused with
/// the reason) and again where it goes to the renderer (cut to the bound: never a freeze).
public enum AdText {
    /// UTF-8 bytes at most.
    public static let maxBytes = 2048
    /// Characters (grapheme clusters) at most.
    public static let maxCharacters = 1000
    /// Unicode scalars one character may hold (a letter and its marks; emoji sequences).
    public static let maxScalarsPerCharacter = 8
    /// Lines at most.
    public static let maxLines = 8

    /// Why `text` is out of bounds, or nil.
    public static func refusal(_ text: String) -> String? {
        if text.utf8.count > maxBytes { return "longer than \(maxBytes) bytes of UTF-8" }
        var characters = 0, lines = 1
        for character in text {
            characters += 1
            if characters > maxCharacters { return "longer than \(maxCharacters) characters" }
            if character.unicodeScalars.count > maxScalarsPerCharacter {
                return "a character with more than \(maxScalarsPerCharacter - 1) combining marks"
            }
            if character.isNewline {
                lines += 1
                if lines > maxLines { return "more than \(maxLines) lines" }
            }
        }
        return nil
    }

    /// `text` within the bounds: cut at the first character past any of them, and each
    /// character to its first `maxScalarsPerCharacter` scalars.
    public static func bounded(_ text: String) -> String {
        guard refusal(text) != nil else { return text }
        var out = String.UnicodeScalarView()
        var bytes = 0, characters = 0, lines = 1
        for character in text {
            let scalars = character.unicodeScalars.prefix(maxScalarsPerCharacter)
            let size = scalars.reduce(0) { $0 + String($1).utf8.count }
            if character.isNewline { lines += 1 }
            characters += 1
            guard bytes + size <= maxBytes, characters <= maxCharacters, lines <= maxLines else { break }
            out.append(contentsOf: scalars)
            bytes += size
        }
        return String(out)
    }
}

/// The one bound on an id from outside — an ad's, a creative's, a slot's, a catalog entry's:
/// at most `maxBytes` of UTF-8 on one line, no control character. Ids go everywhere a play goes
/// (the ledger and its hashed line, the CSV logs, the fleet's messages, the macros), so one from
/// an ad server with a line break or a megabyte in it must not reach them as it came. Checked
/// where ids come in (a catalog: refused with the reason; VAST and the slots API: bounded, the
/// ad still plays) and once more where every source's creative enters the runtime.
public enum AdIdentifier {
    public static let maxBytes = 256

    /// Why `id` is out of bounds, or nil.
    public static func refusal(_ id: String) -> String? {
        if id.isEmpty { return "empty" }
        if id.utf8.count > maxBytes { return "longer than \(maxBytes) bytes of UTF-8" }
        if id.unicodeScalars.contains(where: isControl) { return "it holds a line break or a control character" }
        return nil
    }

    /// `id` within the bounds: its control characters written as escapes (`OneLine`), then cut
    /// to `maxBytes` at a character's end.
    public static func bounded(_ id: String) -> String {
        guard refusal(id) != nil, !id.isEmpty else { return id }
        let escaped = OneLine.escape(id)
        guard escaped.utf8.count > maxBytes else { return escaped }
        var out = "", bytes = 0
        for character in escaped {
            let size = character.utf8.count
            guard bytes + size <= maxBytes else { break }
            out.append(character)
            bytes += size
        }
        return out
    }

    private static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) || scalar == "\u{2028}" || scalar == "\u{2029}"
    }
}
