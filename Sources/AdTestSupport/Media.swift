import Foundation

/// The generated test media (scripts/make-media.sh), made on first use.
public enum Media {
    private static let ready: Result<Void, any Error> = Result {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [repositoryRoot.appendingPathComponent("scripts/make-media.sh").path]
        try process.run()
        process.waitUntilExit()
        if process.terminationStatus != 0 {
            throw NSError(domain: "Media", code: Int(process.terminationStatus),
                          userInfo: [NSLocalizedDescriptionKey: "scripts/make-media.sh failed (is ffmpeg installed?)"])
        }
    }

    /// The path of a generated file, e.g. `Media.path("episode-1.mp4")`.
    public static func path(_ name: String) throws -> String {
        try ready.get()
        let path = repositoryRoot.appendingPathComponent("media").appendingPathComponent(name).path
        guard FileManager.default.fileExists(atPath: path) else {
            throw NSError(domain: "Media", code: 1, userInfo: [NSLocalizedDescriptionKey: "missing \(path)"])
        }
        return path
    }
}

/// Polls a condition until a generous deadline; for facts that have no event. The deadline
/// only bounds a failing test: nothing asserts how soon the condition holds.
public func waitUntil(timeout: TimeInterval = 20, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(timeout)
    while Date() < deadline {
        if condition() { return true }
        Thread.sleep(forTimeInterval: 0.005)
    }
    return condition()
}
