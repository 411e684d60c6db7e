import CacheCore

/// What the proxy serves for one URL: the cached entry as is, or a rewritten HLS playlist.
public struct Representation: Sendable, Equatable {
    /// Total length; nil while unknown (a chunked origin that has not finished yet).
    public var length: Int64?
    public var contentType: String
    public var etag: String?
    public var lastModified: String?

    public init(length: Int64?, contentType: String, etag: String? = nil, lastModified: String? = nil) {
        self.length = length
        self.contentType = contentType
        self.etag = etag
        self.lastModified = lastModified
    }
}

extension Representation {
    /// The same, without the origin's values that cannot be sent as header fields (a control
    /// character in an ETag, a Last-Modified or a Content-Type): such a validator is left out (a
    /// client's If-Range then gets the whole body, which is always right), such a type becomes
    /// `application/octet-stream`. Sent as they are, NIO's encoder would refuse the head and
    /// close the connection, so every request for that file would get no answer.
    var sendable: Representation {
        var rep = self
        if !rep.contentType.isSendableFieldValue { rep.contentType = "application/octet-stream" }
        if let etag = rep.etag, !etag.isSendableFieldValue { rep.etag = nil }
        if let lm = rep.lastModified, !lm.isSendableFieldValue { rep.lastModified = nil }
        return rep
    }
}

/// The request header fields that decide the status and the body.
public struct RequestConditions: Sendable, Equatable {
    public var range: String?
    public var ifRange: String?
    public var ifNoneMatch: String?
    public var ifModifiedSince: String?
    /// Every `If-Match` line, joined as one list.
    public var ifMatch: String?
    public var ifUnmodifiedSince: String?

    public init(range: String? = nil, ifRange: String? = nil, ifNoneMatch: String? = nil, ifModifiedSince: String? = nil,
                ifMatch: String? = nil, ifUnmodifiedSince: String? = nil) {
        self.range = range
        self.ifRange = ifRange
        self.ifNoneMatch = ifNoneMatch
        self.ifModifiedSince = ifModifiedSince
        self.ifMatch = ifMatch
        self.ifUnmodifiedSince = ifUnmodifiedSince
    }
}

/// One piece of a response body: literal bytes (multipart framing, error text) or a byte range
/// of the representation (read from the cache when it is sent).
public enum BodyPart: Sendable, Equatable {
    case literal([UInt8])
    case bytes(Range<Int64>)

    var count: Int64 {
        switch self {
        case let .literal(b): return Int64(b.count)
        case let .bytes(r): return r.upperBound - r.lowerBound
        }
    }
}

public enum ResponseBody: Sendable, Equatable {
    /// The parts, in order; their sizes add up to Content-Length.
    case parts([BodyPart])
    /// Length unknown: stream from offset 0 until a read returns nothing (chunked encoding).
    case untilEnd
}

/// Status, header fields and body layout for one GET or HEAD. HEAD gets the same plan and the
/// server simply sends no body (RFC 9110 9.3.2: the same header fields as GET).
public struct ResponsePlan: Sendable, Equatable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: ResponseBody

    public static func == (a: ResponsePlan, b: ResponsePlan) -> Bool {
        a.status == b.status && a.body == b.body
            && a.headers.map { [$0.0, $0.1] } == b.headers.map { [$0.0, $0.1] }
    }

    /// The first value of a header field (case-insensitive name).
    public func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    /// Content-Length, when the plan has one.
    public var contentLength: Int64? {
        guard case let .parts(parts) = body else { return nil }
        return parts.reduce(0) { $0 + $1.count }
    }
}

/// Decides status, headers and body for a request against a representation (RFC 9110 13 and 14).
///
/// Multiple ranges: answered with `multipart/byteranges` when there are at most
/// `maxMultipartRanges` of them and none overlap; otherwise the whole body with 200, which
/// RFC 9110 14.2 allows (a server MAY ignore the Range header). Players practically never ask
/// for several ranges; this keeps a hostile `bytes=0-,0-,0-...` from multiplying the work.
public enum ResponsePlanner {
    public static let maxMultipartRanges = 16

    public static func plan(_ rep: Representation, _ request: RequestConditions,
                            boundary: String = "httpcachefs-boundary") -> ResponsePlan {
        let rep = rep.sendable
        var headers: [(String, String)] = [("Accept-Ranges", "bytes")]
        if let etag = rep.etag { headers.append(("ETag", etag)) }
        if let lm = rep.lastModified { headers.append(("Last-Modified", lm)) }

        // RFC 9110 §13.2.2's order: If-Match (or, without it, If-Unmodified-Since), then
        // If-None-Match (or, without it, If-Modified-Since), then If-Range below.
        if let failed = failedPrecondition(rep, request) {
            let text = Array("precondition failed: \(failed)\n".utf8)
            return ResponsePlan(status: 412,
                                headers: [("Content-Type", "text/plain; charset=utf-8")] + headers
                                    + [("Content-Length", String(text.count))],
                                body: .parts([.literal(text)]))
        }
        if notModified(rep, request) {
            return ResponsePlan(status: 304, headers: headers, body: .parts([]))
        }

        guard let length = rep.length else {
            // Unknown length: ranges cannot be answered honestly; stream the whole thing.
            headers.insert(("Content-Type", rep.contentType), at: 0)
            return ResponsePlan(status: 200, headers: headers, body: .untilEnd)
        }

        guard FileLength.isRepresentable(length) else {
            // The fetcher refuses such origin claims; a cache index written before it did may
            // still hold one. That file fails alone, and no range arithmetic meets the number.
            let text = Array("bad response from the origin: \(FileLength.refusal("a length of \(length) bytes"))\n".utf8)
            return ResponsePlan(status: 502,
                                headers: [("Content-Type", "text/plain; charset=utf-8"),
                                          ("Content-Length", String(text.count))],
                                body: .parts([.literal(text)]))
        }

        let specs = request.range.flatMap(ByteRanges.parse)
        let rangeApplies = specs != nil && ifRangeMatches(request.ifRange, rep)
        guard rangeApplies, let specs else {
            return full(rep, length: length, headers: headers)
        }

        let ranges = ByteRanges.resolve(specs, length: length)
        switch ranges.count {
        case 0:
            let text = Array("range not satisfiable: the file has \(length) bytes\n".utf8)
            return ResponsePlan(status: 416,
                                headers: [("Content-Type", "text/plain; charset=utf-8"),
                                          ("Content-Range", "bytes */\(length)")] + headers
                                    + [("Content-Length", String(text.count))],
                                body: .parts([.literal(text)]))
        case 1:
            let r = ranges[0]
            return ResponsePlan(status: 206,
                                headers: [("Content-Type", rep.contentType),
                                          ("Content-Range", contentRange(r, length))] + headers
                                    + [("Content-Length", String(r.count))],
                                body: .parts([.bytes(r)]))
        default:
            guard ranges.count <= maxMultipartRanges, !overlapping(ranges) else {
                return full(rep, length: length, headers: headers)
            }
            var parts: [BodyPart] = []
            for (i, r) in ranges.enumerated() {
                let head = (i == 0 ? "" : "\r\n") + "--\(boundary)\r\nContent-Type: \(rep.contentType)\r\n"
                    + "Content-Range: \(contentRange(r, length))\r\n\r\n"
                parts.append(.literal(Array(head.utf8)))
                parts.append(.bytes(r))
            }
            parts.append(.literal(Array("\r\n--\(boundary)--\r\n".utf8)))
            let total = parts.reduce(Int64(0)) { $0 + $1.count }
            return ResponsePlan(status: 206,
                                headers: [("Content-Type", "multipart/byteranges; boundary=\(boundary)")] + headers
                                    + [("Content-Length", String(total))],
                                body: .parts(parts))
        }
    }

    private static func full(_ rep: Representation, length: Int64, headers: [(String, String)]) -> ResponsePlan {
        ResponsePlan(status: 200,
                     headers: [("Content-Type", rep.contentType)] + headers + [("Content-Length", String(length))],
                     body: .parts(length > 0 ? [.bytes(0..<length)] : []))
    }

    static func contentRange(_ r: Range<Int64>, _ length: Int64) -> String {
        "bytes \(r.lowerBound)-\(r.upperBound - 1)/\(length)"
    }

    private static func overlapping(_ ranges: [Range<Int64>]) -> Bool {
        let sorted = ranges.sorted { $0.lowerBound < $1.lowerBound }
        return zip(sorted, sorted.dropFirst()).contains { $0.upperBound > $1.lowerBound }
    }

    /// RFC 9110 13.1.5: the Range applies only if the validator matches the current
    /// representation: a strong ETag compared strongly, or an HTTP-date equal to Last-Modified.
    /// Anything else (a weak tag, a different date, no validator) means "send it all".
    static func ifRangeMatches(_ ifRange: String?, _ rep: Representation) -> Bool {
        guard let raw = ifRange?.trimmingOWS(), !raw.isEmpty else { return true }
        let value = String(raw)
        if value.hasPrefix("\"") || value.hasPrefix("W/") {
            guard !value.hasPrefix("W/"), let etag = rep.etag, !etag.hasPrefix("W/") else { return false }
            return etag == value
        }
        guard let lm = rep.lastModified else { return false }
        if lm == value { return true }
        guard let a = HTTPDate.parse(lm), let b = HTTPDate.parse(value) else { return false }
        return a == b
    }

    /// RFC 9110 §13.1.1 / §13.1.4: why the request's If-Match or If-Unmodified-Since fails
    /// (answered 412), nil when it holds or is absent. If-Match: `*` matches (the proxy only
    /// plans for a representation it has); otherwise a listed tag must equal the current ETag by
    /// strong comparison (a weak tag on either side never matches). If-Unmodified-Since counts
    /// only without If-Match, and is ignored when it is not an HTTP-date or the representation
    /// has no Last-Modified.
    static func failedPrecondition(_ rep: Representation, _ request: RequestConditions) -> String? {
        if let ifMatch = request.ifMatch {
            let list = EntityTagList(ifMatch)
            if list.any { return nil }
            guard let etag = rep.etag, !etag.hasPrefix("W/"), list.tags.contains(etag) else {
                return rep.etag == nil ? "If-Match, and the file has no ETag" : "If-Match does not name the file's ETag \(rep.etag!)"
            }
            return nil
        }
        if let ius = request.ifUnmodifiedSince, let since = HTTPDate.parse(ius),
           let lm = rep.lastModified, let modified = HTTPDate.parse(lm), modified > since {
            return "the file was modified (\(lm)) after If-Unmodified-Since"
        }
        return nil
    }

    /// RFC 9110 13.1.2 / 13.1.3 for GET and HEAD: If-None-Match (weak comparison) wins over
    /// If-Modified-Since, which is only looked at without it.
    static func notModified(_ rep: Representation, _ request: RequestConditions) -> Bool {
        if let inm = request.ifNoneMatch {
            let list = EntityTagList(inm)
            if list.any { return true }
            guard let etag = rep.etag else { return false }
            return list.tags.contains { weakTag($0) == weakTag(etag) }
        }
        if let ims = request.ifModifiedSince, let lm = rep.lastModified,
           let since = HTTPDate.parse(ims), let modified = HTTPDate.parse(lm) {
            return modified <= since
        }
        return false
    }

    private static func weakTag(_ tag: String) -> String { tag.hasPrefix("W/") ? String(tag.dropFirst(2)) : tag }
}

/// An `If-Match` / `If-None-Match` value (RFC 9110 §8.8.3): `*`, or entity-tags separated by
/// commas. Read tag by tag, not split at commas: a tag may contain one (`"a,b"`). Text that is not
/// a tag is skipped up to the next comma; it matches nothing.
struct EntityTagList: Equatable {
    var any = false
    /// The tags as written, `W/` and quotes included.
    var tags: [String] = []

    init(_ value: String) {
        let bytes = Array(value.utf8)
        var i = 0
        func skipSeparators() {
            while i < bytes.count, bytes[i] == UInt8(ascii: " ") || bytes[i] == UInt8(ascii: "\t") || bytes[i] == UInt8(ascii: ",") { i += 1 }
        }
        skipSeparators()
        while i < bytes.count {
            let start = i
            if bytes[i] == UInt8(ascii: "*") {
                any = true
                i += 1
            } else {
                if bytes[i...].starts(with: Array("W/".utf8)) { i += 2 }
                if i < bytes.count, bytes[i] == UInt8(ascii: "\""), let close = bytes[(i + 1)...].firstIndex(of: UInt8(ascii: "\"")) {
                    tags.append(String(decoding: bytes[start...close], as: UTF8.self))
                    i = close + 1
                } else {
                    while i < bytes.count, bytes[i] != UInt8(ascii: ",") { i += 1 }
                }
            }
            skipSeparators()
        }
    }
}
