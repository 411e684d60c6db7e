import CacheCore
import Foundation
import Settings

/// `--range`: an HTTP-style byte range (`A-B` inclusive, `A-` to the end, `-N` the last N), resolved
/// by the same rule as the proxy's `Range` headers, with a usage error where HTTP would answer 416.
extension ByteRangeSpec {
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
        case (false, true): return .from(try number(parts[0]))
        case (true, false):
            let count = try number(parts[1])
            guard count > 0 else { throw UsageError("invalid range '\(text)' for --range: a suffix range needs at least one byte") }
            return .suffix(count)
        case (true, true): throw failure
        }
    }

    /// The half-open byte range this selects in a file of `length` bytes. With an unknown
    /// length, the end is nil ("until the reads come back empty").
    func resolve(length: Int64?, url: String) throws -> (start: Int64, end: Int64?) {
        guard let length else {
            switch self {
            case let .closed(first, last): return (first, last == .max ? .max : last + 1)
            case let .from(first): return (first, nil)
            case .suffix:
                throw UsageError("range \(description) needs the file's length, which the origin did not tell for \(url)")
            }
        }
        if length == 0, self == .from(0) { return (0, 0) }   // all of an empty file
        guard let r = resolve(length: length) else {
            throw UsageError("range \(description) starts past the end of \(url) (\(length) bytes)")
        }
        return (r.lowerBound, r.upperBound)
    }
}

