/// `--rc-addr`: where the rclone-style remote control listens, as rclone writes it
/// (`localhost:5572`, `127.0.0.1:5572`, `[::1]:5572`, `:5572`).
///
/// Loopback only: the remote control refreshes listings and drops cached files for its owner,
/// and every local user and web page can reach loopback anyway (so it asks for a login:
/// `RcAccess` in the proxy). An address another machine could reach is refused with the way
/// out; rclone's `:PORT` (every interface) is refused too rather than quietly narrowed.
public struct RcAddress: Equatable, Sendable {
    /// The address to bind: `127.0.0.1` or `::1`.
    public var host: String
    public var port: Int

    /// rclone's default.
    public static let defaultText = "localhost:5572"

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public static func parse(_ text: String, option: String) throws -> RcAddress {
        let t = text.trimmingCharacters(in: .whitespaces)
        let host: Substring, portText: Substring
        if t.hasPrefix("[") {
            guard let close = t.firstIndex(of: "]"), t[t.index(after: close)...].first == ":" else {
                throw UsageError("invalid address '\(text)' for \(option): expected HOST:PORT, e.g. localhost:5572 or [::1]:5572")
            }
            host = t[t.index(after: t.startIndex)..<close]
            portText = t[t.index(close, offsetBy: 2)...]
        } else if let colon = t.lastIndex(of: ":") {
            host = t[..<colon]
            portText = t[t.index(after: colon)...]
        } else {
            throw UsageError("invalid address '\(text)' for \(option): expected HOST:PORT, e.g. localhost:5572")
        }
        guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
              let port = Int(portText), port <= 65535 else {
            throw UsageError("invalid port '\(portText)' in '\(text)' for \(option): expected 0-65535 (0 picks a free one)")
        }
        let h = host.lowercased()
        if h == "localhost" || h == "127.0.0.1" { return RcAddress(host: "127.0.0.1", port: port) }
        if h == "::1" { return RcAddress(host: "::1", port: port) }
        if isIPv4Loopback(h) { return RcAddress(host: h, port: port) }
        throw UsageError("the remote control listens on loopback only here ('\(text)' for \(option) is \(h.isEmpty ? "every interface" : "not loopback")): give localhost:\(port) (or 127.0.0.1:\(port), [::1]:\(port))")
    }

    /// `127.a.b.c`, four decimal parts.
    static func isIPv4Loopback(_ h: String) -> Bool {
        let parts = h.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4, parts[0] == "127" else { return false }
        return parts.allSatisfy { !$0.isEmpty && $0.count <= 3 && $0.allSatisfy(\.isNumber) && Int($0)! <= 255 }
    }
}
