import ClientSupport
import ControlProtocol
import ProcessSupport
import CSystem
import FoundationEssentials
#if canImport(Glibc)
import Glibc
#endif
import Bounds

/// `adplayerd web`'s endpoints (docs/web.md), each a client of the daemon's control protocol
/// through `DaemonLink` — never of the player, the state database or mpv:
///
///     GET /                      the page (app.js, app.css beside it; no outside asset)
///     GET /api/status            status with the queue, the box's identity, the output
///     GET /api/health            the verdict (503 when failing)
///     GET /metrics               Prometheus text
///     GET /api/plays, plays.csv  proof of play (?since=ROW&limit=N)
///     GET /api/screenshot.png    the output (one grab per 2 s at most)
///     GET /api/logs?lines=N      the daemon's last log lines
///     GET /events                Server-Sent Events: every protocol event, status, health
///     POST /api/command          {"cmd", "args"}: a protocol request, by the role's tier
///
/// Every request is authenticated first (`WebAuth`), then checked against the command
/// table's tier of what it runs; a POST must be JSON and come from this origin (no
/// cross-site request can drive the box, even with Basic credentials cached by a browser).
public final class WebApp: Sendable {
    public struct Identity: Sendable {
        public var version: String
        public var boxID: String
        public init(version: String, boxID: String) {
            self.version = version
            self.boxID = boxID
        }
    }

    let link: DaemonLink
    let auth: WebAuth
    let identity: Identity
    let hub = EventHub()
    /// Requests and failed authentications per client (`ClientLimits`).
    let limits: ClientLimits
    /// The daemon's last status, shared by the readers of `/api/status` within
    /// `statusSharing` seconds (one call to the daemon's loop for all of them), and the call
    /// under way that they wait for.
    private let statusShared = Locked<(at: Double, value: JSONValue)?>(nil)
    private let statusLock = Locked(())
    static let statusSharing = 0.25
    private let started = Date()
    private let screenshotCache = Locked<(time: Date, png: [UInt8], withAds: Bool, note: String)?>(nil)
    private let screenshotLock = Locked(())
    private let dirty = Locked(false)
    private let connected = Locked(false)
    private let stopping = Locked(false)

    public static let screenshotInterval = 2.0

    public init(link: DaemonLink, auth: WebAuth, identity: Identity, limits: ClientLimits = ClientLimits()) {
        self.link = link
        self.auth = auth
        self.identity = identity
        self.limits = limits
    }

    /// Follows the daemon's events for the event streams, and refreshes status snapshots.
    public func start() {
        link.follow(onEvent: { [self] event in
            hub.broadcast(event: "protocol", data: event.text)
            markDirty()
        }, onConnection: { [self] up in
            connected.withLock { $0 = up }
            hub.broadcast(event: "daemon", data: up ? "{\"connected\":true}" : "{\"connected\":false}")
            markDirty()
        })
        startThread(named: "web-status") { [self] in refreshLoop() }
    }

    public func stop() {
        stopping.withLock { $0 = true }
        link.stop()
        markDirty()
    }

    private func markDirty() {
        dirty.signal { $0 = true }
    }

    /// Status snapshots for the event streams: after events (at most 4 a second), and every
    /// 2 s while anyone follows; the health verdict every 10 s.
    private func refreshLoop() {
        var lastHealth = Date.distantPast
        while !stopping.withLock({ $0 }) {
            // A change, or 2 s: whichever comes first (the flag taken as it is read).
            let changed = dirty.wait(timeout: 2) { dirty -> Bool? in
                guard dirty else { return nil }
                dirty = false
                return true
            } ?? false
            guard hub.count > 0 else { continue }
            if case .success(let reply) = link.call(.status(queue: false)), reply["ok"]?.bool == true, let status = reply["result"] {
                hub.broadcast(event: "status", data: status.text)
            }
            // The verdict every 10 s, and after a change once 2 s have passed since the last.
            let sinceHealth = Date().timeIntervalSince(lastHealth)
            if sinceHealth >= 10 || (changed && sinceHealth >= 2) {
                lastHealth = Date()
                hub.broadcast(event: "health", data: healthVerdict().verdict.text)
            }
            sleepThread(0.25)
        }
    }

    // MARK: Routing

    public func handle(_ request: HTTPRequest, _ peer: HTTPServer.Peer) -> HTTPResponse {
        // A browser's cross-site or rebound request: refused before anything else.
        if let refusal = originRefusal(request) { return refusal }
        // Per client: a bound on requests, and a tighter one on failed authentications.
        guard limits.admit(peer.address) else {
            return .error(429, "too many requests from \(peer.address): at most 200 a second", headers: [("Retry-After", "1")])
        }
        guard limits.mayAuthenticate(peer.address) else {
            return .error(429, "too many failed authentications from \(peer.address): wait", headers: [("Retry-After", "5")])
        }
        let role: WebRole
        switch auth.role(authorization: request.header("authorization")) {
        case .role(let found): role = found
        case .unauthorized(let why):
            if request.header("authorization") != nil { limits.failed(peer.address) }
            return .error(401, why, headers: [("WWW-Authenticate", "Basic realm=\"adplayerd\", charset=\"UTF-8\"")])
        }
        let get = request.method == "GET" || request.method == "HEAD"
        switch (get, request.path) {
        case (true, "/"), (true, "/index.html"):
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/html; charset=utf-8")],
                                body: Array(WebPage.html(banner: auth.required ? nil : "No token file: anyone on this machine may look and control (loopback only).").utf8))
        case (true, "/app.js"): return HTTPResponse(status: 200, headers: [("Content-Type", "text/javascript; charset=utf-8")], body: Array(WebPage.script.utf8))
        case (true, "/app.css"): return HTTPResponse(status: 200, headers: [("Content-Type", "text/css; charset=utf-8")], body: Array(WebPage.style.utf8))
        case (true, "/favicon.ico"): return HTTPResponse(status: 204)
        case (true, "/api/status"): return status()
        case (true, "/api/health"):
            let (verdict, status) = healthVerdict()
            return json(status == "failing" ? 503 : 200, verdict)
        case (true, "/metrics"): return metrics()
        case (true, "/api/plays"): return plays(request, csv: false)
        case (true, "/api/plays.csv"): return plays(request, csv: true)
        case (true, "/api/logs"): return logs(request, role: role)
        case (true, "/api/screenshot.png"):
            guard role.tier >= .control else { return .error(403, "the screenshot needs the operator role (\(role.rawValue) may only look)") }
            return screenshot()
        case (true, "/events") where request.method == "HEAD":
            // What a stream would answer, and no stream: a HEAD takes no slot and no body.
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream")])
        case (true, "/events"): return events()
        case (false, "/api/command"): return command(request, role: role)
        case (false, _):
            return ["/", "/api/status", "/api/health", "/metrics", "/api/plays", "/api/logs", "/events"].contains(request.path)
                ? .error(405, "\(request.path) takes GET") : .error(404, "no such endpoint")
        case (true, "/api/command"): return .error(405, "/api/command takes POST")
        default: return .error(404, "no such endpoint")
        }
    }

    /// A POST from a page of another origin (a cross-site request) or a request naming a host
    /// that is not an address (DNS rebinding) is refused: 403 and 421.
    private func originRefusal(_ request: HTTPRequest) -> HTTPResponse? {
        let host = request.header("host") ?? ""
        if !host.isEmpty, !Self.isAddressHost(host), !auth.required {
            return .error(421, "Host \(host.prefix(80)) is not an address of this box (use its IP address or localhost)")
        }
        if request.method == "POST" {
            if let origin = request.header("origin"), origin != "http://\(host)", origin != "https://\(host)" {
                return .error(403, "a request from another origin (\(origin.prefix(80))) may not drive the box")
            }
            guard request.header("content-type")?.lowercased().hasPrefix("application/json") == true else {
                return .error(415, "a command is a JSON body (Content-Type: application/json)")
            }
        }
        return nil
    }

    /// `localhost`, an IPv4 address or a bracketed IPv6 one, with or without a port.
    static func isAddressHost(_ host: String) -> Bool {
        var name = host
        if name.hasPrefix("[") {
            guard let end = name.firstIndex(of: "]") else { return false }
            name = String(name[name.index(after: name.startIndex)..<end])
            var address = in6_addr()
            return inet_pton(AF_INET6, name, &address) == 1
        }
        if let colon = name.lastIndex(of: ":") { name = String(name[..<colon]) }
        if name == "localhost" { return true }
        var address = in_addr()
        return inet_pton(AF_INET, name, &address) == 1
    }

    private func json(_ status: Int, _ value: JSONValue, headers: [(String, String)] = []) -> HTTPResponse {
        HTTPResponse(status: status, headers: [("Content-Type", "application/json")] + headers, body: value.line())
    }

    /// A protocol call's result, or the HTTP error that says why there is none.
    private func result(_ request: Request, timeout: Double? = nil) -> Result<JSONValue, HTTPResponse> {
        switch link.call(request, timeout: timeout) {
        case .failure(let failure):
            return .failure(.error(502, "the daemon: \(failure.description)"))
        case .success(let reply):
            guard reply["ok"]?.bool == true else {
                let code = reply["error"]?["code"]?.string ?? "internal"
                let message = reply["error"]?["message"]?.string ?? "error"
                return .failure(.error(Self.httpStatus(code), "\(message) [\(code)]"))
            }
            return .success(reply["result"] ?? .null)
        }
    }

    static func httpStatus(_ code: String) -> Int {
        switch code {
        case "forbidden": 403
        case "unavailable": 503
        case "not_found": 404
        case "internal": 500
        case "too_large", "line_too_long": 413
        case "ad_playing", "not_playing", "empty_queue", "no_previous", "no_ad", "not_skippable", "queue_full": 409
        default: 400
        }
    }

    // MARK: Endpoints

    /// The daemon's status with the queue, shared: readers within `statusSharing` of the last
    /// call get its answer, and concurrent ones wait for the one call under way — a flood of
    /// `/api/status` costs the player's loop a status every quarter second, not one a request.
    private func sharedStatus() -> Result<JSONValue, HTTPResponse> {
        let fresh = { () -> JSONValue? in
            guard let shared = self.statusShared.withLock({ $0 }), ClientLimits.now() - shared.at < Self.statusSharing else { return nil }
            return shared.value
        }
        if let value = fresh() { return .success(value) }
        return statusLock.withLock { _ in
            if let value = fresh() { return .success(value) }   // the call we waited for answered
            let outcome = result(.status(queue: true))
            if case .success(let value) = outcome { statusShared.withLock { $0 = (ClientLimits.now(), value) } }
            return outcome
        }
    }

    private func status() -> HTTPResponse {
        switch sharedStatus() {
        case .failure(let response): return response
        case .success(let status):
            var box: [String: JSONValue] = [:]
            box["hostname"] = .string(ProcessInfo.processInfo.hostName)
            box["box_id"] = .string(identity.boxID)
            box["version"] = .string(identity.version)
            box["uptime"] = Self.uptime().map { .number($0) } ?? .null
            box["time"] = .string(ISO8601.format(Date().timeIntervalSince1970))
            box["clock_synchronized"] = .bool(csystem_clock_synchronized() != 0)
            box["addresses"] = .array(HostInfo.addresses().map { .string($0) })
            let web: JSONValue = ["since": .string(ISO8601.format(started.timeIntervalSince1970)), "event_streams": .int(Int64(hub.count)),
                                  "tokens": .bool(auth.required)]
            return json(200, status.adding(["box": .object(box), "web": web]))
        }
    }

    /// The daemon's verdict, or `failing` when it does not answer (this process's own check).
    func healthVerdict() -> (verdict: JSONValue, status: String) {
        switch link.call(.health) {
        case .success(let reply) where reply["ok"]?.bool == true:
            let verdict = reply["result"] ?? .null
            return (verdict, verdict["status"]?.string ?? "failing")
        case .success(let reply):
            let message = reply["error"]?["message"]?.string ?? "refused"
            return (["status": "failing", "checks": [["name": "daemon", "status": "failing", "reason": .string("health: \(message)")]]], "failing")
        case .failure(let failure):
            return (["status": "failing", "checks": [["name": "daemon", "status": "failing", "reason": .string(failure.description)]]], "failing")
        }
    }

    private func metrics() -> HTTPResponse {
        switch result(.metrics) {
        case .failure(let response): return response
        case .success(let value): return .text(200, value["text"]?.string ?? "", type: "text/plain; version=0.0.4; charset=utf-8")
        }
    }

    private func plays(_ request: HTTPRequest, csv: Bool) -> HTTPResponse {
        var after: Int64?
        var limit = csv ? 10_000 : 100
        if let text = request.query["since"] {
            guard let row = Int64(text), row >= 0 else { return .error(400, "since is a play's row (a whole number from 0)") }
            after = row
        }
        if let text = request.query["limit"] {
            guard let n = Int(text), (1...10_000).contains(n) else { return .error(400, "limit is a whole number from 1 to 10000") }
            limit = n
        }
        let newest = request.query["newest"] == "1" || request.query["newest"] == "true"
        switch result(.plays(since: nil, afterRow: after ?? 0, limit: limit, newest: newest)) {
        case .failure(let response): return response
        case .success(let value):
            guard csv else { return json(200, value) }
            let columns = ["row", "id", "ad_id", "kind", "source", "content_id", "started", "ended", "seconds", "reason", "viewable", "display", "display_evidence"]
            let loudness = ["rule", "ad_lufs", "ad_peak_dbtp", "content_lufs", "target_lufs", "gain_db"]
            var text = (columns + ["beacons_sent", "beacons_pending", "beacons_failed"] + loudness).joined(separator: ",") + "\r\n"
            for play in value["plays"]?.array ?? [] {
                var cells = columns.map { Self.csvCell(play[$0] ?? .null) }
                cells += ["sent", "pending", "failed"].map { Self.csvCell(play["beacons"]?[$0] ?? .null) }
                cells += loudness.map { Self.csvCell(play["loudness"]?[$0] ?? .null) }
                text += cells.joined(separator: ",") + "\r\n"
            }
            return HTTPResponse(status: 200, headers: [("Content-Type", "text/csv; charset=utf-8"),
                                                       ("Content-Disposition", "attachment; filename=\"plays.csv\"")], body: Array(text.utf8))
        }
    }

    /// A CSV cell: text as `CSV.field` writes it (numbers as they are; formulas guarded).
    static func csvCell(_ value: JSONValue) -> String {
        switch value {
        case .null: return ""
        case .string(let text): return CSV.field(text)
        default: return CSV.field(value.text, guardFormulas: false)
        }
    }

    private func logs(_ request: HTTPRequest, role: WebRole) -> HTTPResponse {
        var lines = 100
        if let text = request.query["lines"] {
            guard let n = Int(text), (1...ControlProtocol.maxLogLines).contains(n) else {
                return .error(400, "lines is a whole number from 1 to \(ControlProtocol.maxLogLines)")
            }
            lines = n
        }
        switch result(.logs(lines: lines)) {
        case .failure(let response): return response
        case .success(let value):
            guard role.tier < .control else { return json(200, value) }
            // A viewer sees the log without what URLs carry after `?` (beacons' ids, tokens).
            let lines = (value["lines"]?.array ?? []).map { line -> JSONValue in
                guard case .object(var fields) = line, let text = fields["text"]?.string else { return line }
                fields["text"] = .string(Self.redactingQueries(text))
                return .object(fields)
            }
            return json(200, ["lines": .array(lines)])
        }
    }

    /// `text` with the query of every http(s) URL in it replaced by `?…`.
    static func redactingQueries(_ text: String) -> String {
        var out = ""
        var rest = Substring(text)
        while let start = rest.firstRange(of: "http") {
            out += rest[..<start.lowerBound]
            var urlEnd = rest[start.lowerBound...].firstIndex { $0 == " " || $0 == "\"" || $0 == "'" || $0 == "\n" } ?? rest.endIndex
            // Punctuation that ends a sentence is not the URL's: "URL: attempt failed".
            while urlEnd > start.lowerBound, ":,).;".contains(rest[rest.index(before: urlEnd)]) { urlEnd = rest.index(before: urlEnd) }
            let url = rest[start.lowerBound..<urlEnd]
            if let question = url.firstIndex(of: "?") { out += url[..<question] + "?…" } else { out += url }
            rest = rest[urlEnd...]
        }
        return out + rest
    }

    /// The output as a PNG: with the ads where mpv can grab them, else the video alone (the
    /// `X-Adplayerd-Screenshot` header says which and why). One grab per 2 s: others get it.
    private func screenshot() -> HTTPResponse {
        screenshotLock.withLock { _ in grabScreenshot() }
    }

    private func grabScreenshot() -> HTTPResponse {
        if let cached = screenshotCache.withLock({ $0 }), Date().timeIntervalSince(cached.time) < Self.screenshotInterval {
            return png(cached.png, withAds: cached.withAds, note: cached.note)
        }
        var note = "with the ads"
        var withAds = true
        var outcome = result(.screenshot(withAds: true, inline: true), timeout: 10)
        if case .failure = outcome {
            withAds = false
            note = "video only: the output with the ads cannot be grabbed here"
            outcome = result(.screenshot(withAds: false, inline: true), timeout: 10)
        }
        switch outcome {
        case .failure(let response): return response
        case .success(let value):
            guard let base64 = value["png_base64"]?.string, let data = Data(base64Encoded: base64) else {
                return .error(502, "the daemon's screenshot carried no image")
            }
            let bytes = [UInt8](data)
            screenshotCache.withLock { $0 = (Date(), bytes, withAds, note) }
            return png(bytes, withAds: withAds, note: note)
        }
    }

    private func png(_ bytes: [UInt8], withAds: Bool, note: String) -> HTTPResponse {
        HTTPResponse(status: 200, headers: [("Content-Type", "image/png"), ("X-Adplayerd-Screenshot", withAds ? "with-ads" : "video-only"),
                                            ("X-Adplayerd-Screenshot-Note", note)], body: bytes)
    }

    private func events() -> HTTPResponse {
        guard let stream = hub.open() else {
            return .error(503, "\(EventHub.maxStreams) event streams are open already; try again", headers: [("Retry-After", "5")])
        }
        // The first message: whether the daemon answers; a status follows shortly.
        stream.send(EventStream.frame(event: "daemon", data: connected.withLock { $0 } ? "{\"connected\":true}" : "{\"connected\":false}"))
        markDirty()
        let hub = self.hub
        return HTTPResponse(status: 200, headers: [("Content-Type", "text/event-stream"), ("X-Accel-Buffering", "no")],
                            body: Array("retry: 2000\n\n".utf8), stream: stream).onClose { hub.remove(stream) }
    }

    /// `{"cmd", "args"}` as on the socket: decoded by the command table, refused above the
    /// role's tier (403), then the daemon's reply as it is (HTTP status from its error code).
    private func command(_ request: HTTPRequest, role: WebRole) -> HTTPResponse {
        guard let body = try? JSONValue.parse(request.body), body.object != nil else { return .error(400, "the body is not a JSON object") }
        switch Commands.decode(body) {
        case .failure(let failure):
            return .error(Self.httpStatus(failure.error.code.rawValue), "\(failure.error.message) [\(failure.error.code.rawValue)]")
        case .success(let envelope):
            if case .subscribe = envelope.request { return .error(400, "follow events at GET /events") }
            if let refusal = Commands.refusal(envelope.request, tier: role.tier) {
                return .error(403, "\(refusal.message.pieces(separatedBy: ";").first ?? refusal.message); the \(role.rawValue) role has the \(role.tier) tier")
            }
            var timeout: Double?
            if case .screenshot = envelope.request { timeout = 10 }
            switch link.call(envelope.request.audited(by: "web page (\(role.rawValue) role)"), timeout: timeout) {
            case .failure(let failure): return .error(502, "the daemon: \(failure.description)")
            case .success(let reply):
                let ok = reply["ok"]?.bool == true
                return json(ok ? 200 : Self.httpStatus(reply["error"]?["code"]?.string ?? "internal"), reply)
            }
        }
    }

    static func uptime() -> Double? {
        // /proc/uptime's first figure: time since boot, suspend included.
        var now = timespec()
        guard clock_gettime(CLOCK_BOOTTIME, &now) == 0 else { return nil }
        return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
    }
}

extension HTTPResponse {
    /// Runs `action` when the stream's connection ends (the hub forgets it).
    func onClose(_ action: @escaping @Sendable () -> Void) -> HTTPResponse {
        var copy = self
        copy.closeAction = action
        return copy
    }
}

