import ControlProtocol
import Foundation

// adplayerctl: controls adplayerd through its control socket (docs/protocol.md).
// Exit 0: done; 1: the daemon said no, or is not running; 2: bad usage.

let usage = """
    usage: adplayerctl [--socket PATH] [--json] COMMAND [ARGS]
      status                       what plays, where, the ad on screen, the queue
      open FILE [--content-id ID] [--start SECONDS]
                                   play FILE now (a file under one of the daemon's library folders)
      queue FILE...                add files to the queue
      play | pause | toggle        the content
      seek SECONDS | seek +S | -S  to a time, or by an offset
      speed X                      playback speed (0.01 to 100)
      next | previous | stop       the next / previous episode; stop playing
      clear                        stop playing and empty the queue
      loop on|off                  loop the episode that plays
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
                                                   "help": .flag])
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
    Request.status, .play, .pause, .toggle, .next, .previous, .stop, .clear, .background, .foreground, .closeAd, .metrics, .version,
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
