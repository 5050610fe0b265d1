#if canImport(Glibc)
import Glibc
#endif

/// CSV as proof of play is exported (RFC 4180). A cell is text or a number, and only text is
/// guarded: a text field a spreadsheet would run as a formula (`=`, `+`, `-`, `@`, a tab or a
/// return first) is prefixed with `'` (text from ad servers is not to be run); a number —
/// `-74.006000` west of Greenwich — is written as the number it is. A field with a comma, a
/// quote or a line break is quoted.
public enum CSV {
    public static func field(_ text: String, guardFormulas: Bool = true) -> String {
        var text = text
        if guardFormulas, let first = text.unicodeScalars.first, "=+-@\t\r".unicodeScalars.contains(first) { text = "'" + text }
        guard text.contains(where: { ",\"\n\r".contains($0) }) else { return text }
        var quoted = "\""
        for character in text { quoted += character == "\"" ? "\"\"" : String(character) }
        return quoted + "\""
    }

    /// A number cell, `format` (`%.3f`, `%.6f`, `%g`) applied; empty for none. A value that is
    /// not finite is no number: empty.
    public static func number(_ value: Double?, _ format: String = "%g") -> String {
        guard let value, value.isFinite else { return "" }
        return CFormat.format(format, value)
    }

    /// A whole number cell.
    public static func number(_ value: Int64) -> String { String(value) }

    /// The records of a CSV text, each without its line break: a line break inside a quoted
    /// field belongs to the field (an ad id from an ad server may hold one), not a new record.
    /// A record still quoted at the end of the text runs to its end (`split` then refuses it).
    public static func records(_ text: Substring) -> [Substring] {
        var records: [Substring] = []
        var quoted = false
        var start = text.startIndex
        var index = text.utf8.startIndex
        while index < text.utf8.endIndex {
            let byte = text.utf8[index]
            if byte == UInt8(ascii: "\"") {
                quoted.toggle()   // a doubled quote toggles twice: still inside
            } else if byte == UInt8(ascii: "\n"), !quoted {
                records.append(text[start..<index])
                start = text.utf8.index(after: index)
            }
            index = text.utf8.index(after: index)
        }
        if start < text.endIndex { records.append(text[start...]) }
        return records
    }

    /// The fields of one CSV line as they stand in it (`raw`: quotes and all, as hashed and
    /// signed) and as text (unquoted). Nil when a quoted field does not end on the line.
    public static func split(_ line: Substring) -> (raw: [Substring], text: [String])? {
        var raw: [Substring] = [], text: [String] = []
        var index = line.startIndex
        while true {
            let start = index
            var value = ""
            if index < line.endIndex, line[index] == "\"" {
                index = line.index(after: index)
                while true {
                    guard index < line.endIndex else { return nil }
                    if line[index] == "\"" {
                        let next = line.index(after: index)
                        if next < line.endIndex, line[next] == "\"" {
                            value.append("\"")
                            index = line.index(after: next)
                            continue
                        }
                        index = next
                        break
                    }
                    value.append(line[index])
                    index = line.index(after: index)
                }
                guard index == line.endIndex || line[index] == "," else { return nil }
            } else {
                while index < line.endIndex, line[index] != "," { index = line.index(after: index) }
                value = String(line[start..<index])
            }
            raw.append(line[start..<index])
            text.append(value)
            guard index < line.endIndex else { break }
            index = line.index(after: index)   // the comma
        }
        return (raw, text)
    }
}
