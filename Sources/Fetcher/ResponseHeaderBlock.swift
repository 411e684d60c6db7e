import CacheCore
import Foundation

/// One HTTP response header block, as libcurl's header callback delivers it line by line.
///
/// With 1xx interim answers the callback sees several blocks in a row; only the final one
/// describes the body, so a new status line starts a fresh block.
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

    /// An interim 1xx answer: the final one follows. (A redirect is a final answer: the fetcher
    /// follows it itself, `TransferState`.)
    var isInterim: Bool { (100..<200).contains(status) }

    /// Only lengths this cache can represent; a larger claim is `lengthRefusal`.
    var contentLength: Int64? {
        contentLengths.first.flatMap(Self.digits).flatMap { FileLength.isRepresentable($0) ? $0 : nil }
    }

    /// Every Content-Length value: each field, and each member of a comma-separated list (RFC
    /// 9110 8.6 lets a recipient take "42, 42" as 42 when all members agree).
    private var contentLengths: [Substring] {
        fields.filter { $0.0 == "content-length" }
            .flatMap { $0.1.split(separator: ",", omittingEmptySubsequences: false) }
            .map { $0.trimmingOWS() }
    }
    var contentRange: ContentRange? { field("content-range").flatMap(ContentRange.init(parsing:)) }
    var etag: String? { field("etag") }
    var lastModified: String? { field("last-modified") }
    var contentType: String? { field("content-type") }
    /// A `DAV:` compliance header ("1", "1,2", ...): the origin speaks WebDAV.
    var webDAV: Bool { !(field("dav").map { $0.trimmingOWS().isEmpty } ?? true) }
    var advertisesByteRanges: Bool {
        field("accept-ranges")?.lowercased().split(separator: ",").contains { $0.trimmingCharacters(in: .whitespaces) == "bytes" } ?? false
    }
    /// Why this answer must be refused for the lengths it claims, or nil. An origin that says
    /// its file has more than `FileLength.limit` bytes (`Content-Length` or `Content-Range`
    /// numbers past 2^62, up to Int64.max or beyond) is wrong or hostile: that file fails with
    /// this message, and no such number ever reaches the cache's arithmetic.
    ///
    /// A Content-Length that is not a number ("12abc"), or values that disagree (two fields, or a
    /// list), are refused too (RFC 9112 6.3: an unrecoverable error): curl frames the body by one
    /// reading of them and the cache would believe another.
    var lengthRefusal: String? {
        let lengths = contentLengths
        if !lengths.isEmpty, lengths.contains(where: { Self.digits($0) == nil }) || Set(lengths.map { Self.digits($0) }).count > 1 {
            let raw = fields.filter { $0.0 == "content-length" }.map(\.1).joined(separator: " / ")
            return "a malformed or conflicting Content-Length (\(raw))"
        }
        if let raw = field("content-length"), let n = contentLength ?? Self.digits(raw), !FileLength.isRepresentable(n) {
            return FileLength.refusal("Content-Length: \(raw)")
        }
        if let raw = field("content-range"), let n = ContentRange.largestNumber(in: raw), !FileLength.isRepresentable(n) {
            return FileLength.refusal("Content-Range: \(raw)")
        }
        return nil
    }

    /// A decimal number written in a header, saturating at Int64.max; nil if it is not one.
    static func digits(_ text: Substring) -> Int64? {
        guard !text.isEmpty, text.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }) else { return nil }
        return Int64(text) ?? .max
    }

    static func digits(_ text: String) -> Int64? { digits(text.trimmingOWS()) }

    /// `Retry-After` in seconds (the HTTP-date form is ignored: backoff applies instead).
    var retryAfter: TimeInterval? {
        field("retry-after").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }.map { TimeInterval(max(0, $0)) }
    }
}

/// Accumulates header lines into blocks.
///
/// Works on the line's bytes as curl hands them over (on the curl loop, for every response):
/// trimming with Foundation's `CharacterSet` cost more there than taking the body's bytes did.
/// Whitespace is what HTTP calls optional whitespace, space and tab (RFC 9110 section 5.6.3).
struct ResponseHeaderParser {
    /// The block being read, or the last one read.
    private(set) var current = ResponseHeaderBlock()

    /// Feeds one raw header line (with its CRLF). Returns the block when this line completed it.
    mutating func feed(_ raw: String) -> ResponseHeaderBlock? {
        var raw = raw
        return raw.withUTF8 { feed(UnsafeRawBufferPointer($0)) }
    }

    /// The same, from the bytes curl passes to its header callback (valid during the call only).
    mutating func feed(_ raw: UnsafeRawBufferPointer) -> ResponseHeaderBlock? {
        let line = Self.trimmed(raw[...], lineEnds: true)
        if line.starts(with: "HTTP/".utf8) {
            current = ResponseHeaderBlock()
            // The status is the second word: "HTTP/1.1 206 Partial Content", "HTTP/2 200".
            let words = line.split(separator: 32, maxSplits: 2, omittingEmptySubsequences: true)
            current.status = words.count >= 2 ? Int(Self.string(words[1])) ?? 0 : 0
            return nil
        }
        if line.isEmpty {
            guard current.status != 0, !current.complete else { return nil }
            current.complete = true
            return current
        }
        if line.first == 32 || line.first == 9, let last = current.fields.popLast() {
            // Obsolete line folding: continues the previous field.
            current.fields.append((last.0, last.1 + " " + Self.string(Self.trimmed(line))))
            return nil
        }
        if let colon = line.firstIndex(of: 58) {
            let name = Self.trimmed(line[..<colon])
            let value = Self.trimmed(line[(colon + 1)...])
            // Field names are ASCII tokens: lowercased byte by byte.
            let lower = String(unsafeUninitializedCapacity: name.count) { out in
                for (i, b) in name.enumerated() { out[i] = b >= 65 && b <= 90 ? b + 32 : b }
                return name.count
            }
            current.fields.append((lower, Self.string(value)))
        }
        return nil
    }

    /// `bytes` without leading and trailing spaces and tabs, or CRs and LFs with `lineEnds`
    /// (a folded line keeps the blank that says it is one).
    private static func trimmed(_ bytes: Slice<UnsafeRawBufferPointer>, lineEnds: Bool = false) -> Slice<UnsafeRawBufferPointer> {
        func blank(_ b: UInt8) -> Bool { lineEnds ? b == 13 || b == 10 : b == 32 || b == 9 }
        var lo = bytes.startIndex, hi = bytes.endIndex
        while lo < hi, blank(bytes[lo]) { lo += 1 }
        while hi > lo, blank(bytes[hi - 1]) { hi -= 1 }
        return bytes[lo..<hi]
    }

    /// The bytes as text (invalid UTF-8 repaired, as `String(decoding:)` does).
    private static func string(_ bytes: Slice<UnsafeRawBufferPointer>) -> String {
        String(decoding: UnsafeRawBufferPointer(rebasing: bytes), as: UTF8.self)
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
        let v = value.trimmingOWS()
        guard v.prefix(6).lowercased() == "bytes " else { return nil }
        let spec = v.dropFirst(6).trimmingOWS()
        guard let slash = spec.firstIndex(of: "/"), let dash = spec[..<slash].firstIndex(of: "-") else { return nil }
        // Every number stays within FileLength.limit, so `last + 1` cannot overflow.
        guard let first = Int64(spec[..<dash].trimmingOWS()),
              let last = Int64(spec[spec.index(after: dash)..<slash].trimmingOWS()),
              first >= 0, last >= first, last < FileLength.limit else { return nil }
        let totalText = spec[spec.index(after: slash)...].trimmingOWS()
        var total: Int64?
        if totalText != "*" {
            guard let t = Int64(totalText), t > last, FileLength.isRepresentable(t) else { return nil }
            total = t
        }
        self.init(start: first, end: last + 1, total: total)
    }

    /// The largest number in a `Content-Range` value (saturating), whether or not it parses.
    static func largestNumber(in value: String) -> Int64? {
        var largest: Int64?
        var number: Int64?
        for byte in value.utf8 {
            guard byte >= 48 && byte <= 57 else {
                if let n = number { largest = max(largest ?? n, n) }
                number = nil
                continue
            }
            let (times, o1) = (number ?? 0).multipliedReportingOverflow(by: 10)
            let (plus, o2) = times.addingReportingOverflow(Int64(byte - 48))
            number = o1 || o2 ? .max : plus
        }
        if let n = number { largest = max(largest ?? n, n) }
        return largest
    }
}
