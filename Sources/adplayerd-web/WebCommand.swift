import AdPlayerWeb
import ClientSupport
import ControlProtocol
import ProcessSupport
import CSystem
import Dispatch
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif

/// `adplayerd web [--config FILE] [--socket PATH] [--listen HOST:PORT] [--token-file FILE]`:
/// the operator's page and its JSON, metrics and event endpoints (docs/web.md), a process
/// apart from the daemon that reaches it only through the control socket. Socket-activated
/// (systemd passes the listening socket) or listening on `web-listen` itself. Listening on
/// anything but loopback without a token file is refused (exit 2, naming `web-token-file`).
/// SIGTERM/SIGINT stop it (exit 0).
struct WebCommand {
    static let usage = """
        usage: adplayerd web [--config FILE] [--socket PATH] [--listen HOST:PORT] [--token-file FILE]
                                                                  the status page, health and metrics over HTTP (docs/web.md)
        """

    let arguments: [String]

    func run() throws -> Int32 {
        // The flags are configuration keys (`--listen` is `web-listen`): the file, then them.
        let parsed = try CommandLineArguments(arguments, spec: ["config": .value, "socket": .value, "listen": .value, "token-file": .value,
                                                                "web-listen": .value, "web-token-file": .value])
        guard parsed.positional.isEmpty else { throw UsageError("web takes no argument \(parsed.positional[0].prefix(64))") }
        var keys: [String] = []
        for (flag, key) in [("config", "config"), ("socket", "socket"), ("web-listen", "web-listen"), ("listen", "web-listen"),
                            ("web-token-file", "web-token-file"), ("token-file", "web-token-file")] {
            if let value = parsed.value(flag) { keys += ["--\(key)", value] }
        }
        let configuration = try ClientConfiguration.load(arguments: keys)

        // Where: the sockets systemd passed (ListenStream=), else web-listen.
        var listeners: [Int32] = []
        var loopbackOnly = true
        var shown = ""
        let passed = csystem_listen_fds()
        if passed > 0 {
            listeners = (0..<passed).map { 3 + $0 }
            for fd in listeners {
                let (address, loopback) = Self.localAddress(fd)
                loopbackOnly = loopbackOnly && loopback
                if shown.isEmpty { shown = address }
            }
        } else {
            let address = configuration.webListen
            loopbackOnly = address.isLoopback
            let (fd, port) = try HTTPServer.listen(address)
            listeners = [fd]
            shown = address.ipv6 ? "[\(address.host)]:\(port)" : "\(address.host):\(port)"
        }

        // Who: the token file, required off loopback.
        let auth: WebAuth
        if let file = configuration.webTokenFile {
            auth = try WebAuth.load(file)
        } else if !loopbackOnly {
            throw UsageError("web: \(shown) is reachable from other machines: a web-token-file is needed (lines `ROLE TOKEN`, mode 0600)")
        } else {
            auth = .open
        }

        let link = DaemonLink(socket: configuration.socket)
        let app = WebApp(link: link, auth: auth, identity: WebApp.Identity(version: Product.version,
                                                                            boxID: HostInfo.machineID() ?? ProcessInfo.processInfo.hostName))
        let server = HTTPServer(listeners: listeners) { request, peer in app.handle(request, peer) }
        let stopped = DispatchSemaphore(value: 0)
        Signals.watch { signal in
            if signal != SIGHUP { stopped.signal() }
        }
        app.start()
        server.start()
        StandardError.write(priority: 5, "listening on http://\(shown)/")
        stopped.wait()
        server.stop()
        app.stop()
        return 0
    }

    /// A listening socket's address as `HOST:PORT`, and whether only this machine reaches it.
    static func localAddress(_ fd: Int32) -> (String, Bool) {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        guard ok == 0 else { return ("?", false) }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: 32)
        _ = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, length, &host, socklen_t(host.count), &service, socklen_t(service.count), NI_NUMERICHOST | NI_NUMERICSERV)
            }
        }
        let address = String(nulTerminated: host), port = String(nulTerminated: service)
        let loopback = SocketAddress.isLoopback(address)
        return (address.contains(":") ? "[\(address)]:\(port)" : "\(address):\(port)", loopback)
    }
}
