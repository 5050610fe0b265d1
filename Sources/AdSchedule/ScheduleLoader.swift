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

    /// `measure`: a file's length as FFmpeg reads it (nil: unknown), for the first file of each
    /// interrupt's playlist.
    public static func load(path: String, library: [String], timeZone: TimeZone,
                            measure: (String) -> Double? = { _ in nil }) throws(ScheduleError) -> ResolvedSchedule {
        let data: Data
        do {
            data = try SafeFile.read(path, maxBytes: Schedule.maxFileBytes)
        } catch {
            throw ScheduleError(problems: ["\(path): \(error.reason)"])
        }
        let schedule: Schedule
        do {
            schedule = try Schedule.parse(Array(data), timeZone: timeZone)
        } catch {
            // Every problem at once: the files of the playlists that could be read are checked too.
            guard let partial = error.partial else { throw error }
            var problems = error.problems
            do {
                _ = try resolve(partial, library: library)
            } catch let more {
                problems += more.problems.filter { !problems.contains($0) }
            }
            throw ScheduleError(problems: problems)
        }
        var resolved = try resolve(schedule, library: library)
        for interrupt in resolved.schedule.interrupts {
            guard var files = resolved.files[interrupt.playlist], let first = files.first, first.seconds == nil, first.measured == nil else { continue }
            files[0].measured = measure(first.path)
            resolved = ResolvedSchedule(schedule: resolved.schedule, files: resolved.files.merging([interrupt.playlist: files]) { $1 })
        }
        return resolved
    }

    public static func resolve(_ schedule: Schedule, library: [String]) throws(ScheduleError) -> ResolvedSchedule {
        var problems: [String] = []
        var files: [String: [ResolvedSchedule.File]] = [:]
        let extensions = Library.playableExtensions.union(Library.imageExtensions)
        // A folder named by many playlists is read once.
        var read: [String: Result<[String], ControlError>] = [:]
        var total = 0
        playlists: for (name, playlist) in schedule.playlists.sorted(by: { $0.key < $1.key }) {
            var resolved: [ResolvedSchedule.File] = []
            for (index, item) in playlist.items.enumerated() {
                let absolute = item.path.hasPrefix("/") ? item.path : (library.first.map { $0 + "/" + item.path } ?? item.path)
                let result = read[absolute] ?? Library.resolveFiles([absolute], under: library, extensions: extensions).map(\.paths)
                read[absolute] = result
                switch result {
                case .success(let paths):
                    resolved += paths.map { file($0, seconds: item.seconds) }
                    total += paths.count
                case .failure(let error):
                    if problems.count < 200 { problems.append("$.playlists.\(name).items[\(index)]: \(error.message)") }
                }
                if resolved.count > Schedule.maxItems {
                    problems.append("$.playlists.\(name): more than \(Schedule.maxItems) files once its folders are read")
                    break
                }
                if total > Schedule.maxTotalFiles {
                    problems.append("$.playlists: more than \(Schedule.maxTotalFiles) files in all once their folders are read")
                    break playlists
                }
            }
            files[name] = resolved
        }
        guard problems.isEmpty else { throw ScheduleError(problems: problems) }
        return ResolvedSchedule(schedule: schedule, files: files)
    }

    /// A file with its length cap: an image's default when none is given.
    public static func file(_ path: String, seconds: Double?) -> ResolvedSchedule.File {
        let image = Library.imageExtensions.contains((path as NSString).pathExtension.lowercased())
        return ResolvedSchedule.File(path: path, seconds: seconds ?? (image ? defaultImageSeconds : nil))
    }
}
