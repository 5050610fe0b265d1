import Bounds
import ControlProtocol
import Foundation

/// The library: the folders a box plays from (`library`), and the one check every path from
/// outside passes before it is played — `open`, `queue`, a takeover, a schedule's items, a
/// saved queue at start — a regular file under a library folder once symlinks are resolved
/// (`SafeFile`), a folder's playable files in the order `open DIR` plays them (natural:
/// `ep2` before `ep10`). Blocking (the disk): a worker's, never the loop's.
public enum Library {
    /// The playable files of a folder, in name order (natural: `ep2` before `ep10`): the
    /// extensions of video and audio files mpv plays. Not recursive.
    public static let playableExtensions: Set<String> = ["mp4", "m4v", "mkv", "webm", "mov", "avi", "ts", "m2ts", "mpg", "mpeg", "flv", "ogv",
                                                  "wmv", "3gp", "mp3", "m4a", "aac", "flac", "ogg", "opus", "wav", "mka"]
    /// And the still images a schedule shows as content (for their `seconds`).
    public static let imageExtensions: Set<String> = ["png", "jpg", "jpeg", "webp", "bmp", "gif"]

    /// `paths` as files under the library `folders` (a folder: its files of `extensions`, in
    /// name order), each checked (`SafeFile`); the first refusal is the answer. Blocking: a
    /// worker's, never the loop's.
    public static func resolveFiles(_ paths: [String], under folders: [String], extensions: Set<String> = playableExtensions) -> Result<CheckedFiles, ControlError> {
        guard !folders.isEmpty else {
            return .failure(ControlError(.noLibrary, "no library folder is configured (--library)"))
        }
        var resolved: [String] = []
        resolved.reserveCapacity(paths.count)
        var expanded: [String] = []
        var skipped: [Skipped] = []
        for path in paths {
            // A library folder (or one inside it): its playable files, in name order; what
            // it holds that cannot be played is reported, not a reason to refuse the rest.
            guard let folder = folderFiles(path, under: folders, extensions: extensions) else {
                expanded.append(path)
                continue
            }
            skipped += folder.skipped
            guard !folder.files.isEmpty else {
                let more = folder.skipped.isEmpty ? "" : " (\(folder.skipped.count) entries skipped: "
                    + folder.skipped.prefix(3).map { "\($0.name): \($0.reason)" }.joined(separator: "; ") + ")"
                return .failure(ControlError(.notAFile, "\(path): is a folder with no playable file in it (it is not a file)" + more))
            }
            expanded += folder.files
        }
        for path in expanded {
            var refusal: FileRefusal?
            var found: String?
            for folder in folders {
                do {
                    found = try SafeFile.check(path, inside: folder).path
                    break
                } catch let error as FileRefusal {
                    // The most telling refusal: a real problem with the file beats "outside".
                    if refusal == nil || refusal!.kind == .outside { refusal = error }
                } catch {}
            }
            guard let found else {
                let error = refusal ?? FileRefusal(path: path, kind: .outside, reason: "is not in a library folder")
                let reason = error.kind == .outside ? "is not under a library folder (\(folders.joined(separator: ", ")))" : error.reason
                return .failure(ControlError(ErrorCode(rawValue: error.kind.rawValue) ?? .badArgs, "\(path): \(reason)"))
            }
            resolved.append(found)
        }
        return .success(CheckedFiles(paths: resolved, skipped: skipped))
    }

    /// The playable files of `path` if it is a folder under one of `folders` (symlinks
    /// resolved), in name order, and what it holds that looks playable but is not (a folder or
    /// a FIFO named `*.mp4`, a name that is not UTF-8); nil if it is not such a folder. Names
    /// are read as bytes (readdir): one that is not UTF-8 cannot be named in the protocol, so it
    /// is reported (escaped), never turned into another name.
    public static func folderFiles(_ path: String, under folders: [String], extensions: Set<String> = playableExtensions) -> (files: [String], skipped: [Skipped])? {
        var info = stat()
        guard let real = SafeFile.realPath(path), stat(real, &info) == 0, (info.st_mode & S_IFMT) == S_IFDIR else { return nil }
        let inside = folders.contains { folder in
            guard let base = SafeFile.realPath(folder) else { return false }
            return SafeFile.isInside(real, base, orEqual: true)
        }
        guard inside, let directory = opendir(real) else { return nil }
        defer { closedir(directory) }
        var names: [String] = []
        var skipped: [Skipped] = []
        while let entry = readdir(directory) {
            let bytes = withUnsafeBytes(of: entry.pointee.d_name) { raw in Array(raw.prefix { $0 != 0 }) }
            guard bytes.first != UInt8(ascii: ".") else { continue }   // hidden, `.` and `..`
            guard let name = String(validating: bytes, as: UTF8.self) else {
                if skipped.count < maxSkipped {
                    skipped.append(Skipped(name: bytes.map { $0 < 0x80 ? String(UnicodeScalar($0)) : String(format: "\\x%02x", $0) }.joined(),
                                           reason: "its name is not UTF-8, so it cannot be named here (rename it)"))
                }
                continue
            }
            guard extensions.contains((name as NSString).pathExtension.lowercased()) else { continue }
            var file = stat()
            guard stat(real + "/" + name, &file) == 0, (file.st_mode & S_IFMT) == S_IFREG else {
                if skipped.count < maxSkipped {
                    let what = (file.st_mode & S_IFMT) == S_IFDIR ? "is a folder" : (file.st_mode & S_IFMT) == S_IFIFO ? "is a FIFO" : "is not a regular file"
                    skipped.append(Skipped(name: name, reason: what))
                }
                continue
            }
            names.append(name)
            if names.count > ControlProtocol.maxQueueEntries * 2 { break }   // a folder that is a bomb: bounded
        }
        let sorted = names.sorted { (a: String, b: String) -> Bool in a.localizedStandardCompare(b) == .orderedAscending }
        return (sorted.prefix(ControlProtocol.maxQueueEntries).map { real + "/" + $0 }, skipped)
    }

    /// Most skipped entries a reply names.
    public static let maxSkipped = 100
}

/// An entry of a folder that was not queued, and why.
public struct Skipped: Sendable {
    public let name: String
    public let reason: String

    public var json: JSONValue { ["name": .string(name), "reason": .string(reason)] }
}

/// Files checked for `open`/`queue`: the resolved paths, and a folder's entries left out.
public struct CheckedFiles: Sendable {
    public let paths: [String]
    public let skipped: [Skipped]

    /// `result` with `skipped` added when anything was.
    public func adding(to result: JSONValue) -> JSONValue {
        guard !skipped.isEmpty, case .object(var fields) = result else { return result }
        fields["skipped"] = .array(skipped.map(\.json))
        return .object(fields)
    }
}
