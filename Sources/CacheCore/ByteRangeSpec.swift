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
