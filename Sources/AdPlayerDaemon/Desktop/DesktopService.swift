import AdRuntime
import CMpris
import ControlProtocol
import CSystem
import Foundation

/// The Linux desktop and system around the daemon, on D-Bus (sd-bus, `CMpris`):
///
/// - **MPRIS2** on the session bus as `org.mpris.MediaPlayer2.adplayerd` (with `--mpris`):
///   desktop media keys and widgets, Bluetooth headset buttons (through BlueZ's AVRCP, which
///   the desktop maps to MPRIS), KDE Connect, `playerctl`. A call becomes work posted to the
///   player's loop, like a control-socket command (SPEC R18); the bus thread goes on serving,
///   and the answer is sent from it once the loop has run the call (sd-bus's asynchronous
///   replies). The bus thread never waits on the loop.
/// - **logind's PrepareForSleep** on the system bus: going to sleep is background and a
///   pause (R13), waking is foreground and play again if it played.
///
/// Threading: the bus connections, their I/O and every D-Bus callback run on one thread of
/// their own (`adplayerd-dbus`), never on the loop. The loop hands over what desktops show
/// (`update`): a copy under a lock, then a queued note that wakes the bus thread — no bus I/O
/// on the loop. Properties are read from that copy, `Position` too: extrapolated from the last
/// change at the rate (the loop hands over a new copy at every play, pause, seek and rate).
public final class DesktopService: @unchecked Sendable {
    // @unchecked: `service` is set once in init; the C side is thread-safe as documented in
    // mpris.h; everything mutable is behind `shown`.
    private let loop: any PlayerLoop
    private let controller: Controller
    private let log: Logger
    private var service: OpaquePointer!
    private let shown = Locked(DesktopState())
    private let finished = Handover<Void>()
    public let exportsMpris: Bool

    /// Connects; `mpris: false` only follows sleep (nil when there is no system bus either).
    /// Call `start()` to serve.
    public init(mpris: Bool, loop: any PlayerLoop, controller: Controller, log: Logger) throws {
        self.loop = loop
        self.controller = controller
        self.log = log
        exportsMpris = mpris
        var error = [CChar](repeating: 0, count: 512)
        var warning = [CChar](repeating: 0, count: 512)
        let callbacks = mpris_callbacks(state: desktopState, position: desktopPosition, command: desktopCommand, sleep: desktopSleep)
        // The C side keeps this pointer for its callbacks; `self` outlives them (`stop` joins).
        let context = Unmanaged.passUnretained(self).toOpaque()
        guard let made = mpris_open(mpris ? "adplayerd" : nil, callbacks, context, &error, error.count, &warning, warning.count) else {
            throw UsageError(Self.string(error))
        }
        service = made
        let note = Self.string(warning)
        if !note.isEmpty { mpris ? log.warning(note) : log.info(note) }
    }

    deinit { mpris_close(service) }

    private static func string(_ buffer: [CChar]) -> String {
        String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Serves on the bus thread until `stop()`.
    public func start() {
        startThread(named: "adplayerd-dbus") { [self] in
            _ = csystem_batch_this_thread()   // waking it must not preempt the player's loop
            mpris_run(service)
            finished.fulfil(())
        }
    }

    /// Stops serving (the bus name is released); waits up to 2 s for the bus thread.
    public func stop() {
        mpris_stop(service)
        _ = finished.wait(timeout: 2)
    }

    // MARK: From the loop

    /// On the loop, after any change: what desktops show now; `PropertiesChanged` names the
    /// properties that differ from what they were shown, `Seeked` follows a real seek.
    public func update(_ state: DesktopState, seekedTo: Double?) {
        guard exportsMpris else { return }
        let before = shown.withLock { shown in
            defer { shown = state }
            return shown
        }
        let changed = Self.changedProperties(before, state)
        if !changed.isEmpty { mpris_properties_changed(service, changed.joined(separator: ",")) }
        if let seekedTo { mpris_seeked(service, Self.microseconds(seekedTo)) }
    }

    /// What waits for the bus thread (answers, changed properties, a Seeked): bounded,
    /// coalesced in mpris.c, however long the bus holds the bus thread up.
    package var waitingForTheBus: Int { Int(mpris_pending_count(service)) }

    /// The `.Player` properties whose values differ between `a` and `b` (Position never: the
    /// specification gives it no change signal).
    static func changedProperties(_ a: DesktopState, _ b: DesktopState) -> [String] {
        var names: [String] = []
        if a.status != b.status { names.append("PlaybackStatus") }
        if a.rate != b.rate { names.append("Rate") }
        if a.loop != b.loop || a.repeatMode != b.repeatMode { names.append("LoopStatus") }
        if a.shuffle != b.shuffle { names.append("Shuffle") }
        if a.volume != b.volume { names.append("Volume") }
        if a.track != b.track || a.length != b.length { names.append("Metadata") }
        if a.canPlay != b.canPlay { names.append("CanPlay") }
        if a.canPause != b.canPause { names.append("CanPause") }
        if a.canSeek != b.canSeek { names.append("CanSeek") }
        if a.canGoNext != b.canGoNext { names.append("CanGoNext") }
        if a.canGoPrevious != b.canGoPrevious { names.append("CanGoPrevious") }
        return names
    }

    static func microseconds(_ seconds: Double) -> Int64 {
        guard seconds.isFinite else { return 0 }
        return Int64(clamping: Int64(exactly: (seconds * 1e6).rounded()) ?? (seconds > 0 ? .max : .min))
    }

    // MARK: On the bus thread

    /// The position now, from the copy the loop handed over last (extrapolated at its rate).
    fileprivate func position() -> Int64 {
        Self.microseconds(shown.withLock { $0 }.position(now: MonotonicTime.now()))
    }

    /// What a property read sees: the copy the loop handed over last.
    fileprivate func fill(_ out: UnsafeMutablePointer<mpris_state>) {
        let state = shown.withLock { $0 }
        out.pointee.status = Int32(state.status == .playing ? MPRIS_PLAYING : state.status == .paused ? MPRIS_PAUSED : MPRIS_STOPPED)
        out.pointee.rate = state.rate
        out.pointee.length_us = state.length.map(Self.microseconds) ?? -1
        out.pointee.loop_status = state.repeatMode == .all ? 2 : state.repeatMode == .one ? 1 : 0
        out.pointee.shuffle = state.shuffle ? 1 : 0
        out.pointee.volume = state.volume
        out.pointee.can_play = state.canPlay ? 1 : 0
        out.pointee.can_pause = state.canPause ? 1 : 0
        out.pointee.can_seek = state.canSeek ? 1 : 0
        out.pointee.can_go_next = state.canGoNext ? 1 : 0
        out.pointee.can_go_previous = state.canGoPrevious ? 1 : 0
        if let track = state.track {
            out.pointee.has_track = 1
            Self.copy(track.id, to: &out.pointee.track_id)
            Self.copy(track.title, to: &out.pointee.title)
            Self.copy(track.url, to: &out.pointee.url)
        }
    }

    /// A C string field of `mpris_state`.
    private static func copy<T>(_ text: String, to field: inout T) {
        withUnsafeMutableBytes(of: &field) { cString(text, into: $0) }
    }

    /// `text` as a NUL-terminated string in `buffer`, cut at a character boundary to fit
    /// (D-Bus refuses invalid UTF-8).
    static func cString(_ text: String, into buffer: UnsafeMutableRawBufferPointer) {
        guard buffer.count > 0 else { return }
        var bytes = Array(text.utf8)
        if bytes.count >= buffer.count {
            bytes = Array(bytes.prefix(buffer.count - 1))
            if let start = bytes.lastIndex(where: { $0 & 0xC0 != 0x80 }), bytes[start] >= 0xC0 {
                // The last character starts at `start`: keep it only if all of it fits.
                let length = bytes[start] >= 0xF0 ? 4 : bytes[start] >= 0xE0 ? 3 : 2
                if bytes.count - start < length { bytes.removeSubrange(start...) }
            }
        }
        buffer.copyBytes(from: bytes)
        buffer[bytes.count] = 0
    }

    /// A method call or property write: validated here, then run on the loop, without waiting
    /// for it. A method is answered (`reply`) once the loop has run it; a property write at once.
    /// What the specification says has no effect (Seek when CanSeek is false, a stale
    /// SetPosition) has none and is no error. Returns a refusal to answer with at once, or nil.
    fileprivate func command(_ command: Int32, argument: Int64, value: Double, text: String?, reply: UnsafeMutableRawPointer?) -> String? {
        let controller = self.controller
        let body: @Sendable () throws -> Void
        switch Int(command) {
        case Int(MPRIS_PLAY): body = { _ = try controller.play() }
        case Int(MPRIS_PAUSE): body = { if controller.desktopState().canPause { _ = try controller.pause() } }
        case Int(MPRIS_PLAY_PAUSE): body = { _ = try controller.toggle() }
        case Int(MPRIS_STOP): body = { _ = controller.stopCommand() }
        case Int(MPRIS_NEXT): body = { if controller.desktopState().canGoNext { _ = try controller.perform(.next) } }
        case Int(MPRIS_PREVIOUS): body = { if controller.desktopState().canGoPrevious { _ = try controller.perform(.previous) } }
        case Int(MPRIS_SEEK):
            guard let by = try? Seconds.check(Double(argument) / 1e6, .offset, field: "Seek") else { return "Seek: offset out of range" }
            body = { if controller.desktopState().canSeek { _ = try controller.perform(.seek(.by(by))) } }
        case Int(MPRIS_SET_POSITION):
            guard let to = try? Seconds.check(Double(argument) / 1e6, .position, field: "SetPosition") else {
                body = {}   // ignored, as specified
                break
            }
            let track = text ?? ""
            body = { () throws(ControlError) in
                let state = controller.desktopState()
                guard state.canSeek, state.track?.id == track, state.length.map({ to <= $0 }) ?? true else { return }   // stale or past the end
                _ = try controller.perform(.seek(.to(to)))
            }
        case Int(MPRIS_SET_RATE):
            if value == 0 {
                body = { if controller.desktopState().canPause { _ = try controller.pause() } }   // as Pause, as specified
            } else {
                guard value.isFinite, value >= 0.01, value <= 100 else { return "Rate must be within MinimumRate (0.01) and MaximumRate (100)" }
                // Answered at once, as a property write is: the loop's `speed` row refuses it too.
                if shown.withLock({ $0.linearAd }) { return "a linear ad plays at its own pace: Rate cannot be set while it plays" }
                body = { _ = try controller.perform(.speed(value)) }
            }
        case Int(MPRIS_SET_LOOP):
            let mode: RepeatMode = argument == 2 ? .all : argument == 1 ? .one : .off
            body = { _ = try controller.setRepeat(mode) }
        case Int(MPRIS_SET_SHUFFLE):
            let on = argument != 0
            body = { _ = controller.setShuffle(on) }
        case Int(MPRIS_SET_VOLUME):
            // The specification: a negative value is 0; above 1 is allowed, here capped at 100 %.
            guard value.isFinite else { return "Volume must be a number" }
            let percent = max(0, min(1, value)) * 100
            body = { _ = try controller.setVolume(.to(percent)) }
        default:
            return "unknown command"
        }
        // The token is handed back once, to the bus thread's queue (mpris_reply); it is not used here.
        let token = reply.map { Unchecked($0) }
        let accepted = loop.execute { [self] in
            var refusal: String?
            do {
                try body()
            } catch {
                refusal = ControlError(internalOrOwn: error).message
            }
            if let token {
                mpris_reply(service, token.value, refusal)   // `self` outlives this work: it is captured
            } else if let refusal {
                log.info("MPRIS: a property write was refused: \(refusal)")
            }
        }
        return accepted ? nil : "the player has shut down"
    }

    fileprivate func sleep(_ going: Bool) {
        let controller = self.controller
        if !loop.execute({ controller.hostSleep(going) }) { log.warning("PrepareForSleep(\(going)): the player has shut down") }
    }
}

// The C callbacks: no captures, the service comes back from the context pointer.

private func desktopState(_ context: UnsafeMutableRawPointer?, _ out: UnsafeMutablePointer<mpris_state>?) {
    guard let context, let out else { return }
    Unmanaged<DesktopService>.fromOpaque(context).takeUnretainedValue().fill(out)
}

private func desktopCommand(_ context: UnsafeMutableRawPointer?, _ command: Int32, _ argument: Int64, _ value: Double,
                            _ text: UnsafePointer<CChar>?, _ reply: UnsafeMutableRawPointer?, _ message: UnsafeMutablePointer<CChar>?,
                            _ size: Int) -> Int32 {
    guard let context else { return -1 }
    let service = Unmanaged<DesktopService>.fromOpaque(context).takeUnretainedValue()
    guard let refusal = service.command(command, argument: argument, value: value, text: text.map { String(cString: $0) },
                                        reply: reply) else { return 0 }
    if let message { DesktopService.cString(refusal, into: UnsafeMutableRawBufferPointer(start: message, count: size)) }
    return -1
}

private func desktopPosition(_ context: UnsafeMutableRawPointer?) -> Int64 {
    guard let context else { return 0 }
    return Unmanaged<DesktopService>.fromOpaque(context).takeUnretainedValue().position()
}

private func desktopSleep(_ context: UnsafeMutableRawPointer?, _ going: Int32) {
    guard let context else { return }
    Unmanaged<DesktopService>.fromOpaque(context).takeUnretainedValue().sleep(going != 0)
}
