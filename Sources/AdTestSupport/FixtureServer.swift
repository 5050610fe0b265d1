import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import AdRuntime

/// The repository's top folder (where Package.swift is), for tests' fixtures and media.
public let repositoryRoot: URL = {
    var url = URL(fileURLWithPath: #filePath)
    while url.path != "/" {
        url.deleteLastPathComponent()
        if FileManager.default.fileExists(atPath: url.appendingPathComponent("Package.swift").path) { return url }
    }
    fatalError("no Package.swift above \(#filePath)")
}()

/// A Python fixture server from Tests/Fixtures, for one test: it listens on 127.0.0.1,
/// prints its port, and exits when its standard input closes (so a test that dies takes it
/// along).
public final class FixtureServer: @unchecked Sendable {
    // @unchecked: the process and pipe are set up in init and only closed in stop().
    public let port: Int
    private let process = Process()
    private let input = Pipe()

    public init(script: String, arguments: [String] = []) throws {
        let output = Pipe()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["python3", repositoryRoot.appendingPathComponent("Tests/Fixtures/\(script)").path] + arguments
        process.standardInput = input
        process.standardOutput = output
        try process.run()
        var line = Data()
        while !line.contains(10) {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty { break }
            line.append(byte)
        }
        guard let port = Int(String(decoding: line, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)) else {
            throw NSError(domain: "FixtureServer", code: 1, userInfo: [NSLocalizedDescriptionKey: "\(script) did not start"])
        }
        self.port = port
    }

    deinit { stop() }

    public var base: String { "http://127.0.0.1:\(port)" }

    public func stop() {
        guard process.isRunning else { return }
        try? input.fileHandleForWriting.close()
        process.waitUntilExit()
    }

    /// GETs `path` and returns the body (for control endpoints and counters).
    @discardableResult
    public func get(_ path: String) throws -> Data {
        let box = Locked<Result<Data, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        URLSession.shared.dataTask(with: URL(string: base + path)!) { data, _, error in
            box.withLock { $0 = data.map { .success($0) } ?? .failure(error ?? URLError(.badServerResponse)) }
            done.signal()
        }.resume()
        _ = done.wait(timeout: .now() + 10)
        return try box.withLock { $0 }?.get() ?? Data()
    }

    /// The `/_counts` JSON object of a counting server.
    public func counts() throws -> [String: Int] {
        (try JSONSerialization.jsonObject(with: get("/_counts")) as? [String: Int]) ?? [:]
    }

    /// The `/_requests` JSON object of the VAST server: documents and media it answered, by path.
    public func requests() throws -> [String: Int] {
        (try JSONSerialization.jsonObject(with: get("/_requests")) as? [String: Int]) ?? [:]
    }
}
