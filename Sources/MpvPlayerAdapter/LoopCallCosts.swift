import AdRuntime
import Foundation

extension MpvPlayer {
    /// `make bench`: what each mpv call that the loop makes costs, measured on the loop while
    /// mpv plays (SPEC R18: only calls measured to cost microseconds run there). Each call is
    /// timed from before it to its return — for an asynchronous command that is the hand-over,
    /// not mpv's work. Blocks the loop while it runs; never use it while serving.
    @_spi(Bench)
    public func measureLoopCalls(rounds: Int) throws -> [(name: String, microseconds: [UInt64])] {
        let handle = self.handle
        var results: [(String, [UInt64])] = []
        func time(_ name: String, _ body: () throws -> Void) throws {
            var samples: [UInt64] = []
            for _ in 0..<rounds {
                let start = MonotonicTime.now()
                try body()
                samples.append((MonotonicTime.now() &- start) / 1000)
                usleep(2_000)   // let mpv's core run between calls, as it does between events
            }
            results.append((name, samples))
        }
        let slot = 62
        let pixels = PixelBuffer(BGRAImage(width: 200, height: 100, pixels: [UInt8](repeating: 255, count: 200 * 100 * 4)))
        let address = pixels.pixels.withUnsafeBufferPointer { UInt(bitPattern: $0.baseAddress) }
        let addNode: [String: MpvValue] = [
            "name": .string("overlay-add"), "id": .int(Int64(slot)), "x": .int(10), "y": .int(10),
            "file": .string("&\(address)"), "offset": .int(0), "fmt": .string("bgra"),
            "w": .int(200), "h": .int(100), "stride": .int(800),
        ]
        let remove = MpvNode(.array([.string("overlay-remove"), .string(String(slot))]))
        let text = MpvNode(.map(["name": .string("osd-overlay"), "id": .int(Int64(slot)), "format": .string("ass-events"),
                                 "data": .string("{\\an3}Sponsored"), "res_x": .int(320), "res_y": .int(240)]))
        let clear = MpvNode(.map(["name": .string("osd-overlay"), "id": .int(Int64(slot)), "format": .string("ass-events"),
                                  "data": .string(""), "res_x": .int(1), "res_y": .int(1)]))
        try loop.sync {
            try time("get pause (read-back: own-write contradiction)") { _ = try handle.get("pause", as: .flag) }
            try time("get eof-reached (read-back: keep-open-pause)") { _ = try handle.get("eof-reached", as: .flag) }
            try time("get time-pos (read-back: a seek's landing)") { _ = try handle.get("time-pos", as: .double) }
            try time("get osd-dimensions (an icon's place over the ad's picture, R27)") { _ = try handle.get("osd-dimensions", as: .node) }
            var squeezed = false
            try time("set video-margin-ratio-right, synchronous (a squeezeback restored, R26)") {
                squeezed.toggle()
                try handle.command(["set", "video-margin-ratio-right", squeezed ? "0.34" : "0"])
            }
            if squeezed { try handle.command(["set", "video-margin-ratio-right", "0"]) }
            var flag = false
            try time("set pause (our own pause/play)") { flag.toggle(); try handle.set("pause", flag) }
            try handle.set("pause", false)
            var fast = false
            try time("set speed") { fast.toggle(); try handle.set("speed", fast ? 1.5 : 1.0) }
            try handle.set("speed", 1.0)
            try time("osd-overlay text set") { try handle.command(text, operation: "osd-overlay") }
            try time("osd-overlay text clear (the removal of a text ad)") { try handle.command(clear, operation: "osd-overlay") }
            // The largest text the catalog accepts (AdText: 2 KiB, 8 lines, 7 marks a character),
            // set, then what the loop pays for a pause while it is on screen.
            let heaviest = String(repeating: String(repeating: "a\u{301}\u{302}\u{303}\u{304}\u{305}\u{306}\u{307}", count: 15) + "\n", count: 8)
            let heavy = MpvNode(.map(["name": .string("osd-overlay"), "id": .int(Int64(slot)), "format": .string("ass-events"),
                                      "data": .string("{\\an3}" + assEscape(AdText.bounded(heaviest))), "res_x": .int(320), "res_y": .int(240)]))
            try time("osd-overlay set, the largest accepted text") { try handle.command(heavy, operation: "osd-overlay") }
            var paused = false
            try time("set pause, with the largest accepted text on screen") { paused.toggle(); try handle.set("pause", paused) }
            try handle.set("pause", false)
            try handle.command(clear, operation: "osd-overlay")
            try time("overlay-add 200x100, asynchronous (hand-over)") {
                handle.commandAsync(node: addNode, keepAlive: pixels)
            }
            try time("overlay-remove (the removal of an image ad)") { try handle.command(remove, operation: "overlay-remove") }
            try time("seek, asynchronous (hand-over)") { handle.commandAsync(["seek", "0", "relative", "exact"]) }
            // The rest of what the loop calls (docs/benchmarks.md §3): the controller's commands
            // and reads, the surface's subtitle raise, a load handed over.
            let volume = (try? handle.get("volume", as: .double))?.double ?? 100
            var louder = false
            try time("set volume") { louder.toggle(); try handle.set("volume", louder ? volume - 1 : volume) }
            try handle.set("volume", volume)
            var muted = false
            try time("set mute") { muted.toggle(); try handle.set("mute", muted) }
            try handle.set("mute", false)
            var looped = false
            try time("set loop-file") { looped.toggle(); try handle.set("loop-file", looped ? "inf" : "no") }
            try handle.set("loop-file", "no")
            try time("get path (read-back: the item's path)") { _ = try handle.get("path", as: .string) }
            try time("get track-list (tracks)") { _ = try handle.get("track-list", as: .node) }
            try time("get audio-device-list (audio-devices)") { _ = try handle.get("audio-device-list", as: .node) }
            var raised = false
            try time("set sub-pos, asynchronous (subtitles above an overlay)") {
                raised.toggle()
                handle.commandAsync(["set", "sub-pos", raised ? "80" : "100"])
            }
            try time("set aid auto, asynchronous (a track chosen)") { handle.commandAsync(["set", "aid", "auto"]) }
            // A display-evidence grab (issue 36): mpv writes it on its own thread; the loop hands over.
            let grabs = FileManager.default.temporaryDirectory.appendingPathComponent("adplayerd-bench-grab-\(getpid())").path
            try? FileManager.default.createDirectory(atPath: grabs, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: grabs) }
            var shot = 0
            try time("screenshot-to-file window, asynchronous (a display-evidence grab)") {
                shot += 1
                handle.commandAsync(["screenshot-to-file", grabs + "/\(shot).png", "window"])
            }
        }
        return results
    }
}
