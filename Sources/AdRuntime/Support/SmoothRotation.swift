/// Smooth weighted rotation (as nginx's upstreams), one state per set of candidates: each
/// candidate's running weight grows by its weight, the largest is chosen and loses the total —
/// 3 against 1 gives A A B A, A A B A…, never a streak of chance. Equal weights: round-robin
/// in the order given. Shared by the catalog's ads and the schedule's equal-priority slots.
public struct SmoothRotation: Sendable, Equatable {
    private var current: [String: [String: Int]] = [:]

    public init() {}

    /// Chooses among `candidates` (id, weight ≥ 1), in the rotation kept under `key`.
    public mutating func choose(_ candidates: [(id: String, weight: Int)], key: String) -> String? {
        guard !candidates.isEmpty else { return nil }
        var running = current[key, default: [:]]
        let total = candidates.reduce(0) { $0 + $1.weight }
        var best: String?
        for candidate in candidates {
            running[candidate.id, default: 0] += candidate.weight
            if best == nil || running[candidate.id]! > running[best!]! { best = candidate.id }
        }
        running[best!]! -= total
        current[key] = running
        return best
    }

    /// Forgets every rotation (bounded memory: the caller clears it when its keys are many).
    public mutating func reset() { current = [:] }
    public var keys: Int { current.count }
}
