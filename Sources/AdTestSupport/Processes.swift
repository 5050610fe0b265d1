import Foundation

/// Runs `executable` with `arguments` to its end and returns its exit status and what it
/// wrote (stdout and stderr together). `environment` replaces the test's own when given.
public func runToEnd(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws
    -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    let output = Pipe()
    process.standardOutput = output
    process.standardError = output
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}
