import AdPlayerDaemon
import AdRuntime
import AdTracking
import MpvPlayerAdapter

extension DisplayWitness.Output {
    /// mpv's output for the display evidence: grabs by `screenshot-to-file … window` (the video
    /// and what mpv draws over it), what `surface` drew, grabs read by `ImageDecoder`.
    /// Only the video outputs that compose what mpv draws over the video can be grabbed with
    /// it (`gpu`, `gpu-next`, `drm`); `x11`, `xv` and the rest give the video alone, no proof
    /// that an ad showed; `null` draws nothing.
    public static func mpv(player: MpvPlayer, surface: MpvAdSurface, vo: String) -> DisplayWitness.Output {
        let name = vo.split(separator: ",").first.map(String.init) ?? vo
        let ungrabbable: String? = switch name {
        case "null": DisplayEvidence.noOutput
        case "gpu", "gpu-next", "drm": nil
        default: "vo=\(name) cannot be grabbed with the ads (gpu, gpu-next or drm can)"
        }
        return DisplayWitness.Output(
            ungrabbable: ungrabbable,
            grab: { path, completion in
                player.screenshot(to: path, withOverlays: true) { (result: Result<Void, MpvError>) in completion(result.mapError { $0 }) }
            },
            drawn: { [weak surface] id in
                switch surface?.drawn(id) {
                case .image(let bitmap, let origin, let part, let canvas)?:
                    guard let grab = OutputGrab(width: bitmap.width, height: bitmap.height, pixels: bitmap.pixels) else {
                        return .elsewhere("the ad's bitmap is outside what is compared (over 4096 pixels a side)")
                    }
                    return .image(bitmap: grab, origin: region(origin), part: region(part), canvas: canvas)
                case .text(let box, let canvas)?: return .text(box: region(box), canvas: canvas)
                case .html?: return .elsewhere("an HTML creative is drawn by the page's browser, not in the player's output")
                case nil: return nil
                }
            },
            decode: { path, size in
                var image = try ImageDecoder.decode(path)
                let width = size?.width ?? min(DisplayWitness.smallWidth, image.width)
                let height = size?.height ?? max(1, image.height * width / max(1, image.width))
                if (width, height) != (image.width, image.height) { image = try ImageDecoder.scale(image, width: width, height: height, path: path) }
                guard let grab = OutputGrab(width: image.width, height: image.height, pixels: image.pixels) else {
                    throw GrabSizeError(width: image.width, height: image.height)
                }
                return grab
            })
    }

    private static func region(_ rect: AdRect) -> OutputGrab.Region {
        OutputGrab.Region(x: rect.x, y: rect.y, width: rect.width, height: rect.height)
    }
}

struct GrabSizeError: Error, CustomStringConvertible {
    let width: Int, height: Int
    var description: String { "a grab of \(width)×\(height) is outside what is compared" }
}
