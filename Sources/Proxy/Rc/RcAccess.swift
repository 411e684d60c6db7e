import Foundation

/// Who may use the remote control: its owner, and only from a program, never from a web page.
///
/// Loopback is reachable by every local user and, through the browser, by every web page, so:
/// - a login is always asked for (HTTP basic auth, as `rclone rc --user U --pass P` sends it):
///   `--rc-user`/`--rc-pass` when given, else user `httpcachefs` with the daemon's control key,
///   which only its owner can read (the 0600 `proxy.json`); the key also works as the
///   `X-Httpcachefs-Control` header, as for the proxy's control requests;
/// - a request a browser made is refused whatever it carries: one with an `Origin` header or a
///   `Sec-Fetch-Site` other than `none` (every browser sends them on a POST; rclone, curl and
///   scripts do not), or whose `Host` does not name loopback (DNS rebinding, `HostHeaderCheck`).
/// Pure: `RcTests` has the table.
public struct RcAccess: Sendable {
    public static let keyUser = "httpcachefs"

    let user: String
    let password: String
    /// The control key, accepted as `X-Httpcachefs-Control` too (nil: a login of the user's own).
    let controlKey: String?
    let hosts: HostHeaderCheck

    /// - Parameters:
    ///   - login: `--rc-user`/`--rc-pass`; nil: `httpcachefs` and `controlKey`.
    ///   - bindAddress: the loopback address the server listens on.
    public init(login: (user: String, password: String)?, controlKey: String, bindAddress: String) {
        if let login {
            user = login.user
            password = login.password
            self.controlKey = nil
        } else {
            user = Self.keyUser
            password = controlKey
            self.controlKey = controlKey
        }
        hosts = HostHeaderCheck(bindAddress: bindAddress, hostName: "", extraNames: [])
    }

    /// Why the request is refused (HTTP status and message), or nil to serve it. `header` looks a
    /// header up by name (first value); `port` is the port the server listens on.
    public func refusal(header: (String) -> String?, port: Int?) -> (status: Int, message: String)? {
        if let origin = header("Origin") {
            return (403, "requests from web pages are refused (Origin: \(origin.prefix(100))): use rclone rc, curl or a script")
        }
        if let site = header("Sec-Fetch-Site"), site.lowercased() != "none" {
            return (403, "requests from web pages are refused (Sec-Fetch-Site: \(site.prefix(40))): use rclone rc, curl or a script")
        }
        if let host = header("Host"), !hosts.accepts(host, port: port) {
            return (403, "the Host header must name this machine's loopback address (got '\(host.prefix(100))')")
        }
        if let controlKey, let key = header(ControlRequest.keyHeader), Self.equal(key, controlKey) { return nil }
        guard let authorization = header("Authorization") else {
            return (401, "log in: --user and --pass (" + (controlKey == nil ? "the mount's --rc-user and --rc-pass" : "user \(Self.keyUser), password the controlKey of the daemon's proxy.json") + ")")
        }
        guard let (u, p) = Self.basic(authorization), Self.equal(u, user) && Self.equal(p, password) else {
            return (401, "wrong login for the remote control")
        }
        return nil
    }

    /// `Basic base64(user:password)`: the two halves, split at the first colon.
    static func basic(_ header: String) -> (String, String)? {
        let parts = header.split(separator: " ", maxSplits: 1)
        guard parts.count == 2, parts[0].lowercased() == "basic",
              let data = Data(base64Encoded: parts[1].trimmingCharacters(in: .whitespaces)),
              let text = String(data: data, encoding: .utf8), let colon = text.firstIndex(of: ":") else { return nil }
        return (String(text[..<colon]), String(text[text.index(after: colon)...]))
    }

    /// Compares every byte whatever differs first, so the time taken tells nothing of the secret.
    static func equal(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        var diff = UInt8(x.count == y.count ? 0 : 1)
        for i in 0..<max(x.count, y.count) { diff |= (i < x.count ? x[i] : 0) ^ (i < y.count ? y[i] : 0) }
        return diff == 0
    }
}
