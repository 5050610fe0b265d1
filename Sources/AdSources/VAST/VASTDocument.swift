import AdRuntime
import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// VAST error codes (IAB VAST 4.x §2.3.6.3) the client reports through `Error` URLs.
public enum VASTErrorCode: Int, Sendable {
    case xmlParsing = 100
    case schemaValidation = 101
    case unsupportedVersion = 102
    case wrapperError = 300
    case wrapperTimeout = 301
    case wrapperLimit = 302
    case noAdsAfterWrapper = 303
    case linearError = 400
    case fileNotFound = 401
    case mediaTimeout = 402
    case noSupportedMedia = 403
    case mediaDisplayProblem = 405
    case nonLinearError = 500
    case nonLinearDimensions = 501
    case nonLinearFetchFailed = 502
    case noSupportedNonLinear = 503
    case undefined = 900
}

/// Why a VAST request gave no ad, with the VAST code to report.
public struct VASTError: Error, Sendable, Equatable, CustomStringConvertible {
    public let code: VASTErrorCode
    public let message: String
    /// Its `Error` URLs have been sent (by the ad that failed, with its wrappers').
    var reported = false
    public var description: String { "VAST \(code.rawValue): \(message)" }

    public init(code: VASTErrorCode, message: String) {
        self.code = code
        self.message = message
    }

    func markedReported() -> VASTError {
        var copy = self
        copy.reported = true
        return copy
    }

    public static func == (a: VASTError, b: VASTError) -> Bool { a.code == b.code && a.message == b.message }
}

/// A VAST 2.0–4.2 document, the parts an overlay/pause-ad/post-roll player needs.
public struct VASTDocument: Sendable, Equatable {
    public struct MediaFile: Sendable, Equatable {
        public var url: String
        public var type: String
        public var delivery: String
        public var width: Int
        public var height: Int
        public var bitrate: Int?
    }

    public struct NonLinear: Sendable, Equatable {
        public var id: String?
        public var width: Int
        public var height: Int
        /// As written (`HH:MM:SS(.mmm)`); the client checks it through `Seconds`.
        public var minSuggestedDuration: String?
        /// `StaticResource` URL and its `creativeType` (image/png, image/jpeg…).
        public var staticResource: (url: String, type: String)?
        public var htmlOrIFrame: String?
        public var clickThrough: String?

        public static func == (a: NonLinear, b: NonLinear) -> Bool {
            a.id == b.id && a.width == b.width && a.height == b.height && a.minSuggestedDuration == b.minSuggestedDuration
                && a.staticResource?.url == b.staticResource?.url && a.staticResource?.type == b.staticResource?.type
                && a.htmlOrIFrame == b.htmlOrIFrame && a.clickThrough == b.clickThrough
        }
    }

    /// A linear creative's `<Icon>`, its attributes and resources as written (the client
    /// judges them).
    public struct Icon: Sendable, Equatable {
        public var program: String?
        public var width: Int
        public var height: Int
        public var xPosition: String?
        public var yPosition: String?
        public var offset: String?
        public var duration: String?
        /// Its `StaticResource` URL and `creativeType` (an `IconClickFallbackImage`'s is not it).
        public var staticResource: String?
        public var staticType = ""
        public var viewTracking: [String] = []
        public var clickThrough: String?
    }

    public struct Creative: Sendable, Equatable {
        public var id: String?
        /// Linear: its `Duration` as written; nil when the creative is not linear.
        public var linearDuration: String?
        /// Linear: its `skipoffset` as written (`HH:MM:SS(.mmm)` or `n%`); nil: not skippable.
        public var skipOffset: String?
        public var mediaFiles: [MediaFile] = []
        public var nonLinears: [NonLinear] = []
        public var isLinear = false
        public var isNonLinear = false
        /// Tracking events by name (`start`, `firstQuartile`, `creativeView`, `close`, …);
        /// `progress` events by `progress:OFFSET`, the offset as written (`00:00:05`, `25%`).
        public var tracking: [String: [String]] = [:]
        /// `UniversalAdId` as `registry value` (VAST 4.0's attributes or 4.1's text).
        public var universalAdID: String?
        /// Its `<CreativeExtension type="application/x-adplayerd-squeezeback">`'s attributes
        /// (`layout`, `scale`, `transition`, `background`), as written: its NonLinear is a
        /// squeezeback (R26) until the IAB's signalling for one is final.
        public var squeezeback: [String: String]?
        /// A linear creative's icons, in document order (at most `AdIcon.maxPerCreative` × 2 read).
        public var icons: [Icon] = []
    }

    /// The creative extension that marks a NonLinear as a squeezeback.
    public static let squeezebackExtension = "application/x-adplayerd-squeezeback"

    public struct Ad: Sendable, Equatable {
        public var id: String?
        /// Its place in a pod (`sequence`); nil: a stand-alone ad (a buffet's).
        public var sequence: Int?
        /// For a wrapper, the next document's URL.
        public var wrapperURI: String?
        /// `Impression` URLs (`about:blank`, a placeholder, is left out).
        public var impressions: [String] = []
        public var errors: [String] = []
        public var creatives: [Creative] = []
        /// `AdServingId` (VAST 4.1): the ad server's id for this serving.
        public var adServingID: String?
        /// `Expires` (VAST 4.1), seconds as written: how long the ad may be cached.
        public var expires: String?
        /// `Advertiser` and `Category` (of an InLine ad): for competitive separation.
        public var advertiser: String?
        public var categories: [String] = []
        /// `ViewableImpression`'s URLs.
        public var viewable: [String] = []
        public var notViewable: [String] = []
        public var viewUndetermined: [String] = []
        public var isWrapper: Bool { wrapperURI != nil }
    }

    public var version: String
    public var ads: [Ad]
    /// Top-level `<Error>` (a no-ad response may carry one).
    public var errors: [String]

    public static let supportedVersions = ["2.0", "3.0", "4.0", "4.1", "4.2", "4.3"]

    /// Parses a document; throws `VASTError` 100 (not well-formed XML: a tag mismatched or not
    /// closed, the document cut short, an entity declared), 101 (not VAST / a required part
    /// missing) or 102 (a version this client does not know).
    public static func parse(_ data: Data) throws -> VASTDocument {
        // No DTD: VAST has none, and a DOCTYPE is how entity expansion ("billion laughs") and
        // external entities get in. Refused before the parser sees it.
        if data.range(of: Data("<!DOCTYPE".utf8)) != nil || data.range(of: Data("<!ENTITY".utf8)) != nil {
            throw VASTError(code: .xmlParsing, message: "a document type declaration (DOCTYPE/ENTITY) is not allowed")
        }
        let builder = Builder()
        let parser = XMLParser(data: data)
        parser.shouldResolveExternalEntities = false
        parser.delegate = builder
        guard parser.parse(), builder.failure == nil else {
            let code = (parser.parserError as NSError?)?.code ?? (builder.failure as NSError?)?.code ?? 0
            let why = switch code {
            case 5: "the document ends before it is complete (no </VAST>)"
            case 76: "a closing tag does not match its opening tag"
            case 4: "the document is empty"
            default: "parser error \(code)"
            }
            throw VASTError(code: .xmlParsing, message: "not well-formed XML at line \(parser.lineNumber), column \(parser.columnNumber): \(why)")
        }
        guard builder.sawVAST else { throw VASTError(code: .schemaValidation, message: "the root element is not <VAST>") }
        guard builder.closedVAST else {
            throw VASTError(code: .xmlParsing, message: "not well-formed XML: the document ends before </VAST>")
        }
        let version = builder.version ?? ""
        guard supportedVersions.contains(where: { version == $0 || version.hasPrefix($0 + ".") }) else {
            throw VASTError(code: .unsupportedVersion, message: "VAST version \"\(version)\" is not supported")
        }
        for ad in builder.ads where ad.isWrapper && (ad.wrapperURI ?? "").isEmpty {
            throw VASTError(code: .schemaValidation, message: "a <Wrapper> without <VASTAdTagURI>")
        }
        return VASTDocument(version: version, ads: builder.ads, errors: builder.topErrors)
    }
}

/// SAX builder: keeps a path of element names and the text of the current element.
private final class Builder: NSObject, XMLParserDelegate {
    var sawVAST = false
    var closedVAST = false
    /// What the parser reported wrong, if anything (it may stop without saying so in `parse()`).
    var failure: (any Error)?
    var version: String?
    var ads: [VASTDocument.Ad] = []
    var topErrors: [String] = []
    private var path: [String] = []
    private var text = ""
    private var ad: VASTDocument.Ad?
    private var creative: VASTDocument.Creative?
    private var mediaFile: VASTDocument.MediaFile?
    private var nonLinear: VASTDocument.NonLinear?
    private var icon: VASTDocument.Icon?
    private var attributes: [[String: String]] = []

    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes attributeDict: [String: String] = [:]) {
        path.append(name)
        attributes.append(attributeDict)
        text = ""
        switch name {
        case "VAST" where path.count == 1:
            sawVAST = true
            version = attributeDict["version"]
        case "Ad":
            ad = VASTDocument.Ad(id: attributeDict["id"].map(AdIdentifier.bounded))
            ad?.sequence = attributeDict["sequence"].flatMap { Int($0) }.flatMap { (1...1000).contains($0) ? $0 : nil }
        case "Wrapper":
            ad?.wrapperURI = ""   // a wrapper, whose target `VASTAdTagURI` must follow
        case "Creative":
            creative = VASTDocument.Creative(id: (attributeDict["id"] ?? attributeDict["adId"]).map(AdIdentifier.bounded))
        case "Linear":
            creative?.isLinear = true
            creative?.skipOffset = attributeDict["skipoffset"].map { String($0.prefix(32)) }
        case "NonLinearAds":
            creative?.isNonLinear = true
        case "CreativeExtension" where attributeDict["type"] == VASTDocument.squeezebackExtension:
            // Only its four attributes, each bounded (the client judges their values).
            creative?.squeezeback = attributeDict.filter { ["layout", "scale", "transition", "background"].contains($0.key) }
                .mapValues { String($0.prefix(32)) }
        case "NonLinear":
            nonLinear = VASTDocument.NonLinear(
                id: attributeDict["id"].map(AdIdentifier.bounded), width: pixels(attributeDict["width"]), height: pixels(attributeDict["height"]),
                minSuggestedDuration: attributeDict["minSuggestedDuration"])
        case "Icon" where creative?.isLinear == true && (creative?.icons.count ?? 0) < AdIcon.maxPerCreative * 2:
            icon = VASTDocument.Icon(program: attributeDict["program"].map { String($0.prefix(64)) },
                                     width: pixels(attributeDict["width"]), height: pixels(attributeDict["height"]),
                                     xPosition: attributeDict["xPosition"].map { String($0.prefix(16)) },
                                     yPosition: attributeDict["yPosition"].map { String($0.prefix(16)) },
                                     offset: attributeDict["offset"].map { String($0.prefix(32)) },
                                     duration: attributeDict["duration"].map { String($0.prefix(32)) })
        case "MediaFile":
            mediaFile = VASTDocument.MediaFile(
                url: "", type: attributeDict["type"] ?? "", delivery: attributeDict["delivery"] ?? "progressive",
                width: pixels(attributeDict["width"]), height: pixels(attributeDict["height"]),
                bitrate: Int(attributeDict["bitrate"] ?? "").map { min(max(0, $0), 1_000_000_000) })
        default:
            break
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) { text += string }

    func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
        if failure == nil { failure = parseError }
    }

    func parser(_ parser: XMLParser, foundCDATA block: Data) { text += String(decoding: block, as: UTF8.self) }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        let value = XMLText.trimmed(text)
        let attrs = attributes.last ?? [:]
        let parent = path.count >= 2 ? path[path.count - 2] : ""
        switch name {
        case "VAST" where path.count == 1:
            closedVAST = true
        case "Ad":
            if let ad { ads.append(ad) }
            ad = nil
        case "VASTAdTagURI":
            ad?.wrapperURI = value
        case "Impression" where !value.isEmpty && value.lowercased() != "about:blank":
            ad?.impressions.append(value)
        case "AdServingId" where !value.isEmpty:
            ad?.adServingID = AdIdentifier.bounded(value)
        case "Expires" where !value.isEmpty:
            ad?.expires = String(value.prefix(32))
        case "Advertiser" where !value.isEmpty && parent == "InLine":
            ad?.advertiser = String(value.prefix(256))
        case "Category" where !value.isEmpty && parent == "InLine" && (ad?.categories.count ?? 0) < 32:
            ad?.categories.append(String(value.prefix(128)))
        case "Viewable" where !value.isEmpty && parent == "ViewableImpression":
            ad?.viewable.append(value)
        case "NotViewable" where !value.isEmpty && parent == "ViewableImpression":
            ad?.notViewable.append(value)
        case "ViewUndetermined" where !value.isEmpty && parent == "ViewableImpression":
            ad?.viewUndetermined.append(value)
        case "UniversalAdId":
            // 4.0: idRegistry and idValue attributes; 4.1: idRegistry and the value as text.
            let registry = attrs["idRegistry"] ?? "unknown"
            if let id = attrs["idValue"] ?? (value.isEmpty ? nil : value), id != "unknown" {
                creative?.universalAdID = AdIdentifier.bounded("\(registry) \(id)")
            }
        case "Error" where !value.isEmpty:
            if ad != nil { ad?.errors.append(value) } else { topErrors.append(value) }
        case "Creative":
            if let creative { ad?.creatives.append(creative) }
            creative = nil
        case "Duration" where parent == "Linear":
            creative?.linearDuration = value
        case "MediaFile":
            if var file = mediaFile, !value.isEmpty {
                file.url = value
                creative?.mediaFiles.append(file)
            }
            mediaFile = nil
        case "Tracking":
            if let event = attrs["event"], !value.isEmpty {
                if event == "progress", let offset = attrs["offset"] {
                    creative?.tracking["progress:\(offset.prefix(32))", default: []].append(value)
                } else {
                    creative?.tracking[event, default: []].append(value)
                }
            }
        case "StaticResource" where icon != nil:
            if !path.contains("IconClickFallbackImage") {   // no pointer on a box: a fallback image is never shown
                icon?.staticResource = value
                icon?.staticType = attrs["creativeType"] ?? ""
            }
        case "IconViewTracking" where icon != nil && !value.isEmpty && (icon?.viewTracking.count ?? 0) < 16:
            icon?.viewTracking.append(value)
        case "IconClickThrough" where icon != nil && !value.isEmpty:
            icon?.clickThrough = value
        case "Icon":
            if let icon { creative?.icons.append(icon) }
            icon = nil
        case "StaticResource" where nonLinear != nil:
            nonLinear?.staticResource = (value, attrs["creativeType"] ?? "")
        case "HTMLResource", "IFrameResource":
            if nonLinear != nil { nonLinear?.htmlOrIFrame = value }
        case "NonLinearClickThrough":
            nonLinear?.clickThrough = value
        case "NonLinear":
            if let nonLinear { creative?.nonLinears.append(nonLinear) }
            nonLinear = nil
        default:
            break
        }
        path.removeLast()
        attributes.removeLast()
        text = ""
    }
}

/// A size in pixels from an attribute: 0 when absent or not a number in 0…100000.
private func pixels(_ text: String?) -> Int {
    guard let text, let value = Int(text), (0...100_000).contains(value) else { return 0 }
    return value
}

extension VASTError: VASTCoded {
    public var vastErrorCode: Int { code.rawValue }
}
