import Foundation
import XCTest

/// The generated test media (scripts/make-media.sh), made on first use.
enum Media {
    static let repository: URL = {
        var url = URL(fileURLWithPath: #filePath)
        while url.path != "/" {
            url.deleteLastPathComponent()
            if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
        }
        fatalError("no Package.swift above \(#filePath)")
    }()

    private static let ready: Result<Void, any Error> = Result {
        let script = repository.appendingPathComponent("scripts/make-media.sh").path
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/bash")
        process.arguments = [script]
        try process.run()
        process.waitUntilExit()
        if process.terminationStatus != 0 {
            throw NSError(domain: "Media", code: Int(process.terminationStatus),
                          userInfo: [NSLocalizedDescriptionKey: "scripts/make-media.sh failed (is ffmpeg installed?)"])
        }
    }

    /// The path of a generated file, e.g. `Media.path("episode-1.mp4")`.
    static func path(_ name: String) throws -> String {
        try ready.get()
        let path = repository.appendingPathComponent("media").appendingPathComponent(name).path
        guard FileManager.default.fileExists(atPath: path) else { throw NSError(domain: "Media", code: 1, userInfo: [NSLocalizedDescriptionKey: "missing \(path)"]) }
        return path
    }
}
