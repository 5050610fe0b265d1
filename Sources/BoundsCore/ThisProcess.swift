#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's environment, working folder and files as Foundation's `ProcessInfo` and
/// `FileManager` give them, for the modules that link no Foundation (the protocol,
/// `adplayerctl`).
public enum ThisProcess {
    /// Every environment variable (`ProcessInfo.processInfo.environment`).
    public static var environment: [String: String] {
        var variables: [String: String] = [:]
        var entry = environ
        while let pointer = entry.pointee {
            let text = String(cString: pointer)
            if let equals = text.firstIndex(of: "=") { variables[String(text[..<equals])] = String(text[text.index(after: equals)...]) }
            entry += 1
        }
        return variables
    }

    /// The working folder (`FileManager.default.currentDirectoryPath`).
    public static var currentDirectory: String {
        guard let path = getcwd(nil, 0) else { return "." }
        defer { free(path) }
        return String(cString: path)
    }

    /// The wall clock: seconds since 1970 (`Date().timeIntervalSince1970`).
    public static var wallClock: Double {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }

    /// Whether something is at `path`, symlinks followed (`FileManager.default.fileExists`).
    public static func exists(_ path: String) -> Bool {
        var info = stat()
        return stat(path, &info) == 0
    }
}
