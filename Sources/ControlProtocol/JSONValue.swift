import BoundsCore
/// A JSON value that can cross threads: what the control protocol reads and writes.
///
/// Integers are kept exact: a number written without a fraction or an exponent that fits in
/// 64 bits is `.int`, anything else `.number` — so a request id above 2^53 comes back as it
/// was sent. Parsing and writing are this module's own (`JSONReader`, `JSONWriter`): strict
/// RFC 8259, nesting bounded, no Foundation on the hot path of every event.
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case int(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Every string in it (keys too) as one line without control characters (`OneLine`): what
    /// a person's terminal is shown of replies and events that carry ad servers' and catalogs'
    /// text (`adplayerctl`'s human output).
    public var printable: JSONValue {
        switch self {
        case .string(let text): .string(OneLine.escape(text))
        case .array(let values): .array(values.map(\.printable))
        case .object(let fields): .object(Dictionary(fields.map { (OneLine.escape($0.key), $0.value.printable) }, uniquingKeysWith: { a, _ in a }))
        default: self
        }
    }

    public static func int(_ value: Int) -> JSONValue { .int(Int64(value)) }
    public static func int(_ value: UInt64) -> JSONValue { value <= UInt64(Int64.max) ? .int(Int64(value)) : .number(Double(value)) }

    /// Parses one JSON text; `JSONError` says where it is broken.
    public static func parse<Bytes: Collection>(_ bytes: Bytes) throws(JSONError) -> JSONValue where Bytes.Element == UInt8 {
        try JSONReader.parse(bytes)
    }

    public static func parse(_ text: String) throws(JSONError) -> JSONValue { try parse(Array(text.utf8)) }

    /// One line of JSON, keys sorted, no newline inside, ending in "\n".
    public func line() -> [UInt8] {
        var writer = JSONWriter()
        writer.write(self)
        writer.bytes.append(10)
        return writer.bytes
    }

    /// The JSON text (keys sorted), without a newline.
    public var text: String {
        var writer = JSONWriter()
        writer.write(self)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    public subscript(key: String) -> JSONValue? { if case .object(let values) = self { values[key] } else { nil } }

    public var string: String? { if case .string(let value) = self { value } else { nil } }
    /// Any number, as a Double.
    public var number: Double? {
        switch self {
        case .number(let value): value
        case .int(let value): Double(value)
        default: nil
        }
    }
    /// An integer written as one (no fraction, no exponent) that fits in 64 bits.
    public var integer: Int64? { if case .int(let value) = self { value } else { nil } }
    public var bool: Bool? { if case .bool(let value) = self { value } else { nil } }
    public var array: [JSONValue]? { if case .array(let values) = self { values } else { nil } }
    public var object: [String: JSONValue]? { if case .object(let values) = self { values } else { nil } }
    public var isNull: Bool { self == .null }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByNilLiteral,
                     ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral, ExpressibleByFloatLiteral,
                     ExpressibleByIntegerLiteral {
    public init(stringLiteral value: String) { self = .string(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(nilLiteral: ()) { self = .null }
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(Dictionary(elements, uniquingKeysWith: { $1 })) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(floatLiteral value: Double) { self = .number(value) }
    public init(integerLiteral value: Int) { self = .int(Int64(value)) }
}

/// Where a JSON text is broken.
public struct JSONError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Byte offset of the problem.
    public let offset: Int
    public let reason: String
    public var description: String { "\(reason) at byte \(offset)" }
}

/// A strict JSON parser over bytes (RFC 8259): UTF-8 checked, nesting at most `maxDepth`,
/// numbers as exact integers when written as integers. Linear in the input.
enum JSONReader {
    static let maxDepth = 64

    static func parse<Bytes: Collection>(_ input: Bytes) throws(JSONError) -> JSONValue where Bytes.Element == UInt8 {
        let bytes = Array(input)
        var reader = Cursor(bytes: bytes)
        reader.skipSpace()
        let value = try reader.value(depth: 0)
        reader.skipSpace()
        guard reader.at == bytes.count else { throw JSONError(offset: reader.at, reason: "text after the JSON value") }
        return value
    }

    struct Cursor {
        let bytes: [UInt8]
        var at = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        func fail(_ reason: String) -> JSONError { JSONError(offset: at, reason: reason) }

        mutating func skipSpace() {
            while at < bytes.count, bytes[at] == 0x20 || bytes[at] == 0x0A || bytes[at] == 0x0D || bytes[at] == 0x09 { at += 1 }
        }

        mutating func value(depth: Int) throws(JSONError) -> JSONValue {
            guard depth < JSONReader.maxDepth else { throw fail("nested deeper than \(JSONReader.maxDepth)") }
            guard at < bytes.count else { throw fail("unexpected end") }
            switch bytes[at] {
            case UInt8(ascii: "{"): return try object(depth: depth)
            case UInt8(ascii: "["): return try array(depth: depth)
            case UInt8(ascii: "\""): return .string(try string())
            case UInt8(ascii: "t"): try literal("true"); return .bool(true)
            case UInt8(ascii: "f"): try literal("false"); return .bool(false)
            case UInt8(ascii: "n"): try literal("null"); return .null
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
            default: throw fail("unexpected character")
            }
        }

        mutating func literal(_ word: StaticString) throws(JSONError) {
            let count = word.utf8CodeUnitCount
            guard at + count <= bytes.count else { throw fail("unexpected end") }
            for i in 0..<count where bytes[at + i] != word.utf8Start[i] { throw fail("unexpected character") }
            at += count
        }

        mutating func object(depth: Int) throws(JSONError) -> JSONValue {
            at += 1
            var values: [String: JSONValue] = [:]
            skipSpace()
            if at < bytes.count, bytes[at] == UInt8(ascii: "}") { at += 1; return .object(values) }
            while true {
                skipSpace()
                guard at < bytes.count, bytes[at] == UInt8(ascii: "\"") else { throw fail("expected a key") }
                let key = try string()
                skipSpace()
                guard at < bytes.count, bytes[at] == UInt8(ascii: ":") else { throw fail("expected ':'") }
                at += 1
                skipSpace()
                values[key] = try value(depth: depth + 1)
                skipSpace()
                guard at < bytes.count else { throw fail("unexpected end") }
                if bytes[at] == UInt8(ascii: ",") { at += 1; continue }
                if bytes[at] == UInt8(ascii: "}") { at += 1; return .object(values) }
                throw fail("expected ',' or '}'")
            }
        }

        mutating func array(depth: Int) throws(JSONError) -> JSONValue {
            at += 1
            var values: [JSONValue] = []
            skipSpace()
            if at < bytes.count, bytes[at] == UInt8(ascii: "]") { at += 1; return .array(values) }
            while true {
                skipSpace()
                values.append(try value(depth: depth + 1))
                skipSpace()
                guard at < bytes.count else { throw fail("unexpected end") }
                if bytes[at] == UInt8(ascii: ",") { at += 1; continue }
                if bytes[at] == UInt8(ascii: "]") { at += 1; return .array(values) }
                throw fail("expected ',' or ']'")
            }
        }

        mutating func number() throws(JSONError) -> JSONValue {
            let start = at
            if bytes[at] == UInt8(ascii: "-") { at += 1 }
            guard at < bytes.count, isDigit(bytes[at]) else { throw fail("a number needs digits") }
            if bytes[at] == UInt8(ascii: "0") {
                at += 1
                if at < bytes.count, isDigit(bytes[at]) { throw fail("a number cannot start with 0") }
            } else {
                while at < bytes.count, isDigit(bytes[at]) { at += 1 }
            }
            var integral = true
            if at < bytes.count, bytes[at] == UInt8(ascii: ".") {
                integral = false
                at += 1
                guard at < bytes.count, isDigit(bytes[at]) else { throw fail("a fraction needs digits") }
                while at < bytes.count, isDigit(bytes[at]) { at += 1 }
            }
            if at < bytes.count, bytes[at] == UInt8(ascii: "e") || bytes[at] == UInt8(ascii: "E") {
                integral = false
                at += 1
                if at < bytes.count, bytes[at] == UInt8(ascii: "+") || bytes[at] == UInt8(ascii: "-") { at += 1 }
                guard at < bytes.count, isDigit(bytes[at]) else { throw fail("an exponent needs digits") }
                while at < bytes.count, isDigit(bytes[at]) { at += 1 }
            }
            guard at - start <= 64 else { throw JSONError(offset: start, reason: "a number longer than 64 characters") }
            let text = String(decoding: bytes[start..<at], as: UTF8.self)
            if integral, let exact = Int64(text) { return .int(exact) }
            guard let value = Double(text), value.isFinite else { throw JSONError(offset: start, reason: "a number out of range") }
            return .number(value)
        }

        func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

        mutating func string() throws(JSONError) -> String {
            at += 1   // the opening quote
            var out: [UInt8] = []
            var runStart = at
            while true {
                guard at < bytes.count else { throw fail("a string without its closing quote") }
                let byte = bytes[at]
                if byte == UInt8(ascii: "\"") {
                    out.append(contentsOf: bytes[runStart..<at])
                    at += 1
                    break
                }
                if byte < 0x20 { throw fail("a control character in a string") }
                if byte == UInt8(ascii: "\\") {
                    out.append(contentsOf: bytes[runStart..<at])
                    at += 1
                    try escape(into: &out)
                    runStart = at
                    continue
                }
                at += 1
            }
            guard let text = String(validating: out, as: UTF8.self) else { throw fail("a string that is not UTF-8") }
            return text
        }

        private mutating func escape(into out: inout [UInt8]) throws(JSONError) {
            guard at < bytes.count else { throw fail("unexpected end") }
            let byte = bytes[at]
            at += 1
            switch byte {
            case UInt8(ascii: "\""): out.append(0x22)
            case UInt8(ascii: "\\"): out.append(0x5C)
            case UInt8(ascii: "/"): out.append(0x2F)
            case UInt8(ascii: "b"): out.append(0x08)
            case UInt8(ascii: "f"): out.append(0x0C)
            case UInt8(ascii: "n"): out.append(0x0A)
            case UInt8(ascii: "r"): out.append(0x0D)
            case UInt8(ascii: "t"): out.append(0x09)
            case UInt8(ascii: "u"):
                var scalar = try hex4()
                if (0xD800...0xDBFF).contains(scalar) {
                    // A high surrogate must be followed by a low one.
                    guard at + 1 < bytes.count, bytes[at] == UInt8(ascii: "\\"), bytes[at + 1] == UInt8(ascii: "u") else {
                        throw fail("a lone surrogate")
                    }
                    at += 2
                    let low = try hex4()
                    guard (0xDC00...0xDFFF).contains(low) else { throw fail("a lone surrogate") }
                    scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
                } else if (0xDC00...0xDFFF).contains(scalar) {
                    throw fail("a lone surrogate")
                }
                out.append(contentsOf: Array(String(Character(Unicode.Scalar(scalar)!)).utf8))
            default:
                throw fail("an unknown escape")
            }
        }

        private mutating func hex4() throws(JSONError) -> UInt32 {
            guard at + 4 <= bytes.count else { throw fail("unexpected end") }
            var value: UInt32 = 0
            for _ in 0..<4 {
                let byte = bytes[at]
                let digit: UInt32
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
                case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
                case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
                default: throw fail("a bad \\u escape")
                }
                value = value << 4 | digit
                at += 1
            }
            return value
        }
    }
}

/// Writes JSON: keys sorted, strings escaped (control characters, quote, backslash; U+2028
/// and U+2029 too, for clients that read lines as JavaScript), non-finite numbers as null.
struct JSONWriter {
    var bytes: [UInt8] = []
    private static let hex: [UInt8] = Array("0123456789abcdef".utf8)

    init() { bytes.reserveCapacity(256) }

    mutating func write(_ value: JSONValue) {
        switch value {
        case .null: append("null")
        case .bool(let flag): append(flag ? "true" : "false")
        case .int(let number): append(String(number))
        case .number(let number): writeNumber(number)
        case .string(let text): writeString(text)
        case .array(let values):
            bytes.append(UInt8(ascii: "["))
            for (index, element) in values.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                write(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let values):
            bytes.append(UInt8(ascii: "{"))
            for (index, key) in values.keys.sorted().enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                writeString(key)
                bytes.append(UInt8(ascii: ":"))
                write(values[key]!)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }

    private mutating func append(_ text: String) { bytes.append(contentsOf: text.utf8) }

    private mutating func writeNumber(_ number: Double) {
        guard number.isFinite else { return append("null") }
        // Whole numbers are written without a fraction, as integers are.
        if number == number.rounded(), abs(number) < 9e15 { return append(String(Int64(number))) }
        append(String(number))   // the shortest text that reads back as the same Double
    }

    private mutating func writeString(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        // Byte by byte: what needs escaping is ASCII, or U+2028/U+2029 (E2 80 A8/A9).
        let utf8 = Array(text.utf8)
        var i = 0
        while i < utf8.count {
            let byte = utf8[i]
            switch byte {
            case 0x22: append("\\\"")
            case 0x5C: append("\\\\")
            case 0x0A: append("\\n")
            case 0x0D: append("\\r")
            case 0x09: append("\\t")
            case 0x00..<0x20:
                bytes.append(contentsOf: [0x5C, 0x75, 0x30, 0x30])   // \u00
                bytes.append(Self.hex[Int(byte >> 4)])
                bytes.append(Self.hex[Int(byte & 0xF)])
            case 0xE2 where i + 2 < utf8.count && utf8[i + 1] == 0x80 && (utf8[i + 2] == 0xA8 || utf8[i + 2] == 0xA9):
                append(utf8[i + 2] == 0xA8 ? "\\u2028" : "\\u2029")
                i += 2
            default:
                bytes.append(byte)
            }
            i += 1
        }
        bytes.append(UInt8(ascii: "\""))
    }
}

extension JSONValue {
    /// An object with `fields` added (over its own); a value that is not an object as it is.
    public func adding(_ fields: [String: JSONValue]) -> JSONValue {
        guard case .object(var own) = self else { return self }
        own.merge(fields) { _, new in new }
        return .object(own)
    }
}
