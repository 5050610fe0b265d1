import AdPlayerDaemon
import AdRuntime
import ControlProtocol
import Foundation

/// Plays a `ViewerScript` on the simulation's loop: each step a request through the box's
/// command table (`CommandRouter`), as a client's on the socket — a files-then-loop command
/// (`open`, `queue`, `takeover`) checks its files as it does there. A refused one is kept with
/// its error and changes nothing else (a `skip` before the skip offset is a viewer's real
/// mistake, not the simulation's). Armed before the box starts: a content step fires on the
/// first item as on every other.
///
/// Threading: loop-only after construction (`arm` and every timer on the loop).
final class ViewerRunner: PlayerObserver, @unchecked Sendable {
    // @unchecked: every var is touched on the loop only.
    private let script: ViewerScript
    private let router: CommandRouter
    private let player: any ContentPlayer
    private let start: UInt64
    private let record: @Sendable (_ label: String, _ request: Request, _ result: String) -> Void
    private var observation: PlayerObservation?
    /// Items started so far (episodes, not loop passes), and the current one.
    private var episodes = 0
    private var item: PlayerItem?
    /// Content steps done for the current item, and the timer waiting for the next one.
    private var doneForItem: Set<Int> = []
    private var contentTimer: LoopTimer?

    init(script: ViewerScript, router: CommandRouter, player: any ContentPlayer, start: UInt64,
         record: @escaping @Sendable (String, Request, String) -> Void) {
        self.script = script
        self.router = router
        self.player = player
        self.start = start
        self.record = record
    }

    func arm() {
        player.loop.requireInLoop()
        observation = player.addObserver(self, phase: .report)
        for (index, step) in script.steps.enumerated() {
            if case .time(let at, let every) = step.trigger { schedule(index, at: at, every: every) }
        }
        // What is in the player now (nothing, before the box starts) counts as the first item.
        let now = player.snapshot()
        if let current = now.item { enter(current) }
        armContent(now)
    }

    func cancel() { observation?.cancel() }

    private func schedule(_ index: Int, at: Double, every: Double?) {
        let now = Double(player.loop.now() &- start) / 1e9
        _ = player.loop.schedule(after: max(0, at - now)) { [weak self] in
            guard let self else { return }
            perform(script.steps[index])
            if let every { schedule(index, at: at + every, every: every) }
        }
    }

    private func perform(_ step: ViewerScript.Step) {
        switch step.action {
        case .command(let request):
            run(request, step.label) { _ in }
        case .holding(let request, let undo, let seconds):
            run(request, step.label) { [weak self] succeeded in
                guard let self, succeeded else { return }
                _ = player.loop.schedule(after: seconds) { [weak self] in self?.run(undo, undo.name) { _ in } }
            }
        }
    }

    /// The request through the command table; its answer recorded (and told to `then`).
    func run(_ request: Request, _ label: String, then: @escaping @Sendable (Bool) -> Void) {
        let record = self.record
        switch request {
        case .version:
            record(label, request, "ok")
            return then(true)
        default:
            break
        }
        router.handle(request) { result in
            switch result {
            case .success:
                record(label, request, "ok")
                then(true)
            case .failure(let error):
                record(label, request, "\(error.code.rawValue): \(error.message)")
                then(false)
            }
        }
    }

    // MARK: Content steps

    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) {
        if case .item(let new) = event.change {
            if let new { enter(new) } else { item = nil }
        }
        armContent(event.snapshot)
    }

    private func enter(_ new: PlayerItem) {
        if new.loop == 0, new.entry != item?.entry { episodes += 1 }
        if new != item { doneForItem = [] }
        item = new
    }

    /// Waits for the next content step of this item, at its position at the current speed.
    private func armContent(_ snapshot: PlayerSnapshot) {
        contentTimer?.cancel()
        contentTimer = nil
        guard snapshot.item != nil else { return }
        var soonest: (index: Int, wait: Double)?
        for (index, step) in script.steps.enumerated() where !doneForItem.contains(index) {
            guard case .content(let position, let episode) = step.trigger, episode == nil || episode == episodes else { continue }
            let wait: Double
            if snapshot.position >= position - 1e-9 {
                wait = 0
            } else if snapshot.playing, snapshot.rate > 0 {
                wait = (position - snapshot.position) / snapshot.rate
            } else {
                continue
            }
            if soonest == nil || wait < soonest!.wait { soonest = (index, wait) }
        }
        guard let (index, wait) = soonest else { return }
        contentTimer = player.loop.schedule(after: wait) { [weak self] in
            guard let self else { return }
            contentTimer = nil
            doneForItem.insert(index)
            perform(script.steps[index])
            armContent(player.snapshot())
        }
    }
}
