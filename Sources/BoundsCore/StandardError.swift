#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Lines on stderr, as their reader wants them. The journal reads a syslog priority from a
/// `<N>` first on each line of its stream; a person at a terminal, or a script reading a pipe,
/// gets words instead (`error: `, `warning: `; nothing before notices), never `<3>`. Whether
/// stderr is the journal's stream is systemd's own test: `$JOURNAL_STREAM` names its device
/// and inode (systemd.exec(5)), checked against stderr's.
public enum StandardError {
    public static let isJournal: Bool = {
        guard let value = getenv("JOURNAL_STREAM") else { return false }
        let parts = String(cString: value).split(separator: ":")
        guard parts.count == 2, let device = UInt64(parts[0]), let inode = UInt64(parts[1]) else { return false }
        var info = stat()
        guard fstat(2, &info) == 0 else { return false }
        return UInt64(info.st_dev) == device && UInt64(info.st_ino) == inode
    }()

    /// `text` as one line for stderr at syslog priority `priority` (2 critical … 7 debug).
    /// `named`: the text names its program first (`adplayerd plays: …`), which says enough
    /// to a person — no word for the priority.
    public static func line(priority: Int, _ text: String, named: Bool = false) -> String {
        if isJournal { return "<\(priority)>\(text)\n" }
        if named { return "\(text)\n" }
        switch priority {
        case ...3: return "error: \(text)\n"
        case 4: return "warning: \(text)\n"
        default: return "\(text)\n"
        }
    }

    /// Writes it (one `write`, so that lines of several threads do not interleave).
    public static func write(priority: Int, _ text: String, named: Bool = false) {
        writeToStderr(line(priority: priority, text, named: named))
    }
}

private func writeToStderr(_ line: String) {
    _ = line.withCString { write(2, $0, strlen($0)) }
}
