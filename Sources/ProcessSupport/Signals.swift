import Bounds
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// Signals, taken by a thread of their own with `sigwait` rather than by handlers: nothing
/// runs in signal context, and the daemon decides what each one means in ordinary code.
///
/// `blockForProcess()` must run in `main` before any other thread exists (mpv's included), so
/// that every thread inherits the mask and the signals wait for `sigwait`.
public enum Signals {
    public static let handled: [Int32] = [SIGTERM, SIGINT, SIGHUP, SIGQUIT]

    public static func blockForProcess() {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in handled { sigaddset(&set, signal) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
        // Sockets: a peer that went away is an error to handle, not a reason to die.
        signal(SIGPIPE, SIG_IGN)
    }

    /// A tool that watches no signal (`simulate`, `schedule-check`, `plays export`…): SIGTERM and
    /// Ctrl-C end it as they end any program. Called before the tool starts a thread (they
    /// inherit the mask); without it, they were blocked for good and only SIGKILL stopped a
    /// month-long simulation.
    public static func unblockForTool() {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in handled { sigaddset(&set, signal) }
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    /// Starts the thread that hands each signal to `onSignal` (on that thread).
    public static func watch(_ onSignal: @escaping @Sendable (Int32) -> Void) {
        startThread(named: "adplayerd-sig") {
            var set = sigset_t()
            sigemptyset(&set)
            for signal in handled { sigaddset(&set, signal) }
            while true {
                var received: Int32 = 0
                if sigwait(&set, &received) == 0 { onSignal(received) }
            }
        }
    }

    public static func name(_ signal: Int32) -> String {
        switch signal {
        case SIGTERM: "SIGTERM"
        case SIGINT: "SIGINT"
        case SIGHUP: "SIGHUP"
        case SIGQUIT: "SIGQUIT"
        default: "signal \(signal)"
        }
    }
}

/// What signals ask of the daemon's main thread, in the order that keeps systemd's promises: a
/// stop goes ahead of any reload still waiting, and reloads asked for while one waits are one
/// (a burst of SIGHUPs is one reload, never a queue that holds SIGTERM past the stop timeout).
///
/// Threading: `stop`/`reload` from any thread (the signal thread); `next` from the one that acts.
public final class DaemonRequests: Sendable {
    public enum Request: Sendable, Equatable {
        case stop(exitCode: Int32)
        case reload
    }

    private struct Pending {
        var stop: Int32?
        var reload = false
    }

    private let pending = Locked(Pending())

    public init() {}

    public func stop(exitCode: Int32 = 0) { pending.signal { if $0.stop == nil { $0.stop = exitCode } } }

    public func reload() { pending.signal { $0.reload = true } }

    /// The next thing to do, waiting for one: a stop first, else one reload for all asked so far.
    public func next() -> Request {
        pending.wait { pending -> Request? in
            if let code = pending.stop { return .stop(exitCode: code) }
            if pending.reload {
                pending.reload = false
                return .reload
            }
            return nil
        }!
    }
}
