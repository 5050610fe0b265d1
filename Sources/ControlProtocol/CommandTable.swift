import BoundsCore
#if canImport(Glibc)
import Glibc
#endif

extension Commands {
    /// The whole protocol, sorted by name (`ProtocolTests` asserts the order): each command's
    /// arguments, who may run it, where it runs, its `adplayerctl` form and its `Request`.
    /// docs/protocol.md's table and `adplayerctl --help` are checked against / made from it.
    public static let all: [Command] = [
        Command("audio-devices", .read, .loop,
                cli: ("audio-devices", "the audio outputs mpv can use (for audio-device in the configuration)")) { _ in .audioDevices },
        Command("audio-track", .control, .loop, .fields([.required("id", .track(off: false))]),
                encode: { if case .audioTrack(let choice) = $0 { trackArguments(choice) } else { nil } },
                cli: ("audio-track ID|auto", "choose the audio track"), parse: { input throws(UsageError) in
                    .audioTrack(try track(input, "audio-track", off: false))
                }) { args throws(ControlError) in .audioTrack(try args.track("id")) },
        Command("background", .control, .loop,
                cli: ("background", "the output is hidden (R13); foreground shows it again")) { _ in .background },
        Command("clear", .admin, .loop, cli: ("clear", "stop playing and empty the queue")) { _ in .clear },
        Command("close-ad", .control, .loop,
                cli: ("close-ad", "the viewer dismisses the overlay or pause ad on screen")) { _ in .closeAd },
        Command("display", .control, .loop, .fields([.required("mode", .choice(DisplayMode.allCases.map(\.rawValue)))]),
                encode: { if case .display(let mode) = $0 { ["mode": .string(mode.rawValue)] } else { nil } },
                cli: ("display on|off|auto", "the display on or off (standby, HDMI-CEC) until the next boundary of\ndisplay-hours; auto: as the hours say"),
                parse: { input throws(UsageError) in
                    guard input.words.count == 1, let mode = DisplayMode(rawValue: input.words[0]) else { throw UsageError("display takes on, off or auto") }
                    return .display(mode)
                }) { args throws(ControlError) in
            guard let mode = DisplayMode(rawValue: try args.text("mode")) else { throw ControlError(.internalError, "display: no such mode") }
            return .display(mode)
        },
        Command("foreground", .control, .loop, cli: ("foreground", "the output is shown again")) { _ in .foreground },
        Command("health", .read, .worker,
                cli: ("health", "the box's verdict on itself: ok, degraded or failing, check by check\n(exit 0 ok, 1 degraded, 2 failing)")) { _ in .health },
        Command("identify", .control, .filesThenLoop, .fields([.optional("seconds", .number(1...600))]),
                encode: { if case .identify(let seconds) = $0 { ["seconds": .number(seconds)] } else { nil } },
                cli: ("identify [SECONDS]", "a label on the screen (box, address, a short code) for SECONDS (30)"),
                parse: { input throws(UsageError) in
                    guard input.words.count <= 1 else { throw UsageError("identify takes SECONDS (1 to 600) or nothing") }
                    guard let word = input.words.first else { return .identify(seconds: 30) }
                    guard let seconds = Double(word), (1...600).contains(seconds) else { throw UsageError("identify takes SECONDS from 1 to 600") }
                    return .identify(seconds: seconds)
                }) { args throws(ControlError) in .identify(seconds: try args.optionalNumber("seconds") ?? 30) },
        Command("jump", .control, .loop, .fields([.required("index", .index)]), linear: .refused("skipped"),
                encode: { if case .jump(let index) = $0 { ["index": .int(Int64(index))] } else { nil } },
                cli: ("jump INDEX", "play entry INDEX (from 1, as status numbers them) now"), parse: { input throws(UsageError) in
                    .jump(index: try entry(input, "jump"))
                }) { args throws(ControlError) in .jump(index: try args.index("index")) },
        Command("logs", .read, .worker, .fields([.optional("lines", .integer(1...Int64(ControlProtocol.maxLogLines)))]),
                encode: { if case .logs(let lines) = $0 { ["lines": .int(Int64(lines))] } else { nil } },
                cli: ("logs [N]", "the daemon's last N log lines (100; at most 1000), oldest first"), parse: { input throws(UsageError) in
                    guard input.words.count <= 1 else { throw UsageError("logs takes N or nothing") }
                    guard let word = input.words.first else { return .logs(lines: 100) }
                    guard let n = Int(word), n >= 1, n <= ControlProtocol.maxLogLines else { throw UsageError("logs takes N from 1 to 1000") }
                    return .logs(lines: n)
                }) { args throws(ControlError) in .logs(lines: Int(try args.optionalInteger("lines") ?? 100)) },
        Command("loop", .control, .loop, .fields([.required("on", .bool)]),
                encode: { if case .loop(let on) = $0 { ["on": .bool(on)] } else { nil } },
                cli: ("loop on|off", "loop the episode that plays (repeat one / off)"), parse: { input throws(UsageError) in
                    .loop(try input.onOff("loop"))
                }) { args throws(ControlError) in .loop(try args.bool("on")) },
        Command("metrics", .read, .worker, cli: ("metrics", "what the ads did since the daemon started, by kind")) { _ in .metrics },
        Command("move", .control, .loop, .fields([.required("from", .index), .required("to", .index)]),
                encode: { if case .move(let from, let to) = $0 { ["from": .int(Int64(from)), "to": .int(Int64(to))] } else { nil } },
                cli: ("move FROM TO", "move an entry of the queue"), parse: { input throws(UsageError) in
                    try input.expect(2, "move takes FROM and TO, from 1")
                    guard let from = Int(input.words[0]), let to = Int(input.words[1]), from >= 1, to >= 1 else {
                        throw UsageError("move takes FROM and TO, from 1")
                    }
                    return .move(from: from - 1, to: to - 1)
                }) { args throws(ControlError) in .move(from: try args.index("from"), to: try args.index("to")) },
        Command("mute", .control, .loop, .fields([.optional("on", .bool)]),
                encode: { if case .mute(let on) = $0 { on.map { ["on": .bool($0)] } ?? [:] } else { nil } },
                cli: ("mute [on|off]", "mute or unmute (no argument: toggle)"), parse: { input throws(UsageError) in
                    guard input.words.count <= 1, input.words.allSatisfy({ ["on", "off"].contains($0) }) else {
                        throw UsageError("mute takes on, off or nothing (toggle)")
                    }
                    return .mute(input.words.first.map { $0 == "on" })
                }) { args throws(ControlError) in .mute(try args.optionalBool("on")) },
        Command("next", .control, .loop, linear: .refused("skipped"), cli: ("next", "the next episode")) { _ in .next },
        Command("open", .control, .filesThenLoop,
                .fields([.required("path", .path), .optional("content_id", .contentID), .optional("start", .seconds(.position))]),
                linear: .refused("replaced by another episode"),
                encode: {
                    guard case .open(let path, let contentID, let start) = $0 else { return nil }
                    var args: [String: JSONValue] = ["path": .string(path)]
                    if let contentID { args["content_id"] = .string(contentID) }
                    if let start { args["start"] = .number(start) }
                    return args
                },
                cli: ("open FILE|DIR [--content-id ID] [--start SECONDS]",
                      "play FILE now (a file under one of the daemon's library folders; a folder:\nits playable files in name order)"),
                options: ["content-id": .value, "start": .value], parse: { input throws(UsageError) in
                    try input.expect(1, "open takes one FILE")
                    return .open(path: input.absolute(input.words[0]), contentID: input.arguments.value("content-id"),
                                 start: try input.arguments.value("start").map { text throws(UsageError) in try input.number(text, "--start") })
                }) { args throws(ControlError) in
            .open(path: try args.text("path"), contentID: try args.optionalText("content_id"),
                  start: try args.optionalNumber("start"))
        },
        Command("pause", .control, .loop, cli: ("pause", "pause the content")) { _ in .pause },
        Command("play", .control, .loop, cli: ("play", "play the content")) { _ in .play },
        Command("plays", .read, .worker,
                .fields([.optional("since", .instant), .optional("after_id", .integer(0...Int64.max)), .optional("limit", .integer(1...10_000)),
                         .optional("newest", .bool), .optional("after_chain", .integer(0...Int64.max))]),
                encode: {
                    guard case .plays(let since, let afterRow, let limit, let newest, let afterChain) = $0 else { return nil }
                    var fields: [String: JSONValue] = newest ? ["newest": true] : [:]
                    if let since { fields["since"] = .number(since) }
                    if let afterRow { fields["after_id"] = .int(afterRow) }
                    if let limit { fields["limit"] = .int(Int64(limit)) }
                    if let afterChain { fields["after_chain"] = .int(afterChain) }
                    return fields
                },
                cli: ("plays [--since TIME] [--after ID] [--limit N]",
                      "proof of play: every ad shown, oldest first (TIME: ISO 8601 or\nseconds since 1970; ID: a play's row, N at most 10000)"),
                options: ["since": .value, "after": .value, "limit": .value], parse: { input throws(UsageError) in
                    try input.expect(0, "plays takes no arguments but --since TIME, --after ID and --limit N")
                    var since: Double?
                    if let text = input.arguments.value("since") {
                        guard let seconds = Double(text) ?? ISO8601.parse(text) else {
                            throw UsageError("--since: \"\(text)\" is not ISO 8601 or seconds since 1970")
                        }
                        since = seconds
                    }
                    let after = try input.arguments.value("after").map { text throws(UsageError) -> Int64 in
                        guard let row = Int64(text), row >= 0 else { throw UsageError("--after: \"\(text)\" is not a play's row (a whole number)") }
                        return row
                    }
                    let limit = try input.arguments.value("limit").map { text throws(UsageError) -> Int in
                        guard let n = Int(text), (1...10_000).contains(n) else { throw UsageError("--limit: \"\(text)\" is not a number from 1 to 10000") }
                        return n
                    }
                    return .plays(since: since, afterRow: after, limit: limit)
                }) { args throws(ControlError) in
            .plays(since: try args.optionalNumber("since"), afterRow: try args.optionalInteger("after_id"),
                   limit: try args.optionalInteger("limit").map { Int($0) }, newest: try args.optionalBool("newest") ?? false,
                   afterChain: try args.optionalInteger("after_chain"))
        },
        Command("previous", .control, .loop, linear: .refused("skipped"), cli: ("previous", "the previous episode, from its start")) { _ in .previous },
        Command("queue", .control, .filesThenLoop, .fields([.required("paths", .paths(max: ControlProtocol.maxQueuePaths))]),
                encode: { if case .queue(let paths) = $0 { ["paths": .array(paths.map { .string($0) })] } else { nil } },
                cli: ("queue FILE|DIR...", "add files (a folder's playable files) to the queue"), parse: { input throws(UsageError) in
                    guard !input.words.isEmpty else { throw UsageError("queue needs at least one FILE") }
                    return .queue(paths: input.words.map(input.absolute))
                }) { args throws(ControlError) in .queue(paths: try args.texts("paths")) },
        Command("reload", .admin, .worker,
                cli: ("reload", "read the configuration file again (as SIGHUP does)")) { _ in .reload },
        Command("remove", .control, .loop, .fields([.required("index", .index)]),
                linear: .refusedForPlayingEntry("removed"),
                encode: { if case .remove(let index) = $0 { ["index": .int(Int64(index))] } else { nil } },
                cli: ("remove INDEX", "take entry INDEX (from 1, as status numbers them) out of the queue"), parse: { input throws(UsageError) in
                    .remove(index: try entry(input, "remove"))
                }) { args throws(ControlError) in .remove(index: try args.index("index")) },
        Command("repeat", .control, .loop, .fields([.required("mode", .choice(RepeatMode.allCases.map(\.rawValue)))]),
                encode: { if case .setRepeat(let mode) = $0 { ["mode": .string(mode.rawValue)] } else { nil } },
                cli: ("repeat off|one|all", "at an episode's end: the next; the same again; the queue over again at its end"),
                parse: { input throws(UsageError) in
                    guard input.words.count == 1, let mode = RepeatMode(rawValue: input.words[0]) else { throw UsageError("repeat takes off, one or all") }
                    return .setRepeat(mode)
                }) { args throws(ControlError) in
            guard let mode = RepeatMode(rawValue: try args.text("mode")) else { throw ControlError(.internalError, "repeat: no such mode") }
            return .setRepeat(mode)
        },
        Command("schedule", .read, .loop,
                cli: ("schedule [auto]", "what the schedule plays and why, and its next change; auto: the schedule\nrules again after open, queue, next… overrode it"),
                parse: { input throws(UsageError) in
                    if input.words == ["auto"] { return .scheduleAuto }
                    try input.expect(0, "schedule takes nothing, or auto")
                    return .schedule
                }) { _ in .schedule },
        Command("schedule-auto", .control, .loop,
                cli: ("schedule-auto", "the schedule rules again (as schedule auto)")) { _ in .scheduleAuto },
        Command("screenshot", .control, .filesThenLoop, .fields([.optional("with_ads", .bool), .optional("inline", .bool)]),
                encode: { if case .screenshot(let withAds, let inline) = $0 { inline ? ["with_ads": .bool(withAds), "inline": true] : ["with_ads": .bool(withAds)] } else { nil } },
                cli: ("screenshot [--video-only]", "a PNG of the screen (with the ads, or the video alone); prints its path"),
                options: ["video-only": .flag], parse: { input throws(UsageError) in
                    try input.expect(0, "screenshot takes no arguments but --video-only")
                    return .screenshot(withAds: !input.arguments.flag("video-only"))
                }) { args throws(ControlError) in
            .screenshot(withAds: try args.optionalBool("with_ads") ?? true, inline: try args.optionalBool("inline") ?? false)
        },
        Command("seek", .control, .loop, .oneOf([.required("to", .seconds(.position)), .required("by", .seconds(.offset))]),
                linear: .refused("seeked"),
                encode: {
                    switch $0 {
                    case .seek(.to(let seconds)): ["to": .number(seconds)]
                    case .seek(.by(let seconds)): ["by": .number(seconds)]
                    default: nil
                    }
                },
                cli: ("seek SECONDS | +S | -S", "to a time, or by an offset"), parse: { input throws(UsageError) in
                    try input.expect(1, "seek takes SECONDS, +SECONDS or -SECONDS")
                    let word = input.words[0]
                    let value = try input.number(word, "seek")
                    return .seek(word.hasPrefix("+") || word.hasPrefix("-") ? .by(value) : .to(value))
                }) { args throws(ControlError) in
            args.has("to") ? .seek(.to(try args.number("to"))) : .seek(.by(try args.number("by")))
        },
        Command("shuffle", .control, .loop, .fields([.required("on", .bool)]),
                encode: { if case .shuffle(let on) = $0 { ["on": .bool(on)] } else { nil } },
                cli: ("shuffle on|off", "play the queue in a new random order each pass"), parse: { input throws(UsageError) in
                    .shuffle(try input.onOff("shuffle"))
                }) { args throws(ControlError) in .shuffle(try args.bool("on")) },
        Command("skip", .control, .loop,
                cli: ("skip", "the viewer skips the linear ad that plays (pre-, mid-, post-roll), once\npast its skip offset")) { _ in .skip },
        Command("speed", .control, .loop, .fields([.required("value", .number(0.01...100))]), linear: .refused("played faster or slower"),
                encode: { if case .speed(let value) = $0 { ["value": .number(value)] } else { nil } },
                cli: ("speed X", "playback speed (0.01 to 100)"), parse: { input throws(UsageError) in
                    try input.expect(1, "speed takes X")
                    return .speed(try input.number(input.words[0], "speed"))
                }) { args throws(ControlError) in .speed(try args.number("value")) },
        Command("status", .read, .loop, .fields([.optional("queue", .bool)]),
                encode: { if case .status(let queue) = $0 { queue ? ["queue": true] : [:] } else { nil } },
                cli: ("status", "what plays, where, the ad on screen, the queue"), parse: { input throws(UsageError) in
                    try input.expect(0, "status takes no arguments")
                    return .status(queue: true)
                }) { args throws(ControlError) in .status(queue: try args.optionalBool("queue") ?? false) },
        Command("stop", .control, .loop, cli: ("stop", "stop playing (the queue stays)")) { _ in .stop },
        Command("subscribe", .read, .socket, .fields([.optional("events", .eventNames)]),
                encode: { if case .subscribe(let events) = $0 { events.map { ["events": .array($0.map { .string($0) })] } ?? [:] } else { nil } },
                cli: ("events [NAME...]", "follow the event stream (names or prefixes: player.* ad.ended)"), word: "events",
                parse: { input throws(UsageError) in
                    .subscribe(events: input.words.isEmpty ? nil : input.words)
                }) { args throws(ControlError) in .subscribe(events: try args.optionalTexts("events")) },
        Command("subtitle-track", .control, .loop, .fields([.required("id", .track(off: true))]),
                encode: { if case .subtitleTrack(let choice) = $0 { trackArguments(choice) } else { nil } },
                cli: ("subtitle-track ID|off|auto", "choose the subtitles"), parse: { input throws(UsageError) in
                    .subtitleTrack(try track(input, "subtitle-track", off: true))
                }) { args throws(ControlError) in .subtitleTrack(try args.track("id")) },
        Command("takeover", .admin, .filesThenLoop,
                .fields([.required("target", .contentID), .optional("seconds", .seconds(.duration)), .optional("priority", .integer(-1000...1_000_000)),
                         .optional("by", .contentID)]),
                linear: .allowed,
                encode: {
                    guard case .takeover(let target, let seconds, let priority, let by) = $0 else { return nil }
                    var fields: [String: JSONValue] = ["target": .string(target)]
                    if let seconds { fields["seconds"] = .number(seconds) }
                    if let priority { fields["priority"] = .int(Int64(priority)) }
                    if let by { fields["by"] = .string(by) }
                    return fields
                },
                cli: ("takeover FILE|PLAYLIST [--for LENGTH] [--priority P] | takeover end",
                      "play a file or a schedule's playlist now, above the schedule (audited),\nfor LENGTH (90m, 2h) or until takeover end"),
                options: ["for": .value, "priority": .value], parse: { input throws(UsageError) in
                    let who = "adplayerctl (user \(ThisProcess.environment["USER"] ?? String(getuid())))"
                    if input.words == ["end"] { return .takeoverEnd(by: who) }
                    try input.expect(1, "takeover takes one FILE or PLAYLIST, or end")
                    let word = input.words[0]
                    // A name of the schedule's playlists, or a file (a path: made absolute).
                    let target = word.contains("/") || word.contains(".") ? input.absolute(word) : word
                    let seconds = try input.arguments.value("for").map { text throws(UsageError) in
                        do { return try Seconds.parseLength(text, .duration, field: "--for") } catch { throw UsageError("\(error)") }
                    }
                    let priority = try input.arguments.value("priority").map { text throws(UsageError) in
                        guard let value = Int(text), (-1000...1_000_000).contains(value) else { throw UsageError("--priority: a whole number from -1000 to 1000000") }
                        return value
                    }
                    return .takeover(target: target, seconds: seconds, priority: priority, by: who)
                }) { args throws(ControlError) in
            .takeover(target: try args.text("target"), seconds: try args.optionalNumber("seconds"),
                      priority: try args.optionalInteger("priority").map { Int($0) }, by: try args.optionalText("by"))
        },
        Command("takeover-end", .admin, .loop, .fields([.optional("by", .contentID)]),
                encode: { if case .takeoverEnd(let by) = $0 { by.map { ["by": .string($0)] } ?? [:] } else { nil } },
                cli: ("takeover-end", "end the takeover (as takeover end)")) { args throws(ControlError) in .takeoverEnd(by: try args.optionalText("by")) },
        Command("toggle", .control, .loop, cli: ("toggle", "play or pause the content")) { _ in .toggle },
        Command("tracks", .read, .loop, cli: ("tracks", "the episode's audio and subtitle tracks")) { _ in .tracks },
        Command("version", .read, .socket, cli: ("version", "the daemon's protocol version")) { _ in .version },
        Command("volume", .control, .loop, .oneOf([.required("value", .number(0...100)), .required("by", .number(-100...100))]),
                encode: {
                    switch $0 {
                    case .volume(.to(let value)): ["value": .number(value)]
                    case .volume(.by(let by)): ["by": .number(by)]
                    default: nil
                    }
                },
                cli: ("volume N | +N | -N", "the content's volume (0 to 100), or by an amount"), parse: { input throws(UsageError) in
                    try input.expect(1, "volume takes N (0 to 100), +N or -N")
                    let word = input.words[0]
                    let value = try input.number(word, "volume")
                    return .volume(word.hasPrefix("+") || word.hasPrefix("-") ? .by(value) : .to(value))
                }) { args throws(ControlError) in
            args.has("value") ? .volume(.to(try args.number("value"))) : .volume(.by(try args.number("by")))
        },
    ]

    /// A track choice as sent (`audio-track`, `subtitle-track`).
    private static func trackArguments(_ choice: TrackChoice) -> [String: JSONValue] {
        switch choice {
        case .id(let id): ["id": .int(Int64(id))]
        case .auto: ["id": "auto"]
        case .off: ["id": "off"]
        }
    }

    /// A queue entry as `adplayerctl` numbers it (from 1), as the protocol's index (from 0).
    private static func entry(_ input: CommandLineInput, _ word: String) throws(UsageError) -> Int {
        guard input.words.count == 1, let index = Int(input.words[0]), index >= 1, index <= ControlProtocol.maxQueueEntries else {
            throw UsageError("\(word) takes an INDEX from 1")
        }
        return index - 1
    }

    private static func track(_ input: CommandLineInput, _ word: String, off: Bool) throws(UsageError) -> TrackChoice {
        let message = "\(word) takes an ID, auto\(off ? " or off" : "")"
        try input.expect(1, message)
        switch input.words[0] {
        case "auto": return .auto
        case "off" where off: return .off
        default:
            guard let id = Int(input.words[0]), id >= 1 else { throw UsageError(message) }
            return .id(id)
        }
    }
}
