import AdRuntime
import AdSchedule
import ControlProtocol

extension Controller {
    /// Runs a command whose row of the table says `Venue.loop`. On the loop. Every request is
    /// named here (no `default`): a new command is placed by the compiler, not forgotten.
    public func perform(_ request: Request) throws(ControlError) -> JSONValue {
        try admit(request)
        let result = try run(request)
        commanded(request)   // a person's command overrides the schedule once it succeeded
        return result
    }

    private func run(_ request: Request) throws(ControlError) -> JSONValue {
        switch request {
        case .status(let queue): return status(queue: queue)
        case .play: return try play()
        case .pause: return try pause()
        case .toggle: return try toggle()
        case .next: return try next()
        case .previous: return try previous()
        case .stop: return stopCommand()
        case .clear: return clear()
        case .background: return setBackground(true)
        case .foreground: return setBackground(false)
        case .closeAd: return try closeAd()
        case .skip: return try skipAd()
        case .loop(let on): return try setLoop(on)
        case .speed(let value): return try speed(value)
        case .seek(let target): return try seek(target)
        case .volume(let change): return try setVolume(change)
        case .mute(let on): return try setMute(on)
        case .setRepeat(let mode): return try setRepeat(mode)
        case .shuffle(let on): return setShuffle(on)
        case .remove(let index): return try remove(index)
        case .move(let from, let to): return try move(from: from, to: to)
        case .jump(let index): return try jump(index)
        case .tracks: return try tracks()
        case .audioTrack(let choice): return try selectTrack(audio: true, choice)
        case .subtitleTrack(let choice): return try selectTrack(audio: false, choice)
        case .audioDevices: return audioDevices()
        case .display(let mode): return setDisplay(mode)
        case .schedule: return try scheduleStatus()
        case .scheduleAuto: return try scheduleAutomatic()
        case .takeoverEnd(let by): return try takeoverEnd(by: by)
        case .open, .queue, .takeover, .screenshot, .metrics, .plays, .subscribe, .version, .health, .logs, .identify, .reload:
            throw ControlError(.internalError, "\(request.name) does not run on the loop alone")
        }
    }

    /// What a linear ad (or its break) refuses of `request`: its row's `duringLinearAd`, the
    /// one rule for every client (docs/protocol.md, "While a linear ad plays"). Every command
    /// that reaches the player passes here (`perform`, the router's files-then-loop commands).
    public func admit(_ request: Request) throws(ControlError) {
        player.loop.requireInLoop()
        switch Commands.row(of: request)?.duringLinearAd ?? .allowed {
        case .allowed: break
        case .refused(let what): try refuseDuringLinearAd(what)
        case .refusedForPlayingEntry(let what): if request.entryIndex == current { try refuseDuringLinearAd(what) }
        }
    }
}
