import ClientSupport
import ControlProtocol

// adplayerd-web: the operator's page (docs/web.md), a process apart from the player that links
// the protocol and its own parts only. `adplayerd web …` starts it too (the same process: exec).
ProcessSetup.beforeAnyThread()
ProcessSetup.runTools("adplayerd-web", Array(CommandLine.arguments.dropFirst()), tools: [:], usage: WebCommand.usage) {
    try WebCommand(arguments: $0).run()
}
