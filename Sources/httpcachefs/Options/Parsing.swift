import CacheCore
import Foundation
import Settings

/// `--range`: an HTTP-style byte range (`A-B` inclusive, `A-` to the end, `-N` the last N) whose
/// positions may also be sizes (`10M-30M`, `-5M`, `10M-`; see `ByteSize.rangePosition`), parsed
/// by the grammar of the proxy's `Range` headers and resolved by the same rule, with a usage
/// error where HTTP would answer 416.
extension ByteRangeSpec {
    static func parse(option text: String) throws -> ByteRangeSpec {
        var s = Substring(text.trimmingCharacters(in: .whitespaces))
        if s.lowercased().hasPrefix("bytes=") { s = s.dropFirst(6) }
        let spec: ByteRangeSpec
        do {
            spec = try ByteRangeSpec.parse(s) { text, position in
                ByteSize.rangePosition(text, isEnd: position == .last)
            }
        } catch ByteRangeSpec.SyntaxError.endsBeforeItStarts {
            throw UsageError("invalid range '\(text)' for --range: it ends before it starts")
        } catch {
            throw UsageError("invalid range '\(text)' for --range: expected A-B (inclusive byte offsets), A- or -N, where a position may also be a size, e.g. 0-1023, 10M-30M or -5M")
        }
        if case .suffix(0) = spec {
            throw UsageError("invalid range '\(text)' for --range: a suffix range needs at least one byte")
        }
        return spec
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


/// A URL argument (`cat URL`, `preload URL...`, `url URL`) in its one spelling, where it enters:
/// `http://host/Zero Hour (1995).mkv` becomes `http://host/Zero%20Hour%20(1995).mkv`, the URL
/// every later step (the request, the cache key, a proxy URL) uses; one that cannot be made valid
/// is a one-line error naming why. Called from the commands' `validate()`.
enum URLArgument {
    static func normalize(_ url: String) throws -> String {
        do { return try KeyRules.normalized(url) } catch { throw ErrorReporting.report(error) }
    }
}
