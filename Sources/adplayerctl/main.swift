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
      events [NAME...]             follow the event stream (names or prefixes: player.* ad.ended)
      version                      the daemon's protocol version
    """

func fail(_ message: String, code: Int32) -> Never {
    FileHandle.standardError.write(Data("adplayerctl: \(message)\n".utf8))
    exit(code)
}

var arguments = Array(CommandLine.arguments.dropFirst())
var socketPath: String?
var json = false
var positional: [String] = []
var options: [String: String] = [:]
while !arguments.isEmpty {
    let argument = arguments.removeFirst()
    switch argument {
    case "--socket":
        guard !arguments.isEmpty else { fail("--socket needs a path", code: 2) }
        socketPath = arguments.removeFirst()
    case "--json": json = true
    case "--content-id", "--start":
        guard !arguments.isEmpty else { fail("\(argument) needs a value", code: 2) }
        options[argument] = arguments.removeFirst()
    case "-h", "--help":
        print(usage)
        exit(0)
    default:
        positional.append(argument)
    }
}
guard let command = positional.first else { fail("a command is needed\n\n\(usage)", code: 2) }
let rest = Array(positional.dropFirst())

func number(_ text: String, _ what: String) -> Double {
    guard let value = Double(text), value.isFinite else { fail("\(what): \"\(text)\" is not a number", code: 2) }
    return value
}

func absolute(_ path: String) -> String {
    path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
}

var args: [String: Any] = [:]
switch command {
case "status", "play", "pause", "toggle", "next", "previous", "stop", "clear", "background", "foreground", "close-ad", "version":
    guard rest.isEmpty else { fail("\(command) takes no arguments", code: 2) }
case "open":
    guard rest.count == 1 else { fail("open takes one FILE", code: 2) }
    args["path"] = absolute(rest[0])
    if let id = options["--content-id"] { args["content_id"] = id }
    if let start = options["--start"] { args["start"] = number(start, "--start") }
case "queue":
    guard !rest.isEmpty else { fail("queue needs at least one FILE", code: 2) }
    args["paths"] = rest.map(absolute)
case "seek":
    guard rest.count == 1 else { fail("seek takes SECONDS, +SECONDS or -SECONDS", code: 2) }
    if rest[0].hasPrefix("+") || rest[0].hasPrefix("-") {
        args["by"] = number(rest[0], "seek")
    } else {
        args["to"] = number(rest[0], "seek")
    }
case "speed":
    guard rest.count == 1 else { fail("speed takes X", code: 2) }
    args["value"] = number(rest[0], "speed")
case "loop":
    guard rest.count == 1, ["on", "off"].contains(rest[0]) else { fail("loop takes on or off", code: 2) }
    args["on"] = rest[0] == "on"
case "events":
    break
default:
    fail("unknown command \(command)\n\n\(usage)", code: 2)
}

let client: ControlClient
do {
    client = try ControlClient(path: ControlClient.socketPath(socketPath))
} catch {
    fail("\(error)", code: 1)
}

func printJSON(_ object: Any) {
    let data = (try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])) ?? Data()
    FileHandle.standardOutput.write(data + Data("\n".utf8))
}

do {
    if command == "events" {
        let reply = try client.call("subscribe", rest.isEmpty ? [:] : ["events": rest])
        guard reply["ok"] as? Bool == true else { fail(Human.error(reply), code: 1) }
        while true {
            let event = try client.readMessage()
            if json { printJSON(event) } else { FileHandle.standardOutput.write(Data((Human.event(event) + "\n").utf8)) }
        }
    }
    let reply = try client.call(command, args)
    if json {
        printJSON(reply)
    } else if reply["ok"] as? Bool == true {
        print(Human.result(command, reply["result"] as? [String: Any] ?? [:]))
    }
    if reply["ok"] as? Bool != true {
        if !json { FileHandle.standardError.write(Data("adplayerctl: \(Human.error(reply))\n".utf8)) }
        exit(1)
    }
} catch {
    fail("\(error)", code: 1)
}
