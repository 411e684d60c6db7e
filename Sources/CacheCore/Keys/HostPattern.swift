/// A `--allow-host` or `--credential-host` pattern: a shell-style glob over the host name, case-insensitive.
/// (Here, not in Proxy: the proxy checks a request's URL with it, the fetcher every redirect hop
/// and where credentials may go.)
///
/// `*` matches any run of characters (dots included, so `*.example.com` matches
/// `a.b.example.com` but not `example.com` itself), `?` exactly one. A pattern may carry a port
/// (`media.local:8080`); without one, any port matches.
public struct HostPattern: Sendable, Equatable, CustomStringConvertible {
    public let pattern: String

    public init(_ pattern: String) { self.pattern = pattern.lowercased() }

    public var description: String { pattern }

    /// `port` is the effective port (80 or 443 when the URL names none).
    public func matches(host: String, port: Int?) -> Bool {
        let (hostGlob, portText) = split
        if let portText, String(port ?? -1) != portText { return false }
        return Self.glob(Array(hostGlob.utf8), Array(host.lowercased().utf8))
    }

    /// The one host (name or address, without brackets or port) a pattern without wildcards
    /// names, else nil. Such a pattern also opens a link-local or cloud metadata address, which
    /// the fetcher refuses by default: `*` must never do that.
    public var exactHost: String? {
        let host = split.host
        guard !host.isEmpty, !host.contains("*"), !host.contains("?") else { return nil }
        return host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : String(host)
    }

    /// The host glob and the port, if the pattern has one.
    private var split: (host: Substring, port: Substring?) {
        if let colon = pattern.lastIndex(of: ":") {
            let head = pattern[..<colon], tail = pattern[pattern.index(after: colon)...]
            // A bare IPv6 address has colons of its own; only `[v6]:port` or `name:port` split.
            if !tail.isEmpty, tail.allSatisfy({ $0.isASCII && $0.isNumber }), !head.contains(":") || head.hasSuffix("]") {
                return (head, tail)
            }
        }
        return (Substring(pattern), nil)
    }

    /// Iterative glob match with single backtrack point (linear-ish, no recursion blow-up).
    static func glob(_ p: [UInt8], _ s: [UInt8]) -> Bool {
        var pi = 0, si = 0, star = -1, mark = 0
        while si < s.count {
            if pi < p.count && (p[pi] == UInt8(ascii: "?") || p[pi] == s[si]) {
                pi += 1; si += 1
            } else if pi < p.count && p[pi] == UInt8(ascii: "*") {
                star = pi; mark = si; pi += 1
            } else if star >= 0 {
                pi = star + 1; mark += 1; si = mark
            } else {
                return false
            }
        }
        while pi < p.count && p[pi] == UInt8(ascii: "*") { pi += 1 }
        return pi == p.count
    }
}
