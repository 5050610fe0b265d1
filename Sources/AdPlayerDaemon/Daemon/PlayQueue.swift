import AdRuntime
import ControlProtocol

/// The queue as a value: its entries, the one that plays, the play order (shuffled or not),
/// what happens at an episode's end (`repeat`), and its bounds. No player, no loop, no disk:
/// the controller owns one on the loop and saves it through `StateStore`; its rules are tested
/// alone (`PlayQueueTests`).
public struct PlayQueue: Sendable, Equatable {
    public private(set) var entries: [QueueEntry] = []
    /// The entry that plays (or played last: `play` resumes it).
    public var current: Int?
    /// At an episode's end: the next (`off`), the same again (`one`, each pass another item,
    /// R14), the queue over again at its end (`all`).
    public var repeatMode = RepeatMode.off
    /// The queue in a new random order each pass, never an episode twice in a row.
    public private(set) var shuffle = false
    /// The play order while shuffled: indices of `entries`.
    private var order: [Int] = []
    /// Where the shuffles' randomness comes from (a simulation's is seeded).
    public var environment = AdEnvironment.system

    public static func == (a: PlayQueue, b: PlayQueue) -> Bool {
        a.entries == b.entries && a.current == b.current && a.repeatMode == b.repeatMode && a.shuffle == b.shuffle && a.order == b.order
    }

    public init(entries: [QueueEntry] = [], current: Int? = nil, repeatMode: RepeatMode = .off, shuffle: Bool = false,
                environment: AdEnvironment = .system) {
        self.environment = environment
        self.entries = entries
        self.current = current.flatMap { entries.indices.contains($0) ? $0 : nil }
        self.repeatMode = repeatMode
        self.shuffle = shuffle
        if shuffle { reshuffle(first: self.current) }
    }

    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }
    public var loopsEpisode: Bool { repeatMode == .one }
    public subscript(index: Int) -> QueueEntry { entries[index] }
    public func contains(_ index: Int) -> Bool { entries.indices.contains(index) }

    // MARK: Adding (within the bounds: `QueueEntry.maxEntries`, `maxPathBytes`)

    /// Refuses, adding nothing, what would take the queue past its bounds.
    public func checkRoom(for more: [QueueEntry]) throws(ControlError) {
        guard !QueueEntry.fits(entries, more) else { return }
        throw ControlError(.queueFull, "the queue holds \(entries.count) entries; with \(more.count) more it would pass "
                           + "its bounds (\(QueueEntry.maxEntries) entries, \(QueueEntry.maxPathBytes >> 20) MiB of paths)"
                           + (entries.isEmpty ? "" : "; `clear` empties it"))
    }

    /// `open`: `more` right after the current entry; returns the index of the first (to play now).
    public mutating func insertAfterCurrent(_ more: [QueueEntry]) throws(ControlError) -> Int {
        try checkRoom(for: more)
        let index = min((current ?? -1) + 1, entries.count)
        entries.insert(contentsOf: more, at: index)
        if let playing = current, playing >= index { current = playing + more.count }
        if shuffle { reshuffle(first: index) }
        return index
    }

    /// `queue`: `more` at the end; returns the entry to play if nothing plays (the first added,
    /// or the first of them in the shuffled order).
    public mutating func append(_ more: [QueueEntry]) throws(ControlError) -> Int {
        try checkRoom(for: more)
        let first = entries.count
        entries += more
        if shuffle { reshuffle(first: current) }
        return shuffle ? (order.first { $0 >= first } ?? first) : first
    }

    public mutating func removeAll() {
        entries = []
        current = nil
        order = []
    }

    // MARK: Editing

    /// The index must name an entry; the error names the command.
    public func checkIndex(_ index: Int, _ command: String) throws(ControlError) {
        guard entries.indices.contains(index) else {
            throw ControlError(.badArgs, "\(command): no entry \(index) (the queue has \(entries.count), numbered from 0)")
        }
    }

    /// Takes entry `index` out. If it was the current one, there is no current entry after
    /// this (the caller plays the entry now at `index`, if any); otherwise the current entry
    /// keeps playing, renumbered.
    public mutating func remove(at index: Int) throws(ControlError) {
        try checkIndex(index, "remove")
        entries.remove(at: index)
        if index == current {
            current = nil
            if shuffle { reshuffle() }
        } else {
            if let playing = current, index < playing { current = playing - 1 }
            if shuffle { reshuffle(first: current) }
        }
    }

    /// Moves entry `from` to position `to` (the entries between shift); what plays goes on.
    public mutating func move(from: Int, to: Int) throws(ControlError) {
        try checkIndex(from, "move")
        try checkIndex(to, "move")
        let entry = entries.remove(at: from)
        entries.insert(entry, at: to)
        if let playing = current {
            if playing == from {
                current = to
            } else if from < playing, to >= playing {
                current = playing - 1
            } else if from > playing, to <= playing {
                current = playing + 1
            }
        }
        if shuffle { reshuffle(first: current) }
    }

    /// `jump`: `index` plays next, first of a new shuffled order.
    public mutating func jump(to index: Int) throws(ControlError) {
        try checkIndex(index, "jump")
        if shuffle { reshuffle(first: index) }
    }

    public mutating func setShuffle(_ on: Bool) {
        shuffle = on
        if on { reshuffle(first: current) }
    }

    // MARK: Order

    /// Where playback goes after `index`: the next in the queue (or in the shuffled order); at
    /// the end, the start again with `repeat all` (a new order when shuffled), else nothing.
    public mutating func next(after index: Int) -> Int? {
        guard !entries.isEmpty else { return nil }
        if shuffle {
            if order.count != entries.count { reshuffle(first: index) }
            if let position = order.firstIndex(of: index), position + 1 < order.count { return order[position + 1] }
            guard repeatMode == .all else { return nil }
            reshuffle(notFirst: index)
            return order.first
        }
        if index + 1 < entries.count { return index + 1 }
        return repeatMode == .all ? 0 : nil
    }

    /// The episode likely to play after `index`, without drawing a new order (nil at the end
    /// of a shuffled order about to be drawn again): what is worth getting ready ahead.
    public func upcoming(after index: Int) -> Int? {
        guard !entries.isEmpty else { return nil }
        if shuffle {
            guard let position = order.firstIndex(of: index), position + 1 < order.count else { return nil }
            return order[position + 1]
        }
        if index + 1 < entries.count { return index + 1 }
        return repeatMode == .all ? 0 : nil
    }

    /// Whether there is a next episode (MPRIS's CanGoNext), without drawing a new order.
    public func hasNext(after index: Int) -> Bool {
        guard !entries.isEmpty else { return false }
        if repeatMode == .all { return true }
        if shuffle, let position = order.firstIndex(of: index) { return position + 1 < order.count }
        return index + 1 < entries.count
    }

    /// The episode before `index` in the play order.
    public func previous(before index: Int) -> Int? {
        if shuffle, let position = order.firstIndex(of: index) { return position > 0 ? order[position - 1] : nil }
        return index > 0 ? index - 1 : nil
    }

    /// A new play order: `first` (the episode that plays) first, the others in a random order;
    /// or, for a new pass, not beginning with `notFirst` (just played).
    private mutating func reshuffle(first: Int? = nil, notFirst: Int? = nil) {
        var generator = AdEnvironment.Generator(environment)
        var rest = entries.indices.filter { $0 != first }.shuffled(using: &generator)
        if let notFirst, rest.count > 1, rest.first == notFirst { rest.swapAt(0, environment.int(in: 1..<rest.count)) }
        order = (first.map { [$0] } ?? []) + rest
    }

    /// The play order (tests, and the status's reading of it).
    public var playOrder: [Int] { shuffle ? order : Array(entries.indices) }
}
