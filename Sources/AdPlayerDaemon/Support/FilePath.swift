import Foundation

/// Paths as text: what the player's loop may do with a path without touching the disk.
/// (Foundation's `URL(fileURLWithPath:)` stats the path to decide whether it is a folder —
/// disk I/O that must never run on the loop, R18.)
public enum FilePath {
    /// The last component without its extension: `/srv/tv/ep-1.mp4` → `ep-1`.
    public static func stem(_ path: String) -> String {
        let name = lastComponent(path)
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return name }
        return String(name[..<dot])
    }

    /// The last component: `/srv/tv/ep-1.mp4` → `ep-1.mp4` (trailing slashes ignored).
    public static func lastComponent(_ path: String) -> String {
        let trimmed = path.utf8.last == UInt8(ascii: "/") && path.count > 1 ? String(path.dropLast()) : path
        guard let slash = trimmed.lastIndex(of: "/") else { return trimmed }
        return String(trimmed[trimmed.index(after: slash)...])
    }

    /// `file://` and the absolute path, percent-encoded as a URL's path: never a trailing
    /// slash the path did not have.
    public static func fileURL(_ path: String) -> String {
        "file://" + (path.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed) ?? path)
    }
}
