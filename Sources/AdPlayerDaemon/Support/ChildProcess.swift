import AdRuntime
import Foundation

/// Runs a helper program (the display's `cec-command`) the way a daemon must: never waiting on
/// it for ever, never holding what it prints, never leaving it behind (issue 34, 19).
///
/// - its own **process group** (`posix_spawn` with `POSIX_SPAWN_SETPGROUP`), so that a timeout
///   kills it **and everything it started** (`kill(-group, SIGKILL)`): a child that kept the
///   output pipe open no longer holds the reader;
/// - standard output and error on one pipe, read as it comes with `poll` up to the deadline,
///   keeping only the **last `maxOutput` bytes** (a program that prints 100 MB costs 4 KiB);
/// - **always reaped** (`waitpid`), whatever happened: no zombie;
/// - a clean signal mask and default dispositions (the daemon blocks its signals for its own
///   thread; a child must not inherit that), standard input from /dev/null.
///
/// Threading: any thread but the player's loop; it blocks for at most `timeout` (+ the reap).
enum ChildProcess {
    struct Outcome: Equatable {
        /// The exit status, or nil when it was killed (the timeout) or died of a signal.
        var status: Int32?
        var timedOut: Bool
        /// The last bytes it wrote, as text.
        var output: String
    }

    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    static func run(_ path: String, _ arguments: [String], timeout: Double, maxOutput: Int = 4096) throws -> Outcome {
        var pipeEnds: [Int32] = [-1, -1]
        guard pipe(&pipeEnds) == 0 else { throw Failure(description: "pipe: \(String(cString: strerror(errno)))") }
        for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }   // only the child's copies (dup2) survive exec
        defer { if pipeEnds[0] >= 0 { close(pipeEnds[0]) } }

        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 1)
        posix_spawn_file_actions_adddup2(&actions, pipeEnds[1], 2)

        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var empty = sigset_t(), all = sigset_t()
        sigemptyset(&empty)
        sigfillset(&all)
        sigdelset(&all, SIGKILL)
        sigdelset(&all, SIGSTOP)
        posix_spawnattr_setsigmask(&attributes, &empty)
        posix_spawnattr_setsigdefault(&attributes, &all)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))

        let argv: [UnsafeMutablePointer<CChar>?] = ([path] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, path, &actions, &attributes, argv, environ)
        close(pipeEnds[1])
        guard spawned == 0 else { throw Failure(description: "\(path) cannot be run: \(String(cString: strerror(spawned)))") }

        // Read until the end of its output or the deadline, keeping the tail.
        let deadline = Double(MonotonicTime.now()) / 1e9 + timeout
        var tail: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16384)
        var timedOut = false
        reading: while true {
            let left = deadline - Double(MonotonicTime.now()) / 1e9
            guard left > 0 else {
                timedOut = true
                break
            }
            var item = pollfd(fd: pipeEnds[0], events: Int16(POLLIN), revents: 0)
            let ready = poll(&item, 1, Int32(min(left, 3600) * 1000) + 1)
            if ready < 0 {
                if errno == EINTR { continue }
                break
            }
            guard ready > 0 else { continue }
            let n = read(pipeEnds[0], &chunk, chunk.count)
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                break reading
            }
            guard n > 0 else { break }   // its end of the pipe, and every copy of it, closed
            tail.append(contentsOf: chunk[0..<n])
            if tail.count > maxOutput { tail.removeFirst(tail.count - maxOutput) }
        }
        if timedOut { kill(-pid, SIGKILL) }   // the group: what it started goes too
        close(pipeEnds[0])
        pipeEnds[0] = -1
        // Reap it, always. Done reading (its output closed), it may still be finishing: it is
        // given what is left of the deadline, then killed with its group.
        var status: Int32 = 0
        while true {
            let reaped = waitpid(pid, &status, timedOut ? 0 : WNOHANG)
            if reaped == pid { break }
            if reaped < 0, errno == EINTR { continue }
            if reaped < 0 { break }
            if Double(MonotonicTime.now()) / 1e9 >= deadline {
                kill(-pid, SIGKILL)
                timedOut = true
                continue
            }
            usleep(10_000)
        }
        // Whatever it left in its group (a child that outlived it): gone too.
        kill(-pid, SIGKILL)
        let exited = (status & 0x7F) == 0
        return Outcome(status: exited && !timedOut ? (status >> 8) & 0xFF : nil, timedOut: timedOut,
                       output: String(decoding: tail, as: UTF8.self))
    }
}
