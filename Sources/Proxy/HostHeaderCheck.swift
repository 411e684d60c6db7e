/// Whether a request's Host header names this proxy, by exact match.
///
/// DNS rebinding: a web page on `attacker.test` whose name suddenly resolves to 127.0.0.1 can
/// make the browser send requests here, and read the answers, but its requests still carry its
/// own name in the Host header. So a request is addressed to this machine only when its Host is
/// an address literal that is loopback or the bind address (an address cannot be rebound), or
/// one of a few names the attacker cannot be served under: `localhost`, names under `.localhost`,
/// the bind address if it is a name, this machine's host name, and the names the user gave with
/// `--proxy-name`. Nothing is matched by prefix or suffix other than `.localhost`.
struct HostHeaderCheck: Sendable {
    /// Accepted names, lower-case, without a trailing dot.
    let names: Set<String>
    /// Accepted addresses besides loopback ones: the bind address, if it is one.
    let addresses: [IPLiteral]

    /// - Parameters:
    ///   - bindAddress: what the proxy listens on (an address, or a name such as `localhost`).
    ///   - hostName: this machine's host name: it and its first label are accepted (Debian maps
    ///     the name to 127.0.1.1, and the user chose it, as with `--proxy-name`).
    ///   - extraNames: `--proxy-name` values.
    init(bindAddress: String, hostName: String, extraNames: [String]) {
        var names: Set<String> = ["localhost"]
        var addresses: [IPLiteral] = []
        if let address = IPLiteral(bindAddress) {
            addresses.append(address)
        } else if !bindAddress.isEmpty {
            names.insert(Self.canonicalName(bindAddress))
        }
        let host = Self.canonicalName(hostName)
        if !host.isEmpty {
            names.insert(host)
            names.insert(String(host.prefix { $0 != "." }))
        }
        for n in extraNames where !n.isEmpty { names.insert(Self.canonicalName(n)) }
        self.names = names
        self.addresses = addresses
    }

    /// - Parameters:
    ///   - header: the Host header as sent: `host` or `host:port`, an IPv6 address in brackets.
    ///     An empty one names nothing (HTTP/1.1 sends it for a target without authority) and is
    ///     let through, as is a request without Host (HTTP/1.0): no browser sends either.
    ///   - port: the port the proxy listens on; when given, a Host with a port must name it.
    ///     nil when not known (then any port is accepted).
    func accepts(_ header: String, port: Int?) -> Bool {
        if header.isEmpty { return true }
        guard let (host, givenPort) = Self.split(Self.asciiLowercased(header)) else { return false }
        if let givenPort, let port, givenPort != port { return false }
        if host.hasPrefix("[") {
            guard let address = IPLiteral(host), address.bytes.count == 16 else { return false }
            return address.isLoopback || addresses.contains(address)
        }
        if let address = IPLiteral(host) {
            return address.isLoopback || addresses.contains(address)
        }
        let name = Self.canonicalName(host)
        return names.contains(name) || Self.isUnderLocalhost(name)
    }

    /// `host` and the port of a Host header (lower-cased), nil when it is malformed: a bare IPv6
    /// address, text after `]`, a port that is not 0-65535. An empty port (`host:`) is no port
    /// (RFC 3986 §6.2.3).
    static func split(_ header: String) -> (host: String, port: Int?)? {
        let host: Substring, portText: Substring?
        if header.hasPrefix("[") {
            guard let close = header.firstIndex(of: "]") else { return nil }
            host = header[...close]
            let rest = header[header.index(after: close)...]
            if rest.isEmpty { portText = nil } else {
                guard rest.first == ":" else { return nil }
                portText = rest.dropFirst()
            }
        } else if let colon = header.firstIndex(of: ":") {
            host = header[..<colon]
            portText = header[header.index(after: colon)...]
        } else {
            host = Substring(header)
            portText = nil
        }
        guard !host.isEmpty else { return nil }
        guard let portText, !portText.isEmpty else { return (String(host), nil) }
        guard portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }), let port = Int(portText),
              port <= 65535 else { return nil }
        return (String(host), port)
    }

    /// RFC 6761 §6.3 reserves `localhost` and every name under it for loopback, and browsers
    /// (Chrome, Firefox) resolve them to loopback themselves, without asking DNS: a page from
    /// elsewhere cannot be served under such a name, so `app.localhost` is as safe as `localhost`.
    /// Only plain DNS labels count (`localhost.evil.test` ends elsewhere and is refused).
    static func isUnderLocalhost(_ name: String) -> Bool {
        guard name.hasSuffix(".localhost") else { return false }
        let labels = name.dropLast(".localhost".count).split(separator: ".", omittingEmptySubsequences: false)
        return labels.allSatisfy { label in
            !label.isEmpty && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }
        }
    }

    /// Lower-case, without the one trailing dot of a fully qualified name (`localhost.`).
    static func canonicalName(_ name: String) -> String {
        let n = asciiLowercased(name)
        return n.hasSuffix(".") ? String(n.dropLast()) : n
    }

    /// Only A-Z change: Unicode case folding would turn the Kelvin sign into `k`, and a Host
    /// that is not ASCII must not come to equal one that is.
    static func asciiLowercased(_ text: String) -> String {
        String(decoding: text.utf8.map { (0x41...0x5A).contains($0) ? $0 + 0x20 : $0 }, as: UTF8.self)
    }
}
