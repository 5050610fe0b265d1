import AdRuntime
import Foundation
import MpvPlayerAdapter

// adplayerd — at this stage: play episodes through the mpv adapter and print the player
// model's changes as a timeline. Later: the daemon with ads and a control socket.

let arguments = Array(CommandLine.arguments.dropFirst())
do {
    let options = try PlayCommand.Options.parse(arguments)
    exit(try PlayCommand(options: options).run())
} catch let error as UsageError {
    FileHandle.standardError.write(Data("adplayerd: \(error.message)\n\n\(PlayCommand.usage)\n".utf8))
    exit(2)
} catch {
    FileHandle.standardError.write(Data("<3>adplayerd: \(error)\n".utf8))
    exit(1)
}
