import Foundation

/// A JSON value that can cross threads: what the control protocol reads and writes.
enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    static func int(_ value: Int64) -> JSONValue { .number(Double(value)) }
    static func int(_ value: Int) -> JSONValue { .number(Double(value)) }

    /// Parses one JSON text (JSONSerialization: strict JSON, depth-limited by Foundation).
    static func parse(_ data: Data) throws -> JSONValue {
        try JSONValue(any: JSONSerialization.jsonObject(with: data, options: [.fragmentsAllowed]))
    }

    private init(any: Any) throws {
        switch any {
        case is NSNull: self = .null
        case let string as String: self = .string(string)
        case let number as NSNumber:
            // true/false arrive as booleans that also cast to NSNumber.
            if String(describing: type(of: any)).contains("Bool") { self = .bool(number.boolValue) } else { self = .number(number.doubleValue) }
        case let array as [Any]: self = .array(try array.map(JSONValue.init(any:)))
        case let object as [String: Any]: self = .object(try object.mapValues(JSONValue.init(any:)))
        default: throw CocoaError(.propertyListReadCorrupt)
        }
    }

    /// One line of JSON, keys sorted, no newline inside (strings are escaped by the encoder).
    func line() -> Data {
        var data = (try? JSONSerialization.data(withJSONObject: foundation, options: [.sortedKeys, .fragmentsAllowed])) ?? Data("null".utf8)
        data.append(10)
        return data
    }

    private var foundation: Any {
        switch self {
        case .null: NSNull()
        case .bool(let value): value
        case .number(let value):
            // JSON has no NaN or infinity; whole numbers are written without a fraction.
            if !value.isFinite { NSNull() } else if value == value.rounded(), abs(value) < 9e15 { Int64(value) } else { value }
        case .string(let value): value
        case .array(let values): values.map(\.foundation)
        case .object(let values): values.mapValues(\.foundation)
        }
    }

    subscript(key: String) -> JSONValue? { if case .object(let values) = self { values[key] } else { nil } }

    var string: String? { if case .string(let value) = self { value } else { nil } }
    var number: Double? { if case .number(let value) = self { value } else { nil } }
    var bool: Bool? { if case .bool(let value) = self { value } else { nil } }
    var array: [JSONValue]? { if case .array(let values) = self { values } else { nil } }
    var object: [String: JSONValue]? { if case .object(let values) = self { values } else { nil } }

    /// An integer id as JSON-RPC-like protocols use them (whole and within ±2^53).
    var integer: Int64? {
        guard case .number(let value) = self, value == value.rounded(), abs(value) <= 9_007_199_254_740_992 else { return nil }
        return Int64(value)
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByBooleanLiteral, ExpressibleByNilLiteral,
                     ExpressibleByDictionaryLiteral, ExpressibleByArrayLiteral, ExpressibleByFloatLiteral,
                     ExpressibleByIntegerLiteral {
    init(stringLiteral value: String) { self = .string(value) }
    init(booleanLiteral value: Bool) { self = .bool(value) }
    init(nilLiteral: ()) { self = .null }
    init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(Dictionary(elements, uniquingKeysWith: { $1 })) }
    init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    init(floatLiteral value: Double) { self = .number(value) }
    init(integerLiteral value: Int) { self = .number(Double(value)) }
}
