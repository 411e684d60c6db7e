import CCurl
import Foundation

/// A URL's origin as libcurl reads it: scheme, host and port (the scheme's default when the URL
/// names none). Credentials are bound to it as curl binds them across redirects (curl sends
/// `--user` and its headers to a redirect target only when scheme, host and port all match).
///
/// Parsed with curl's own URL parser (`curl_url`), so the host compared is the one curl connects
/// to, whatever spelling tricks a URL carries (`user@host`, `%`-escapes, a trailing dot...).
/// Pure: no I/O, safe on any thread.
public struct URLOrigin: Hashable, Sendable, CustomStringConvertible {
    /// Lower-case: "http", "https", ...
    public let scheme: String
    /// Lower-case, without brackets or a trailing dot.
    public let host: String
    public let port: Int

    public init(scheme: String, host: String, port: Int) {
        self.scheme = scheme.lowercased()
        self.host = AddressPolicy.normalized(host)
        self.port = port
    }

    /// nil: not a URL curl can parse (a raw space, no host, ...).
    public init?(_ url: String) {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, url, UInt32(CURLU_NON_SUPPORT_SCHEME)) == CURLUE_OK,
              let scheme = Self.part(handle, CURLUPART_SCHEME, 0),
              let host = Self.part(handle, CURLUPART_HOST, 0), !host.isEmpty,
              let portText = Self.part(handle, CURLUPART_PORT, UInt32(CURLU_DEFAULT_PORT)), let port = Int(portText) else { return nil }
        self.init(scheme: scheme, host: host, port: port)
    }

    /// `scheme://host:port`, IPv6 addresses in brackets.
    public var description: String { "\(scheme)://\(hostPort)" }

    /// `host:port` (IPv6 in brackets), as a `--credential-host` or `--allow-host` pattern names it.
    public var hostPort: String { (host.contains(":") ? "[\(host)]" : host) + ":\(port)" }

    /// `location` (a `Location` header's value) made absolute against `base`, as libcurl does when
    /// it follows a redirect itself (same parser, same flags: spaces and other unsafe bytes are
    /// percent-encoded). nil: not a usable URL.
    public static func resolve(_ location: String, against base: String) -> String? {
        let trimmed = location.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty, let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, base, UInt32(CURLU_NON_SUPPORT_SCHEME)) == CURLUE_OK,
              curl_url_set(handle, CURLUPART_URL, trimmed,
                           UInt32(CURLU_NON_SUPPORT_SCHEME | CURLU_URLENCODE | CURLU_ALLOW_SPACE)) == CURLUE_OK else { return nil }
        return part(handle, CURLUPART_URL, 0)
    }

    private static func part(_ handle: OpaquePointer, _ what: CURLUPart, _ flags: UInt32) -> String? {
        var value: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, what, &value, flags) == CURLUE_OK, let value else { return nil }
        defer { curl_free(value) }
        return String(cString: value)
    }
}
