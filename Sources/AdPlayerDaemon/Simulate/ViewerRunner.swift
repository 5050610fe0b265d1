import AdRuntime
import ControlProtocol
import Foundation

/// Plays a `ViewerScript` on the simulation's loop: each step a request through the command
/// table (`Controller.perform`), as a client's; a refused one is kept with its error (a
/// `skip` before the skip offset is a viewer's real mistake, not the simulation's).
///
/// Threading: loop-only after construction (`arm` and every timer on the loop).
final class ViewerRunner: PlayerObserver, @unchecked Sendable {
    // @unchecked: every var is touched on the loop only.
    private let script: ViewerScript
    private weak var simulation: Simulation?
    private let controller: Controller
    private let player: any ContentPlayer
    private let viewerPaused: (@Sendable (Bool) -> Void)?
    private var observation: PlayerObservation?
    /// Episodes (items other than loop passes) started so far, and the current one's number.
    private var episodes = 0
    private var item: PlayerItem?
    /// Content steps done for the current item, and the timer waiting for the next one.
    private var doneForItem: Set<Int> = []
    private var contentTimer: LoopTimer?

    init(script: ViewerScript, simulation: Simulation, controller: Controller, player: any ContentPlayer, viewerPaused: (@Sendable (Bool) -> Void)?) {
        self.script = script
        self.simulation = simulation
        self.controller = controller
        self.player = player
        self.viewerPaused = viewerPaused
    }

    func arm() {
        player.loop.requireInLoop()
        observation = player.addObserver(self, phase: .report)
        for (index, step) in script.steps.enumerated() {
            if case .time(let at, let every) = step.trigger { schedule(index, at: at, every: every) }
        }
    }

    private func schedule(_ index: Int, at: Double, every: Double?) {
        guard let simulation else { return }
        let now = Double(player.loop.now() &- simulation.startedAt) / 1e9
        _ = player.loop.schedule(after: max(0, at - now)) { [weak self] in
            guard let self else { return }
            perform(script.steps[index])
            if let every { schedule(index, at: at + every, every: every) }
        }
    }

    private func perform(_ step: ViewerScript.Step) {
        switch step.action {
        case .command(let request):
            run(request, step.label)
        case .holding(let request, let undo, let seconds):
            run(request, step.label + " for \(String(format: "%g", seconds)) s")
            _ = player.loop.schedule(after: seconds) { [weak self] in self?.run(undo, undo.name) }
        }
    }

    private func run(_ request: Request, _ label: String) {
        let result: String
        do {
            _ = try controller.perform(request)
            result = "ok"
        } catch {
            result = "\(error.code.rawValue): \(error.message)"
        }
        // A linear ad's video follows the viewer's pause (mpv pauses it with the content).
        switch request {
        case .pause: viewerPaused?(true)
        case .play: viewerPaused?(false)
        case .toggle: viewerPaused?(!(player.snapshot().playing))
        default: break
        }
        simulation?.recordViewer(label, result)
    }

    // MARK: Content steps

    func player(_ player: any TrackablePlayer, didChange event: PlayerEvent) {
        if case .item(let new) = event.change {
            if let new, new.loop == 0, new.entry != item?.entry { episodes += 1 }
            item = new
            doneForItem = []
        }
        armContent(event.snapshot)
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
