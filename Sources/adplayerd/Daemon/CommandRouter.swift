import AdRuntime
import AdSources
import Foundation

/// Turns a control request into a command on the player's loop, and its result into a reply
/// (docs/protocol.md). Arguments are checked here, on the socket's side, in one place each:
/// times through `Seconds`, files through `SafeFile` against the library (on a worker: the
/// file system may be slow), the rest by type and bound. Nothing unchecked reaches the loop.
///
/// Threading: `handle` on the control socket's thread; it returns at once.
final class CommandRouter: Sendable {
    private let loop: any PlayerLoop
    private let controller: Controller
    private let library: Locked<[String]>
    private let files = Workers(name: "adplayerd-files")

    init(loop: any PlayerLoop, controller: Controller, library: [String]) {
        self.loop = loop
        self.controller = controller
        self.library = Locked(library)
    }

    /// SIGHUP: the library folders of the new configuration.
    func setLibrary(_ folders: [String]) { library.withLock { $0 = folders } }

    static let commands = ["status", "open", "queue", "play", "pause", "toggle", "seek", "speed", "next", "previous", "stop", "clear", "loop",
                           "background", "foreground", "close-ad", "subscribe", "version"]

    func handle(_ request: JSONValue, reply: @escaping @Sendable (JSONValue) -> Void) {
        let id = request["id"] ?? .null
        let answer: @Sendable (Result<JSONValue, ControlError>) -> Void = { result in
            switch result {
            case .success(let value): reply(["id": id, "ok": true, "result": value])
            case .failure(let error): reply(ControlServer.errorReply(id: id, error))
            }
        }
        do {
            guard request.object != nil else { throw ControlError.malformed("a request is a JSON object") }
            guard id == .null || id.integer != nil else { throw ControlError.malformed("id must be an integer") }
            guard let command = request["cmd"]?.string else { throw ControlError.malformed("cmd must be a string") }
            let args = request["args"] ?? .object([:])
            guard args.object != nil else { throw ControlError.malformed("args must be an object") }
            guard Self.commands.contains(command) else {
                throw ControlError(code: "unknown_command", message: "\"\(command.prefix(64))\" is not a command (\(Self.commands.joined(separator: ", ")))")
            }
            try route(command, args, answer)
        } catch let error as ControlError {
            answer(.failure(error))
        } catch {
            answer(.failure(ControlError(code: "internal", message: "\(error)")))
        }
    }

    private func route(_ command: String, _ args: JSONValue, _ answer: @escaping @Sendable (Result<JSONValue, ControlError>) -> Void) throws {
        let controller = self.controller, loop = self.loop
        @Sendable func onLoop(_ body: @escaping @Sendable () throws -> JSONValue) {
            let accepted = loop.execute {
                do {
                    answer(.success(try body()))
                } catch let error as ControlError {
                    answer(.failure(error))
                } catch {
                    answer(.failure(ControlError(code: "internal", message: "\(error)")))
                }
            }
            if !accepted { answer(.failure(ControlError(code: "unavailable", message: "the player has shut down"))) }
        }
        switch command {
        case "version":
            answer(.success(["protocol": 1, "daemon": "adplayerd"]))
        case "status": onLoop { controller.status() }
        case "play": onLoop { try controller.play() }
        case "pause": onLoop { try controller.pause() }
        case "toggle": onLoop { try controller.toggle() }
        case "next": onLoop { try controller.next() }
        case "previous": onLoop { try controller.previous() }
        case "stop": onLoop { controller.stopCommand() }
        case "clear": onLoop { controller.clear() }
        case "background": onLoop { controller.setBackground(true) }
        case "foreground": onLoop { controller.setBackground(false) }
        case "close-ad": onLoop { try controller.closeAd() }
        case "loop":
            guard let on = args["on"]?.bool else { throw ControlError.badArgs("loop needs {\"on\": true|false}") }
            onLoop { try controller.setLoop(on) }
        case "speed":
            guard let value = args["value"]?.number, value.isFinite, value >= 0.01, value <= 100 else {
                throw ControlError.badArgs("speed needs {\"value\": x} with 0.01 ≤ x ≤ 100")
            }
            onLoop { try controller.speed(value) }
        case "seek":
            let seek: Controller.Seek
            switch (args["to"], args["by"]) {
            case (let to?, nil): seek = .to(try Self.seconds(to, .position, "seek.to"))
            case (nil, let by?): seek = .by(try Self.seconds(by, .offset, "seek.by"))
            default: throw ControlError.badArgs("seek needs {\"to\": seconds} or {\"by\": seconds}")
            }
            onLoop { try controller.seek(seek) }
        case "open":
            guard let path = args["path"]?.string else { throw ControlError.badArgs("open needs {\"path\": \"/a/file\"}") }
            let contentID = try args["content_id"].map { value -> String in
                guard let id = value.string, !id.isEmpty, id.count <= 256, !id.contains(where: \.isNewline) else {
                    throw ControlError.badArgs("content_id must be a non-empty string of at most 256 characters")
                }
                return id
            }
            let start = try args["start"].map { try Self.seconds($0, .position, "open.start") }
            checkFiles([path]) { result in
                switch result {
                case .success(let paths):
                    let entry = QueueEntry(path: paths[0], contentID: contentID)
                    onLoop { try controller.open(entry, start: start) }
                case .failure(let error):
                    answer(.failure(error))
                }
            }
        case "queue":
            guard let list = args["paths"]?.array, !list.isEmpty, list.count <= 1000 else {
                throw ControlError.badArgs("queue needs {\"paths\": [\"/a/file\", …]} with 1 to 1000 paths")
            }
            let paths = try list.map { value -> String in
                guard let path = value.string else { throw ControlError.badArgs("queue: every path must be a string") }
                return path
            }
            checkFiles(paths) { result in
                switch result {
                case .success(let resolved): onLoop { try controller.enqueue(resolved.map { QueueEntry(path: $0) }) }
                case .failure(let error): answer(.failure(error))
                }
            }
        default:
            throw ControlError(code: "unknown_command", message: command)
        }
    }

    private static func seconds(_ value: JSONValue, _ bounds: Seconds.Bounds, _ field: String) throws -> Double {
        guard let number = value.number else { throw ControlError.badArgs("\(field) must be a number of seconds") }
        do {
            return try Seconds.check(number, bounds, field: field)
        } catch {
            throw ControlError.badArgs("\(error)")
        }
    }

    /// Each path must be a regular file under one of the library folders once resolved (no
    /// `..`, no symlink escape); the answer carries the resolved paths. Off the socket thread.
    private func checkFiles(_ paths: [String], _ done: @escaping @Sendable (Result<[String], ControlError>) -> Void) {
        let folders = library.withLock { $0 }
        files.execute {
            guard !folders.isEmpty else {
                return done(.failure(ControlError(code: "no_library", message: "no library folder is configured (--library)")))
            }
            var resolved: [String] = []
            for path in paths {
                guard path.hasPrefix("/") else {
                    return done(.failure(ControlError(code: "bad_args", message: "\(path.prefix(200)): an absolute path is needed")))
                }
                var refusal: FileRefusal?
                var found: String?
                for folder in folders {
                    do {
                        found = try SafeFile.check(path, inside: folder).path
                        break
                    } catch let error as FileRefusal {
                        // The most telling refusal: a real problem with the file beats "outside".
                        if refusal == nil || refusal!.kind == .outside { refusal = error }
                    } catch {}
                }
                guard let found else {
                    let error = refusal ?? FileRefusal(path: path, kind: .outside, reason: "is not in a library folder")
                    let reason = error.kind == .outside ? "is not under a library folder (\(folders.joined(separator: ", ")))" : error.reason
                    return done(.failure(ControlError(code: error.kind.rawValue, message: "\(path): \(reason)")))
                }
                resolved.append(found)
            }
            done(.success(resolved))
        }
    }
}
