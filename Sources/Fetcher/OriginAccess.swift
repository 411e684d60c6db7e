import CCurl
import Foundation

/// Whom the fetcher trusts and how it proves who it is to origins, beyond what a URL carries:
/// a private CA (`--ca-certificate`), a netrc file, and `--user` / `--password-file`.
///
/// Credentials belong to origins: a netrc file names its machines, and libcurl sends its entry
/// only to that host, unless only a mount not given the file named it (`CredentialScope.Grant`);
/// `user` and `password`, like every `--header`, go only to the origins of
/// `scope` (the URLs the user gave and `--credential-host`), and on a redirect only to a hop at
/// the request's own origin (`CurlTransfer.sendsCredentials`). A URL that carries its own
/// user-info keeps it.
public struct OriginAccess: Sendable, Equatable {
    /// PEM file with the CA certificate(s) that verify origins' TLS certificates
    /// (`CURLOPT_CAINFO`, in place of the system's bundle file).
    public var caCertificate: String?
    /// A netrc file whose entries are used when a URL carries no credentials; nil: none.
    public var netrcFile: String?
    /// Basic-auth user and password for URLs without user-info.
    public var user: String?
    public var password: Secret?
    /// Where `user`, `password` and the configuration's `extraHeaders` may go. The default covers
    /// no origin: a library user names them (`CredentialScope(urls:hosts:)`).
    public var scope: CredentialScope

    public init(caCertificate: String? = nil, netrcFile: String? = nil, user: String? = nil, password: Secret? = nil,
                scope: CredentialScope = CredentialScope()) {
        self.caCertificate = caCertificate
        self.netrcFile = netrcFile
        self.user = user
        self.password = password
        self.scope = scope
    }

    /// Sets these options on an easy handle about to fetch `url`; `user` and `password` only
    /// with `credentials` (the hop may have them: see `CurlTransfer.beginAttempt`).
    func configure(_ easy: UnsafeMutableRawPointer, url: String, credentials: Bool) {
        if let caCertificate { _ = ccurl_easy_setopt_string(easy, CURLOPT_CAINFO, caCertificate) }
        if let netrcFile, scope.allowsNetrc(url) {
            _ = ccurl_easy_setopt_long(easy, CURLOPT_NETRC, Int(CURL_NETRC_OPTIONAL.rawValue))
            _ = ccurl_easy_setopt_string(easy, CURLOPT_NETRC_FILE, netrcFile)
        }
        if credentials, let user, !Self.hasUserInfo(url) {
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
