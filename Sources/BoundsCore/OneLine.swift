#if canImport(Glibc)
import Glibc
#endif
/// Text from outside (an ad server's id, a catalog's title, a file name) made safe to print on
/// one line of a log or a terminal: line breaks, tabs, the backslash and every C0 and C1 control
/// character (ESC, CSI, DEL: what a terminal would act on) written as escapes. One function for
/// the daemon's log and `adplayerctl`'s human output.
public enum OneLine {
    public static func escape(_ text: String) -> String {
        var out = ""
        out.reserveCapacity(text.utf8.count)
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\\": out += "\\\\"
            default:
                if scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value) {
                    out += "\\x" + String(scalar.value, radix: 16).leftPadded(to: 2)
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }
}

private extension String {
    func leftPadded(to width: Int) -> String { count >= width ? self : String(repeating: "0", count: width - count) + self }
}
