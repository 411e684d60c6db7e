import Foundation

/// Rules that turn URLs into cache keys. A key (`CacheKey`, in EntryMachine, so that the entry
/// machine can name it) is the identity of a cache entry: the URL made canonical by these rules.
///
/// The URL in its one spelling (`URLSpelling`: escaped as curl would, RFC 3986 §6.2.2, `( ) ' ! *`
/// raw in the path; so `Alpha Centauri (1971).mp4` and `Alpha%20Centauri%20%281971%29.mp4` are
/// one entry), with query parameters named by `KeyRules.ignoredQueryNames` (rotating tokens)
/// removed, so `video.mp4?token=1` and `video.mp4?token=2` share one entry. Requests still use
/// the full URL. Keys written by versions before the spelling are respelled once when the index
/// is opened (`CacheIndex`, migration `v4-url-spelling`).
///
/// Map of this folder (`Keys/`): what names an entry, and URLs as they enter and as they are shown.
/// - `CacheKey.swift` (this file): the rules that make an entry's key from the URL in its one spelling.
/// - `URLSpelling.swift`: the one spelling of a URL (curl's escaping), pure.
/// - `CredentialKey.swift`: bytes fetched with credentials keyed to them (a keyed hash).
/// - `HostPattern.swift`: `--allow-host` / `--credential-host` globs.
/// - `DisplayURL.swift`: passwords masked wherever a URL is shown.
/// Neighbours: nearly a leaf (it uses `Storage/`'s XXH64 for credential hashes and `Status/`'s
/// `RecentResults` memo); `Engine/`, `Storage/` (rows are keyed, `CacheIndex+Respell`), `Eviction/`,
/// `Status/` and the front doors (Proxy, FuseMount, the executable) use it.
public struct KeyRules: Sendable, Equatable {
    /// Query parameter names dropped from the key (compared case-sensitively, as servers do).
    public var ignoredQueryNames: Set<String>
    /// Credentials every request carries (`--user`, a netrc file, `Authorization` or `Cookie`
    /// headers), one line each: part of the key, hashed (`CredentialKey`). A URL's own
    /// `user:password@` takes the place of `--user` and netrc, as it does in requests.
    public var sharedCredentials: [String] = []
    /// `--user`, which a URL's user-info replaces.
    public var sharedLogin: String? = nil
    /// Hosts a netrc file has a login for ("*": its `default` entry), used when neither a URL's
    /// user-info nor `--user` gives one; and the file, whose entries key the bytes.
    public var netrcHosts: Set<String> = []
    public var netrcFile: String? = nil
    /// The cache's secret that keys the hash of credentials (set by the engine).
    public var credentialKey: [UInt8] = []
    /// The buckets read with S3 keys: a URL under one is keyed by those keys' identity too
    /// (`S3Buckets.credentialIdentity`), so two accounts reading one bucket never share bytes
    /// the other may not read. Nil: no bucket is signed.
    public var s3Buckets: S3Buckets? = nil

    public init(ignoredQueryNames: Set<String> = []) {
        self.ignoredQueryNames = ignoredQueryNames
    }

    /// The canonical key for `url`, or `CacheError.invalidURL` for anything but http(s).
    public func key(for url: String) throws -> CacheKey {
        let parsed = try Self.validate(url)
        var c = parsed
        c.scheme = parsed.scheme?.lowercased()
        c.host = parsed.host?.lowercased()
        if (c.scheme == "http" && c.port == 80) || (c.scheme == "https" && c.port == 443) { c.port = nil }
        c.fragment = nil
        var credentials: [String] = []
        if let user = parsed.user {
            credentials.append("userinfo \(user):\(parsed.password ?? "")")
        } else if let login = sharedLogin {
            credentials.append(login)
        } else if let netrcFile, let host = c.host, netrcHosts.contains(host) || netrcHosts.contains("*") {
            credentials.append("netrc \(netrcFile) \(host)")
        }
        credentials += sharedCredentials
        c.user = nil
        c.password = nil
        if c.path.isEmpty { c.path = "/" }
        if let items = c.queryItems, !ignoredQueryNames.isEmpty {
            let kept = items.filter { !ignoredQueryNames.contains($0.name) }
            c.queryItems = kept.isEmpty ? nil : kept
        }
        guard var s = c.string else { throw CacheError.invalidURL(url, reason: "cannot be made canonical") }
        if let identity = s3Buckets?.credentialIdentity(of: s) { credentials.append(identity) }
        // After a '#', which no canonical URL has: bytes fetched with credentials are theirs.
        if !credentials.isEmpty { s += "#cred-" + CredentialKey.hash(credentials.joined(separator: "\n"), secret: credentialKey) }
        return CacheKey(rawValue: s)
    }

    /// `url` in its one spelling (`URLSpelling`), for every place a URL enters: a URL that
    /// cannot be made valid is `CacheError.invalidURL` with the reason, never a dead link.
    public static func normalized(_ url: String) throws -> String {
        do { return try URLSpelling.normalize(url) } catch let error as URLSpelling.Invalid {
            throw CacheError.invalidURL(url, reason: error.reason)
        }
    }

    /// Parses `url` in its one spelling and checks that it is an absolute http(s) URL with a
    /// host and no control characters (`normalized` says why not).
    public static func validate(_ url: String) throws -> URLComponents {
        if let c = recentlyValid.cached(url) { return c }
        guard let c = URLComponents(string: try normalized(url)) else {
            throw CacheError.invalidURL(url, reason: "not a URL")
        }
        guard let scheme = c.scheme?.lowercased(), scheme == "http" || scheme == "https" else {
            throw CacheError.invalidURL(url, reason: "only http and https URLs are supported")
        }
        guard let host = c.host, !host.isEmpty else {
            throw CacheError.invalidURL(url, reason: "no host")
        }
        recentlyValid.store(c, for: url)
        return c
    }

    /// URLs `validate` passed lately (each proxied request validates its URL; a player repeats one).
    private static let recentlyValid = RecentResults<URLComponents>()
}
