import CacheCore
import Foundation

/// What the server does with one request head, decided without touching the network: the
/// security rules live here, in one pure function with a table test. In order: method and sizes;
/// the Host check (DNS rebinding; always for control requests); the token when the proxy has
/// one; then a fetch needs its proof of ownership (the URL's signature, the token or the control
/// key), and `--allow-host`; an owner-only page needs its proof (`OwnerProof`): the control key
/// or the token. Who the client is (its socket's uid) proves nothing: another daemon of the same
/// user, fetching for someone else, has that uid too.
public enum ProxyRoute: Equatable, Sendable {
    case ping
    /// The status document. `tokenPresented`: the request carried the valid token (only then may
    /// the answer contain it); `keyPresented`: the control key (only then may it name the cache
    /// directory).
    case status(tokenPresented: Bool, keyPresented: Bool = false)
    /// The status page (`/.httpcachefs/`). Owner-only: served with a proof only.
    case statusPage(proof: OwnerProof)
    /// The status document the page draws (`/.httpcachefs/status.json`); owner-only as above. Its
    /// proxy URLs carry the token when the request did.
    case statusDocument(proof: OwnerProof)
    /// Prometheus metrics (`/metrics`); owner-only as above.
    case metrics(proof: OwnerProof)
    /// Answer 302 with this `Location` (`/` goes to the status page).
    case redirect(location: String)
    /// Serve this original URL from the cache.
    case proxy(url: String)
    /// Answer with this status and a one-line text explanation.
    case reject(status: Int, message: String)
    /// A control request that carried the control key (the handler still requires a peer on
    /// this machine).
    case control(ControlRequest)
}

/// What let a request for an owner-only page (status page, `status.json`, `/metrics`) in.
public enum OwnerProof: Equatable, Sendable {
    /// It carried the control key (from the owner-only runtime file): the header
    /// `X-Httpcachefs-Control`, or `?key=` (the page's address `status` prints, a scraper's URL).
    case controlKey
    /// It carried the proxy's token (which the owner hands to the clients it chooses).
    case token
}

public struct ProxyRouter: Sendable {
    public static let statusPath = "/.httpcachefs/status"
    public static let pagePath = "/.httpcachefs/"
    public static let documentPath = "/.httpcachefs/status.json"
    public static let metricsPath = "/metrics"

    let configuration: ProxyConfiguration
    let allowed: [HostPattern]
    /// Which Host headers name this machine.
    let hostCheck: HostHeaderCheck

    public init(configuration: ProxyConfiguration) {
        self.configuration = configuration
        self.allowed = configuration.allowedHosts.map(HostPattern.init)
        self.hostCheck = HostHeaderCheck(bindAddress: configuration.bindAddress, hostName: ProcessInfo.processInfo.hostName,
                                         extraNames: configuration.proxyNames)
    }

    /// RFC 9112 §3.2: a server must answer 400 to an HTTP/1.1 request without a Host header and
    /// to any request with more than one. Browsers always send exactly one, so the rebinding check
    /// below never needed this; but a request whose Host the check cannot see (missing) or could
    /// read two ways (two lines, the first checked, another used by something in between) is not
    /// one to serve. HTTP/1.0 may leave Host out.
    /// - Parameters:
    ///   - lines: the values of every Host line in the request.
    ///   - http11: whether the request is HTTP/1.1 or later.
    public static func hostFieldRefusal(lines: [String], http11: Bool) -> ProxyRoute? {
        if lines.count > 1 { return .reject(status: 400, message: "more than one Host header (RFC 9112 §3.2)") }
        if lines.isEmpty && http11 { return .reject(status: 400, message: "an HTTP/1.1 request needs a Host header (RFC 9112 §3.2)") }
        return nil
    }

    /// - Parameters:
    ///   - method: the request method, upper-case as sent.
    ///   - target: the request target exactly as sent.
    ///   - headerBytes: total bytes of header names and values.
    ///   - host: the Host header, if any.
    ///   - port: the port the proxy listens on (known once bound); nil or 0: the configured one,
    ///     or any port when that is 0 too (picked at bind, not known yet).
    ///   - controlKey: the `X-Httpcachefs-Control` header, if any.
    public func route(method: String, target: String, headerBytes: Int, host: String? = nil, port: Int? = nil,
                      controlKey: String? = nil) -> ProxyRoute {
        guard method == "GET" || method == "HEAD" || method == "POST" else {
            return .reject(status: 405, message: "only GET and HEAD are supported")
        }
        guard target.utf8.count <= configuration.maxRequestTargetBytes else {
            return .reject(status: 414, message: "request target longer than \(configuration.maxRequestTargetBytes) bytes")
        }
        guard headerBytes <= configuration.maxHeaderBytes else {
            return .reject(status: 431, message: "request header fields larger than \(configuration.maxHeaderBytes) bytes")
        }
        // Absolute-form (`GET http://host/...`), authority-form and `*` would make this an open
        // forward proxy: only the encoded forms below are ever served.
        guard target.hasPrefix("/") else {
            return .reject(status: 400, message: "not an open proxy: request targets must be proxy URLs (/u/...)")
        }
        let path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? target
        let boundPort = [port ?? 0, configuration.port].first { $0 > 0 }
        if method == "POST" {
            // The key is required too; the Host check keeps a rebinding page from even trying.
            if let host, !hostCheck.accepts(host, port: boundPort) {
                return .reject(status: 403, message: "Host '\(host)' is not this machine: control requests go to 127.0.0.1 or localhost")
            }
            return controlRoute(target: target, controlKey: controlKey)
        }
        if path == "/ping" { return .ping }
        // DNS rebinding: a web page whose name suddenly resolves to 127.0.0.1 could otherwise read
        // whatever it makes this proxy fetch (including hosts on the LAN), or the status document
        // (which tells loopback peers the cache directory). Without a token, and always for the
        // status document, only requests addressed to this machine are served: a Host that is
        // exactly one of its names or addresses (`HostHeaderCheck`), and its port.
        if configuration.token == nil || path == Self.statusPath, let host, !hostCheck.accepts(host, port: boundPort) {
            // A proxy that has a token sends a LAN client to it, not to an option it already has.
            let remedy = configuration.token?.isEmpty == false ? "or this proxy's token: /t/TOKEN\(path)" : "(or run with --token)"
            return .reject(status: 403, message: "Host '\(host)' is not this machine: use 127.0.0.1 or localhost \(remedy)")
        }
        let keyPresented = presentsControlKey(controlKey)
        if path == Self.statusPath { return .status(tokenPresented: false, keyPresented: keyPresented) }
        if configuration.token?.isEmpty ?? true,
           let own = ownPage(path, prefix: "", proof: keyPresented || presentsQueryKey(target) ? .controlKey : nil,
                             query: Self.query(of: target)) { return own }

        let tokenPresented: Bool
        if let expected = configuration.token, !expected.isEmpty {
            guard let given = tokenPrefix(of: path), constantTimeEqual(given, expected) else {
                return .reject(status: 403, message: "this proxy requires its token: use the URLs printed by 'httpcachefs url'")
            }
            let rest = String(path.dropFirst(3 + given.utf8.count))
            if rest == "/ping" { return .ping }
            if rest == Self.statusPath { return .status(tokenPresented: true, keyPresented: keyPresented) }
            // The token defeats DNS rebinding (a foreign page cannot know it): any Host may see
            // these, which is what a browser on the LAN sends.
            if let own = ownPage(rest, prefix: "/t/" + given, proof: .token, query: Self.query(of: target)) { return own }
            tokenPresented = true
        } else {
            tokenPresented = false
        }

        let decoded: ProxyTarget
        do {
            decoded = try ProxyURL.decode(path: target)
        } catch ProxyURLError.notProxyPath {
            return .reject(status: 404, message: ProxyURLError.notProxyPath.description)
        } catch {
            return .reject(status: 400, message: "\(error)")
        }
        // The proxy serves its owner: a web page in any browser on this machine, or another local
        // user, can send requests here, but cannot sign a URL (`ProxySigningKey`).
        guard tokenPresented || keyPresented || decoded.isSigned(by: configuration.signingKey) else {
            // A signed URL is one resource (`ProxyURL`): not every path of its origin.
            if decoded.signsOnlyTheOriginal(by: configuration.signingKey) {
                return .reject(status: 403, message: "a signed proxy URL opens its own file only, not a relative reference under it "
                    + "(a playlist's segments, keys and maps come signed in the playlist the proxy rewrites): "
                    + "get a URL for this file from 'httpcachefs url URL', or use the proxy's --token URLs, under which relative references resolve")
            }
            let what = decoded.signature == nil ? "is not signed" : "has a signature that is not this proxy's for it"
            return .reject(status: 403, message: "this proxy URL \(what): get one from 'httpcachefs url URL' (the proxy serves only URLs its owner made)")
        }
        if !allowed.isEmpty {
            guard let c = URLComponents(string: decoded.url), let host = c.host else {
                return .reject(status: 400, message: "no host in \(decoded.url)")
            }
            let port = c.port ?? (c.scheme?.lowercased() == "https" ? 443 : 80)
            guard allowed.contains(where: { $0.matches(host: host, port: port) }) else {
                return .reject(status: 403, message: "origin host '\(host)' is not allowed by --allow-host")
            }
        }
        return .proxy(url: decoded.url)
    }

    /// The status page, its document and the metrics, at `path` after any token prefix; refused
    /// without a proof (nil).
    /// - Parameter query: the target's query, if it has one: `/?url=...` is a proxy URL, not the
    ///   page; `/?key=KEY` (the page's address with the path left out) goes to the page with its
    ///   query, with the right key only.
    private func ownPage(_ path: String, prefix: String, proof: OwnerProof?, query: Substring?) -> ProxyRoute? {
        switch path {
        case "", "/", "/.httpcachefs":
            guard let query else { return .redirect(location: prefix + Self.pagePath) }
            guard query.split(separator: "&").contains(where: { $0.hasPrefix("key=") }) else { return nil }
            return proof == nil ? Self.ownerOnly : .redirect(location: prefix + Self.pagePath + "?" + query)
        case Self.pagePath: return proof.map { .statusPage(proof: $0) } ?? Self.ownerOnly
        case Self.documentPath: return proof.map { .statusDocument(proof: $0) } ?? Self.ownerOnly
        case Self.metricsPath: return proof.map { .metrics(proof: $0) } ?? Self.ownerOnly
        default: return nil
        }
    }

    /// What follows the target's `?`, if it has one.
    static func query(of target: String) -> Substring? {
        target.firstIndex(of: "?").map { target[target.index(after: $0)...] }
    }

    /// The answer to an owner-only page asked for without proof.
    static let ownerOnly = ProxyRoute.reject(status: 403, message: "this daemon's status and metrics are for its owner only: open the page address 'httpcachefs status' prints (it carries the key, ?key=), or send the control key from its \(ProxyStatus.runtimeFileName) (header \(ControlRequest.keyHeader)), or use the proxy's token")

    /// Whether `key` (the `X-Httpcachefs-Control` header) is this daemon's control key.
    func presentsControlKey(_ key: String?) -> Bool {
        key.map { constantTimeEqual($0, configuration.controlKey) } ?? false
    }

    /// Whether the target's query has `key=` with this daemon's control key: the form a browser
    /// address or a scraper's URL can carry (owner-only pages only, never a fetch).
    private func presentsQueryKey(_ target: String) -> Bool {
        guard let q = target.firstIndex(of: "?"), target[q...].contains("key=") else { return false }
        return target[target.index(after: q)...].split(separator: "&").contains { item in
            item.hasPrefix("key=") && constantTimeEqual(String(item.dropFirst(4)).removingPercentEncoding ?? "", configuration.controlKey)
        }
    }

    /// `POST /.httpcachefs/control/{refresh,rm,clear,pin,unpin,mount,unmount,s3-key}` (after `/t/TOKEN` when the proxy has a
    /// token), with the control key; any other POST is 405. `s3-key?url=U` asks the mounts' host
    /// which cache key (and so which keys' identity) the daemon reads a bucket object with.
    private func controlRoute(target: String, controlKey: String?) -> ProxyRoute {
        let notAllowed = ProxyRoute.reject(status: 405, message: "only GET and HEAD are supported")
        var path = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first.map(String.init) ?? target
        if let expected = configuration.token, !expected.isEmpty {
            guard let given = tokenPrefix(of: path), constantTimeEqual(given, expected) else {
                return .reject(status: 403, message: "this proxy requires its token: use the URLs printed by 'httpcachefs url'")
            }
            path.removeFirst(3 + given.count)
        }
        guard path.hasPrefix(ControlRequest.pathPrefix) else { return notAllowed }
        let action = path.dropFirst(ControlRequest.pathPrefix.count)
        guard ["refresh", "rm", "clear", "pin", "unpin", "mount", "unmount", "s3-key"].contains(action) else { return notAllowed }
        guard let controlKey, constantTimeEqual(controlKey, configuration.controlKey) else {
            return .reject(status: 403, message: "control requests need the key in this daemon's runtime file (\(ProxyStatus.runtimeFileName)): use 'httpcachefs refresh' or 'httpcachefs cache rm/clear'")
        }
        let items = URLComponents(string: "http://x" + target)?.queryItems ?? []
        switch action {
        case "refresh" where items.contains { $0.name == "mount" }, "mount", "unmount", "s3-key":
            return .control(.mounts(action: String(action), query: items))
        case "refresh":
            return .control(.refresh(path: items.first { $0.name == "path" }?.value))
        case "rm":
            let urls = items.filter { $0.name == "url" }.compactMap(\.value)
            guard !urls.isEmpty else { return .reject(status: 400, message: "no url= to remove") }
            return .control(.remove(urls: urls))
        case "pin":
            // `range=START-END` half-open byte offsets, repeatable; `limit=` the most bytes pinned in all.
            guard let url = items.first(where: { $0.name == "url" })?.value,
                  let limit = items.first(where: { $0.name == "limit" })?.value.flatMap({ Int64($0) }) else {
                return .reject(status: 400, message: "pin needs url= and limit=")
            }
            var ranges: [Range<Int64>] = []
            for item in items where item.name == "range" {
                let parts = (item.value ?? "").split(separator: "-").map { Int64($0) }
                guard parts.count == 2, let lo = parts[0], let hi = parts[1], lo >= 0, lo < hi else {
                    return .reject(status: 400, message: "bad range= for pin: \(item.value ?? "")")
                }
                ranges.append(lo..<hi)
            }
            return .control(.pin(url: url, ranges: ranges, limit: limit))
        case "unpin":
            let urls = items.filter { $0.name == "url" }.compactMap(\.value)
            guard !urls.isEmpty else { return .reject(status: 400, message: "no url= to unpin") }
            return .control(.unpin(urls: urls))
        default:
            return .control(.clear)
        }
    }

    /// `abc` for `/t/abc/...` or `/t/abc`.
    private func tokenPrefix(of path: String) -> String? {
        guard path.hasPrefix("/t/") else { return nil }
        let rest = path.dropFirst(3)
        let token = rest.prefix { $0 != "/" }
        return token.isEmpty ? nil : String(token)
    }

    private func constantTimeEqual(_ a: String, _ b: String) -> Bool {
        let x = Array(a.utf8), y = Array(b.utf8)
        guard x.count == y.count else { return false }
        var diff: UInt8 = 0
        for i in 0..<x.count { diff |= x[i] ^ y[i] }
        return diff == 0
    }
}
