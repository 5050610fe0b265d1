import AdRuntime
import ControlProtocol
import Foundation

/// The display's power: the operating hours (`display-hours`) and the overrides of `display
/// on|off|auto` (issue 27).
///
/// ```
/// on ──outside the hours──────────▶ off(schedule) ──the hours begin──▶ on
/// on ──display off────────────────▶ off(override) ──next boundary / display auto──▶ as the hours say
/// off(schedule) ──display on──────▶ on(override)  ──next boundary / display auto──▶ as the hours say
/// ```
///
/// Off: the ads' policy goes dark first (nothing asked for, shown or counted), the output is
/// hidden (background reason `schedule`: R13 for anything on screen), the content is paused
/// where it is, the output blanked, and the display put in standby (`cec`, off the loop). On:
/// woken, unblanked, shown, and the episode plays on from where it stopped if it played.
///
/// Time: the wall clock is asked each time (it may jump: NTP at boot, an operator); the loop's
/// timer only says when to ask again — at the next boundary, and at least every 30 s, so a
/// jump is followed within 30 s and acted on once (the state is compared, not the edges).
struct DisplayPower {
    var hours: WeeklyHours?
    /// `display on|off`, held until `until` (the next boundary; nil: until `display auto`).
    var override: (on: Bool, until: Date?)?
    var on = true
    var reason: String?
    /// The content played when the display went off: it plays again when it comes on.
    var playAfter = false
    var timer: LoopTimer?
    /// Puts the display in standby (false) or wakes it (true): runs off the loop.
    var cec: (@Sendable (Bool) -> Void)?
    var now: @Sendable () -> Date = { Date() }

    /// Re-evaluated at least this often (seconds), so a wall-clock jump is followed.
    static let recheck = 30.0
}

extension Controller {
    /// Starts following the operating hours (nil: always on, overrides still work); `cec` puts
    /// the display in standby and wakes it. On the loop, once, after `start`.
    public func configureDisplay(hours: WeeklyHours?, cec: (@Sendable (Bool) -> Void)?, now: @escaping @Sendable () -> Date = { Date() }) {
        player.loop.requireInLoop()
        display.hours = hours
        display.cec = cec
        display.now = now
        metrics?.set("adplayerd_display_on", [:], 1)
        evaluateDisplay()
    }

    /// New operating hours (a reload): an override stays until its boundary in the new hours
    /// (with none: until `display auto`).
    public func setDisplayHours(_ hours: WeeklyHours?) {
        player.loop.requireInLoop()
        display.hours = hours
        let now = display.now()
        if display.override != nil { display.override?.until = hours?.nextChange(after: now) }
        evaluateDisplay()
    }

    /// `display on|off|auto`.
    public func setDisplay(_ mode: DisplayMode) -> JSONValue {
        player.loop.requireInLoop()
        let now = display.now()
        switch mode {
        case .auto: display.override = nil
        case .on, .off: display.override = (mode == .on, display.hours?.nextChange(after: now))
        }
        evaluateDisplay()
        return status()
    }

    /// `status`'s `display`.
    var displayJSON: JSONValue {
        var fields: [String: JSONValue] = ["power": .string(display.on ? "on" : "off"), "reason": display.reason.map { .string($0) } ?? .null]
        if let hours = display.hours {
            fields["hours"] = .string(hours.description)
            fields["next_change"] = hours.nextChange(after: display.now()).map { .string(ISO8601.format($0.timeIntervalSince1970)) } ?? .null
        }
        if let until = display.override?.until { fields["override_until"] = .string(ISO8601.format(until.timeIntervalSince1970)) }
        return .object(fields)
    }

    var displayOn: Bool { display.on }

    /// What the hours and the override say now, applied if it differs from what is; then
    /// asked again at the next boundary (at most `recheck` seconds away).
    func evaluateDisplay() {
        let now = display.now()
        if let override = display.override, let until = override.until, now >= until { display.override = nil }
        let scheduled = display.hours?.isOpen(at: now) ?? true
        let on = display.override?.on ?? scheduled
        let reason: String? = display.override != nil ? "override" : (on ? nil : "schedule")
        if on != display.on {
            applyDisplay(on: on, reason: reason)
        } else if reason != display.reason {
            display.reason = reason
            emit(.playerDisplay(on: on, reason: reason))
        }
        display.timer?.cancel()
        guard display.hours != nil || display.override?.until != nil else { return }
        var wait = DisplayPower.recheck
        if let next = display.hours?.nextChange(after: now) { wait = min(wait, max(0.05, next.timeIntervalSince(now))) }
        display.timer = player.loop.schedule(after: wait) { [weak self] in self?.evaluateDisplay() }
    }

    private func applyDisplay(on: Bool, reason: String?) {
        display.on = on
        display.reason = reason
        metrics?.set("adplayerd_display_on", [:], on ? 1 : 0)
        // Told first: what follows (the pause and the overlay it ends; at opening, the play
        // and the ads asked for again) comes after it.
        emit(.playerDisplay(on: on, reason: reason))
        if on {
            log.notice("display on\(reason.map { " (\($0))" } ?? ""): woken\(display.playAfter && episode != nil ? ", the episode plays on" : "")")
            display.cec?(true)
            updateBlank()
            setBackground(false, for: .schedule)
            episode?.policy?.setDark(false)
            if display.playAfter, episode != nil { try? player.play() }
            display.playAfter = false
        } else {
            let playing = player.snapshot().playing || (linearAd.map { !$0.paused } ?? false)
            display.playAfter = playing || display.playAfter
            log.notice("display off (\(reason ?? "schedule")): standby\(playing ? ", paused at \(String(format: "%.1f", player.snapshot().position)) s" : "")")
            // Dark before the pause: the pause asks for no pause ad.
            episode?.policy?.setDark(true)
            setBackground(true, for: .schedule)
            if playing { try? player.pause() }
            updateBlank()
            display.cec?(false)
        }
    }
}

extension Controller {
    /// The output is black while the display is off or the screen rests after a pause ad's
    /// `pause-ad-max`; one `osd-overlay` command when that changes.
    func updateBlank() {
        let blank = !display.on || resting
        guard blank != blanked else { return }
        blanked = blank
        try? player.setBlanked(blank)
    }

    /// After `pause-ad-max`: black until the content plays, seeks or changes (burn-in care).
    func setResting(_ rest: Bool) {
        guard rest != resting else { return }
        resting = rest
        if rest { log.info("pause-ad-max reached: the output rests (black) until the content moves") }
        updateBlank()
    }
}
