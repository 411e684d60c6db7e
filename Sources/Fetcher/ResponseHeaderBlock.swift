import Foundation

/// One HTTP response header block, as libcurl's header callback delivers it line by line.
///
/// With redirects (and 1xx interim answers) the callback sees several blocks in a row; only the
/// final one describes the body, so a new status line starts a fresh block.
struct ResponseHeaderBlock: Equatable {
    var status: Int = 0
    /// Lower-cased name and value, in order.
    var fields: [(String, String)] = []
    /// The blank line ending the block was seen.
    var complete = false

    static func == (a: Self, b: Self) -> Bool {
        a.status == b.status && a.complete == b.complete && a.fields.elementsEqual(b.fields, by: { $0 == $1 })
    }

    /// The last field called `name` (lower-case).
    func field(_ name: String) -> String? { fields.last { $0.0 == name }?.1 }

    /// A block libcurl will not hand a body for: an interim 1xx, or a redirect it follows.
    var isInterim: Bool {
        if (100..<200).contains(status) { return true }
        return (300..<400).contains(status) && status != 304 && field("location") != nil
    }

    /// Nil when absent or negative (libcurl warns about a negative one and ignores it; so do we).
    var contentLength: Int64? {
        field("content-length").flatMap { Int64($0.trimmingCharacters(in: .whitespaces)) }.flatMap { $0 >= 0 ? $0 : nil }
    }
    var contentRange: ContentRange? { field("content-range").flatMap(ContentRange.init(parsing:)) }
    var etag: String? { field("etag") }
    var lastModified: String? { field("last-modified") }
    var contentType: String? { field("content-type") }
    var advertisesByteRanges: Bool {
        field("accept-ranges")?.lowercased().split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces) == "bytes" } ?? false
    }
    /// `Retry-After` in seconds (the HTTP-date form is ignored: backoff applies instead).
    var retryAfter: TimeInterval? {
        field("retry-after").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }.map { TimeInterval(max(0, $0)) }
    }
}

/// Accumulates header lines into blocks.
struct ResponseHeaderParser {
    private static let lineEnd = CharacterSet(charactersIn: "\r\n")
    /// The block being read, or the last one read.
    private(set) var current = ResponseHeaderBlock()

    /// Feeds one raw header line (with its CRLF). Returns the block when this line completed it.
    mutating func feed(_ raw: String) -> ResponseHeaderBlock? {
        // Not `hasSuffix("\n")`: "\r\n" is one Character in Swift.
        let line = raw.trimmingCharacters(in: Self.lineEnd)
        if line.hasPrefix("HTTP/") {
            current = ResponseHeaderBlock()
            let parts = line.split(separator: " ", maxSplits: 2)
            current.status = parts.count >= 2 ? Int(parts[1]) ?? 0 : 0
            return nil
        }
        if line.isEmpty {
            guard current.status != 0, !current.complete else { return nil }
            current.complete = true
            return current
        }
        if line.first == " " || line.first == "\t", let last = current.fields.popLast() {
            // Obsolete line folding: continues the previous field.
            current.fields.append((last.0, last.1 + " " + line.trimmingCharacters(in: .whitespaces)))
            return nil
        }
        if let colon = line.firstIndex(of: ":") {
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            current.fields.append((name, value))
        }
        return nil
    }
}

/// `Content-Range: bytes first-last/total` (total may be `*`).
struct ContentRange: Equatable {
    var start: Int64
    /// One past the last byte.
    var end: Int64
    var total: Int64?
    var length: Int64 { end - start }

    init(start: Int64, end: Int64, total: Int64?) {
        self.start = start
        self.end = end
        self.total = total
    }

    init?(parsing value: String) {
        let v = value.trimmingCharacters(in: .whitespaces)
        guard v.lowercased().hasPrefix("bytes ") else { return nil }
        let spec = v.dropFirst("bytes ".count).trimmingCharacters(in: .whitespaces)
        guard let slash = spec.firstIndex(of: "/"), let dash = spec[..<slash].firstIndex(of: "-") else { return nil }
        guard let first = Int64(spec[..<dash].trimmingCharacters(in: .whitespaces)),
              let last = Int64(spec[spec.index(after: dash)..<slash].trimmingCharacters(in: .whitespaces)),
              first >= 0, last >= first, last < Int64.max else { return nil }  // end = last + 1 must fit
        let totalText = spec[spec.index(after: slash)...].trimmingCharacters(in: .whitespaces)
        var total: Int64?
        if totalText != "*" {
            guard let t = Int64(totalText), t > last else { return nil }
            total = t
        }
        self.init(start: first, end: last + 1, total: total)
    }
}
