import CCurl
import Foundation

/// Whom the fetcher trusts and how it proves who it is to origins, beyond what a URL carries:
/// a private CA (`--ca-certificate`), a netrc file, and `--user` / `--password-file`.
///
/// Credentials are per origin where they can be: a netrc file names its machines, and libcurl
/// sends its entry only to that host. `user` and `password` go to every origin, as `curl --user`
/// does (never to the other host of a cross-host redirect); a URL that carries its own user-info
/// keeps it.
public struct OriginAccess: Sendable, Equatable {
    /// PEM file with the CA certificate(s) that verify origins' TLS certificates
    /// (`CURLOPT_CAINFO`, in place of the system's bundle file).
    public var caCertificate: String?
    /// A netrc file whose entries are used when a URL carries no credentials; nil: none.
    public var netrcFile: String?
    /// Basic-auth user and password for URLs without user-info.
    public var user: String?
    public var password: Secret?

    public init(caCertificate: String? = nil, netrcFile: String? = nil, user: String? = nil, password: Secret? = nil) {
        self.caCertificate = caCertificate
        self.netrcFile = netrcFile
        self.user = user
        self.password = password
    }

    /// Sets these options on an easy handle about to fetch `url`.
    func configure(_ easy: UnsafeMutableRawPointer, url: String) {
        if let caCertificate { _ = ccurl_easy_setopt_string(easy, CURLOPT_CAINFO, caCertificate) }
        if let netrcFile {
            _ = ccurl_easy_setopt_long(easy, CURLOPT_NETRC, Int(CURL_NETRC_OPTIONAL.rawValue))
            _ = ccurl_easy_setopt_string(easy, CURLOPT_NETRC_FILE, netrcFile)
        }
        if let user, !Self.hasUserInfo(url) {
            _ = ccurl_easy_setopt_string(easy, CURLOPT_USERNAME, user)
            _ = ccurl_easy_setopt_string(easy, CURLOPT_PASSWORD, password?.value ?? "")
        }
    }

    /// Whether `url` names a user itself (`https://user:pass@host/...`): libcurl would let
    /// `CURLOPT_USERNAME` override it, and the URL's own credentials should win.
    static func hasUserInfo(_ url: String) -> Bool {
        guard let schemeEnd = url.range(of: "://") else { return false }
        let authority = url[schemeEnd.upperBound...].prefix { $0 != "/" && $0 != "?" && $0 != "#" }
        return authority.contains("@")
    }
}

/// A value that must not reach a log line or an error message: its description is a mask.
public struct Secret: Sendable, Equatable, CustomStringConvertible, CustomDebugStringConvertible {
    public let value: String
    public init(_ value: String) { self.value = value }
    public var description: String { "<secret>" }
    public var debugDescription: String { "<secret>" }
}
