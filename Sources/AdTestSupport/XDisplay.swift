import Foundation

/// A virtual X display (Xvfb) for tests that look at pixels, with a screen grabber
/// (`ffmpeg -f x11grab`) and a keyboard (`xdotool`). There is no window manager: windows
/// sit where their geometry puts them, and a test plays the window manager's part where it
/// needs one (`minimize`).
public final class XDisplay {
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// A captured region, RGB.
    public struct Capture {
        public let width: Int
        public let height: Int
        public let rgb: [UInt8]

        public func pixel(_ x: Int, _ y: Int) -> (r: Int, g: Int, b: Int) {
            let i = (y * width + x) * 3
            return (Int(rgb[i]), Int(rgb[i + 1]), Int(rgb[i + 2]))
        }

        /// The bounding box of pixels matching `predicate` within `region` (whole capture by default).
        public func bounds(in region: (x: Int, y: Int, w: Int, h: Int)? = nil,
                    where predicate: ((r: Int, g: Int, b: Int)) -> Bool) -> (minX: Int, minY: Int, maxX: Int, maxY: Int, count: Int)? {
            let r = region ?? (0, 0, width, height)
            var box: (Int, Int, Int, Int, Int)?
            for y in r.y..<(r.y + r.h) {
                for x in r.x..<(r.x + r.w) where predicate(pixel(x, y)) {
                    if let b = box {
                        box = (min(b.0, x), min(b.1, y), max(b.2, x), max(b.3, y), b.4 + 1)
                    } else {
                        box = (x, y, x, y, 1)
                    }
                }
            }
            return box.map { ($0.0, $0.1, $0.2, $0.3, $0.4) }
        }

        /// Writes a PNG for a person to look at (tests attach it on failure).
        public func writePNG(_ path: String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "rawvideo", "-pix_fmt", "rgb24",
                                 "-video_size", "\(width)x\(height)", "-i", "-", "-frames:v", "1", path]
            let input = Pipe()
            process.standardInput = input
            try? process.run()
            input.fileHandleForWriting.write(Data(rgb))
            try? input.fileHandleForWriting.close()
            process.waitUntilExit()
        }
    }

    public let name: String
    private let server = Process()

    /// Starts Xvfb on a free display. Throws — so the test fails, loudly — when it cannot.
    public init(width: Int = 800, height: Int = 600) throws {
        guard let xvfb = Self.which("Xvfb") else {
            throw Failure(description: "Xvfb is not installed (apt-get install xvfb): pixel tests cannot run")
        }
        for tool in ["xdotool", "ffmpeg"] where Self.which(tool) == nil {
            throw Failure(description: "\(tool) is not installed: pixel tests cannot run")
        }
        var number = 90 + Int(getpid() % 50)
        while FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)") || FileManager.default.fileExists(atPath: "/tmp/.X\(number)-lock") {
            number += 1
        }
        name = ":\(number)"
        server.executableURL = URL(fileURLWithPath: xvfb)
        server.arguments = [name, "-screen", "0", "\(width)x\(height)x24", "-nolisten", "tcp", "-noreset"]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        let socket = "/tmp/.X11-unix/X\(number)"
        let deadline = Date().addingTimeInterval(15)
        while !FileManager.default.fileExists(atPath: socket) {
            guard Date() < deadline, server.isRunning else { throw Failure(description: "Xvfb \(name) did not start") }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    deinit { stop() }

    public func stop() {
        if server.isRunning {
            server.terminate()
            server.waitUntilExit()
        }
    }

    /// Grabs a region of the screen.
    public func capture(x: Int = 0, y: Int = 0, width: Int, height: Int) throws -> Capture {
        let output = try Self.run("ffmpeg", ["-hide_banner", "-loglevel", "error", "-f", "x11grab", "-draw_mouse", "0", "-video_size", "\(width)x\(height)",
                                             "-i", "\(name)+\(x),\(y)", "-frames:v", "1", "-f", "rawvideo", "-pix_fmt", "rgb24", "-"],
                                  display: name)
        guard output.count == width * height * 3 else { throw Failure(description: "x11grab returned \(output.count) bytes") }
        return Capture(width: width, height: height, rgb: [UInt8](output))
    }

    /// A region of the screen grabbed continuously (`ffmpeg -f x11grab` at `fps`) into a file,
    /// for `seconds`; `frames()` once it is done (`wait`). Each frame is the region's mean colour.
    public final class Recording {
        public let fps: Int
        private let process = Process()
        private let file: String
        private let size: Int

        init(display: String, x: Int, y: Int, width: Int, height: Int, fps: Int, seconds: Double, file: String) throws {
            self.fps = fps
            self.file = file
            size = width * height * 3
            process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
            process.arguments = ["ffmpeg", "-hide_banner", "-loglevel", "error", "-y", "-f", "x11grab", "-draw_mouse", "0",
                                 "-framerate", String(fps), "-video_size", "\(width)x\(height)", "-i", "\(display)+\(x),\(y)",
                                 "-t", String(seconds), "-f", "rawvideo", "-pix_fmt", "rgb24", file]
            var environment = ProcessInfo.processInfo.environment
            environment["DISPLAY"] = display
            process.environment = environment
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            try process.run()
        }

        /// Waits for the recording's end: the frames, each as its mean (r, g, b).
        public func wait() throws -> [(r: Int, g: Int, b: Int)] {
            process.waitUntilExit()
            let data = try Data(contentsOf: URL(fileURLWithPath: file))
            let bytes = [UInt8](data)
            let pixels = size / 3
            return stride(from: 0, to: bytes.count - size + 1, by: size).map { start in
                var sum = (0, 0, 0)
                for i in stride(from: start, to: start + size, by: 3) {
                    sum.0 += Int(bytes[i])
                    sum.1 += Int(bytes[i + 1])
                    sum.2 += Int(bytes[i + 2])
                }
                return (sum.0 / pixels, sum.1 / pixels, sum.2 / pixels)
            }
        }
    }

    public func record(x: Int, y: Int, width: Int, height: Int, fps: Int = 60, seconds: Double, into file: String) throws -> Recording {
        try Recording(display: name, x: x, y: y, width: width, height: height, fps: fps, seconds: seconds, file: file)
    }

    /// Presses `key` in the window titled `title`, as a person at the keyboard would.
    public func press(_ key: String, inWindowTitled title: String) throws {
        let ids = String(decoding: try Self.run("xdotool", ["search", "--sync", "--name", title], display: name), as: UTF8.self)
        guard let window = ids.split(separator: "\n").first.map(String.init) else { throw Failure(description: "no window \(title)") }
        _ = try Self.run("xdotool", ["windowfocus", "--sync", window], display: name)
        _ = try Self.run("xdotool", ["key", key], display: name)
    }

    /// Plays a window manager's part in minimizing the window titled `title` (or restoring
    /// it), after `announceNetWM`: sets the window's `_NET_WM_STATE` to `_NET_WM_STATE_HIDDEN`
    /// (or empty), as a window manager does when a person minimizes it. mpv sees the change
    /// and reports `window-minimized`.
    public func minimize(_ minimized: Bool, windowTitled title: String) throws {
        let ids = String(decoding: try Self.run("xdotool", ["search", "--sync", "--name", title], display: name), as: UTF8.self)
        guard let window = ids.split(separator: "\n").first.map(String.init) else { throw Failure(description: "no window \(title)") }
        _ = try Self.run("xprop", ["-id", window, "-f", "_NET_WM_STATE", "32a", "-set", "_NET_WM_STATE",
                                   minimized ? "_NET_WM_STATE_HIDDEN" : ""], display: name)
    }

    /// Announces a NetWM window manager on the root window, before mpv opens its window (mpv
    /// asks once, when it creates it, and reads `_NET_WM_STATE` only from a NetWM window
    /// manager). The root's properties last because the display never resets (`-noreset`).
    public func announceNetWM() throws {
        // One atom: xprop would take "A,B" as the name of a single atom. FULLSCREEN is the
        // one mpv looks for.
        _ = try Self.run("xprop", ["-root", "-f", "_NET_SUPPORTED", "32a", "-set", "_NET_SUPPORTED", "_NET_WM_STATE_FULLSCREEN"],
                         display: name)
    }

    private static func which(_ tool: String) -> String? {
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(dir)/\(tool)"
            if FileManager.default.isExecutableFile(atPath: path) { return path }
        }
        return nil
    }

    @discardableResult
    private static func run(_ tool: String, _ arguments: [String], display: String) throws -> Data {
        var environment = ProcessInfo.processInfo.environment
        environment["DISPLAY"] = display
        // A tool that hangs fails the test instead.
        let result = try runProcess("/usr/bin/timeout", ["20", tool] + arguments, environment: environment, mergeErrors: false)
        guard result.status == 0 else {
            throw Failure(description: "\(tool) \(arguments.joined(separator: " ")) failed (\(result.status)): \(String(decoding: result.errors, as: UTF8.self))")
        }
        return result.output
    }
}
