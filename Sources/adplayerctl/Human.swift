import BoundsCore
import ControlProtocol
#if canImport(Glibc)
import Glibc
#endif

/// The daemon's answers and events as lines a person reads.
enum Human {
    static func error(_ reply: JSONValue) -> String {
        let error = reply["error"]
        return "\(error?["message"]?.string ?? "error") [\(error?["code"]?.string ?? "?")]"
    }

    static func result(_ request: Request, _ result: JSONValue) -> String {
        switch request {
        case .version:
            return "protocol \(result["protocol"]?.integer.map(String.init) ?? "?")"
        case .open:
            return "playing \(result["path"]?.string ?? "?") (\(result["content_id"]?.string ?? "?"))"
        case .schedule, .scheduleAuto, .takeover, .takeoverEnd:
            return schedule(result)
        case .queue:
            return "queued \(result["queued"]?.integer ?? 0); \(result["queue_length"]?.integer ?? 0) in the queue"
        case .metrics:
            return ControlProtocol.adKinds.map { kind in
                let k = result[kind]
                func n(_ key: String) -> Int64 { k?[key]?.integer ?? 0 }
                return "\(kind.padded(to: 11)) requested \(n("requested")), filled \(n("filled")), "
                    + "no fill \(n("nofill")), errors \(n("errors")), started \(n("started"))"
            }.joined(separator: "\n")
        case .plays:
            let plays = result["plays"]?.array ?? []
            guard !plays.isEmpty else { return "no ad shown" }
            return plays.map { p in
                func s(_ key: String) -> String { p[key]?.string ?? "-" }
                let beacons = p["beacons"]
                func n(_ key: String) -> Int64 { beacons?[key]?.integer ?? 0 }
                let seconds = p["seconds"]?.number.map { CFormat.format("%.1f s", $0) } ?? "-"
                return "#\(p["row"]?.integer ?? 0) \(s("started"))  \(s("kind").padded(to: 8)) \(s("ad_id")) on \(s("content_id")): "
                    + "\(seconds), \(s("reason")), \(s("viewable")); beacons sent \(n("sent")), pending \(n("pending")), failed \(n("failed"))"
                    + "; display \(s("display"))" + (p["display_evidence"]?["reason"]?.string.map { " (\($0))" } ?? "")
            }.joined(separator: "\n")
        case .tracks, .audioTrack, .subtitleTrack:
            var lines: [String] = []
            for (kind, key) in [("audio", "audio"), ("subtitle", "subtitle")] {
                let list = result[key]?.array ?? []
                lines.append("\(kind): " + (list.isEmpty ? "none" : ""))
                for t in list {
                    let fields = [t["language"]?.string, t["title"]?.string, t["codec"]?.string, t["external"]?.bool == true ? "external" : nil]
                    lines.append("  \(t["selected"]?.bool == true ? "*" : " ") \(t["id"]?.integer ?? 0)  " + fields.compactMap { $0 }.joined(separator: ", "))
                }
            }
            return lines.joined(separator: "\n")
        case .audioDevices:
            return (result["devices"]?.array ?? []).map { "\($0["name"]?.string ?? "?")  \($0["description"]?.string ?? "")" }.joined(separator: "\n")
        case .screenshot:
            return result["path"]?.string ?? "?"
        case .health:
            var lines = [result["status"]?.string ?? "?"]
            for check in result["checks"]?.array ?? [] {
                let status = check["status"]?.string ?? "?"
                lines.append("  \(status.padded(to: 9)) \(check["name"]?.string ?? "?"): \(check["reason"]?.string ?? "")")
            }
            return lines.joined(separator: "\n")
        case .logs:
            return (result["lines"]?.array ?? []).map { line in
                "\(line["time"]?.string ?? "?") \(line["level"]?.string ?? "?"): \(line["text"]?.string ?? "")"
            }.joined(separator: "\n")
        case .identify:
            return "the screen shows its label (code \(result["code"]?.string ?? "?"))"
        case .reload:
            return "reloading the configuration"
        default:
            return status(result)
        }
    }

    static func status(_ s: JSONValue) -> String {
        var lines: [String] = []
        let playing = s["playing"]?.bool == true
        if let item = s["item"], item != .null {
            let path = item["path"]?.string ?? "?"
            let rate = s["rate"]?.number ?? 0
            lines.append("\(playing ? "playing" : "paused ")  \(path) (\(item["content_id"]?.string ?? "?"))  at \(time(s["position"]?.number ?? 0))"
                         + (playing ? CFormat.format(", %.2fx", rate) : ""))
        } else {
            lines.append("stopped")
        }
        if let ad = s["ad"], ad != .null {
            lines.append("ad       \(ad["kind"]?.string ?? "?") \(ad["ad_id"]?.string ?? "?")")
        }
        let queue = s["queue"]?.array?.compactMap(\.string) ?? []
        let length = s["queue_length"]?.integer.map(Int.init) ?? queue.count
        let current = s["current"]?.integer.map(Int.init)
        lines.append("queue    \(length) episode\(length == 1 ? "" : "s")" + (current.map { ", playing number \($0 + 1)" } ?? ""))
        for (index, path) in queue.enumerated() { lines.append("  \(index == current ? ">" : " ") \(index + 1). \(path)") }
        var flags: [String] = []
        if let volume = s["volume"]?.number { flags.append(CFormat.format("volume %.0f", volume) + (s["mute"]?.bool == true ? " (muted)" : "")) }
        if let mode = s["repeat"]?.string, mode != "off" { flags.append("repeat \(mode)") }
        if s["shuffle"]?.bool == true { flags.append("shuffle") }
        if s["background"]?.bool == true { flags.append("in the background") }
        if !flags.isEmpty { lines.append(flags.joined(separator: ", ")) }
        if let display = s["display"], display != .null, display["power"]?.string != "on" || display["hours"] != nil {
            var line = "display  \(display["power"]?.string ?? "?")" + (display["reason"]?.string.map { " (\($0))" } ?? "")
            if let next = display["next_change"]?.string { line += ", changes at \(next)" }
            lines.append(line)
        }
        return lines.joined(separator: "\n")
    }

    static func event(_ e: JSONValue) -> String {
        func n(_ key: String) -> String { e[key]?.number.map { CFormat.format("%.2f", $0) } ?? "?" }
        func s(_ key: String) -> String { e[key]?.string ?? "?" }
        let clock = ISO8601.format(ThisProcess.wallClock).split(separator: "T").last.map { String($0.dropLast()) } ?? ""   // HH:MM:SS.mmm, UTC
        let text: String
        switch e["event"]?.string.flatMap(EventName.init(rawValue:)) {
        case .playerItem?: text = e["path"]?.string.map { "item \($0)" } ?? "item none"
        case .playerPlaying?: text = "playing at \(n("rate"))x from \(n("position")) s"
        case .playerPaused?: text = "paused at \(n("position")) s"
        case .playerSeeked?: text = "seeked \(n("from")) s -> \(n("to")) s"
        case .playerRate?: text = "rate \(n("rate"))x"
        case .playerEnded?: text = "ended \(s("path")) at \(n("position")) s"
        case .playerFailed?: text = "failed \(s("path")): \(s("message"))"
        case .playerBackground?: text = e["background"]?.bool == true ? "output hidden (background)" : "output shown (foreground)"
        case .playerDisplay?: text = "display \(s("power"))" + (e["reason"]?.string.map { " (\($0))" } ?? "")
        case .playerVolume?: text = "volume \(n("volume"))" + (e["mute"]?.bool == true ? " (muted)" : "")
        case .playerMode?: text = "repeat \(s("repeat")), shuffle \(e["shuffle"]?.bool == true ? "on" : "off")"
        case .playerQueue?: text = "queue: \(e["length"]?.integer ?? 0) entries" + (e["current"]?.integer.map { ", playing number \($0 + 1)" } ?? "")
        case .playerTrack?: text = "\(s("type")) track \(e["id"]?.integer.map(String.init) ?? e["id"]?.string ?? "off")"
        case .adRequested?: text = "ad requested: \(s("kind")) at \(n("position")) s"
        case .adNoFill?: text = "ad no fill: \(s("kind")) at \(n("position")) s"
        case .adBreakStarted?: text = "ad break: \(s("kind")) at \(n("position")) s (the content waits)"
        case .adBreakEnded?: text = "ad break over: \(s("kind")), the content from \(n("position")) s"
        case .adLoaded?: text = "ad loaded: \(s("kind")) \(s("ad_id"))"
        case .adStarted?: text = "ad started: \(s("kind")) \(s("ad_id"))"
        case .adQuartile?: text = "ad \(s("ad_id")): quartile \(e["quartile"]?.integer.map(String.init) ?? "?")/4"
        case .adViewability?:
            text = "ad \(s("ad_id")): \(s("viewability"))"
                + (s("viewability") == "undetermined" ? " (no visible output to measure it on: vo=null, or an HTML creative)" : "")
        case .adPaused?: text = "ad \(s("ad_id")) paused"
        case .adResumed?: text = "ad \(s("ad_id")) resumed"
        case .adHTML?: text = "ad html \(s("action")): \(s("url"))"
        case .adEnded?:
            text = "ad ended: \(s("kind")) \(s("ad_id")): \(s("reason"))"
                + (e["latency_us"]?.integer.map { " (\($0) µs after the player's change)" } ?? "")
        case .adError?: text = "ad error: \(s("kind"))\(e["ad_id"]?.string.map { " " + $0 } ?? ""): \(s("message")) [\(s("code"))]"
        case .beaconSent?: text = "beacon sent \(s("url"))"
        case nil: text = e.text
        }
        return "\(clock)  \(text)"
    }

    static func time(_ seconds: Double) -> String {
        let whole = Int(seconds)
        return "\(whole / 60):\(Digits.padded(whole % 60, 2)).\(Int((seconds - Double(whole)) * 10))"
    }

    /// `schedule`: what rules and why, what plays, the next change, the takeover and its audit.
    static func schedule(_ result: JSONValue) -> String {
        let rule = result["rule"]
        var lines = ["rule     \(rule?["kind"]?.string ?? "?") \(rule?["id"]?.string ?? "")"
                     + (rule?["priority"]?.integer.map { " (priority \($0))" } ?? "") + ": \(rule?["why"]?.string ?? "")"]
        if let playing = result["playing"], let path = playing["path"]?.string {
            lines.append("playing  \(path)" + (playing["playlist"]?.string.map { $0.isEmpty ? "" : " (playlist \($0))" } ?? ""))
        }
        lines.append("next     \(result["next_change"]?.string ?? "no change within the next day")")
        if let until = result["override_until"]?.string { lines.append("override a person's commands rule until \(until) (schedule auto gives it back)") }
        if let takeover = result["takeover"], let target = takeover["target"]?.string {
            lines.append("takeover \(target) by \(takeover["who"]?.string ?? "?") since \(takeover["since"]?.string ?? "?"), until \(takeover["until"]?.string ?? "takeover end")")
        }
        for entry in result["audit"]?.array?.suffix(10) ?? [] {
            lines.append("audit    \(entry["at"]?.string ?? "?")  takeover of \(entry["target"]?.string ?? "?") \(entry["event"]?.string ?? "?") (by \(entry["by"]?.string ?? "?"))")
        }
        return lines.joined(separator: "\n")
    }
}
