import Foundation

/// Where the buckets of `s3://BUCKET/KEY` URLs are, and how their requests are signed: the
/// endpoint (`--s3-endpoint`, else AWS's for the region), the region, the addressing style and
/// the keys. Pure: the executable maps the user's s3:// URLs to HTTP URLs with it, and the fetcher
/// asks it which requests to sign (`signs`) and for their headers (`signedHeaders`).
///
/// An s3:// URL becomes the HTTP URL of the object (or folder) at the endpoint: path-style
/// `ENDPOINT/BUCKET/KEY` when an endpoint is given or `pathStyle` is set (MinIO, Ceph, moto,
/// most S3-compatible servers), else AWS's virtual-hosted `https://BUCKET.s3.REGION.amazonaws.com/KEY`
/// (path-style too for a bucket name with dots, which AWS's wildcard certificate does not cover).
/// The cache keys, proxy URLs and status page then name these HTTP URLs, which hold no key.
///
/// The keys go only to the endpoint: a request is signed when its URL's scheme, host and port
/// are the endpoint's (path-style) or a bucket's host under it (virtual-hosted); never on a
/// redirect elsewhere (the fetcher signs only hops at the request's own origin).
public struct S3Endpoint: Sendable, Equatable {
    /// `http` or `https`.
    public var scheme: String
    /// Host, lowercase, with `:port` when one was given (an IPv6 address in brackets).
    public var authority: String
    public var region: String
    public var pathStyle: Bool
    /// Nil: requests go unsigned (a public bucket).
    public var credentials: SigV4.Credentials?
    /// Where temporary keys came from (`credential_process …`), when they change while the
    /// source stays: the entries' identity is then the source's (`credentialIdentity`), so
    /// bytes survive a renewal of the keys. Nil: the keys themselves.
    public var credentialSource: String? = nil

    public init(scheme: String, authority: String, region: String, pathStyle: Bool, credentials: SigV4.Credentials?) {
        self.scheme = scheme
        self.authority = authority
        self.region = region
        self.pathStyle = pathStyle
        self.credentials = credentials
    }

    /// AWS's own endpoint for `region` (virtual-hosted unless `pathStyle`).
    public static func aws(region: String, pathStyle: Bool = false, credentials: SigV4.Credentials?) -> S3Endpoint {
        S3Endpoint(scheme: "https", authority: "s3.\(region).amazonaws.com", region: region, pathStyle: pathStyle, credentials: credentials)
    }

    /// An endpoint URL as `--s3-endpoint` or `AWS_ENDPOINT_URL` give it: `http(s)://host[:port]`,
    /// with no path, query or user-info. Path-style unless told otherwise.
    public static func parse(endpoint text: String, region: String, pathStyle: Bool = true,
                             credentials: SigV4.Credentials?) throws -> S3Endpoint {
        let t = text.trimmingCharacters(in: .whitespaces)
        guard let r = t.range(of: "://") else { throw S3URLError("the endpoint '\(text)' is no URL: expected http://HOST[:PORT] or https://HOST[:PORT]") }
        let scheme = t[..<r.lowerBound].lowercased()
        var authority = String(t[r.upperBound...])
        if authority.hasSuffix("/") { authority.removeLast() }
        guard scheme == "http" || scheme == "https" else { throw S3URLError("the endpoint '\(text)' must be an http:// or https:// URL") }
        guard !authority.isEmpty, !authority.contains("/"), !authority.contains("?"), !authority.contains("#"),
              !authority.contains("@"), !authority.contains(where: { $0.isWhitespace || $0.isASCII && $0.asciiValue! < 0x20 }) else {
            throw S3URLError("the endpoint '\(text)' must be only a scheme, host and port (no path, query or user)")
        }
        // The URLs made from it are spelled as every URL is (`URLSpelling`): no default port.
        authority = authority.lowercased()
        let defaultPort = scheme == "https" ? ":443" : ":80"
        if authority.hasSuffix(defaultPort), !authority.hasSuffix("]") { authority.removeLast(defaultPort.count) }
        return S3Endpoint(scheme: scheme, authority: authority, region: region, pathStyle: pathStyle, credentials: credentials)
    }

    /// The bucket and key of `s3://BUCKET/KEY` (the key may be empty or a prefix ending in `/`),
    /// or nil when `text` is no s3:// URL. Throws for an s3:// URL with a bad bucket name.
    public static func split(_ text: String) throws -> (bucket: String, key: String)? {
        guard text.lowercased().hasPrefix("s3://") else { return nil }
        let rest = text.dropFirst(5)
        let bucket = String(rest.prefix { $0 != "/" })
        let key = String(rest.dropFirst(bucket.count + (rest.count > bucket.count ? 1 : 0)))
        guard isBucketName(bucket) else {
            throw S3URLError("'\(bucket)' in \(text) is no bucket name: 3 to 63 lowercase letters, digits, dots and hyphens")
        }
        guard !key.contains(where: { $0.isASCII && ($0.asciiValue! < 0x20 || $0.asciiValue! == 0x7F) }) else {
            throw S3URLError("the key in \(text) holds a control character")
        }
        return (bucket, key)
    }

    /// S3's bucket naming rules (the loose, old ones: S3-compatible servers allow underscores and
    /// capitals, so only what would break a URL's host or path is refused).
    static func isBucketName(_ name: String) -> Bool {
        (3...63).contains(name.utf8.count) && name.utf8.allSatisfy { b in
            (b >= 0x61 && b <= 0x7A) || (b >= 0x41 && b <= 0x5A) || (b >= 0x30 && b <= 0x39) || b == 0x2E || b == 0x2D || b == 0x5F
        } && !name.hasPrefix(".") && !name.hasSuffix(".")
    }

    /// Whether `bucket` is addressed by path (see the type's note).
    func usesPath(_ bucket: String) -> Bool { pathStyle || bucket.contains(".") || bucket.contains(where: \.isUppercase) || bucket.contains("_") }

    /// The URL of `bucket`'s root folder, ending in `/`.
    public func root(bucket: String) -> String {
        usesPath(bucket) ? "\(scheme)://\(authority)/\(bucket)/" : "\(scheme)://\(bucket).\(authority)/"
    }

    /// The URL that lists the bucket (a ListObjectsV2 query is appended to it).
    public func listingBase(bucket: String) -> String {
        usesPath(bucket) ? "\(scheme)://\(authority)/\(bucket)" : "\(scheme)://\(bucket).\(authority)/"
    }

    /// The HTTP URL of `s3://bucket/key`: the key encoded as S3 reads it (every byte but the
    /// unreserved ones and `/`).
    public func url(bucket: String, key: String) -> String {
        root(bucket: bucket) + SigV4.encode(key, keepSlash: true)
    }

    /// Whether a request for `url` goes to this endpoint (and is signed, with credentials).
    public func signs(_ url: String) -> Bool {
        guard let r = url.range(of: "://") else { return false }
        guard url[..<r.lowerBound].lowercased() == scheme else { return false }
        let rest = url[r.upperBound...]
        let host = rest.prefix { $0 != "/" && $0 != "?" && $0 != "#" }.lowercased()
        guard !host.contains("@") else { return false }
        if host == authority { return true }
        // Virtual-hosted: one label (a bucket) in front of the endpoint's host.
        guard host.hasSuffix("." + authority) else { return false }
        let bucket = host.dropLast(authority.count + 1)
        return !bucket.isEmpty && !bucket.contains(".")
    }

    /// Whose bytes a signed request fetches, for the cache key (hashed there with the cache's
    /// secret, `CredentialKey`): the key id with its secret (a wrong secret is another identity,
    /// which the endpoint judges anew), or the source of temporary keys; nil when unsigned.
    /// The endpoint, bucket and key are in the URL itself.
    public var credentialIdentity: String? {
        guard let credentials else { return nil }
        if let credentialSource { return "s3 \(credentialSource)" }
        return "s3 key \(credentials.accessKeyID):\(credentials.secretAccessKey)"
    }

    /// The headers that sign a `method` request for `url` at `date`; empty without credentials
    /// or for a URL elsewhere.
    public func signedHeaders(method: String, url: String, date: Date) -> [String] {
        guard let credentials, signs(url) else { return [] }
        return SigV4.headers(method: method, url: url, credentials: credentials, region: region, date: date) ?? []
    }
}

/// An s3:// URL or S3 setting that cannot be used, with why.
public struct S3URLError: Error, CustomStringConvertible, Equatable {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension HTTPDate {
    /// An ISO 8601 UTC time as S3 lists it (`2009-10-12T17:50:30.000Z`, fraction optional).
    public static func parseISO8601(_ text: String) -> Date? {
        let s = Array(text.trimmingCharacters(in: .whitespaces).utf8)
        guard s.count >= 20, s.last == UInt8(ascii: "Z"), s[4] == 0x2D, s[7] == 0x2D, s[10] == 0x54 || s[10] == 0x74,
              s[13] == 0x3A, s[16] == 0x3A else { return nil }
        func number(_ r: Range<Int>) -> Int? {
            s[r].allSatisfy { $0 >= 0x30 && $0 <= 0x39 } ? Int(String(decoding: s[r], as: UTF8.self)) : nil
        }
        guard let y = number(0..<4), let m = number(5..<7), let d = number(8..<10), let h = number(11..<13),
              let min = number(14..<16), let sec = number(17..<19), h < 24, min < 60, sec < 61 else { return nil }
        if s.count > 20 { guard s[19] == 0x2E, number(20..<(s.count - 1)) != nil else { return nil } } else { guard s[19] == UInt8(ascii: "Z") else { return nil } }
        let days = daysFromCivil(year: y, month: m, day: d)
        guard (1...12).contains(m), civilFromDays(days) == (y, m, d) else { return nil }
        return Date(timeIntervalSince1970: TimeInterval(days * 86400 + h * 3600 + min * 60 + sec))
    }
}
