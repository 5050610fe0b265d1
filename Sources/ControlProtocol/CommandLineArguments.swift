import BoundsCore
/// A command line that cannot be used: the message says which word and why.
public struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    public let message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// The one command-line parser of `adplayerd` (the daemon and its tools) and `adplayerctl`:
/// `--name value`, `--name=value`, switches (`--json`), `-h` for `--help`, `--` before words
/// that start with a dash; every other word is positional (`seek -5` is a word, not an option).
/// Unknown options are refused by name.
public struct CommandLineArguments: Sendable {
    public enum Kind: Sendable {
        /// Takes a value: the next word, or after `=`.
        case value
        /// Takes none on the command line (`--mpris`).
        case flag
    }

    /// One option as given, in order.
    public struct Option: Sendable, Equatable {
        public let name: String
        /// A flag's value is "yes".
        public let value: String
        /// How it was written (`--library`), for errors.
        public var source: String { "--\(name)" }
    }

    public private(set) var options: [Option] = []
    public private(set) var positional: [String] = []

    /// Parses `words` by `spec` (option names without dashes).
    public init(_ words: [String], spec: [String: Kind]) throws(UsageError) {
        var rest = words[...]
        while let word = rest.popFirst() {
            if word == "--" {
                positional += rest
                break
            }
            guard word.hasPrefix("--") || word == "-h" else {
                positional.append(word)
                continue
            }
            var name = word == "-h" ? "help" : String(word.dropFirst(2))
            var value: String?
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            }
            guard let kind = spec[name] else { throw UsageError("unknown option --\(name.prefix(64))") }
            switch kind {
            case .flag:
                guard value == nil else { throw UsageError("--\(name) takes no value") }
                options.append(Option(name: name, value: "yes"))
            case .value:
                if value == nil {
                    guard let next = rest.popFirst() else { throw UsageError("--\(name) needs a value") }
                    value = next
                }
                options.append(Option(name: name, value: value!))
            }
        }
    }

    /// The last value given for `name`.
    public func value(_ name: String) -> String? { options.last { $0.name == name }?.value }

    /// Every value given for `name`, in order.
    public func values(_ name: String) -> [String] { options.filter { $0.name == name }.map(\.value) }

    public func flag(_ name: String) -> Bool { options.contains { $0.name == name } }

    /// The value of `name` as a whole number in `range`, if given.
    public func integer(_ name: String, in range: ClosedRange<Int>) throws(UsageError) -> Int? {
        guard let text = value(name) else { return nil }
        guard let number = Int(text), range.contains(number) else {
            throw UsageError("--\(name) needs a whole number from \(range.lowerBound) to \(range.upperBound)")
        }
        return number
    }
}
