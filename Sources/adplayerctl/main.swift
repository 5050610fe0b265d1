import BoundsCore
import ControlProtocol
#if canImport(Glibc)
import Glibc
#endif

// adplayerctl: controls adplayerd through its control socket (docs/protocol.md).
// Exit 0: done; 1: the daemon said no, or is not running; 2: bad usage.

/// The commands' lines come from the protocol's command table (`Commands.all`).
let usage = """
    usage: adplayerctl [--socket PATH] [--json] COMMAND [ARGS]   (--version: this program's)
    \(Commands.commandLineHelp)
    """

func fail(_ message: String, code: Int32) -> Never {
    writeAll("adplayerctl: \(message)\n", to: 2)
    exit(code)
}

let parsed: CommandLineArguments
do {
    parsed = try CommandLineArguments(Array(CommandLine.arguments.dropFirst()), spec: Commands.commandLineOptions)
} catch {
    fail("\(error)\n\n\(usage)", code: 2)
}
if parsed.flag("version") {
    print("adplayerctl \(Product.version)")
    exit(0)
}
if parsed.flag("help") {
    print(usage)
    exit(0)
}
guard let command = parsed.positional.first else { fail("a command is needed\n\n\(usage)", code: 2) }
let json = parsed.flag("json")

/// The command line as a request of the protocol, by the command's row (its arguments are
/// checked again, and bounded, by the daemon: `Commands.decode`).
let request: Request
do {
    let input = CommandLineInput(words: Array(parsed.positional.dropFirst()), arguments: parsed,
                                 directory: ThisProcess.currentDirectory)
    request = try Commands.parse(commandLine: input, word: command)
} catch {
    fail("\(error)" + (Commands.commandLine(command) == nil ? "\n\n\(usage)" : ""), code: 2)
}

let client: ControlClient
do {
    client = try ControlClient(path: ControlClient.socketPath(parsed.value("socket")))
} catch {
    fail("\(error)", code: 1)
}

func write(_ line: String) {
    writeAll(line + "\n", to: 1)
}

do {
    let reply = try client.call(request)
    let ok = reply["ok"]?.bool == true
    if case .subscribe = request {
        guard ok else { fail(Human.error(reply.printable), code: 1) }
        while true {
            let event = try client.readMessage()
            write(json ? event.text : Human.event(event.printable))
        }
    }
    // health: its verdict is the exit status (0 ok, 1 degraded, 2 failing), for health hooks.
    if case .health = request, ok {
        write(json ? reply.text : Human.result(request, reply.printable["result"] ?? .object([:])))
        switch reply["result"]?["status"]?.string {
        case "ok": exit(0)
        case "degraded": exit(1)
        default: exit(2)
        }
    }
    if json {
        write(reply.text)
    } else if ok {
        // What a person reads carries ad servers' and catalogs' text: one line each, no control
        // characters (--json is JSON, escaped by its encoding).
        write(Human.result(request, reply.printable["result"] ?? .object([:])))
    }
    if !ok {
        if !json { writeAll("adplayerctl: \(Human.error(reply.printable))\n", to: 2) }
        exit(1)
    }
} catch {
    fail("\(error)", code: 1)
}
