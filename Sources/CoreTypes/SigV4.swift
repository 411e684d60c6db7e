import Foundation

/// AWS Signature Version 4 for S3 requests (header form): the headers that make one request
/// signed, computed from its method, URL, the headers chosen to sign, the time and the keys.
///
/// Pure: no clock, no I/O. The fetcher calls it for every attempt of every transfer to a bucket's
/// endpoint (each range, each retry, each redirect hop at that origin), with the time of that
/// attempt, so that no signature outlives its 15 minutes. Only `host`, `x-amz-content-sha256`,
/// `x-amz-date` and, with a session token, `x-amz-security-token` are signed: `Range`,
/// `If-Range`, `Accept-Encoding` and `Via` change per attempt and S3 does not ask them signed.
/// The payload is `UNSIGNED-PAYLOAD` (requests here have no body; S3 allows it over plain HTTP
/// too). SHA-256 and HMAC are the project's own (`HMACSHA256`), checked against AWS's examples in
/// `SigV4Tests`.
public enum SigV4 {
    /// The payload hash of a request whose body is not signed.
    public static let unsignedPayload = "UNSIGNED-PAYLOAD"

    /// The keys a request is signed with. Their description masks all but the key id.
    public struct Credentials: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
        public var accessKeyID: String
        public var secretAccessKey: String
        /// Temporary credentials' token (`x-amz-security-token`), signed and sent with them.
        public var sessionToken: String?

        public init(accessKeyID: String, secretAccessKey: String, sessionToken: String? = nil) {
            self.accessKeyID = accessKeyID
            self.secretAccessKey = secretAccessKey
            self.sessionToken = sessionToken
        }

        public var description: String { "access key \(accessKeyID) (secret not shown)" }
        public var debugDescription: String { description }
    }

    /// The header lines ("Name: value") to add to a request for `url` so that it is signed:
    /// `x-amz-date`, `x-amz-content-sha256`, `x-amz-security-token` (with a session token) and
    /// `Authorization`. `signedHeaders` are further headers the request sends and that are to be
    /// signed as well (name, value); `Host` is always signed, taken from the URL as curl sends it.
    /// Nil when `url` is no absolute http(s) URL.
    public static func headers(method: String, url: String, signedHeaders extra: [(String, String)] = [],
                               payloadHash: String = unsignedPayload, credentials: Credentials,
                               region: String, service: String = "s3", date: Date) -> [String]? {
        guard let parts = URLParts(url) else { return nil }
        let stamp = timestamp(date)
        var signed: [(String, String)] = [("host", parts.host), ("x-amz-content-sha256", payloadHash), ("x-amz-date", stamp)]
        if let token = credentials.sessionToken { signed.append(("x-amz-security-token", token)) }
        for (name, value) in extra { signed.append((name.lowercased(), value)) }
        signed.sort { $0.0 < $1.0 }
        let canonicalHeaders = signed.map { "\($0.0):\(trimmed($0.1))\n" }.joined()
        let signedNames = signed.map(\.0).joined(separator: ";")
        let canonicalRequest = [method, canonicalURI(parts.path), canonicalQuery(parts.query),
                                canonicalHeaders, signedNames, payloadHash].joined(separator: "\n")
        let day = String(stamp.prefix(8))
        let scope = "\(day)/\(region)/\(service)/aws4_request"
        let stringToSign = ["AWS4-HMAC-SHA256", stamp, scope, hex(SHA256.hash(Array(canonicalRequest.utf8)))].joined(separator: "\n")
        var key = Array("AWS4\(credentials.secretAccessKey)".utf8)
        for part in [day, region, service, "aws4_request"] { key = HMACSHA256(key: key).mac(Array(part.utf8)) }
        let signature = hex(HMACSHA256(key: key).mac(Array(stringToSign.utf8)))
        var lines = ["x-amz-date: \(stamp)", "x-amz-content-sha256: \(payloadHash)"]
        if let token = credentials.sessionToken { lines.append("x-amz-security-token: \(token)") }
        lines.append("Authorization: AWS4-HMAC-SHA256 Credential=\(credentials.accessKeyID)/\(scope), SignedHeaders=\(signedNames), Signature=\(signature)")
        return lines
    }

    /// `yyyyMMdd'T'HHmmss'Z'` in UTC.
    public static func timestamp(_ date: Date) -> String {
        let seconds = Int(date.timeIntervalSince1970.rounded(.down))
        let days = Int((Double(seconds) / 86400).rounded(.down))
        let (y, m, d) = HTTPDate.civilFromDays(days)
        let rest = seconds - days * 86400
        func two(_ n: Int) -> String { n < 10 ? "0\(n)" : "\(n)" }
        return "\(y)\(two(m))\(two(d))T\(two(rest / 3600))\(two(rest / 60 % 60))\(two(rest % 60))Z"
    }

    /// The path as S3 reads it: percent-decoded, then encoded once, all but unreserved bytes and `/`.
    static func canonicalURI(_ path: String) -> String {
        path.isEmpty ? "/" : encode(percentDecodedBytes(path), keepSlash: true)
    }

    /// The query's parameters decoded, encoded again (keys and values, `/` too), sorted.
    static func canonicalQuery(_ query: String) -> String {
        guard !query.isEmpty else { return "" }
        let pairs: [(String, String)] = query.split(separator: "&", omittingEmptySubsequences: true).map { item in
            let kv = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let k = encode(percentDecodedBytes(String(kv[0])), keepSlash: false)
            let v = kv.count > 1 ? encode(percentDecodedBytes(String(kv[1])), keepSlash: false) : ""
            return (k, v)
        }
        return pairs.sorted { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }.map { "\($0.0)=\($0.1)" }.joined(separator: "&")
    }

    /// URI-encodes per AWS: every byte but `A-Z a-z 0-9 - . _ ~` (and `/` with `keepSlash`) as `%XX`.
    public static func encode(_ bytes: [UInt8], keepSlash: Bool) -> String {
        var out = ""
        out.reserveCapacity(bytes.count)
        for b in bytes {
            if isUnreserved(b) || (keepSlash && b == 0x2F) {
                out.unicodeScalars.append(UnicodeScalar(b))
            } else {
                out += "%" + String(b >> 4, radix: 16, uppercase: true) + String(b & 15, radix: 16, uppercase: true)
            }
        }
        return out
    }

    public static func encode(_ s: String, keepSlash: Bool) -> String { encode(Array(s.utf8), keepSlash: keepSlash) }

    static func isUnreserved(_ b: UInt8) -> Bool {
        (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A) || (b >= 0x30 && b <= 0x39) || b == 0x2D || b == 0x2E || b == 0x5F || b == 0x7E
    }

    /// `%XX` sequences as bytes; a `%` not followed by two hex digits stays as it is.
    public static func percentDecodedBytes(_ s: String) -> [UInt8] {
        let bytes = Array(s.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        func hexValue(_ c: UInt8) -> UInt8? {
            switch c {
            case 0x30...0x39: return c - 0x30
            case 0x41...0x46: return c - 0x41 + 10
            case 0x61...0x66: return c - 0x61 + 10
            default: return nil
            }
        }
        while i < bytes.count {
            if bytes[i] == 0x25, i + 2 < bytes.count, let h = hexValue(bytes[i + 1]), let l = hexValue(bytes[i + 2]) {
                out.append(h << 4 | l)
                i += 3
            } else {
                out.append(bytes[i])
                i += 1
            }
        }
        return out
    }

    /// Header values as SigV4 signs them: ends trimmed, inner runs of spaces made one.
    static func trimmed(_ value: String) -> String {
        value.split(separator: " ", omittingEmptySubsequences: true).joined(separator: " ")
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var out = [UInt8]()
        out.reserveCapacity(bytes.count * 2)
        for b in bytes { out.append(digits[Int(b >> 4)]); out.append(digits[Int(b & 15)]) }
        return String(decoding: out, as: UTF8.self)
    }

    /// The pieces of an http(s) URL that SigV4 signs: the host as the `Host` header carries it
    /// (lowercase, the port only when it is not the scheme's default), the raw path and query.
    struct URLParts {
        var host: String
        var path: String
        var query: String

        init?(_ url: String) {
            guard let schemeEnd = url.range(of: "://") else { return nil }
            let scheme = url[..<schemeEnd.lowerBound].lowercased()
            guard scheme == "http" || scheme == "https" else { return nil }
            let rest = url[schemeEnd.upperBound...].prefix { $0 != "#" }
            let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" } ?? rest.endIndex
            var authority = rest[..<authorityEnd]
            if let at = authority.lastIndex(of: "@") { authority = authority[authority.index(after: at)...] }
            var host = authority.lowercased()
            let defaultPort = scheme == "https" ? ":443" : ":80"
            if host.hasSuffix(defaultPort), !host.hasSuffix("]") { host.removeLast(defaultPort.count) }
            guard !host.isEmpty else { return nil }
            let pathAndQuery = rest[authorityEnd...]
            if let q = pathAndQuery.firstIndex(of: "?") {
                path = String(pathAndQuery[..<q])
                query = String(pathAndQuery[pathAndQuery.index(after: q)...])
            } else {
                path = String(pathAndQuery)
                query = ""
            }
            self.host = host
        }
    }
}
