import Foundation

/// The daemon's answers and events as lines a person reads.
enum Human {
    static func error(_ reply: [String: Any]) -> String {
        let error = reply["error"] as? [String: Any] ?? [:]
        return "\(error["message"] as? String ?? "error") [\(error["code"] as? String ?? "?")]"
    }

    static func result(_ command: String, _ result: [String: Any]) -> String {
        switch command {
        case "version":
            return "protocol \(result["protocol"] ?? "?")"
        case "open":
            return "playing \(result["path"] as? String ?? "?") (\(result["content_id"] as? String ?? "?"))"
        case "queue":
            return "queued \(result["queued"] ?? 0); \((result["queue"] as? [Any])?.count ?? 0) in the queue"
        default:
            return status(result)
        }
    }

    static func status(_ s: [String: Any]) -> String {
        var lines: [String] = []
        let playing = s["playing"] as? Bool == true
        if let item = s["item"] as? [String: Any] {
            let path = item["path"] as? String ?? "?"
            let rate = (s["rate"] as? NSNumber)?.doubleValue ?? 0
            lines.append("\(playing ? "playing" : "paused ")  \(path) (\(item["content_id"] as? String ?? "?"))  at \(time((s["position"] as? NSNumber)?.doubleValue ?? 0))"
                         + (playing ? String(format: ", %.2fx", rate) : ""))
        } else {
            lines.append("stopped")
        }
        if let ad = s["ad"] as? [String: Any] {
            lines.append("ad       \(ad["kind"] as? String ?? "?") \(ad["ad_id"] as? String ?? "?")")
        }
        let queue = s["queue"] as? [String] ?? []
        let current = (s["current"] as? NSNumber)?.intValue
        lines.append("queue    \(queue.count) episode\(queue.count == 1 ? "" : "s")" + (current.map { ", playing number \($0 + 1)" } ?? ""))
        for (index, path) in queue.enumerated() { lines.append("  \(index == current ? ">" : " ") \(index + 1). \(path)") }
        var flags: [String] = []
        if s["loop"] as? Bool == true { flags.append("looping") }
        if s["background"] as? Bool == true { flags.append("in the background") }
        if !flags.isEmpty { lines.append(flags.joined(separator: ", ")) }
        return lines.joined(separator: "\n")
    }

    static func event(_ e: [String: Any]) -> String {
        let name = e["event"] as? String ?? "?"
        func n(_ key: String) -> String { (e[key] as? NSNumber).map { String(format: "%.2f", $0.doubleValue) } ?? "?" }
        func s(_ key: String) -> String { e[key] as? String ?? "?" }
        let clock = Date().formatted(.iso8601.time(includingFractionalSeconds: true))
        let text: String = switch name {
        case "player.item": (e["path"] as? String).map { "item \($0)" } ?? "item none"
        case "player.playing": "playing at \(n("rate"))x from \(n("position")) s"
        case "player.paused": "paused at \(n("position")) s"
        case "player.seeked": "seeked \(n("from")) s -> \(n("to")) s"
        case "player.rate": "rate \(n("rate"))x"
        case "player.ended": "ended \(s("path")) at \(n("position")) s"
        case "ad.requested": "ad requested: \(s("kind")) at \(n("position")) s"
        case "ad.loaded": "ad loaded: \(s("kind")) \(s("ad_id"))"
        case "ad.started": "ad started: \(s("kind")) \(s("ad_id"))"
        case "ad.quartile": "ad \(s("ad_id")): quartile \(e["quartile"] ?? "?")/4"
        case "ad.paused", "ad.resumed": "ad \(s("ad_id")) \(name == "ad.paused" ? "paused" : "resumed")"
        case "ad.html": "ad html \(s("action")): \(s("url"))"
        case "player.failed": "failed \(s("path")): \(s("message"))"
        case "player.background": (e["background"] as? Bool == true) ? "output hidden (background)" : "output shown (foreground)"
        case "ad.ended": "ad ended: \(s("kind")) \(s("ad_id")): \(s("reason"))" + ((e["latency_us"] as? NSNumber).map { " (\($0) µs after the player's change)" } ?? "")
        case "ad.error": "ad error: \(s("kind"))\((e["ad_id"] as? String).map { " " + $0 } ?? ""): \(s("message")) [\(s("code"))]"
        case "beacon.sent": "beacon sent \(s("url"))"
        default: (try? JSONSerialization.data(withJSONObject: e, options: [.sortedKeys])).map { String(decoding: $0, as: UTF8.self) } ?? name
        }
        return "\(clock)  \(text)"
    }

    static func time(_ seconds: Double) -> String {
        let whole = Int(seconds)
        return String(format: "%d:%02d.%d", whole / 60, whole % 60, Int((seconds - Double(whole)) * 10))
    }
}
