/// Where each episode was left, by path, kept on the loop: at most `limit`, the most recently
/// saved — the same rule as the store's (`StateStore.maxPositions`, newest rows kept), so the
/// loop and the disk forget the same episodes.
public struct RecentPositions: Sendable, Equatable {
    private var seconds: [String: Double] = [:]
    /// When each was saved (a counter): the smallest is forgotten first.
    private var stamps: [String: UInt64] = [:]
    private var clock: UInt64 = 0
    public let limit: Int

    /// `saved`: what the store had (older than anything saved from now on).
    public init(_ saved: [String: Double] = [:], limit: Int = StateStore.maxPositions) {
        self.limit = max(1, limit)
        for (path, value) in saved.sorted(by: { $0.key < $1.key }).prefix(self.limit) { set(path, value) }
    }

    public var count: Int { seconds.count }

    public subscript(path: String) -> Double? { seconds[path] }

    /// `path` is at `value`; at the bound, the least recently saved is forgotten (O(n), only
    /// when a new path arrives at the bound).
    public mutating func set(_ path: String, _ value: Double) {
        clock &+= 1
        if seconds[path] == nil, seconds.count >= limit, let oldest = stamps.min(by: { $0.value < $1.value })?.key {
            seconds[oldest] = nil
            stamps[oldest] = nil
        }
        seconds[path] = value
        stamps[path] = clock
    }

    public mutating func remove(_ path: String) {
        seconds[path] = nil
        stamps[path] = nil
    }
}
