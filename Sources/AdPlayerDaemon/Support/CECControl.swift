import AdRuntime
import Foundation

/// Puts the display in standby and wakes it over HDMI-CEC (`cec-command`, by default Debian's
/// `cec-ctl` from v4l-utils, the kernel's CEC framework): the command with `--standby` or
/// `--image-view-on` appended.
///
/// Off the loop: each request goes to a thread of its own kind (`Workers`, one thread), the
/// command is found on `PATH` there and run as a `ChildProcess` — its own process group, 10 s
/// (then killed with everything it started), the last 4 KiB of its output kept, always reaped.
/// Requests made while one runs are coalesced to the last. A box without the command, or
/// without a CEC device, says so **once** (then blanks only); a failure that changes is said
/// again, and so is the first success after failures.
public final class CECControl: Sendable {
    private let command: [String]
    private let log: Logger
    private let workers = Workers(name: "adplayerd-cec", threads: 1)
    private let state = Locked(State())

    private struct State {
        var wanted: Bool?
        var running = false
        var lastProblem: String?
    }

    public init(command: [String], log: Logger) {
        self.command = command
        self.log = log
    }

    /// Wakes the display (true) or puts it in standby (false). Any thread; returns at once.
    public func set(on: Bool) {
        let start = state.withLock { state -> Bool in
            state.wanted = on
            guard !state.running else { return false }
            state.running = true
            return true
        }
        guard start else { return }
        workers.execute { [self] in drain() }
    }

    private func drain() {
        while let on = state.withLock({ state -> Bool? in
            guard let wanted = state.wanted else {
                state.running = false
                return nil
            }
            state.wanted = nil
            return wanted
        }) {
            run(on: on)
        }
    }

    private func run(on: Bool) {
        let flag = on ? "--image-view-on" : "--standby"
        guard let program = command.first, let path = Self.find(program) else {
            say("display: no \(command.first ?? "cec-command") on PATH (Debian: apt-get install v4l-utils): the output is blanked only, the display's power is not switched")
            return
        }
        let outcome: ChildProcess.Outcome
        do {
            outcome = try ChildProcess.run(path, Array(command.dropFirst()) + [flag], timeout: Self.timeout)
        } catch {
            say("display: \(error): the output is blanked only")
            return
        }
        let text = outcome.output.trimmingCharacters(in: .whitespacesAndNewlines)
        if outcome.status == 0 {
            if state.withLock({ state in defer { state.lastProblem = nil }; return state.lastProblem != nil }) {
                log.notice("display: \(path) \(flag) works again")
            } else {
                log.info("display: \(path) \(flag)")
            }
            return
        }
        if outcome.timedOut {
            say("display: \(path) \(flag) did not finish within \(Int(Self.timeout)) s: killed with what it started; the output is blanked")
            return
        }
        let last = text.split(separator: "\n").last.map(String.init) ?? "no output"
        let noDevice = text.contains("/dev/cec") || text.lowercased().contains("no such file")
        say(noDevice ? "display: this box has no CEC device (\(path) \(flag): \(last.prefix(200))): the output is blanked only"
                     : "display: \(path) \(flag) failed (\(outcome.status.map { "status \($0)" } ?? "killed by a signal")): \(last.prefix(200)); the output is blanked")
    }

    /// Once until it changes (or the command works again).
    private func say(_ problem: String) {
        let new = state.withLock { state in defer { state.lastProblem = problem }; return state.lastProblem != problem }
        if new { log.warning(problem) }
    }

    /// How long the command may take (then it is killed, with whatever it started).
    static let timeout = 10.0

    /// `program` as given when it names a path, else the first executable of that name on `PATH`.
    static func find(_ program: String) -> String? {
        if program.contains("/") { return access(program, X_OK) == 0 ? program : nil }
        let path = ProcessInfo.processInfo.environment["PATH"] ?? "/usr/local/bin:/usr/bin:/bin"
        for folder in path.split(separator: ":") where !folder.isEmpty {
            let candidate = "\(folder)/\(program)"
            var info = stat()
            if stat(candidate, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG, access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }
}
