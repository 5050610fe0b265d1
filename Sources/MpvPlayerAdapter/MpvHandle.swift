import AdRuntime
import CMpv
import Foundation

/// One libmpv core, and the loop that owns it (SPEC R5, R18).
///
/// Threading contract (in the spirit of mpv's `client.h`):
/// - `init` creates and initializes the core on the calling thread. Options are applied
///   before `mpv_initialize`; config files, scripts, youtube-dl and the terminal are off.
///   Until `start`, the creating thread may make calls (observe, warm up).
/// - `start(handler:)` starts the loop: one OS thread ("mpv-events") that runs work handed
///   to it, then due timers, then waits in `mpv_wait_event` with the next timer's deadline
///   as its timeout (for ever when none is due), copies each event into an `MpvEvent` and
///   calls `handler` with it and the moment it arrived. Other threads hand it work with
///   `execute`, which wakes the wait with `mpv_wakeup` (never a wakeup callback: nothing of
///   ours runs on mpv's threads).
/// - Every call into mpv after `start` is made on the loop (`assertInLoop`). Replies to
///   asynchronous commands are routed to their handler on the loop.
/// - `shutdown()` (R5): on the loop, refuse calls and send `quit` → the loop drains events
///   until `SHUTDOWN` and returns → join it → `mpv_terminate_destroy`. Idempotent; from the
///   loop itself the last two steps are the exiting thread's.
final class MpvHandle: PlayerLoop, @unchecked Sendable {
    // @unchecked: `raw` is used by the creating thread until `start`, then by the loop
    // thread only (and by `execute`'s `mpv_wakeup`, which is thread-safe, under `shared`'s
    // lock while the core exists); `timers`, `replies`, `nextReply`, `closed` and `handler`
    // are loop-only; `shared` is behind its lock.
    private let raw: OpaquePointer
    private struct Shared {
        var queue: [@Sendable () -> Void] = []
        var thread: pthread_t?
        /// The loop has returned: no more work is taken.
        var stopped = false
        /// `shutdown()` has begun.
        var closing = false
        /// The exiting loop thread destroys the core (shutdown was asked for on the loop).
        var destroyOnExit = false
        /// Other clients of this core: closed at shutdown, which would otherwise wait for them
        /// (`mpv_terminate_destroy` waits for every handle of the core).
        var clients: [WeakClient] = []
    }

    struct WeakClient {
        weak var client: MpvClient?
    }
    private let shared = Locked(Shared())
    private let finished = Handover<Bool>()
    private var timers = TimerQueue()
    private var replies: [UInt64: (MpvEvent.Reply) -> Void] = [:]
    private var nextReply: UInt64 = 1
    private var closed = false
    private var handler: ((MpvEvent, UInt64) -> Void)?

    /// Options that no configuration can turn on: they would load files or run programs
    /// that the daemon does not control (SPEC §6, security). `access-references=no`: a file
    /// that is really a playlist or an EDL (an m3u named `.mp4`) is refused instead of making
    /// mpv fetch URLs and open files it lists (measured: both then fail "unrecognized format").
    static let lockedOptions: [(String, String)] = [
        ("config", "no"), ("load-scripts", "no"), ("ytdl", "no"), ("osc", "no"),
        ("load-stats-overlay", "no"), ("load-osd-console", "no"), ("load-auto-profiles", "no"),
        ("terminal", "no"), ("input-terminal", "no"), ("idle", "yes"),
        ("access-references", "no"), ("load-unsafe-playlists", "no"),
    ]

    /// Creates and initializes a core with `options` (applied in order, then `lockedOptions`)
    /// and asks for log messages at `logLevel` and above.
    private let offLoopCalls: OffLoopCalls?
    /// How much faster than the monotonic clock the loop's clock runs (`adplayerd simulate
    /// --speed X`: X, with mpv's speed X as well, so that content and timers keep in step);
    /// 1 everywhere else.
    let timeScale: Double
    private let origin: UInt64

    init(options: [(String, String)], logLevel: String = "warn", offLoopCalls: OffLoopCalls? = nil, timeScale: Double = 1) throws {
        self.offLoopCalls = offLoopCalls
        self.timeScale = timeScale.isFinite && timeScale >= 1 ? timeScale : 1
        origin = MonotonicTime.now()
        // mpv refuses to start unless numbers are formatted the C way (notes §2.1).
        setlocale(LC_NUMERIC, "C")
        guard let raw = mpv_create() else { throw MpvError(code: -2, operation: "mpv_create") }
        self.raw = raw
        do {
            for (name, value) in options + Self.lockedOptions {
                try Self.check(mpv_set_option_string(raw, name, value), "option \(name)=\(value)")
            }
            try Self.check(mpv_initialize(raw), "mpv_initialize")
            try Self.check(mpv_request_log_messages(raw, logLevel), "request_log_messages")
        } catch {
            mpv_terminate_destroy(raw)
            closed = true
            shared.withLock { $0.stopped = true; $0.closing = true }
            finished.fulfil(true)
            throw error
        }
    }

    deinit {
        // The loop thread holds the handle while it runs, so this runs after it returned
        // (or when it never started).
        if shared.withLock({ !$0.closing }) { mpv_terminate_destroy(raw) }
    }

    // MARK: The loop

    /// Starts the loop; see the type. Call once, after registering observers.
    func start(handler: @escaping (MpvEvent, UInt64) -> Void) {
        self.handler = handler
        shared.withLock { shared in
            precondition(shared.thread == nil && !shared.closing, "MpvHandle.start: already started or shut down")
            // The thread holds the handle while it runs (see `deinit`).
            shared.thread = startThread(named: "mpv-events", detached: false) { [self] in run() }
        }
    }

    var inLoop: Bool { pthread_getspecific(loopKey) == Unmanaged.passUnretained(self).toOpaque() }

    @discardableResult
    func execute(_ work: @escaping @Sendable () -> Void) -> Bool {
        shared.withLock { shared in
            guard !shared.stopped else { return false }
            shared.queue.append(work)
            // Under the lock: the core exists until the loop has stopped (see `run`).
            mpv_wakeup(raw)
            return true
        }
    }

    func now() -> UInt64 {
        let real = MonotonicTime.now()
        guard timeScale != 1 else { return real }
        return origin &+ UInt64(Double(real &- origin) * timeScale)
    }

    func reportOffLoop(_ function: String, file: StaticString, line: UInt) {
        guard let offLoopCalls else { offLoopTrap(function, file: file, line: line) }
        offLoopCalls.record("\(file):\(line) \(function)")
    }

    func schedule(after seconds: Double, _ action: @escaping () -> Void) -> LoopTimer {
        requireInLoop()
        return timers.add(deadline: now() &+ LoopTime.nanoseconds(seconds), on: self, action)
    }

    private func run() {
        pthread_setspecific(loopKey, Unmanaged.passUnretained(self).toOpaque())
        while true {
            runHandedOver()
            while let due = timers.popDue(now()) { due.action() }
            let timeout = timers.nextDeadline().map { Double($0 &- min($0, now())) / 1e9 / timeScale } ?? -1
            guard let pointer = mpv_wait_event(raw, timeout) else { continue }
            let receivedAt = now()
            let isShutdown = pointer.pointee.event_id == MPV_EVENT_SHUTDOWN
            if let event = MpvEvent(copying: pointer.pointee) {
                if case .reply(let reply) = event {
                    replies.removeValue(forKey: reply.userdata)?(reply)
                } else {
                    handler?(event, receivedAt)
                }
            }
            if isShutdown { break }
        }
        closed = true
        // Replies that will never come: their handlers learn it now.
        for (userdata, reply) in replies.sorted(by: { $0.key < $1.key }) {
            reply(MpvEvent.Reply(userdata: userdata, error: MpvError.shutDown("reply").code, result: .unavailable))
        }
        replies = [:]
        let destroy = shared.withLock { shared -> Bool in
            shared.stopped = true
            return shared.destroyOnExit
        }
        // Work handed over before the stop still runs (a caller may be waiting for it); its
        // calls into mpv are refused.
        runHandedOver()
        handler = nil
        if destroy {
            mpv_terminate_destroy(raw)
            finished.fulfil(true)
        }
    }

    /// Runs the work handed over, and what that work hands over in turn — a few rounds at
    /// most, so that work which keeps handing over cannot keep mpv's events waiting.
    private func runHandedOver() {
        for _ in 0..<4 {
            let work = shared.withLock { shared -> [@Sendable () -> Void] in
                defer { shared.queue.removeAll() }
                return shared.queue
            }
            if work.isEmpty { return }
            for item in work { item() }
        }
    }

    // MARK: Commands and properties (on the loop)

    /// Runs a command synchronously. Only for commands measured to cost microseconds.
    func command(_ args: [String]) throws {
        try call(args.first ?? "command") { raw in withCStringArray(args) { mpv_command(raw, $0) } }
    }

    /// Runs a command given as a node (named arguments, binary-safe strings), synchronously.
    func command(node args: [String: MpvValue]) throws {
        try command(MpvNode(.map(args)), operation: args["name"]?.string ?? "command")
    }

    /// Runs a command built ahead (see `MpvNode`), synchronously.
    func command(_ node: MpvNode, operation: String) throws {
        try call(operation) { raw in mpv_command_node(raw, node.pointer, nil) }
    }

    /// Hands a command to mpv without waiting (`mpv_command_node_async`); `onReply` runs on the
    /// loop with its result when mpv has run it (or failed to). `keepAlive` is held until then
    /// (memory the command points into, e.g. `overlay-add`'s pixels).
    func commandAsync(node args: [String: MpvValue], keepAlive: AnyObject? = nil,
                      onReply: @escaping (Result<MpvValue, MpvError>) -> Void = { _ in }) {
        sendAsync(args["name"]?.string ?? "command", .map(args), keepAlive: keepAlive, onReply)
    }

    /// `commandAsync(node:)` for positional arguments (`["seek", "10", "absolute"]`).
    func commandAsync(_ args: [String], onReply: @escaping (Result<MpvValue, MpvError>) -> Void = { _ in }) {
        sendAsync(args.first ?? "command", .array(args.map { .string($0) }), keepAlive: nil, onReply)
    }

    private func sendAsync(_ operation: String, _ command: MpvValue, keepAlive: AnyObject?,
                           _ onReply: @escaping (Result<MpvValue, MpvError>) -> Void) {
        let userdata = nextReply
        nextReply += 1
        do {
            let node = MpvNode(command)
            try call(operation) { raw in mpv_command_node_async(raw, userdata, node.pointer) }
        } catch {
            onReply(.failure(error as? MpvError ?? MpvError(code: -20, operation: operation)))
            return
        }
        replies[userdata] = { reply in
            withExtendedLifetime(keepAlive) {
                onReply(reply.error < 0 ? .failure(MpvError(code: reply.error, operation: operation)) : .success(reply.result))
            }
        }
    }

    func set(_ name: String, _ value: Bool) throws {
        var flag: Int32 = value ? 1 : 0
        try call("set \(name)") { mpv_set_property($0, name, MPV_FORMAT_FLAG, &flag) }
    }

    func set(_ name: String, _ value: Double) throws {
        var double = value
        try call("set \(name)") { mpv_set_property($0, name, MPV_FORMAT_DOUBLE, &double) }
    }

    func set(_ name: String, _ value: String) throws {
        try call("set \(name)") { mpv_set_property_string($0, name, value) }
    }

    /// Observes `name` in `format`; changes arrive as `.property(id:name:value:)`.
    func observe(_ name: String, format: MpvFormat, id: UInt64) throws {
        try call("observe \(name)") { mpv_observe_property($0, id, name, format.raw) }
    }

    /// Reads a property; `.unavailable` when mpv has no value for it now (R1).
    func get(_ name: String, as format: MpvFormat) throws -> MpvValue {
        var value: MpvValue = .unavailable
        do {
            try call("get \(name)") { raw in
                switch format {
                case .flag:
                    var v: Int32 = 0
                    let rc = mpv_get_property(raw, name, MPV_FORMAT_FLAG, &v)
                    if rc >= 0 { value = .flag(v != 0) }
                    return rc
                case .int:
                    var v: Int64 = 0
                    let rc = mpv_get_property(raw, name, MPV_FORMAT_INT64, &v)
                    if rc >= 0 { value = .int(v) }
                    return rc
                case .double:
                    var v = 0.0
                    let rc = mpv_get_property(raw, name, MPV_FORMAT_DOUBLE, &v)
                    if rc >= 0 { value = .double(v) }
                    return rc
                case .string:
                    guard let s = mpv_get_property_string(raw, name) else { return MPV_ERROR_PROPERTY_UNAVAILABLE.rawValue }
                    value = .string(String(cString: s))
                    mpv_free(s)
                    return 0
                case .node:
                    var node = mpv_node()
                    let rc = mpv_get_property(raw, name, MPV_FORMAT_NODE, &node)
                    if rc >= 0 {
                        value = MpvValue(node: node)
                        mpv_free_node_contents(&node)
                    }
                    return rc
                }
            }
        } catch let error as MpvError where error.code == MPV_ERROR_PROPERTY_UNAVAILABLE.rawValue {
            return .unavailable
        }
        return value
    }

    // MARK: Other clients of the same core

    /// A second client of this core (`mpv_create_client`): what a script, an IPC client or a
    /// foreign tool is. Any thread.
    func makeClient(name: String) throws -> MpvClient {
        try sync {
            var client: OpaquePointer?
            try call("create_client") { raw in
                client = mpv_create_client(raw, name)
                return client == nil ? MPV_ERROR_NOMEM.rawValue : 0
            }
            let made = MpvClient(raw: client!)
            shared.withLock { shared in
                shared.clients.removeAll { $0.client == nil }
                shared.clients.append(WeakClient(client: made))
            }
            return made
        }
    }

    // MARK: Shutdown

    /// See the type: R5's order, idempotent. Off the loop it blocks until the core is
    /// destroyed; on the loop it starts the shutdown, which the exiting thread completes.
    func shutdown() {
        let (thread, first, clients) = shared.withLock { shared -> (pthread_t?, Bool, [WeakClient]) in
            defer { shared.closing = true }
            return (shared.thread, !shared.closing, shared.clients)
        }
        clients.forEach { $0.client?.close() }
        guard first else {
            if !inLoop { _ = finished.wait() }
            return
        }
        guard let thread else {
            mpv_terminate_destroy(raw)
            finished.fulfil(true)
            return
        }
        if inLoop {
            shared.withLock { $0.destroyOnExit = true }
            sendQuit()
            pthread_detach(thread)
            return
        }
        execute { [self] in sendQuit() }   // false when mpv quit by itself: the loop has returned
        pthread_join(thread, nil)
        mpv_terminate_destroy(raw)
        finished.fulfil(true)
    }

    /// On the loop: the one call after `closed`; the loop still drains events until SHUTDOWN.
    private func sendQuit() {
        guard !closed else { return }
        closed = true
        withCStringArray(["quit"]) { _ = mpv_command_async(raw, 0, $0) }
    }

    // MARK: Plumbing

    static func check(_ rc: Int32, _ operation: String) throws {
        if rc < 0 { throw MpvError(code: rc, operation: operation) }
    }

    private func call(_ operation: String, _ body: (OpaquePointer) -> Int32) throws {
        assert(inLoop || shared.withLock { $0.thread == nil }, "mpv called off its loop: \(operation)")
        guard !closed else { throw MpvError.shutDown(operation) }
        try Self.check(body(raw), operation)
    }
}

/// Which loop, if any, runs on the current thread.
private let loopKey: pthread_key_t = {
    var key = pthread_key_t()
    pthread_key_create(&key, nil)
    return key
}()

/// Another client of a core; see `MpvPlayer.makeForeignClient(name:)`. It never reads its
/// events. Threading: any thread. `close()` (or release) destroys it.
@_spi(Foreign)
public final class MpvClient: @unchecked Sendable {
    // @unchecked: the client handle is only used with `state`'s lock held.
    private struct Raw: @unchecked Sendable { let pointer: OpaquePointer }
    private let state: Locked<Raw?>

    init(raw: OpaquePointer) { state = Locked(Raw(pointer: raw)) }
    deinit { close() }

    public func set(_ name: String, _ value: Bool) throws {
        try state.withLock { client in
            guard let raw = client?.pointer else { throw MpvError.shutDown("set \(name)") }
            var flag: Int32 = value ? 1 : 0
            try MpvHandle.check(mpv_set_property(raw, name, MPV_FORMAT_FLAG, &flag), "set \(name)")
        }
    }

    public func command(_ args: [String]) throws {
        try state.withLock { client in
            guard let raw = client?.pointer else { throw MpvError.shutDown(args.first ?? "command") }
            try MpvHandle.check(withCStringArray(args) { mpv_command(raw, $0) }, args.first ?? "command")
        }
    }

    /// Reads a property as this client (for tests: what mpv holds, not what we derived).
    public func get(_ name: String, as format: MpvFormat) throws -> MpvValue {
        try state.withLock { client in
            guard let raw = client?.pointer else { throw MpvError.shutDown("get \(name)") }
            switch format {
            case .flag:
                var v: Int32 = 0
                let rc = mpv_get_property(raw, name, MPV_FORMAT_FLAG, &v)
                return rc >= 0 ? .flag(v != 0) : .unavailable
            case .int:
                var v: Int64 = 0
                let rc = mpv_get_property(raw, name, MPV_FORMAT_INT64, &v)
                return rc >= 0 ? .int(v) : .unavailable
            case .double:
                var v = 0.0
                let rc = mpv_get_property(raw, name, MPV_FORMAT_DOUBLE, &v)
                return rc >= 0 ? .double(v) : .unavailable
            case .string, .node:
                guard let s = mpv_get_property_string(raw, name) else { return .unavailable }
                defer { mpv_free(s) }
                return .string(String(cString: s))
            }
        }
    }

    public func close() {
        state.withLock { client in
            if let raw = client?.pointer { mpv_destroy(raw) }
            client = nil
        }
    }
}

// MARK: - Helpers

/// Calls `body` with a NULL-terminated `argv` of C strings that live for the call.
func withCStringArray<R>(_ strings: [String], _ body: (UnsafeMutablePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    var argv: [UnsafePointer<CChar>?] = copies.map { UnsafePointer($0) } + [nil]
    return argv.withUnsafeMutableBufferPointer { body($0.baseAddress!) }
}

/// An `mpv_node` tree built from an `MpvValue`, owning its C memory. Built once, it can be
/// sent any number of times: the removals on the pause path use nodes built when the ad went
/// up, so that nothing is allocated between mpv's event and the removal.
final class MpvNode: @unchecked Sendable {
    // @unchecked: immutable after init; mpv only reads it during a call.
    let pointer: UnsafeMutablePointer<mpv_node>
    private var allocations: [UnsafeMutableRawPointer] = []

    init(_ value: MpvValue) {
        pointer = .allocate(capacity: 1)
        pointer.initialize(to: build(value))
    }

    deinit {
        allocations.forEach { free($0) }
        pointer.deallocate()
    }

    private func build(_ value: MpvValue) -> mpv_node {
        var node = mpv_node()
        switch value {
        case .unavailable: node.format = MPV_FORMAT_NONE
        case .flag(let v): node.format = MPV_FORMAT_FLAG; node.u.flag = v ? 1 : 0
        case .int(let v): node.format = MPV_FORMAT_INT64; node.u.int64 = v
        case .double(let v): node.format = MPV_FORMAT_DOUBLE; node.u.double_ = v
        case .string(let v):
            let s = strdup(v)!
            allocations.append(UnsafeMutableRawPointer(s))
            node.format = MPV_FORMAT_STRING
            node.u.string = s
        case .array(let items):
            node.format = MPV_FORMAT_NODE_ARRAY
            node.u.list = list(items.map { (nil, $0) })
        case .map(let entries):
            node.format = MPV_FORMAT_NODE_MAP
            node.u.list = list(entries.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
        }
        return node
    }

    private func list(_ entries: [(String?, MpvValue)]) -> UnsafeMutablePointer<mpv_node_list> {
        let count = max(1, entries.count)
        let list = malloc(MemoryLayout<mpv_node_list>.stride)!.bindMemory(to: mpv_node_list.self, capacity: 1)
        allocations.append(UnsafeMutableRawPointer(list))
        let values = malloc(MemoryLayout<mpv_node>.stride * count)!.bindMemory(to: mpv_node.self, capacity: count)
        allocations.append(UnsafeMutableRawPointer(values))
        var keys: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        if entries.contains(where: { $0.0 != nil }) {
            let k = malloc(MemoryLayout<UnsafeMutablePointer<CChar>?>.stride * count)!
                .bindMemory(to: UnsafeMutablePointer<CChar>?.self, capacity: count)
            allocations.append(UnsafeMutableRawPointer(k))
            keys = k
        }
        for (i, (key, value)) in entries.enumerated() {
            (values + i).initialize(to: build(value))
            if let keys, let key {
                let s = strdup(key)!
                allocations.append(UnsafeMutableRawPointer(s))
                keys[i] = s
            }
        }
        list.initialize(to: mpv_node_list(num: Int32(entries.count), values: values, keys: keys))
        return list
    }
}
