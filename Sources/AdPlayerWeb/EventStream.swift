import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Bounds

/// One Server-Sent Events client's queue: messages wait here for its connection's thread to
/// write them. Bounded: a client that stops reading falls behind, and past `maxQueuedBytes`
/// it is dropped (its connection closed), never buffered without bound.
///
/// Threading: `send` from any thread; `next` from the connection's thread.
public final class EventStream: Sendable {
    public static let maxQueuedBytes = 1 << 20
    public static let maxQueued = 1024

    private struct State {
        var queue: [[UInt8]] = []
        var head = 0
        var bytes = 0
        var closed = false
        var overflowed = false
    }

    private let state = Locked(State())

    public init() {}

    /// Queues one message (already framed); false if the stream is closed or just overflowed.
    @discardableResult
    public func send(_ message: [UInt8]) -> Bool {
        state.signal { state -> Bool in
            guard !state.closed else { return false }
            if state.bytes + message.count > Self.maxQueuedBytes || state.queue.count - state.head >= Self.maxQueued {
                state.overflowed = true
                state.closed = true
                return false
            }
            state.queue.append(message)
            state.bytes += message.count
            return true
        }
    }

    /// Ends the stream (the daemon went away, the server stops).
    public func close() {
        state.signal { $0.closed = true }
    }

    public var overflowed: Bool { state.withLock { $0.overflowed } }

    public enum Next: Equatable {
        case messages([[UInt8]])
        /// Nothing within the wait: time for a keep-alive comment.
        case idle
        case closed
    }

    /// What is waiting, or `idle` after `timeout` seconds with nothing, or `closed`.
    public func next(timeout: Double) -> Next {
        state.wait(timeout: timeout) { state -> Next? in
            if state.overflowed { return .closed }
            if state.head < state.queue.count {
                let messages = Array(state.queue[state.head...])
                state.queue.removeAll(keepingCapacity: true)
                state.head = 0
                state.bytes = 0
                return .messages(messages)
            }
            return state.closed ? .closed : nil
        } ?? .idle
    }

    /// An SSE message: `event: NAME` and the data's lines.
    public static func frame(event: String, data: String) -> [UInt8] {
        var text = "event: \(event)\n"
        for line in data.split(separator: "\n", omittingEmptySubsequences: false) { text += "data: \(line)\n" }
        return Array((text + "\n").utf8)
    }
}

/// Every SSE client, and what is sent to all of them. Bounded: at most `maxStreams` at once.
public final class EventHub: Sendable {
    public static let maxStreams = 32
    private let streams = Locked<[ObjectIdentifier: EventStream]>([:])

    public init() {}

    /// A new stream, nil when `maxStreams` are open.
    public func open() -> EventStream? {
        let stream = EventStream()
        let added = streams.withLock { streams -> Bool in
            guard streams.count < Self.maxStreams else { return false }
            streams[ObjectIdentifier(stream)] = stream
            return true
        }
        return added ? stream : nil
    }

    public func remove(_ stream: EventStream) {
        stream.close()
        _ = streams.withLock { $0.removeValue(forKey: ObjectIdentifier(stream)) }
    }

    public var count: Int { streams.withLock { $0.count } }

    /// Sends to every stream; one that overflows is dropped here (its thread sees it closed).
    public func broadcast(event: String, data: String) {
        let message = EventStream.frame(event: event, data: data)
        let all = streams.withLock { Array($0.values) }
        for stream in all where !stream.send(message) {
            remove(stream)
        }
    }
}
