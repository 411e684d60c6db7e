import CacheCore

/// RFC 9110 section 14 `Range: bytes=...` parsing and resolution, kept pure so every case players
/// depend on is pinned by a table test.
///
/// The cases other servers get wrong, and that players rely on:
/// - `bytes=-500` is a *suffix* range: the LAST 500 bytes (or the whole file if it is shorter).
/// - `bytes=-0` is valid syntax but not satisfiable.
/// - A first position at or past the end is not satisfiable: 416 with `Content-Range: bytes */LEN`,
///   but only when *no* range in the set is satisfiable.
/// - A header that does not parse (unknown unit, `5-2`, garbage) is ignored: the answer is 200.
/// - A last position past the end is clipped to the end.
public enum ByteRanges {
    /// Parses a `Range` header value. Returns nil when the header must be ignored (it is not a
    /// syntactically valid `bytes` range set), which means "serve the whole representation".
    ///
    /// Numbers too large for Int64 saturate: they are still syntactically valid ranges.
    public static func parse(_ header: String) -> [ByteRangeSpec]? {
        guard let eq = header.firstIndex(of: "=") else { return nil }
        let unit = header[..<eq].trimmingOWS()
        guard unit.lowercased() == "bytes" else { return nil }
        var specs: [ByteRangeSpec] = []
        for element in header[header.index(after: eq)...].split(separator: ",", omittingEmptySubsequences: false) {
            let item = element.trimmingOWS()
            // RFC 9110 5.6.1.2: recipients accept and ignore empty list elements.
            if item.isEmpty { continue }
            // RFC 9110 14.1.1: last < first makes the range-spec invalid, and an invalid range
            // set means the whole header is ignored.
            guard let spec = try? ByteRangeSpec.parse(item, position: { text, _ in parseDigits(text) }) else { return nil }
            specs.append(spec)
        }
        return specs.isEmpty ? nil : specs
    }

    /// Resolves parsed specs against a representation of `length` bytes: the satisfiable ranges
    /// as half-open byte ranges, in the order they were asked for. Empty means 416.
    public static func resolve(_ specs: [ByteRangeSpec], length: Int64) -> [Range<Int64>] {
        specs.compactMap { $0.resolve(length: length) }
    }

    /// ASCII digits only (no sign, no spaces), saturating at Int64.max.
    static func parseDigits(_ s: Substring) -> Int64? {
        guard !s.isEmpty else { return nil }
        var value: Int64 = 0
        for u in s.utf8 {
            guard u >= 0x30 && u <= 0x39 else { return nil }
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(Int64(u - 0x30))
            value = (o1 || o2) ? Int64.max : a
        }
        return value
    }
}
