import AdRuntime
import AdSources
import Foundation

extension BeaconOutbox {
    // MARK: Delivering

    public struct Report: Sendable, Equatable {
        public var sent = 0
        public var failed = 0
        public var dropped = 0
        public init() {}
    }

    /// One pass: drops expired beacons, sends every due one (at most `concurrency` at a time),
    /// deletes the delivered, reschedules the rest.
    public func deliverDue() async -> Report {
        var report = Report()
        let (due, events) = state.withLock { state -> ([Pending], [OutboxEvent]) in
            var events = flushMemory(&state)
            let now = state.run.now()
            events += expire(now, &state)
            report.dropped = events.filter { if case .dropped = $0 { true } else { false } }.count
            var due: [Pending] = []
            let limit = max(64, configuration.concurrency * 16)
            // On-disk beacons whose schedule the disk did not take are due by the schedule kept here.
            let rescheduled = state.schedule.filter { $0.value.nextRun <= now }.map(\.key)
            if let rows = try? state.db.execute("""
                SELECT id, url, event, play, billable, created_run, wall, mono, boot, synced, attempts, next_run, deadline_run
                FROM beacons WHERE (next_run <= ? AND id NOT IN (SELECT value FROM json_each(?))) OR id IN (SELECT value FROM json_each(?))
                ORDER BY next_run, id LIMIT ?
                """, [.real(now), .text(Self.idList(state.schedule.keys)), .text(Self.idList(rescheduled)),
                      .integer(Int64(limit + state.inFlight.count + state.delivered.count))]) {
                for row in rows {
                    guard var pending = Self.pending(row), !state.inFlight.contains(pending.id), !state.delivered.contains(pending.id) else { continue }
                    if let entry = state.schedule[pending.id] { (pending.attempts, pending.nextRun) = entry }
                    due.append(pending)
                    if due.count >= limit { break }
                }
            }
            for pending in state.memory where pending.nextRun <= now && !state.inFlight.contains(pending.id) && due.count < limit {
                due.append(pending)
            }
            // A beacon that wants [TIMESTAMP] waits for an unsynchronised clock (a while), looked
            // at again every few seconds — all those of a pass in the pass's one transaction: a
            // box that never syncs its clock must not write (and sync) a row per beacon a second.
            var held: [Pending] = []
            due = due.filter { pending in
                guard Macros.wantsTimestamp(pending.beacon.url), pending.beacon.recorded.corrected(clock) == nil,
                      now - pending.createdRun < configuration.timeSyncWait else { return true }
                held.append(pending)
                return false
            }
            for pending in held where pending.id < 0 {
                if let index = state.memory.firstIndex(where: { $0.id == pending.id }) { state.memory[index].nextRun = now + Self.heldRecheck }
            }
            // The attempt is written before it is made: a beacon in flight when the process dies
            // counts it and waits its backoff after the restart, behind the others due.
            var planned: [Int64: (attempts: Int, nextRun: Double)] = [:]
            for pending in held where pending.id > 0 { planned[pending.id] = (pending.attempts, now + Self.heldRecheck) }
            for pending in due where pending.id > 0 { planned[pending.id] = (pending.attempts + 1, now + backoff(after: pending.attempts + 1)) }
            var written = false
            if !state.diskFailing, !planned.isEmpty {
                do {
                    try state.db.transaction {
                        for (id, entry) in planned {
                            try state.db.execute("UPDATE beacons SET attempts = ?, next_run = ? WHERE id = ?",
                                                 [.integer(Int64(entry.attempts)), .real(entry.nextRun), .integer(id)])
                        }
                        try saveRun(&state)
                    }
                    written = true
                } catch {
                    events.append(diskFailed(error, &state))
                }
            }
            // What the disk did not take is kept here: the backoff holds all the same.
            for (id, entry) in planned {
                if written { state.schedule[id] = nil } else { state.schedule[id] = entry }
            }
            state.inFlight.formUnion(due.map(\.id))
            return (due, events)
        }
        events.forEach(onEvent)
        guard !due.isEmpty else { return report }

        // Each outcome is written as soon as it is known (its own small transaction), so a
        // `kill -9` mid-pass re-sends only what was in flight then; and it is told at once.
        await withTaskGroup(of: (Pending, String, Result<Int, any Error>).self) { group in
            var next = due.makeIterator()
            let clock = self.clock
            func start(_ pending: Pending) {
                let url = Macros.fillTimestamp(pending.beacon.url, pending.beacon.recorded.corrected(clock)
                                                  .map { Date(timeIntervalSince1970: $0) } ?? Date(timeIntervalSince1970: pending.beacon.recorded.wall))
                group.addTask { [sender, configuration] in (pending, url, await sender.send(pending.beacon, url: url, timeout: configuration.requestTimeout)) }
            }
            for _ in 0..<max(1, configuration.concurrency) {
                guard let pending = next.next() else { break }
                start(pending)
            }
            while let (pending, url, result) = await group.next() {
                onEvent(record(pending, url, result, into: &report))   // the callback after the lock is released
                if let pending = next.next() { start(pending) }
            }
        }
        return report
    }

    static func pending(_ row: [SQLiteValue]) -> Pending? {
        guard row.count == 13, let id = row[0].integer, let url = row[1].text else { return nil }
        let recorded = RecordedTime(wall: row[6].real ?? 0, monotonic: row[7].real ?? 0, boot: row[8].text ?? "", trust: RecordedTime.Trust(rawValue: Int(row[9].integer ?? 0)) ?? .none)
        let deadline = row[12].real.map { $0 - (row[5].real ?? 0) }
        let beacon = Beacon(url: url, event: row[2].text ?? "", play: row[3].text, billable: row[4].integer == 1, recorded: recorded,
                            deadline: deadline)
        return Pending(id: id, beacon: beacon, createdRun: row[5].real ?? 0, attempts: Int(row[10].integer ?? 0), nextRun: row[11].real ?? 0)
    }

    /// Seconds (run time) between two looks at a beacon held for the clock's synchronisation.
    static let heldRecheck = 5.0
    /// When the database cannot be read, the courier looks again after this long (never sleeps unbounded).
    static let unreadableRecheck = 5.0

    /// Ids as a JSON array, for `json_each` (SQLite's JSON functions are built in since 3.38).
    static func idList<S: Sequence>(_ ids: S) -> String where S.Element == Int64 {
        "[" + ids.map(String.init).joined(separator: ",") + "]"
    }

    /// Drops what is older than `maxAge` (run time), and what has missed its `pop-deadline` (a
    /// buyer who pays on time or not at all is never sent one late), counting each, on its play
    /// too. Under the lock.
    func expire(_ now: Double, _ state: inout State) -> [OutboxEvent] {
        let limit = now - configuration.maxAge
        var events = drop(.expired, where: "created_run < ?", [.real(limit)], &state) { pending in pending.createdRun < limit }
        events += drop(.deadline, where: "deadline_run IS NOT NULL AND deadline_run < ?", [.real(now)], &state) { pending in
            pending.beacon.deadline.map { pending.createdRun + $0 < now } == true
        }
        saveCounters(&state)
        savePlays(&state)
        return events
    }

    /// Drops the beacons on disk that `condition` (SQL) selects and those in memory that
    /// `inMemory` does — none in flight — counting each as `reason`. Under the lock.
    private func drop(_ reason: DropReason, where condition: String, _ values: [SQLiteValue], _ state: inout State,
                      inMemory: (Pending) -> Bool) -> [OutboxEvent] {
        var events: [OutboxEvent] = []
        func count(_ url: String, _ play: String?) {
            add("dropped:\(reason.rawValue)", 1, &state)
            if let play {
                state.unsavedPlays[play, default: (0, 0, 0, 0)].dropped += 1
                if reason == .deadline { state.unsavedPlays[play, default: (0, 0, 0, 0)].deadline += 1 }
            }
            events.append(.dropped(url: url, reason: reason.rawValue))
        }
        if !state.diskFailing, let rows = try? state.db.execute("SELECT id, url, play FROM beacons WHERE \(condition) LIMIT 10000", values),
           !rows.isEmpty {
            let doomed = rows.filter { $0[0].integer.map { !state.inFlight.contains($0) } ?? false }
            do {
                try state.db.transaction {
                    for row in doomed { try state.db.execute("DELETE FROM beacons WHERE id = ?", [row[0]]) }
                }
                for row in doomed {
                    let url = row[1].text ?? ""
                    state.rows -= 1
                    state.bytes -= url.utf8.count
                    count(url, row[2].text)
                }
            } catch {
                events.append(diskFailed(error, &state))
            }
        }
        let gone = state.memory.filter { inMemory($0) && !state.inFlight.contains($0.id) }
        if !gone.isEmpty {
            let ids = Set(gone.map(\.id))
            state.memory.removeAll { ids.contains($0.id) }
            state.memoryBytes -= gone.reduce(0) { $0 + $1.beacon.url.utf8.count }
            for pending in gone { count(pending.beacon.url, pending.beacon.play) }
        }
        return events
    }

    /// Writes what became of one delivery: deleted when the server took it (2xx), otherwise
    /// rescheduled with backoff. No longer in flight either way.
    /// An outcome's writes (the delivered beacon deleted, a retry's schedule, the counters) are
    /// not synced to the disk each (`synchronous=NORMAL` under WAL: a crash or `kill -9` loses
    /// none of them; a power cut may lose the last few, and then re-sends those beacons — a
    /// duplicate, never a loss — and the next synced write, a beacon queued, makes them
    /// durable). A beacon queued is synced before anything is sent. At 10,000 beacons a minute
    /// this is ~25,000 fewer fsyncs a minute (docs/benchmarks.md §6).
    func record(_ pending: Pending, _ url: String, _ result: Result<Int, any Error>, into report: inout Report) -> OutboxEvent {
        state.withLock { state -> OutboxEvent in
            defer { state.inFlight.remove(pending.id) }
            let db = state.db
            return db.withoutSyncEachCommit { () -> OutboxEvent in
                let now = state.run.now()
                if case .success(let status) = result, (200..<300).contains(status) {
                    state.schedule[pending.id] = nil
                    report.sent += 1
                    add("sent", 1, &state)
                    if let play = pending.beacon.play { state.unsavedPlays[play, default: (0, 0, 0, 0)].sent += 1 }
                    if pending.id < 0 {
                        state.memory.removeAll { $0.id == pending.id }
                        state.memoryBytes -= pending.beacon.url.utf8.count
                    } else {
                        do {
                            try state.db.execute("DELETE FROM beacons WHERE id = ?", [.integer(pending.id)])
                            state.rows -= 1
                            state.bytes -= pending.beacon.url.utf8.count
                        } catch {
                            state.delivered.insert(pending.id)   // never sent again; deleted when the disk takes writes
                            state.diskFailing = true
                        }
                    }
                    saveCounters(&state)
                    savePlays(&state)
                    return .sent(url: url, attempts: pending.attempts + 1)
                }
                let reason = switch result {
                case .success(let status): "HTTP \(status)"
                case .failure(let error): String(describing: error)
                }
                report.failed += 1
                add("failed_attempts", 1, &state)
                let delay = backoff(after: pending.attempts + 1)
                if pending.id < 0 {
                    if let index = state.memory.firstIndex(where: { $0.id == pending.id }) {
                        state.memory[index].attempts += 1
                        state.memory[index].nextRun = now + delay
                    }
                } else {
                    let entry = (attempts: pending.attempts + 1, nextRun: now + delay)
                    let written = !state.diskFailing && (try? state.db.execute("UPDATE beacons SET attempts = ?, next_run = ?, last_error = ? WHERE id = ?",
                                                                                 [.integer(Int64(entry.attempts)), .real(entry.nextRun),
                                                                                  .text(String(reason.prefix(500))), .integer(pending.id)])) != nil
                    if !written {
                        state.diskFailing = true
                        state.schedule[pending.id] = entry
                    } else {
                        state.schedule[pending.id] = nil
                    }
                }
                saveCounters(&state)
                return .retrying(url: url, attempts: pending.attempts + 1, reason: reason, inSeconds: delay)
            }
        }
    }

    /// Delivers until nothing is pending or `until` passes; sleeps until the next due beacon.
    public func deliverAll(until deadline: Date = .distantFuture) async {
        while Date() < deadline {
            _ = await deliverDue()
            guard let wait = nextDue() else { return }
            if wait > 0 { try? await Task.sleep(nanoseconds: UInt64(min(wait, max(0, deadline.timeIntervalSinceNow)) * 1e9)) }
        }
    }

    /// Exponential backoff with ±50 % jitter: base × 2^(attempts−1), capped.
    public func backoff(after attempts: Int) -> Double {
        let exponential = min(configuration.maxDelay, configuration.baseDelay * pow(2, Double(max(0, attempts - 1))))
        var random = AdEnvironment.Generator(configuration.environment)
        return exponential * Double.random(in: 0.5...1.5, using: &random)
    }
}
