import Foundation
import CacheCore

/// What the origin holds at a path.
struct OriginResource {
    enum Content {
        /// A file with validators, served with Range / If-Range semantics.
        case file(FileBody, etag: String?, lastModified: String, contentType: String)
        /// A canned answer: served as is, Range is ignored.
        case fixed(status: Int, headers: [(String, String)], body: [UInt8])
    }
    var content: Content
}

/// Where body bytes come from: a stored array, the deterministic generator, or a file opened once.
enum FileBody {
    case bytes([UInt8])
    case generated(seed: UInt64, length: Int64)
    case disk(OpenFile)

    var length: Int64 {
        switch self {
        case let .bytes(b): return Int64(b.count)
        case let .generated(_, length): return length
        case let .disk(f): return f.length
        }
    }
}

/// A file served from disk, opened when it was set (no path is looked up per request), read
/// with `pread` as the body streams. Its length is what it had then: a file that shrank since
/// ends the response early (the connection closes), never pads it.
public final class OpenFile: @unchecked Sendable {
    let fd: Int32
    let length: Int64

    init(fd: Int32, length: Int64) {
        self.fd = fd
        self.length = length
    }

    deinit { close(fd) }

    /// Reads `buffer.count` bytes at `offset`; false if the file no longer has them.
    func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int64) -> Bool {
        (try? readFully(fd, into: buffer, at: offset)) != nil
    }
}

/// The bytes `[start, end)` of a body, produced chunk by chunk while streaming.
struct BodySlice {
    var body: FileBody
    var start: Int64
    var end: Int64
    var count: Int64 { end - start }
}

/// Everything the channel handler needs to write one response. Built by `ResponsePlanner`
/// (pure: no I/O, no locks) so the HTTP semantics can be read in one place.
struct ResponsePlan {
    var status: Int
    var headers: [(String, String)]
    /// nil: no body (HEAD, 304, 416...).
    var body: BodySlice?
    /// Close the connection after this many body bytes.
    var dropAfterBytes: Int64?
    var bytesPerSecond: Int?
    /// Sent after the body, beyond its length (`Faults.garbageAfterBody`).
    var garbageAfterBody: [UInt8]?
    /// The status came from `Faults.status` (consumes one of `statusCount`).
    var statusFromFault = false
}

/// RFC 9110 semantics of the test origin: ranges (incl. suffix), If-Range, 416, conditional GET.
enum ResponsePlanner {
    static let defaultLastModified = "Mon, 01 Jan 2024 00:00:00 GMT"

    /// The answer to a request, given the resource at its path and the faults in force.
    /// - Parameters:
    ///   - origin: "http://host:port", to make relative redirect targets absolute.
    ///   - statusFaultActive: `faults.status` still has uses left.
    ///   - dropActive: `faults.dropAfterBytes` still has uses left.
    static func plan(method: String, headers: [(String, String)], resource: OriginResource?,
                     faults: Faults, origin: String, statusFaultActive: Bool, dropActive: Bool) -> ResponsePlan {
        var plan = basePlan(method: method, headers: headers, resource: resource, faults: faults,
                            origin: origin, statusFaultActive: statusFaultActive)
        if method == "HEAD" { plan.body = nil }
        if let body = plan.body, let drop = faults.dropAfterBytes, dropActive, body.count > drop {
            plan.dropAfterBytes = max(0, drop)
        }
        if plan.body != nil, faults.noContentLength {
            plan.headers.removeAll { $0.0.lowercased() == "content-length" }
            plan.headers.append(("Transfer-Encoding", "chunked"))
        }
        plan.bytesPerSecond = faults.bytesPerSecond.map { max(1, $0) }
        plan.garbageAfterBody = faults.garbageAfterBody
        return plan
    }

    private static func basePlan(method: String, headers: [(String, String)], resource: OriginResource?,
                                 faults: Faults, origin: String, statusFaultActive: Bool) -> ResponsePlan {
        if let target = faults.redirectTo {
            let location = target.hasPrefix("/") ? origin + target : target
            return textResponse(302, "redirect to \(location)\n", extra: [("Location", location)])
        }
        if let status = faults.status, statusFaultActive {
            var extra: [(String, String)] = []
            if let retryAfter = faults.retryAfter { extra.append(("Retry-After", String(retryAfter))) }
            var plan = textResponse(status, "fault: status \(status)\n", extra: extra)
            plan.statusFromFault = true
            return plan
        }
        guard method == "GET" || method == "HEAD" else {
            return textResponse(405, "method not allowed\n", extra: [("Allow", "GET, HEAD")])
        }
        guard let resource else { return textResponse(404, "not found\n") }
        switch resource.content {
        case let .fixed(status, fixedHeaders, body):
            var h = fixedHeaders
            if !h.contains(where: { $0.0.lowercased() == "content-length" || $0.0.lowercased() == "transfer-encoding" }) {
                h.append(("Content-Length", String(body.count)))
            }
            let slice = body.isEmpty ? nil : BodySlice(body: .bytes(body), start: 0, end: Int64(body.count))
            return ResponsePlan(status: status, headers: h, body: slice)
        case let .file(body, etag, lastModified, contentType):
            return fileResponse(headers: headers, body: body, etag: etag, lastModified: lastModified,
                                contentType: contentType, faults: faults)
        }
    }

    private static func fileResponse(headers: [(String, String)], body: FileBody, etag: String?,
                                     lastModified: String, contentType: String, faults: Faults) -> ResponsePlan {
        let length = body.length
        var h: [(String, String)] = [("Content-Type", contentType)]
        if !faults.noLastModified { h.append(("Last-Modified", lastModified)) }
        if let etag { h.append(("ETag", etag)) }
        if !faults.noAcceptRanges { h.append(("Accept-Ranges", "bytes")) }

        // If-Match (RFC 9110 §13.1.1; S3's one version per read): another version => 412.
        if let im = header("if-match", in: headers), im != "*",
           !im.split(separator: ",").contains(where: { etag != nil && !etag!.hasPrefix("W/") && $0.trimmingCharacters(in: .whitespaces) == etag! }) {
            return ResponsePlan(status: 412, headers: h + [("Content-Length", "0")], body: nil)
        }
        // Conditional GET (revalidation): exact validator match => 304.
        if let inm = header("if-none-match", in: headers), let etag,
           inm == "*" || inm.split(separator: ",").contains(where: { weakCompare(String($0), etag) }) {
            return ResponsePlan(status: 304, headers: h, body: nil)
        }
        if header("if-none-match", in: headers) == nil,
           let ims = header("if-modified-since", in: headers), ims == lastModified {
            return ResponsePlan(status: 304, headers: h, body: nil)
        }

        var outcome = RangeOutcome.full
        if !faults.ignoreRange, let range = header("range", in: headers) {
            let honoured = header("if-range", in: headers).map {
                ifRangeMatches($0, etag: etag, lastModified: lastModified)
            } ?? true
            if honoured { outcome = resolveRange(range, length: length) }
        }
        switch outcome {
        case .full:
            h.append(("Content-Length", String(length)))
            return ResponsePlan(status: 200, headers: h,
                                body: length > 0 ? BodySlice(body: body, start: 0, end: length) : nil)
        case let .partial(start, end):
            h.append(("Content-Range", "bytes \(start)-\(end - 1)/\(length)"))
            h.append(("Content-Length", String(end - start)))
            return ResponsePlan(status: 206, headers: h, body: BodySlice(body: body, start: start, end: end))
        case .unsatisfiable:
            h.removeAll { $0.0 == "Content-Type" }
            h.append(("Content-Range", "bytes */\(length)"))
            h.append(("Content-Length", "0"))
            return ResponsePlan(status: 416, headers: h, body: nil)
        }
    }

    private static func textResponse(_ status: Int, _ text: String, extra: [(String, String)] = []) -> ResponsePlan {
        let body = Array(text.utf8)
        return ResponsePlan(status: status,
                            headers: [("Content-Type", "text/plain"), ("Content-Length", String(body.count))] + extra,
                            body: BodySlice(body: .bytes(body), start: 0, end: Int64(body.count)))
    }

    enum RangeOutcome: Equatable {
        case full
        case partial(start: Int64, end: Int64)
        case unsatisfiable
    }

    /// Resolves one `Range` header against a resource length (RFC 9110 section 14.1.2).
    /// Unparseable headers and multi-range requests are ignored (full 200), as the RFC allows.
    static func resolveRange(_ header: String, length: Int64) -> RangeOutcome {
        let trimmed = header.trimmingCharacters(in: .whitespaces)
        guard trimmed.lowercased().hasPrefix("bytes=") else { return .full }
        let spec = trimmed.dropFirst("bytes=".count).trimmingCharacters(in: .whitespaces)
        guard !spec.contains(","), let dash = spec.firstIndex(of: "-") else { return .full }
        let first = spec[..<dash].trimmingCharacters(in: .whitespaces)
        let last = spec[spec.index(after: dash)...].trimmingCharacters(in: .whitespaces)
        if first.isEmpty {
            // Suffix range: the last N bytes.
            guard let n = Int64(last), n >= 0 else { return .full }
            if n == 0 || length == 0 { return .unsatisfiable }
            return .partial(start: max(0, length - n), end: length)
        }
        guard let start = Int64(first), start >= 0 else { return .full }
        if last.isEmpty {
            return start < length ? .partial(start: start, end: length) : .unsatisfiable
        }
        guard let lastByte = Int64(last), lastByte >= start else { return .full }
        if start >= length { return .unsatisfiable }
        return .partial(start: start, end: min(lastByte, length - 1) + 1)
    }

    /// If-Range holds when it is the current strong ETag, or exactly the current Last-Modified.
    static func ifRangeMatches(_ value: String, etag: String?, lastModified: String) -> Bool {
        let v = value.trimmingCharacters(in: .whitespaces)
        if v.hasPrefix("\"") || v.hasPrefix("W/") {
            guard let etag, !etag.hasPrefix("W/"), !v.hasPrefix("W/") else { return false }
            return v == etag
        }
        return v == lastModified
    }

    private static func weakCompare(_ a: String, _ b: String) -> Bool {
        func strip(_ s: String) -> String {
            let t = s.trimmingCharacters(in: .whitespaces)
            return t.hasPrefix("W/") ? String(t.dropFirst(2)) : t
        }
        return strip(a) == strip(b)
    }

    static func header(_ name: String, in headers: [(String, String)]) -> String? {
        headers.first { $0.0.lowercased() == name }?.1
    }
}
