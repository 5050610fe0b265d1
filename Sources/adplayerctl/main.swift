import ControlProtocol
import Foundation

// adplayerctl: controls adplayerd through its control socket (docs/protocol.md).
// Exit 0: done; 1: the daemon said no, or is not running; 2: bad usage.

let usage = """
    usage: adplayerctl [--socket PATH] [--json] COMMAND [ARGS]
      status                       what plays, where, the ad on screen, the queue
      open FILE|DIR [--content-id ID] [--start SECONDS]
                                   play FILE now (a file under one of the daemon's library folders; a folder:
                                   its playable files in name order)
      queue FILE|DIR...            add files (a folder's playable files) to the queue
      play | pause | toggle        the content
      seek SECONDS | seek +S | -S  to a time, or by an offset
      speed X                      playback speed (0.01 to 100)
      next | previous | stop       the next / previous episode; stop playing
      clear                        stop playing and empty the queue
      loop on|off                  loop the episode that plays (repeat one / off)
      repeat off|one|all           at an episode's end: the next; the same again; the queue over again at its end
      shuffle on|off               play the queue in a new random order each pass
      volume N | +N | -N           the content's volume (0 to 100), or by an amount
      mute [on|off]                mute or unmute (no argument: toggle)
      remove INDEX                 take entry INDEX (from 1, as status numbers them) out of the queue
      move FROM TO                 move an entry of the queue
      jump INDEX                   play entry INDEX now
      tracks                       the episode's audio and subtitle tracks
      audio-track ID|auto          choose the audio track
      subtitle-track ID|off|auto   choose the subtitles
      audio-devices                the audio outputs mpv can use (for audio-device in the configuration)
      screenshot [--video-only]    a PNG of the screen (with the ads, or the video alone); prints its path
      background | foreground      the output is hidden / shown again (R13)
      close-ad                     the viewer dismisses the overlay or pause ad on screen
      metrics                      what the ads did since the daemon started, by kind
      plays [--since TIME]         proof of play: every ad shown, oldest first (TIME: ISO 8601 or
                                   seconds since 1970)
      events [NAME...]             follow the event stream (names or prefixes: player.* ad.ended)
      version                      the daemon's protocol version
    """

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data("adplayerctl: \(message)\n".utf8))
    exit(code)
}

let parsed: CommandLineArguments
do {
    parsed = try CommandLineArguments(Array(CommandLine.arguments.dropFirst()),
                                      spec: ["socket": .value, "json": .flag, "content-id": .value, "start": .value, "since": .value,
                                                   "video-only": .flag, "help": .flag])
} catch {
    fail("\(error)\n\n\(usage)", code: 2)
}
if parsed.flag("help") {
    print(usage)
    exit(0)
}
guard let command = parsed.positional.first else { fail("a command is needed\n\n\(usage)", code: 2) }
let rest = Array(parsed.positional.dropFirst())
let json = parsed.flag("json")

func number(_ text: String, _ what: String) -> Double {
    guard let value = Double(text), value.isFinite else { fail("\(what): \"\(text)\" is not a number", code: 2) }
    return value
}

func absolute(_ path: String) -> String {
    path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
}

/// The commands that take no arguments, by name.
let withoutArguments: [String: Request] = Dictionary(uniqueKeysWithValues: [
    Request.status(queue: true), .play, .pause, .toggle, .next, .previous, .stop, .clear, .background, .foreground, .closeAd, .metrics, .version,
    .tracks, .audioDevices,
].map { ($0.name, $0) })

/// The command line as a request of the protocol (its arguments are checked again, and
/// bounded, by the daemon: `Commands.decode`).
let request: Request
switch command {
case let name where withoutArguments[name] != nil:
    guard rest.isEmpty else { fail("\(command) takes no arguments", code: 2) }
    request = withoutArguments[name]!
case "open":
    guard rest.count == 1 else { fail("open takes one FILE", code: 2) }
    request = .open(path: absolute(rest[0]), contentID: parsed.value("content-id"),
                    start: parsed.value("start").map { number($0, "--start") })
case "queue":
    guard !rest.isEmpty else { fail("queue needs at least one FILE", code: 2) }
    request = .queue(paths: rest.map(absolute))
case "seek":
    guard rest.count == 1 else { fail("seek takes SECONDS, +SECONDS or -SECONDS", code: 2) }
    let offset = rest[0].hasPrefix("+") || rest[0].hasPrefix("-")
    request = .seek(offset ? .by(number(rest[0], "seek")) : .to(number(rest[0], "seek")))
case "speed":
    guard rest.count == 1 else { fail("speed takes X", code: 2) }
    request = .speed(number(rest[0], "speed"))
case "loop":
    guard rest.count == 1, ["on", "off"].contains(rest[0]) else { fail("loop takes on or off", code: 2) }
    request = .loop(rest[0] == "on")
case "events":
    request = .subscribe(events: rest.isEmpty ? nil : rest)
case "repeat":
    guard rest.count == 1, let mode = RepeatMode(rawValue: rest[0]) else { fail("repeat takes off, one or all", code: 2) }
    request = .setRepeat(mode)
case "shuffle":
    guard rest.count == 1, ["on", "off"].contains(rest[0]) else { fail("shuffle takes on or off", code: 2) }
    request = .shuffle(rest[0] == "on")
case "volume":
    guard rest.count == 1 else { fail("volume takes N (0 to 100), +N or -N", code: 2) }
    let relative = rest[0].hasPrefix("+") || rest[0].hasPrefix("-")
    request = .volume(relative ? .by(number(rest[0], "volume")) : .to(number(rest[0], "volume")))
case "mute":
    guard rest.count <= 1, rest.allSatisfy({ ["on", "off"].contains($0) }) else { fail("mute takes on, off or nothing (toggle)", code: 2) }
    request = .mute(rest.first.map { $0 == "on" })
case "remove", "jump":
    guard rest.count == 1, let index = Int(rest[0]), index >= 1 else { fail("\(command) takes an INDEX from 1", code: 2) }
    request = command == "remove" ? .remove(index: index - 1) : .jump(index: index - 1)
case "move":
    guard rest.count == 2, let from = Int(rest[0]), let to = Int(rest[1]), from >= 1, to >= 1 else { fail("move takes FROM and TO, from 1", code: 2) }
    request = .move(from: from - 1, to: to - 1)
case "audio-track", "subtitle-track":
    let audio = command == "audio-track"
    guard rest.count == 1 else { fail("\(command) takes an ID, auto\(audio ? "" : " or off")", code: 2) }
    let choice: TrackChoice
    switch rest[0] {
    case "auto": choice = .auto
    case "off" where !audio: choice = .off
    default:
        guard let id = Int(rest[0]), id >= 1 else { fail("\(command) takes an ID, auto\(audio ? "" : " or off")", code: 2) }
        choice = .id(id)
    }
    request = audio ? .audioTrack(choice) : .subtitleTrack(choice)
case "screenshot":
    guard rest.isEmpty else { fail("screenshot takes no arguments but --video-only", code: 2) }
    request = .screenshot(withAds: !parsed.flag("video-only"))
case "plays":
    guard rest.isEmpty else { fail("plays takes no arguments but --since TIME", code: 2) }
    var since: Double?
    if let text = parsed.value("since") {
        guard let seconds = Double(text) ?? ISO8601.parse(text) else { fail("--since: \"\(text)\" is not ISO 8601 or seconds since 1970", code: 2) }
        since = seconds
    }
    request = .plays(since: since)
default:
    fail("unknown command \(command)\n\n\(usage)", code: 2)
}

let client: ControlClient
do {
    client = try ControlClient(path: ControlClient.socketPath(parsed.value("socket")))
} catch {
    fail("\(error)", code: 1)
}

func write(_ line: String) {
    FileHandle.standardOutput.write(Data((line + "\n").utf8))
}

do {
    let reply = try client.call(request)
    let ok = reply["ok"]?.bool == true
    if command == "events" {
        guard ok else { fail(Human.error(reply), code: 1) }
        while true {
            let event = try client.readMessage()
            write(json ? event.text : Human.event(event))
        }
    }
    if json {
        write(reply.text)
    } else if ok {
        write(Human.result(request, reply["result"] ?? .object([:])))
    }
    if !ok {
        if !json { FileHandle.standardError.write(Data("adplayerctl: \(Human.error(reply))\n".utf8)) }
        exit(1)
    }
} catch {
    fail("\(error)", code: 1)
}
