import AdRuntime
import Foundation

/// What a process printed, and how it ended.
public struct ProcessOutput: Sendable {
    public let status: Int32
    /// Standard output (and standard error too when they were merged).
    public let output: Data
    /// Standard error, when kept apart.
    public let errors: Data
}

/// The one process runner of the tests: runs `executable` with `arguments` to its end.
/// `environment` replaces the test's own when given; `directory` is its working folder (the
/// test's when nil); `mergeErrors` sends standard error into `output`, else it is read apart
/// (at the same time, so that neither pipe can fill and stall).
public func runProcess(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, directory: URL? = nil,
                       mergeErrors: Bool = true) throws -> ProcessOutput {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    if let environment { process.environment = environment }
    if let directory { process.currentDirectoryURL = directory }
    let output = Pipe()
    process.standardOutput = output
    let errors = Locked(Data())
    if mergeErrors {
        process.standardError = output
    } else {
        let pipe = Pipe()
        process.standardError = pipe
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            errors.withLock { $0.append(data) }
        }
    }
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    if let pipe = process.standardError as? Pipe, !mergeErrors {
        pipe.fileHandleForReading.readabilityHandler = nil
        errors.withLock { $0.append(pipe.fileHandleForReading.readDataToEndOfFile()) }
    }
    return ProcessOutput(status: process.terminationStatus, output: data, errors: errors.withLock { $0 })
}

/// Runs `executable` to its end: its exit status and what it wrote (stdout and stderr together).
public func runToEnd(_ executable: String, _ arguments: [String], environment: [String: String]? = nil) throws
    -> (status: Int32, output: String) {
    let result = try runProcess(executable, arguments, environment: environment)
    return (result.status, String(decoding: result.output, as: UTF8.self))
}

/// A process that runs beside a test (a server, a bridge): started at once, what it writes to
/// standard error (and `output`, when `collectOutput`) collected as it comes, killed (SIGKILL,
/// after a SIGCONT for a stopped one) when the test lets go of it.
public final class BackgroundProcess: @unchecked Sendable {
    // @unchecked: driven by the test's thread; the collected bytes are behind their lock.
    public let process = Process()
    private let collected = Locked(Data())

    public init(_ executable: String, _ arguments: [String], environment: [String: String]? = nil, collectOutput: Bool = false) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if let environment { process.environment = environment }
        let pipe = Pipe()
        process.standardError = pipe
        process.standardOutput = collectOutput ? pipe : FileHandle.nullDevice
        let collected = self.collected
        pipe.fileHandleForReading.readabilityHandler = { handle in
            let data = handle.availableData
            collected.withLock { $0.append(data) }
        }
        try process.run()
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGCONT)
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        // The handler's dispatch source would otherwise outlive the process and keep its pipe.
        (process.standardError as? Pipe)?.fileHandleForReading.readabilityHandler = nil
    }

    /// What it wrote so far.
    public var log: String { collected.withLock { String(decoding: $0, as: UTF8.self) } }
    public var pid: Int32 { process.processIdentifier }
    public var isRunning: Bool { process.isRunning }
}
