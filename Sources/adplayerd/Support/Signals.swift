import AdRuntime
import Foundation

/// Signals, taken by a thread of their own with `sigwait` rather than by handlers: nothing
/// runs in signal context, and the daemon decides what each one means in ordinary code.
///
/// `blockForProcess()` must run in `main` before any other thread exists (mpv's included), so
/// that every thread inherits the mask and the signals wait for `sigwait`.
enum Signals {
    static let handled: [Int32] = [SIGTERM, SIGINT, SIGHUP, SIGQUIT]

    static func blockForProcess() {
        var set = sigset_t()
        sigemptyset(&set)
        for signal in handled { sigaddset(&set, signal) }
        pthread_sigmask(SIG_BLOCK, &set, nil)
        // Sockets: a peer that went away is an error to handle, not a reason to die.
        signal(SIGPIPE, SIG_IGN)
    }

    /// Starts the thread that hands each signal to `onSignal` (on that thread).
    static func watch(_ onSignal: @escaping @Sendable (Int32) -> Void) {
        let box = Unmanaged.passRetained(SignalBox(onSignal)).toOpaque()
        var thread = pthread_t()
        pthread_create(&thread, nil, signalThreadMain, box)
        pthread_detach(thread)
    }

    static func name(_ signal: Int32) -> String {
        switch signal {
        case SIGTERM: "SIGTERM"
        case SIGINT: "SIGINT"
        case SIGHUP: "SIGHUP"
        case SIGQUIT: "SIGQUIT"
        default: "signal \(signal)"
        }
    }
}

private final class SignalBox: Sendable {
    let onSignal: @Sendable (Int32) -> Void
    init(_ onSignal: @escaping @Sendable (Int32) -> Void) { self.onSignal = onSignal }
}

private func signalThreadMain(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let context else { return nil }
    let box = Unmanaged<SignalBox>.fromOpaque(context).takeRetainedValue()
    setThreadName("adplayerd-sig")
    var set = sigset_t()
    sigemptyset(&set)
    for signal in Signals.handled { sigaddset(&set, signal) }
    while true {
        var received: Int32 = 0
        if sigwait(&set, &received) == 0 { box.onSignal(received) }
    }
}
