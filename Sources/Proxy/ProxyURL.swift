import CacheCore
import Foundation

/// Proxy URLs: the original URL rides in one path segment, and the path ends with the original's
/// own last segment.
///
///     http://127.0.0.1:8718/s/<signature>/u/<base64url(original)>/video.mp4
///     http://192.168.1.5:8718/t/<token>/s/<signature>/u/<base64url(original)>/video.mp4
///     http://127.0.0.1:8718/?url=<percent-encoded original>&sig=<signature>   (accepted, never generated)
///
/// Why the last segment: players and browsers sniff the extension (`.m3u8`, `.mp4`) to pick a
/// demuxer. Why a segment and not a query: the directory of a proxy URL, `/s/<sig>/u/<b64>/`,
/// then mirrors the original's directory, so a relative reference the proxy did not rewrite (a
/// DASH manifest's segment names, a subtitle next to the video) lands at
/// `/s/<sig>/u/<b64>/<relative>`, which `decode` resolves against the original URL (kept on the
/// original's scheme, host and port) and marks as such (`ProxyTarget.reference`).
///
/// Proof of ownership: the daemon fetches only what its owner asked for, so a URL carries either
/// the token (`/t/`, for proxies reachable from the network) or `/s/<signature>`, the
/// `ProxySigningKey` MAC of the original (the base64url segment). The router checks it.
///
/// A signed URL is one resource: the signature covers the original exactly,
/// and opens that and nothing else; a relative reference under it is refused (403), since it
/// would open every path of the origin, with the owner's credentials for it, to whoever holds
/// the URL of one public file. What a player needs besides comes signed: the playlist rewrite
/// signs every URI it writes (segments, keys, maps, variants, renditions). Under the token, a
/// relative reference still resolves: the token is proof for any URL at all (its holder can
/// write `/t/<token>/u/<any URL>`), and it is what serves a DASH manifest's unrewritten names.
public enum ProxyURL {
    /// A request header (any value) asking the proxy for the range asked and nothing more: the
    /// file's open takes no first bytes along (a one-byte probe instead of the usual 256 KiB).
    /// Sent by `preload` through a daemon, so that `--head 64K --tail 64K` fetches just those.
    public static let exactRangeHeader = "X-HTTPCacheFS-Exact-Range"
    /// A request header (any value) asking that the slices the request reads go to the cap's
    /// scan share, as a media scanner's do. Sent by `preload --head/--tail` through a daemon.
    public static let scanShareHeader = "X-HTTPCacheFS-Scan-Share"
    /// A request header (any value) saying the request warms the cache (`preload` through a
    /// daemon): its reader is a background one (`ReaderClass.background`), fetched with what the
    /// link has left and counted as warm-up, not as a player. It can only lower a request's
    /// standing, so it needs no more proof than the request's own.
    public static let warmUpHeader = "X-HTTPCacheFS-Warm-Up"

    /// A proxy URL for `original`. `base` is `http://host:port` (no trailing slash), or "" for a
    /// root-relative URL (what the HLS rewriter emits, so it works whatever Host the player used).
    /// The URL carries the token if given, and the signature if a key is: either is proof, and
    /// with both it keeps working whether the proxy runs with that token or without one. With
    /// neither it carries no proof (the proxy refuses it: only tests of that refusal make one).
    ///
    /// The original is taken in its one spelling (`URLSpelling`: no fragment, escaped as curl
    /// does), as `decode` gives it back, so the signature covers the URL the proxy will check:
    /// signed as written, a playlist's `seg.ts#t=10` was refused by the proxy that rewrote it.
    public static func make(original: String, base: String, token: String?, key: ProxySigningKey?) -> String {
        let original = (try? URLSpelling.normalize(original)) ?? original
        var s = base
        if let token, !token.isEmpty { s += "/t/" + token }
        if let key { s += "/s/" + key.signature(for: original) }
        s += "/u/" + Base64URL.encode(Array(original.utf8)) + "/" + lastSegment(of: original)
        return s
    }

    /// The original URL named by a request target (path and optional query), and the token and
    /// signature the target carried (checked by the router, not here). Throws
    /// `ProxyURLError.notProxyPath` for targets that are not proxy URLs (404), `.invalid` for
    /// proxy URLs that do not decode to a safe http(s) URL (400).
    public static func decode(path target: String) throws -> ProxyTarget {
        let (path, query) = splitQuery(target)
        var rest = Substring(path)
        let token = takePrefix("/t/", of: &rest)
        var signature = takePrefix("/s/", of: &rest)
        if rest == "/" || rest.isEmpty {
            guard let query, let encoded = queryValue(query, name: "url") else { throw ProxyURLError.notProxyPath }
            if signature == nil { signature = queryValue(query, name: "sig") }
            let url = try validated(encoded)
            return ProxyTarget(url: url, token: token, signature: signature, signedURL: url)
        }
        guard rest.hasPrefix("/u/") else { throw ProxyURLError.notProxyPath }
        let afterU = rest.dropFirst(3)
        let end = afterU.firstIndex(of: "/") ?? afterU.endIndex
        guard let bytes = Base64URL.decode(afterU[..<end]) else {
            throw ProxyURLError.invalid("the proxy URL's encoded segment is not base64url")
        }
        guard let decoded = String(validating: bytes, as: UTF8.self) else {
            throw ProxyURLError.invalid("the proxy URL's encoded segment is not UTF-8 text")
        }
        let original = try validated(decoded)
        var remainder = end < afterU.endIndex ? String(afterU[afterU.index(after: end)...]) : ""
        if remainder.isEmpty || same(remainder, lastSegment(of: original)) {
            return ProxyTarget(url: original, token: token, signature: signature, signedURL: original)
        }
        if let query { remainder += "?" + query }
        var target = ProxyTarget(url: try resolve(remainder, against: original), token: token, signature: signature,
                                 signedURL: original)
        target.reference = remainder
        return target
    }

    /// `abc` for a path starting `/t/abc/` (`marker` "/t/"), which is then taken off `rest`
    /// (leaving "/" at least).
    private static func takePrefix(_ marker: String, of rest: inout Substring) -> String? {
        guard rest.hasPrefix(marker) else { return nil }
        let after = rest.dropFirst(marker.count)
        let end = after.firstIndex(of: "/") ?? after.endIndex
        let value = String(after[..<end])
        rest = after[end...]
        if rest.isEmpty { rest = "/" }
        return value
    }

    /// A reference under `/u/<b64>/` other than the original's own name: resolved like a
    /// browser would against the original, and kept only on the same origin.
    private static func resolve(_ reference: String, against original: String) throws -> String {
        guard let base = URL(string: original), let url = URL(string: reference, relativeTo: base)?.absoluteURL,
              let resolvedComponents = URLComponents(url: url, resolvingAgainstBaseURL: false),
              let baseComponents = URLComponents(string: original) else {
            throw ProxyURLError.invalid("'\(reference)' does not resolve against the original URL")
        }
        guard resolvedComponents.scheme?.lowercased() == baseComponents.scheme?.lowercased(),
              resolvedComponents.host?.lowercased() == baseComponents.host?.lowercased(),
              resolvedComponents.port == baseComponents.port else {
            throw ProxyURLError.invalid("a relative reference may not leave the original's host")
        }
        return try validated(url.absoluteString)
    }

    /// Only absolute http(s) URLs with a host and no line breaks are ever proxied.
    private static func validated(_ url: String) throws -> String {
        // Checked on scalars: "\r\n" is a single Character, which a Character comparison misses.
        if url.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            throw ProxyURLError.invalid("not proxied: the URL contains a line break or control character")
        }
        do {
            _ = try KeyRules.validate(url)
        } catch let error as CacheError {
            if case let .invalidURL(_, reason) = error { throw ProxyURLError.invalid("not proxied: \(reason)") }
            throw ProxyURLError.invalid("not proxied: \(error)")
        }
        return (try? URLSpelling.normalize(url)) ?? url   // one spelling per resource
    }

    /// The original's last path segment, percent-encoded as in the original; "" when the path
    /// ends with a slash (the proxy URL then ends with one too).
    static func lastSegment(of url: String) -> String {
        if let plain = plainLastSegment(of: url) { return plain }
        return recentLastSegments.value(for: url) { url in
            guard let c = URLComponents(string: url) else { return "" }
            let path = c.percentEncodedPath
            guard !path.hasSuffix("/"), let last = path.split(separator: "/").last else { return "" }
            return String(last)
        }
    }

    /// `lastSegment` read off the bytes of an http(s) URL made of URL characters only (no `%`,
    /// brackets or spaces), where `URLComponents` finds the same path: a playlist rewrite names
    /// every segment, and each was a parse (and a miss of the cache below). nil: ask Foundation.
    static func plainLastSegment(of url: String) -> String? {
        let bytes = url.utf8
        let prefix: Int
        if bytes.starts(with: "http://".utf8) { prefix = 7 } else if bytes.starts(with: "https://".utf8) { prefix = 8 } else { return nil }
        guard bytes.allSatisfy(isPlainURLByte) else { return nil }
        let rest = bytes.dropFirst(prefix)
        guard let pathStart = rest.firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") }),
              rest[pathStart] == UInt8(ascii: "/") else { return "" }
        let afterPath = rest[pathStart...]
        let path = afterPath.prefix { $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") }
        guard let lastSlash = path.lastIndex(of: UInt8(ascii: "/")) else { return "" }
        return String(decoding: path[path.index(after: lastSlash)...], as: UTF8.self)
    }

    /// Printable ASCII that may stand in a URL as it is, less `%` and the brackets.
    private static func isPlainURLByte(_ b: UInt8) -> Bool {
        switch b {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "-._~:/?#@!$&'()*+,;=".utf8.contains(b)
        }
    }

    /// Every proxied request compares its name with the original's (`decode`): parsed once per URL.
    private static let recentLastSegments = RecentResults<String>()

    private static func same(_ a: String, _ b: String) -> Bool {
        a == b || (a.removingPercentEncoding ?? a) == (b.removingPercentEncoding ?? b)
    }

    private static func splitQuery(_ target: String) -> (String, String?) {
        guard let q = target.firstIndex(of: "?") else { return (target, nil) }
        return (String(target[..<q]), String(target[target.index(after: q)...]))
    }

    /// Form-style query lookup: `+` is a space, values are percent-decoded.
    private static func queryValue(_ query: String, name: String) -> String? {
        for pair in query.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            guard kv.count == 2, kv[0] == name else { continue }
            return String(kv[1]).replacingOccurrences(of: "+", with: " ").removingPercentEncoding
        }
        return nil
    }
}

/// What a proxy request target names.
public struct ProxyTarget: Equatable, Sendable {
    /// The original http(s) URL to serve (full query, exactly as encoded).
    public var url: String
    /// The token from a `/t/<token>/` prefix, if any.
    public var token: String?
    /// The signature from `/s/<sig>/` (or `&sig=` of the query form), if any.
    public var signature: String?
    /// The URL the signature covers: the encoded original, which `url` differs from when the
    /// target is a relative reference under it.
    public var signedURL: String
    /// The relative reference under the encoded original that `url` resolves (a path other than
    /// the original's own last segment); nil when the target is the original itself. Only the
    /// token (or the control key) opens one: a signature covers the original alone.
    public var reference: String?

    public init(url: String, token: String?, signature: String? = nil, signedURL: String? = nil) {
        self.url = url
        self.token = token
        self.signature = signature
        self.signedURL = signedURL ?? url
    }

    /// Whether the target carries `key`'s signature of the very resource it names: the
    /// original it encodes, not a relative reference under it (`signsOnlyTheOriginal`).
    public func isSigned(by key: ProxySigningKey) -> Bool {
        reference == nil && carriesSignature(of: key)
    }

    /// A relative reference under a URL that `key` signed: the signature is genuine, and opens
    /// the original, not this (the router says so in its 403).
    public func signsOnlyTheOriginal(by key: ProxySigningKey) -> Bool {
        reference != nil && carriesSignature(of: key)
    }

    private func carriesSignature(of key: ProxySigningKey) -> Bool {
        guard let signature else { return false }
        return key.verifies(signature: signature, for: signedURL)
    }
}

public enum ProxyURLError: Error, Equatable, CustomStringConvertible {
    /// Not one of the proxy URL forms (answered 404).
    case notProxyPath
    /// A proxy URL whose original is malformed or not allowed (answered 400).
    case invalid(String)

    public var description: String {
        switch self {
        case .notProxyPath: return "not a proxy URL: get one from 'httpcachefs url URL'"
        case let .invalid(message): return message
        }
    }
}

/// RFC 4648 section 5 base64url without padding; decoding also accepts padding and `+` from the
/// standard alphabet, because people paste what other tools produce (a standard `/` cannot
/// survive in a path segment).
public enum Base64URL {
    /// Encodes by table, one pass: a playlist rewrite encodes every segment's URL, and the way
    /// through Foundation (`Data`, then three replacements on an NSString) was most of the 5 s
    /// a 150,000-segment playlist took.
    public static func encode(_ bytes: [UInt8]) -> String {
        let alphabet = encodeAlphabet
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 4 + 2) / 3)
        var i = 0
        while i + 3 <= bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            out.append(alphabet[Int(n >> 18)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)])
            out.append(alphabet[Int(n & 63)])
            i += 3
        }
        switch bytes.count - i {
        case 1:
            let n = UInt32(bytes[i]) << 16
            out.append(alphabet[Int(n >> 18)])
            out.append(alphabet[Int(n >> 12 & 63)])
        case 2:
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out.append(alphabet[Int(n >> 18)])
            out.append(alphabet[Int(n >> 12 & 63)])
            out.append(alphabet[Int(n >> 6 & 63)])
        default:
            break
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static let encodeAlphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Decodes by table, one pass over the UTF-8 bytes: every proxy request decodes its URL, and
    /// the way through Foundation (two replacements, a padded copy, `Data`) cost more than the
    /// open of the cached file it named.
    public static func decode<S: StringProtocol>(_ text: S) -> [UInt8]? {
        var values: [UInt8] = []
        values.reserveCapacity(text.utf8.count)
        var padded = false
        for c in text.utf8 {
            if c == UInt8(ascii: "=") { padded = true; continue }
            guard !padded else { return nil }   // `=` only at the end
            let v = decodeTable[Int(c)]
            guard v != 0xFF else { return nil }
            values.append(v)
        }
        guard !values.isEmpty, values.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(values.count * 3 / 4)
        var i = 0
        while i + 4 <= values.count {
            let n = UInt32(values[i]) << 18 | UInt32(values[i + 1]) << 12 | UInt32(values[i + 2]) << 6 | UInt32(values[i + 3])
            out.append(UInt8(truncatingIfNeeded: n >> 16))
            out.append(UInt8(truncatingIfNeeded: n >> 8))
            out.append(UInt8(truncatingIfNeeded: n))
            i += 4
        }
        switch values.count - i {
        case 2:
            out.append(values[i] << 2 | values[i + 1] >> 4)
        case 3:
            out.append(values[i] << 2 | values[i + 1] >> 4)
            out.append(values[i + 1] << 4 | values[i + 2] >> 2)
        default:
            break
        }
        return out
    }

    /// Each byte's 6-bit value; both alphabets' 62nd and 63rd characters (`-`/`+`, `_`/`/`);
    /// 0xFF for anything else.
    private static let decodeTable: [UInt8] = {
        var t = [UInt8](repeating: 0xFF, count: 256)
        for (i, c) in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789".utf8.enumerated() { t[Int(c)] = UInt8(i) }
        t[Int(UInt8(ascii: "-"))] = 62
        t[Int(UInt8(ascii: "+"))] = 62
        t[Int(UInt8(ascii: "_"))] = 63
        t[Int(UInt8(ascii: "/"))] = 63
        return t
    }()
}
