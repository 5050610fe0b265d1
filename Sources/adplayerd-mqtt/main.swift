import ClientSupport
import ControlProtocol

// adplayerd-mqtt: the fleet bridge (docs/fleet.md), a process apart from the player that links
// the protocol and its own parts only. `adplayerd mqtt …` starts it too (the same process: exec).
ProcessSetup.beforeAnyThread()
ProcessSetup.runTools("adplayerd-mqtt", Array(CommandLine.arguments.dropFirst()), tools: [:], usage: MqttCommand.usage) {
    try MqttCommand(arguments: $0).run()
}
