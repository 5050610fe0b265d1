import CMpv
import Foundation
import Synchronization

/// One libmpv handle, its event thread and its commands.
///
/// Threading contract (in the spirit of mpv's `client.h`):
/// - `init` creates and initializes the core; it blocks briefly and may be called from any
///   thread. Options are applied before `mpv_initialize`; config files, scripts, youtube-dl
///   and the terminal are always off.
/// - `start(handler:)` starts one dedicated OS thread ("mpv-events") that blocks in
///   `mpv_wait_event(-1)`, copies each event into an `MpvEvent` and calls `handler` with it,
///   on that thread, one at a time, in mpv's order. The handler must be short (mpv
///   synthesizes property changes inside `mpv_wait_event`, so a slow handler delays every
///   later one); it may call any method here except `shutdown()`.
/// - Commands and property calls may be made from any thread, also from the handler; they
///   block on mpv's core lock for as long as mpv takes (usually microseconds). Once
///   `shutdown()` has begun they throw `MpvError.shutDown` and never reach mpv.
/// - `shutdown()` (R5): refuse new calls → wait for calls in flight → `quit` → the event
///   thread sees `SHUTDOWN` and returns → join it → `mpv_terminate_destroy`. Blocks until
///   done; must not be called from the event thread. Idempotent. Releasing the last
///   reference shuts down too.
/// - No wakeup callback is installed: nothing of ours ever runs on mpv's own threads.
public final class MpvHandle: @unchecked Sendable {
    // @unchecked: `raw` is used only while `gate` is held for reading (so never after
    // shutdown has begun), except by the event thread, which alone calls `mpv_wait_event`
    // and is joined before `mpv_terminate_destroy`. libmpv's API is thread-safe otherwise.
    private let raw: OpaquePointer
    private let gate = ReadWriteGate()
    private let life = Mutex(Life())

    private struct Life {
        var closed = false
        var thread: pthread_t?
        var loop: EventLoop?
    }

    /// Options that no configuration can turn on: they would load files or run programs
    /// that the daemon does not control (SPEC §6, security).
    public static let lockedOptions: [(String, String)] = [
        ("config", "no"), ("load-scripts", "no"), ("ytdl", "no"), ("osc", "no"),
        ("load-stats-overlay", "no"), ("load-osd-console", "no"), ("load-auto-profiles", "no"),
        ("terminal", "no"), ("input-terminal", "no"), ("idle", "yes"),
    ]

    /// Creates and initializes a core with `options` (applied in order, then `lockedOptions`)
    /// and asks for log messages at `logLevel` and above.
    public init(options: [(String, String)], logLevel: String = "warn") throws {
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
            life.withLock { $0.closed = true }
            throw error
        }
    }

    deinit {
        if isEventThread {
            // The last reference went away inside the event handler: the thread cannot join
            // itself, so it destroys the handle when it sees SHUTDOWN, and is detached.
            let (thread, loop) = gate.exclusively { life.withLock { life in
                life.closed = true
                return (life.thread, life.loop)
            } }
            loop?.destroyOnExit.store(true, ordering: .releasing)
            withCStringArray(["quit"]) { _ = mpv_command(raw, $0) }
            if let thread { pthread_detach(thread) }
        } else {
            shutdown()
        }
    }

    // MARK: Events

    /// Starts the event thread; see the type. Call once, after registering observers.
    public func start(handler: @escaping @Sendable (MpvEvent) -> Void) {
        life.withLock { life in
            precondition(life.thread == nil && !life.closed, "MpvHandle.start: already started or shut down")
            let loop = EventLoop(raw: raw, handler: handler)
            let context = Unmanaged.passRetained(loop).toOpaque()
            var thread = pthread_t()
            let rc = pthread_create(&thread, nil, mpvEventThreadMain, context)
            precondition(rc == 0, "pthread_create failed: \(rc)")
            life.thread = thread
            life.loop = loop
        }
    }

    /// True on the event thread.
    public var isEventThread: Bool {
        guard let thread = life.withLock({ $0.thread }) else { return false }
        return pthread_equal(thread, pthread_self()) != 0
    }

    /// Observes `name` in `format`; changes arrive as `.property(id:name:value:)`.
    public func observe(_ name: String, format: MpvFormat, id: UInt64) throws {
        try withRaw("observe \(name)") { mpv_observe_property($0, id, name, format.raw) }
    }

    // MARK: Commands and properties

    /// Runs a command (`["seek", "10", "absolute"]`).
    public func command(_ args: [String]) throws {
        try withRaw(args.first ?? "command") { raw in
            withCStringArray(args) { mpv_command(raw, $0) }
        }
    }

    /// Runs a command and returns its result node (e.g. `loadfile` → `{playlist_entry_id}`).
    public func commandReturning(_ args: [String]) throws -> MpvValue {
        var result = mpv_node()
        try withRaw(args.first ?? "command") { raw in
            withCStringArray(args) { mpv_command_ret(raw, $0, &result) }
        }
        defer { mpv_free_node_contents(&result) }
        return MpvValue(node: result)
    }

    /// Runs a command given as a node (named arguments, binary-safe strings).
    public func command(node args: [String: MpvValue]) throws {
        try withRaw((args["name"]?.string) ?? "command") { raw in
            NodeBuilder.withNode(.map(args)) { node in mpv_command_node(raw, node, nil) }
        }
    }

    public func set(_ name: String, _ value: Bool) throws {
        var flag: Int32 = value ? 1 : 0
        try withRaw("set \(name)") { mpv_set_property($0, name, MPV_FORMAT_FLAG, &flag) }
    }

    public func set(_ name: String, _ value: Double) throws {
        var double = value
        try withRaw("set \(name)") { mpv_set_property($0, name, MPV_FORMAT_DOUBLE, &double) }
    }

    public func set(_ name: String, _ value: String) throws {
        try withRaw("set \(name)") { mpv_set_property_string($0, name, value) }
    }

    /// Reads a property; `.unavailable` when mpv has no value for it now (R1).
    public func get(_ name: String, as format: MpvFormat) throws -> MpvValue {
        var value: MpvValue = .unavailable
        do {
            try withRaw("get \(name)") { raw in
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

    /// mpv's monotonic clock, in microseconds.
    public func timeMicroseconds() -> Int64? {
        try? withRawValue("get_time_us") { mpv_get_time_us($0) }
    }

    // MARK: Other clients of the same core

    /// A second client of this core (`mpv_create_client`): what a script, an IPC client or
    /// a foreign tool would be. For tests and tools.
    public func makeClient(name: String) throws -> MpvClient {
        guard let client = try withRawValue("create_client", { mpv_create_client($0, name) }) else {
            throw MpvError(code: -2, operation: "create_client")
        }
        return MpvClient(raw: client)
    }

    // MARK: Shutdown

    /// See the type: R5's order, blocking, idempotent.
    public func shutdown() {
        precondition(!isEventThread, "MpvHandle.shutdown() called on the event thread (it would join itself)")
        let alreadyClosed = gate.exclusively { life.withLock { life -> Bool in
            defer { life.closed = true }
            return life.closed
        } }
        if alreadyClosed { return }
        let thread = life.withLock { $0.thread }
        if let thread {
            // The one call after `closed`: the event thread still drains until SHUTDOWN.
            withCStringArray(["quit"]) { _ = mpv_command(raw, $0) }
            pthread_join(thread, nil)
        }
        mpv_terminate_destroy(raw)
    }

    // MARK: Plumbing

    static func check(_ rc: Int32, _ operation: String) throws {
        if rc < 0 { throw MpvError(code: rc, operation: operation) }
    }

    private func withRaw(_ operation: String, _ body: (OpaquePointer) -> Int32) throws {
        let rc = try withRawValue(operation, body)
        try Self.check(rc, operation)
    }

    private func withRawValue<T>(_ operation: String, _ body: (OpaquePointer) -> T) throws -> T {
        try gate.shared {
            guard !life.withLock({ $0.closed }) else { throw MpvError.shutDown(operation) }
            return body(raw)
        }
    }
}

/// Another client of a core; see `MpvHandle.makeClient(name:)`. It never reads its events.
/// Threading: any thread. `close()` (or release) destroys it; the owner core waits for it.
public final class MpvClient: @unchecked Sendable {
    /// The client's handle; @unchecked because it is only ever used under `state`'s lock.
    private struct Raw: @unchecked Sendable { let pointer: OpaquePointer }
    private let state: Mutex<Raw?>

    init(raw: OpaquePointer) { state = Mutex(Raw(pointer: raw)) }
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

    public func close() {
        state.withLock { client in
            if let raw = client?.pointer { mpv_destroy(raw) }
            client = nil
        }
    }
}

// MARK: - The event thread

private final class EventLoop: @unchecked Sendable {
    // @unchecked: `raw` and `handler` are immutable; `raw` is used by this thread alone
    // (`mpv_wait_event`) and, once `destroyOnExit` is set, destroyed by it alone.
    let raw: OpaquePointer
    let handler: @Sendable (MpvEvent) -> Void
    let destroyOnExit = Atomic<Bool>(false)

    init(raw: OpaquePointer, handler: @escaping @Sendable (MpvEvent) -> Void) {
        self.raw = raw
        self.handler = handler
    }

    func run() {
        while true {
            guard let pointer = mpv_wait_event(raw, -1) else { continue }
            let isShutdown = pointer.pointee.event_id == MPV_EVENT_SHUTDOWN
            if let event = MpvEvent(copying: pointer.pointee) { handler(event) }
            if isShutdown { break }
        }
        if destroyOnExit.load(ordering: .acquiring) { mpv_terminate_destroy(raw) }
    }
}

/// Entry point of the event thread. A free function, not a closure formed in an isolated
/// context, so that Swift inserts no executor check into it (notes/libmpv.md §6.2.1).
private func mpvEventThreadMain(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
    guard let context else { return nil }
    let loop = Unmanaged<EventLoop>.fromOpaque(context).takeRetainedValue()
    cmpv_name_this_thread("mpv-events")
    loop.run()
    return nil
}

// MARK: - Helpers

/// A pthread read-write lock: many readers (calls into mpv) or one writer (shutdown).
final class ReadWriteGate: @unchecked Sendable {
    // @unchecked: the lock is only used through pthread_rwlock_*, which are thread-safe.
    private let lock = UnsafeMutablePointer<pthread_rwlock_t>.allocate(capacity: 1)

    init() { pthread_rwlock_init(lock, nil) }
    deinit {
        pthread_rwlock_destroy(lock)
        lock.deallocate()
    }

    func shared<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_rdlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }

    func exclusively<T>(_ body: () throws -> T) rethrows -> T {
        pthread_rwlock_wrlock(lock)
        defer { pthread_rwlock_unlock(lock) }
        return try body()
    }
}

/// Calls `body` with a NULL-terminated `argv` of C strings that live for the call.
func withCStringArray<R>(_ strings: [String], _ body: (UnsafeMutablePointer<UnsafePointer<CChar>?>) -> R) -> R {
    let copies = strings.map { strdup($0) }
    defer { copies.forEach { free($0) } }
    var argv: [UnsafePointer<CChar>?] = copies.map { UnsafePointer($0) } + [nil]
    return argv.withUnsafeMutableBufferPointer { body($0.baseAddress!) }
}

/// Builds a temporary `mpv_node` tree from an `MpvValue` for a call.
enum NodeBuilder {
    static func withNode<R>(_ value: MpvValue, _ body: (UnsafeMutablePointer<mpv_node>) -> R) -> R {
        var allocations: [UnsafeMutableRawPointer] = []
        defer { allocations.forEach { free($0) } }
        let node = UnsafeMutablePointer<mpv_node>.allocate(capacity: 1)
        defer { node.deallocate() }
        node.initialize(to: build(value, &allocations))
        return body(node)
    }

    private static func build(_ value: MpvValue, _ allocations: inout [UnsafeMutableRawPointer]) -> mpv_node {
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
            node.u.list = list(items.map { (nil, $0) }, &allocations)
        case .map(let entries):
            node.format = MPV_FORMAT_NODE_MAP
            node.u.list = list(entries.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }, &allocations)
        }
        return node
    }

    private static func list(_ entries: [(String?, MpvValue)],
                             _ allocations: inout [UnsafeMutableRawPointer]) -> UnsafeMutablePointer<mpv_node_list> {
        let list = malloc(MemoryLayout<mpv_node_list>.stride)!.bindMemory(to: mpv_node_list.self, capacity: 1)
        allocations.append(UnsafeMutableRawPointer(list))
        let values = malloc(MemoryLayout<mpv_node>.stride * max(1, entries.count))!
            .bindMemory(to: mpv_node.self, capacity: max(1, entries.count))
        allocations.append(UnsafeMutableRawPointer(values))
        var keys: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?
        if entries.contains(where: { $0.0 != nil }) {
            let k = malloc(MemoryLayout<UnsafeMutablePointer<CChar>?>.stride * max(1, entries.count))!
                .bindMemory(to: UnsafeMutablePointer<CChar>?.self, capacity: max(1, entries.count))
            allocations.append(UnsafeMutableRawPointer(k))
            keys = k
        }
        for (i, (key, value)) in entries.enumerated() {
            (values + i).initialize(to: build(value, &allocations))
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
