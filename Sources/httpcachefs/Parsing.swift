import Foundation
import Settings

/// An HTTP-style byte range from `--range`: `A-B` (inclusive), `A-` (to the end), `-N` (last N).
enum ByteRangeSpec: Equatable, CustomStringConvertible {
    case closed(first: Int64, last: Int64)
    case from(first: Int64)
    case suffix(count: Int64)

    static func parse(_ text: String) throws -> ByteRangeSpec {
        let failure = UsageError("invalid range '\(text)' for --range: expected A-B (inclusive byte offsets), A- or -N, e.g. 0-1023")
        var s = text.trimmingCharacters(in: .whitespaces)
        if s.lowercased().hasPrefix("bytes=") { s = String(s.dropFirst(6)) }
        let parts = s.split(separator: "-", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 2 else { throw failure }
        func number(_ p: String) throws -> Int64 {
            guard !p.isEmpty, p.allSatisfy({ $0.isASCII && $0.isNumber }), let v = Int64(p) else { throw failure }
            return v
        }
        switch (parts[0].isEmpty, parts[1].isEmpty) {
        case (false, false):
            let first = try number(parts[0]), last = try number(parts[1])
            guard first <= last else {
                throw UsageError("invalid range '\(text)' for --range: the first offset is after the last")
            }
            return .closed(first: first, last: last)
        case (false, true): return .from(first: try number(parts[0]))
        case (true, false):
            let count = try number(parts[1])
            guard count > 0 else { throw UsageError("invalid range '\(text)' for --range: a suffix range needs at least one byte") }
            return .suffix(count: count)
        case (true, true): throw failure
        }
    }

    var description: String {
        switch self {
        case let .closed(first, last): return "\(first)-\(last)"
        case let .from(first): return "\(first)-"
        case let .suffix(count): return "-\(count)"
        }
    }

    /// The half-open byte range this selects in a file of `length` bytes, clipped to the end as
    /// HTTP does. With an unknown length, the end is nil ("until the reads come back empty").
    func resolve(length: Int64?, url: String) throws -> (start: Int64, end: Int64?) {
        switch self {
        case let .closed(first, last):
            if let length {
                guard first < length else { throw UsageError("range \(description) starts past the end of \(url) (\(length) bytes)") }
                return (first, min(last, length - 1) + 1)  // `last + 1` traps at Int64.max
            }
            return (first, last == .max ? .max : last + 1)
        case let .from(first):
            if let length {
                guard first < length || (first == 0 && length == 0) else {
                    throw UsageError("range \(description) starts past the end of \(url) (\(length) bytes)")
                }
                return (first, length)
            }
            return (first, nil)
        case let .suffix(count):
            guard let length else {
                throw UsageError("range \(description) needs the file's length, which the origin did not tell for \(url)")
            }
            return (max(0, length - count), length)
        }
    }
}
