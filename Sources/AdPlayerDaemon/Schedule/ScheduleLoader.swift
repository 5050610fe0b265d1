import AdRuntime
import ControlProtocol
import Foundation

/// Reads a schedule file and resolves its playlists to files (issue 37): each item a file or a
/// folder (its playable files and images, in name order) under a library folder — a relative
/// path from the first library folder — each checked as `open` checks a file. Blocking (the
/// disk): a worker's, never the loop's.
public enum ScheduleLoader {
    /// An image without `seconds` is shown this long (mpv would show it for 1 s).
    public static let defaultImageSeconds = 10.0

    public static func load(path: String, library: [String], timeZone: TimeZone) throws(ScheduleError) -> ResolvedSchedule {
        let data: Data
        do {
            data = try SafeFile.read(path, maxBytes: Schedule.maxFileBytes)
        } catch {
            throw ScheduleError(problems: ["\(path): \(error.reason)"])
        }
        let schedule = try Schedule.parse(Array(data), timeZone: timeZone)
        return try resolve(schedule, library: library)
    }

    public static func resolve(_ schedule: Schedule, library: [String]) throws(ScheduleError) -> ResolvedSchedule {
        var problems: [String] = []
        var files: [String: [ResolvedSchedule.File]] = [:]
        let extensions = CommandRouter.playableExtensions.union(CommandRouter.imageExtensions)
        for (name, playlist) in schedule.playlists.sorted(by: { $0.key < $1.key }) {
            var resolved: [ResolvedSchedule.File] = []
            for (index, item) in playlist.items.enumerated() {
                let absolute = item.path.hasPrefix("/") ? item.path : (library.first.map { $0 + "/" + item.path } ?? item.path)
                switch CommandRouter.resolveFiles([absolute], under: library, extensions: extensions) {
                case .success(let checked):
                    resolved += checked.paths.map { file($0, seconds: item.seconds) }
                case .failure(let error):
                    if problems.count < 200 { problems.append("$.playlists.\(name).items[\(index)]: \(error.message)") }
                }
                if resolved.count > Schedule.maxItems {
                    problems.append("$.playlists.\(name): more than \(Schedule.maxItems) files once its folders are read")
                    break
                }
            }
            files[name] = resolved
        }
        guard problems.isEmpty else { throw ScheduleError(problems: problems) }
        return ResolvedSchedule(schedule: schedule, files: files)
    }

    /// A file with its length cap: an image's default when none is given.
    public static func file(_ path: String, seconds: Double?) -> ResolvedSchedule.File {
        let image = CommandRouter.imageExtensions.contains((path as NSString).pathExtension.lowercased())
        return ResolvedSchedule.File(path: path, seconds: seconds ?? (image ? defaultImageSeconds : nil))
    }
}
