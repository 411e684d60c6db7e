/// One byte range as HTTP writes it (RFC 9110 section 14.1.1): `first-last` (inclusive),
/// `first-` (to the end) or `-n` (the last n bytes). The proxy parses them from `Range` headers,
/// the CLI from `--range`; both resolve them here, by one rule.
public enum ByteRangeSpec: Equatable, Sendable, CustomStringConvertible {
    case closed(first: Int64, last: Int64)
    case from(Int64)
    case suffix(Int64)

    /// The half-open range this selects in a representation of `length` bytes, or nil when it is
    /// not satisfiable: a first position at or past the end, or an empty suffix. A last position
    /// past the end is clipped to it; a suffix longer than the file is the whole file.
    public func resolve(length: Int64) -> Range<Int64>? {
        switch self {
        case let .closed(first, last):
            guard first < length else { return nil }
            return first..<(last >= length - 1 ? length : last + 1)
        case let .from(first):
            guard first < length else { return nil }
            return first..<length
        case let .suffix(n):
            guard n > 0, length > 0 else { return nil }
            return max(0, length - n)..<length
        }
    }

    public var description: String {
        switch self {
        case let .closed(first, last): return "\(first)-\(last)"
        case let .from(first): return "\(first)-"
        case let .suffix(count): return "-\(count)"
        }
    }
}

extension ByteRangeSpec {
    /// Why a range-spec did not parse.
    public enum SyntaxError: Error, Equatable, Sendable {
        /// Not `first-last`, `first-` or `-n`, or a position `position` could not read.
        case malformed
        /// `first-last` with last before first (RFC 9110 makes the spec invalid).
        case endsBeforeItStarts
    }

    /// Which number of a range-spec a position parser is reading: the CLI reads a last position
    /// written as a size differently from a byte offset (see `ByteSize.rangePosition`).
    public enum Position: Sendable {
        case first, last, suffixLength
    }

    /// Parses one range-spec: `first-last` (inclusive), `first-` or `-n`. The one grammar for the
    /// proxy's `Range` header elements and the CLI's `--range`; they differ only in how a number
    /// is written, which `position` reads (nil: not a number).
    public static func parse<S: StringProtocol>(_ text: S, position: (Substring, Position) -> Int64?) throws -> ByteRangeSpec {
        let text = Substring(text)
        guard let dash = text.firstIndex(of: "-") else { throw SyntaxError.malformed }
        let firstText = text[..<dash]
        let lastText = text[text.index(after: dash)...]
        if firstText.isEmpty {
            guard !lastText.isEmpty, let n = position(lastText, .suffixLength) else { throw SyntaxError.malformed }
            return .suffix(n)
        }
        guard let first = position(firstText, .first) else { throw SyntaxError.malformed }
        if lastText.isEmpty { return .from(first) }
        guard let last = position(lastText, .last) else { throw SyntaxError.malformed }
        guard last >= first else { throw SyntaxError.endsBeforeItStarts }
        return .closed(first: first, last: last)
    }
}
