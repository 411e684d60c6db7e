import CCurl
import Foundation

/// The origins the fetcher refuses to connect to: cloud metadata services and link-local
/// addresses. A proxied URL, a redirect or an HLS key URI must not turn this program into a way
/// to read the instance's credentials (server-side request forgery).
///
/// Where it is checked (see `CurlTransfer`):
/// - on the address actually connected to, in libcurl's open-socket callback, which sees every
///   resolved address before a socket exists, also after each redirect: no DNS answer, redirect
///   or IPv4-mapped spelling gets around it, and no packet reaches a refused address;
/// - by name and address literal before a transfer starts and before each request is sent
///   (libcurl's pre-request callback), which also covers requests sent through an upstream proxy,
///   where the connection goes to the proxy and only the URL names the target.
///
/// Private LAN ranges stay allowed: a NAS is a normal origin. `allowedHosts` opens an exact
/// address, or an exact name together with whatever it resolves to.
public struct AddressPolicy: Sendable, Equatable {
    public var forbiddenRanges: [AddressRange]
    /// Lower-case, without a trailing dot.
    public var forbiddenNames: Set<String>
    /// Addresses opened on purpose (from exact `--allow-host` patterns).
    public var allowedAddresses: Set<IPAddress>
    /// Names opened on purpose, with every address they resolve to.
    public var allowedNames: Set<String>

    /// IPv4 link-local (the metadata service of AWS, GCP, Azure, OCI and others at
    /// 169.254.169.254, ECS task metadata at 169.254.170.2), IPv6 link-local, AWS's IPv6
    /// metadata address, Alibaba Cloud's metadata address.
    public static let defaultForbiddenRanges = ["169.254.0.0/16", "fe80::/10", "fd00:ec2::254/128", "100.100.100.200/32"]
    /// GCP's metadata names (`metadata` is what its resolver search path completes).
    public static let defaultForbiddenNames = ["metadata.google.internal", "metadata.goog", "metadata"]

    /// The default: metadata and link-local refused, everything else allowed.
    public static let standard = AddressPolicy(forbiddenRanges: defaultForbiddenRanges.compactMap(AddressRange.init),
                                               forbiddenNames: defaultForbiddenNames)
    /// Refuses nothing.
    public static let unrestricted = AddressPolicy(forbiddenRanges: [], forbiddenNames: [])

    /// - Parameter allowedHosts: exact host names or addresses to open (no patterns).
    public init(forbiddenRanges: [AddressRange], forbiddenNames: [String], allowedHosts: [String] = []) {
        self.forbiddenRanges = forbiddenRanges
        self.forbiddenNames = Set(forbiddenNames.map(Self.normalized))
        allowedAddresses = []
        allowedNames = []
        self = allowing(hosts: allowedHosts)
    }

    /// This policy with these exact hosts (names or addresses) opened.
    public func allowing(hosts: [String]) -> AddressPolicy {
        var p = self
        for host in hosts {
            if let address = IPAddress(host) {
                p.allowedAddresses.insert(address.unwrapped)
            } else {
                p.allowedNames.insert(Self.normalized(host))
            }
        }
        return p
    }

    /// Why connecting to `address` for a URL whose host is `host` is refused, or nil.
    /// - Parameters:
    ///   - address: the address about to be connected to (nil: not known, check the name only).
    ///   - host: the URL's host (a name or an address literal), if known.
    public func refusal(connectingTo address: IPAddress?, host: String?) -> String? {
        let name = host.map(Self.normalized)
        if let name, allowedNames.contains(name) { return nil }
        if let name, forbiddenNames.contains(name) {
            return "'\(name)' is a cloud metadata host name (--allow-host \(name) opens it)"
        }
        let literal = host.flatMap(IPAddress.init(urlHost:))
        for candidate in [literal, address].compactMap({ $0?.unwrapped }) {
            if allowedAddresses.contains(candidate) { continue }
            if let range = forbiddenRanges.first(where: { $0.contains(candidate) }) {
                return "\(candidate) is a link-local or cloud metadata address (in \(range); --allow-host \(Self.bracketed(candidate)) opens it)"
            }
        }
        return nil
    }

    /// Why a request for `url` is refused by its host name or address literal alone, or nil.
    public func refusal(url: String) -> String? {
        guard let host = Self.host(of: url) else { return nil }
        return refusal(connectingTo: nil, host: host)
    }

    /// The host of a URL as libcurl reads it (the name it resolves, IPv4 numbers normalized as
    /// it connects to them), without brackets; nil if curl could not fetch the URL anyway.
    static func host(of url: String) -> String? {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        guard curl_url_set(handle, CURLUPART_URL, url, 0) == CURLUE_OK else { return nil }
        var part: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, CURLUPART_HOST, &part, 0) == CURLUE_OK, let part else { return nil }
        defer { curl_free(part) }
        let host = String(cString: part)
        return host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
    }

    static func normalized(_ host: String) -> String {
        var h = Substring(host.lowercased())
        if h.hasPrefix("["), h.hasSuffix("]") { h = h.dropFirst().dropLast() }
        while h.hasSuffix(".") { h = h.dropLast() }
        return String(h)
    }

    private static func bracketed(_ address: IPAddress) -> String {
        address.isIPv4 ? "\(address)" : "[\(address)]"
    }
}
