import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif

/// A VMAP 1.0 document (IAB): an episode's ad breaks — where (`timeOffset`), what kind
/// (`breakType`: linear, nonlinear, display), and where each break's ads come from (an inline
/// VAST document, `VASTAdData`, or a VAST tag, `AdTagURI`), with its `breakStart`, `breakEnd`
/// and `error` tracking.
///
/// Parsed with the VAST parser's safety: no DTD or entity, at most 64 elements deep, at most
/// 1,000 breaks; a malformed document is refused whole (the content plays on).
public struct VMAPDocument: Sendable, Equatable {
    /// Where a break is (`timeOffset`).
    public enum Offset: Sendable, Equatable {
        case start, end
        case seconds(Double)
        case percent(Double)
        /// `#n`: the n-th of the content's cue points (1-based).
        case position(Int)
    }

    public struct Break: Sendable, Equatable {
        public var id: String?
        public var offset: Offset
        /// `linear`, `nonlinear`, `display` (several may be listed: `linear,nonlinear`).
        public var types: [String]
        /// `repeatAfter`: the break again every so many seconds after its offset.
        public var repeatAfter: Double?
        public var allowMultipleAds = true
        public var followRedirects = true
        /// The inline VAST document (`VASTAdData`), or a VAST tag (`AdTagURI`).
        public var vast: Data?
        public var tagURI: String?
        public var breakStart: [String] = []
        public var breakEnd: [String] = []
        public var error: [String] = []
    }

    public var breaks: [Break]

    /// VMAP 1.0's error codes (sent through a break's `error` tracking, `[ERRORCODE]`).
    public enum ErrorCode: Int, Sendable {
        case schema = 1002
        case breakTypeNotSupported = 1003
        case adResponseError = 1004
        case templateNotSupported = 1005
        case extractionError = 1006
        case retrievalTimeout = 1007
        case retrievalError = 1008
    }

    public struct Problem: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    public static let maxBreaks = 1000
    public static let maxDepth = 64

    /// Whether `data` is a VMAP document (its root element is `VMAP`, with or without a prefix).
    public static func looksLikeVMAP(_ data: Data) -> Bool {
        let head = String(decoding: data.prefix(2048), as: UTF8.self)
        guard let open = head.range(of: "<", options: [], range: head.startIndex..<head.endIndex) else { return false }
        var rest = head[open.upperBound...]
        // Skip the XML declaration and comments.
        while rest.hasPrefix("?") || rest.hasPrefix("!--") {
            guard let end = rest.range(of: rest.hasPrefix("?") ? "?>" : "-->"), let next = rest[end.upperBound...].firstIndex(of: "<") else { return false }
            rest = rest[rest.index(after: next)...]
        }
        let name = rest.prefix { !" \t\r\n>/".contains($0) }
        return name == "VMAP" || name.hasSuffix(":VMAP")
    }

    public static func parse(_ data: Data) throws -> VMAPDocument {
        if data.range(of: Data("<!DOCTYPE".utf8)) != nil || data.range(of: Data("<!ENTITY".utf8)) != nil {
            throw Problem(description: "VMAP: a document type declaration (DOCTYPE/ENTITY) is not allowed")
        }
        let builder = VMAPBuilder()
        let parser = XMLParser(data: data)
        parser.shouldResolveExternalEntities = false
        parser.delegate = builder
        guard parser.parse(), builder.failure == nil else {
            throw Problem(description: "VMAP: " + (builder.failure ?? "not well-formed XML at line \(parser.lineNumber), column \(parser.columnNumber)"))
        }
        guard builder.sawRoot else { throw Problem(description: "VMAP: the root element is not <vmap:VMAP>") }
        guard builder.version.hasPrefix("1.") || builder.version == "1" else {
            throw Problem(description: "VMAP: version \"\(builder.version)\" is not supported (1.0)")
        }
        // The inline VAST documents, cut out of the bytes in order (the parser sees their
        // elements as the VMAP's; each is parsed as VAST when its break is asked for).
        var inline = inlineDocuments(data)
        var breaks = builder.breaks
        for index in breaks.indices where builder.hasInline.contains(index) {
            breaks[index].vast = inline.isEmpty ? nil : inline.removeFirst()
        }
        return VMAPDocument(breaks: breaks)
    }

    /// The bytes inside each `VASTAdData` element, in order (an optional CDATA wrapper removed).
    static func inlineDocuments(_ data: Data) -> [Data] {
        var out: [Data] = []
        var from = data.startIndex
        while let open = data.range(of: Data("VASTAdData".utf8), in: from..<data.endIndex) {
            // `<vmap:VASTAdData …>`: the element's opening tag ends at the next '>'.
            guard let tagEnd = data[open.upperBound...].firstIndex(of: UInt8(ascii: ">")),
                  let close = data.range(of: Data("VASTAdData>".utf8), in: tagEnd..<data.endIndex),
                  let closeOpen = data[..<close.lowerBound].lastIndex(of: UInt8(ascii: "<")) else { break }
            var inner = Data(data[data.index(after: tagEnd)..<closeOpen])
            let trimmed = XMLText.trimmed(inner)
            if trimmed.starts(with: Data("<![CDATA[".utf8)), trimmed.count >= 12, trimmed.suffix(3).elementsEqual(Data("]]>".utf8)) {
                inner = Data(trimmed.dropFirst(9).dropLast(3))
            }
            out.append(inner)
            from = close.upperBound
            if out.count >= maxBreaks { break }
        }
        return out
    }

    /// `timeOffset` as VMAP writes it: `start`, `end`, `HH:MM:SS(.mmm)`, `n%`, `#n`.
    package static func offset(_ text: String) -> Offset? {
        let value = text.trimmingCharacters(in: .whitespaces)
        switch value.lowercased() {
        case "start": return .start
        case "end": return .end
        default: break
        }
        // No sign anywhere: "-00:00:01" is no offset (not +1 s), and the document is refused.
        guard !value.contains("-"), !value.contains("+") else { return nil }
        if value.hasSuffix("%"), let percent = Double(value.dropLast()), percent.isFinite, (0...100).contains(percent) {
            return .percent(percent)
        }
        if value.hasPrefix("#"), let n = Int(value.dropFirst()), (1...maxBreaks).contains(n) { return .position(n) }
        return clock(value).map { .seconds($0) }
    }

    /// `HH:MM:SS` or `HH:MM:SS.mmm`, at most 30 days.
    static func clock(_ text: String) -> Double? {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0.isASCII && ($0.isNumber || $0 == ".") } }),
              let hours = Int(parts[0]), let minutes = Int(parts[1]), let seconds = Double(parts[2]),
              hours >= 0, (0..<60).contains(minutes), seconds.isFinite, seconds >= 0, seconds < 60 else { return nil }
        let total = Double(hours * 3600 + minutes * 60) + seconds
        return total <= 30 * 86_400 ? total : nil
    }
}

private final class VMAPBuilder: NSObject, XMLParserDelegate {
    var sawRoot = false
    var version = ""
    var breaks: [VMAPDocument.Break] = []
    /// Breaks (by index) whose ad source is inline VAST.
    var hasInline: Set<Int> = []
    var failure: String?
    private var path: [String] = []
    private var text = ""
    private var current: VMAPDocument.Break?
    private var trackingEvent: String?
    /// Inside `VASTAdData`: its elements are VAST's, not the VMAP's.
    private var inlineDepth = 0

    private static func local(_ name: String) -> String { name.split(separator: ":").last.map(String.init) ?? name }

    private func fail(_ parser: XMLParser, _ why: String) {
        guard failure == nil else { return }
        failure = why
        parser.abortParsing()
    }

    func parser(_ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?,
                attributes: [String: String] = [:]) {
        path.append(name)
        text = ""
        guard path.count <= VMAPDocument.maxDepth else { return fail(parser, "nested more than \(VMAPDocument.maxDepth) elements deep") }
        if inlineDepth > 0 {
            inlineDepth += 1
            return
        }
        switch Self.local(name) {
        case "VMAP" where path.count == 1:
            sawRoot = true
            version = attributes["version"] ?? ""
        case "AdBreak":
            guard breaks.count < VMAPDocument.maxBreaks else { return fail(parser, "more than \(VMAPDocument.maxBreaks) breaks") }
            guard let offsetText = attributes["timeOffset"], let offset = VMAPDocument.offset(offsetText) else {
                return fail(parser, "an AdBreak's timeOffset \"\(attributes["timeOffset"]?.prefix(32) ?? "")\" is not start, end, HH:MM:SS(.mmm), n% or #n")
            }
            let types = (attributes["breakType"] ?? "").lowercased().split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
            guard !types.isEmpty else { return fail(parser, "an AdBreak without breakType") }
            var made = VMAPDocument.Break(id: attributes["breakId"].map { String($0.prefix(128)) }, offset: offset, types: types)
            if let repeatText = attributes["repeatAfter"] {
                guard let repeatAfter = VMAPDocument.clock(repeatText), repeatAfter >= 1 else {
                    return fail(parser, "repeatAfter \"\(repeatText.prefix(32))\" is not HH:MM:SS of at least a second")
                }
                made.repeatAfter = repeatAfter
            }
            current = made
        case "AdSource":
            current?.allowMultipleAds = attributes["allowMultipleAds"]?.lowercased() != "false"
            current?.followRedirects = attributes["followRedirects"]?.lowercased() != "false"
        case "VASTAdData", "VASTData":
            inlineDepth = 1
            if current != nil { hasInline.insert(breaks.count) }
        case "Tracking":
            trackingEvent = attributes["event"]
        default:
            break
        }
    }

    func parser(_ parser: XMLParser, foundCharacters string: String) {
        if inlineDepth == 0, text.utf8.count < 64 * 1024 { text += string }
    }

    func parser(_ parser: XMLParser, foundCDATA CDATABlock: Data) {
        if inlineDepth == 0, text.utf8.count < 64 * 1024 { text += String(decoding: CDATABlock, as: UTF8.self) }
    }

    func parser(_ parser: XMLParser, didEndElement name: String, namespaceURI: String?, qualifiedName: String?) {
        defer { path.removeLast() }
        if inlineDepth > 0 {
            inlineDepth -= 1
            if inlineDepth > 0 { return }
            return   // the VASTAdData element itself closed
        }
        let value = XMLText.trimmed(text)
        switch Self.local(name) {
        case "AdTagURI":
            if !value.isEmpty { current?.tagURI = String(value.prefix(16 * 1024)) }
        case "Tracking":
            guard !value.isEmpty, value.hasPrefix("http://") || value.hasPrefix("https://") else { break }
            switch trackingEvent {
            case "breakStart": current?.breakStart.append(value)
            case "breakEnd": current?.breakEnd.append(value)
            case "error": current?.error.append(value)
            default: break
            }
            trackingEvent = nil
        case "AdBreak":
            if let current { breaks.append(current) }
            current = nil
        default:
            break
        }
    }

    func parser(_ parser: XMLParser, parseErrorOccurred parseError: any Error) {
        if failure == nil { failure = "not well-formed XML at line \(parser.lineNumber), column \(parser.columnNumber)" }
    }
}
