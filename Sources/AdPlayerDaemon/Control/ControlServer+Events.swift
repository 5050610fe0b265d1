import AdRuntime
import ControlProtocol
import CSystem
import Foundation

/// Event fan-out: to subscribers, written directly by the broadcasting thread while nothing
/// waits for a subscriber, through the socket thread otherwise (see the ordering invariant at
/// `ControlServer`).
extension ControlServer {
    /// Sends `event` to every client subscribed to it; encoded once, here.
    public func broadcast(_ event: ControlEvent) { broadcast([event]) }

    /// Events in order, each client's share in one write (a player change and the ad events
    /// it caused: one system call, one wake-up of the reader).
    public func broadcast(_ events: [ControlEvent]) {
        guard !events.isEmpty else { return }
        // No subscriber: nothing is encoded (a subscriber that comes meanwhile hears from its
        // subscription on, which this batch precedes).
        guard inbox.withLock({ !$0.subscribers.isEmpty && !$0.stopping }) else { return }
        let lines = events.map { $0.json.line() }
        let handOver = inbox.withLock { inbox -> Bool in
            guard !inbox.stopping else { return false }
            var written: Set<Int32> = []
            var others = false
            if inbox.deliveries.isEmpty {
                for (fd, subscriber) in inbox.subscribers.sorted(by: { $0.key < $1.key }) {
                    var bytes: [UInt8] = []
                    for (index, event) in events.enumerated() where event.matches(subscriber.subscription) { bytes += lines[index] }
                    guard !bytes.isEmpty else { continue }
                    guard subscriber.direct, written.count < Self.maxDirectWrites else {
                        others = true
                        continue
                    }
                    let n = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT | MSG_NOSIGNAL)) }
                    if n == bytes.count {
                        written.insert(fd)
                        continue
                    }
                    inbox.subscribers[fd]?.direct = false
                    if n > 0 {
                        written.insert(fd)
                        inbox.deliveries.append(.rest(fd: fd, Array(bytes[n...])))
                    } else {
                        others = true
                    }
                }
            } else {
                others = true
            }
            if others {
                for (index, event) in events.enumerated() { inbox.deliveries.append(.event(event, lines[index], except: written)) }
                // Every subscriber these go to through the socket thread writes nothing directly
                // until they are out: a later event written directly would overtake them (an
                // ad's ad.ended before its ad.started, while replies kept the inbox busy).
                for (fd, subscriber) in inbox.subscribers where !written.contains(fd) && subscriber.direct
                    && events.contains(where: { $0.matches(subscriber.subscription) }) {
                    inbox.subscribers[fd]?.direct = false
                }
            }
            return !inbox.deliveries.isEmpty
        }
        if handOver { poke() }
    }

    /// Subscribers whose output is all written may be written to directly again — if nothing
    /// for anyone waits in the inbox (it could be for them).
    func allowDirectWrites() {
        let idle = clients.filter { $0.value.subscription != nil && $0.value.output.isEmpty && !$0.value.closing }.map(\.key)
        guard !idle.isEmpty else { return }
        inbox.withLock { inbox in
            guard inbox.deliveries.isEmpty else { return }
            for fd in idle { inbox.subscribers[fd]?.direct = true }
        }
    }
}
