/// One spelling per resource: the form every URL takes where it enters (command line, URL lists,
/// listings, proxy URLs), which is also the form its cache key is made of.
///
/// What it does, in order (a pure function over the URL's bytes; no Foundation, no I/O):
/// - Characters a URL may not hold are percent-encoded as curl's URL parser encodes them
///   (`CURLU_URLENCODE`): a space becomes `%20`, `"<>\^`{|}` and brackets outside the host,
///   and every byte of a non-ASCII character, become `%XX`; a `%` that starts no `%XX` becomes
///   `%25`. A line break or other control character is refused (it is never part of a name
///   someone meant, and in a request it would split the header).
/// - RFC 3986 §6.2.2: scheme and host lower-case, hex digits of `%XX` upper-case, `%XX` of an
///   unreserved character (`A-Z a-z 0-9 - . _ ~`) decoded, `.` and `..` segments removed, the
///   default port (80, 443) and an empty port dropped, an empty path made `/`. The fragment,
///   which is never sent, is dropped.
/// - One fixed choice beyond the RFC, in the path only: `%21 %27 %28 %29 %2A` are written as
///   `! ' ( ) *`. RFC 3986 keeps them apart because a scheme *may* give them a meaning, but
///   HTTP servers give them none in a path: nginx, Apache, lighttpd, Caddy and S3 decode the
///   path before looking the file up, so both spellings name one file. The raw form is what curl
///   and browsers send for a name typed as is, what JavaScript's `encodeURIComponent` leaves, and
///   what nginx's and Apache's listings link to; Python's `quote` and PHP's `rawurlencode`
///   encode them, which is where `Alpha%20Centauri%20%281971%29.mp4` comes from. The other
///   sub-delimiters keep their spelling: `+` is a space to some servers (S3), `;` starts path
///   parameters (Tomcat), `= & , $` are left as given. The query is the application's: only the
///   RFC's safe rules apply there.
///
/// Idempotent (`normalize(normalize(u)) == normalize(u)`), and a URL already in this form comes
/// back as the same string, so keys of cache entries written in it stay what they were.
public enum URLSpelling {
    /// Why a URL cannot be made valid, in words for a one-line error.
    public struct Invalid: Error, Equatable, CustomStringConvertible {
        public var reason: String
        public var description: String { reason }
    }

    /// The one spelling of `url`, or why there is none.
    public static func normalize(_ url: String) throws -> String {
        var bytes = Array(url.utf8)[...]
        // Pasted URLs carry spaces and tabs around them; inside they are part of a name.
        while let b = bytes.first, b == 0x20 || b == 0x09 { bytes = bytes.dropFirst() }
        while let b = bytes.last, b == 0x20 || b == 0x09 { bytes = bytes.dropLast() }
        if bytes.contains(where: { $0 == 0x0D || $0 == 0x0A }) { throw Invalid(reason: "contains a line break") }
        if bytes.contains(where: { $0 < 0x20 || $0 == 0x7F }) { throw Invalid(reason: "contains a control character") }

        guard let colon = bytes.firstIndex(of: UInt8(ascii: ":")),
              bytes[colon...].starts(with: "://".utf8) else {
            throw Invalid(reason: bytes.isEmpty ? "empty URL" : "not a URL: expected http://host/path or https://host/path")
        }
        let scheme = String(decoding: bytes[..<colon].map(lower), as: UTF8.self)
        guard scheme == "http" || scheme == "https" else {
            throw Invalid(reason: "only http and https URLs are supported")
        }
        let afterScheme = bytes[(colon + 3)...]
        let authorityEnd = afterScheme.firstIndex { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") } ?? afterScheme.endIndex
        let authority = afterScheme[..<authorityEnd]
        var rest = afterScheme[authorityEnd...]
        if let hash = rest.firstIndex(of: UInt8(ascii: "#")) { rest = rest[..<hash] }
        let pathEnd = rest.firstIndex(of: UInt8(ascii: "?")) ?? rest.endIndex
        let path = rest[..<pathEnd]
        let query = pathEnd < rest.endIndex ? rest[(pathEnd + 1)...] : nil

        var out = Array(scheme.utf8) + Array("://".utf8)
        try appendAuthority(authority, scheme: scheme, to: &out)
        var normalPath: [UInt8] = []
        encode(path, part: .path, into: &normalPath)
        out += removingDotSegments(normalPath.isEmpty ? [UInt8(ascii: "/")] : normalPath)
        if let query {
            out.append(UInt8(ascii: "?"))
            encode(query, part: .query, into: &out)
        }
        let result = String(decoding: out, as: UTF8.self)
        return result == url ? url : result
    }

    /// The key of an entry written by an earlier version, respelled: its URL part normalized, a
    /// credentials suffix (`#cred-…`, after a `#` no normal URL has) kept. nil when the URL part
    /// cannot be normalized (the key is then left as it is).
    public static func respell(storedKey key: String) -> String? {
        var url = Substring(key), suffix = Substring("")
        if let hash = key.firstIndex(of: "#") { url = key[..<hash]; suffix = key[hash...] }
        guard let normal = try? normalize(String(url)) else { return nil }
        return normal + suffix
    }

    // MARK: Parts

    private enum Part { case userInfo, path, query }

    private static func appendAuthority(_ authority: ArraySlice<UInt8>, scheme: String, to out: inout [UInt8]) throws {
        var hostPort = authority
        if let at = authority.lastIndex(of: UInt8(ascii: "@")) {
            encode(authority[..<at], part: .userInfo, into: &out)
            out.append(UInt8(ascii: "@"))
            hostPort = authority[(at + 1)...]
        }
        var host = hostPort, port: ArraySlice<UInt8> = []
        if hostPort.first == UInt8(ascii: "[") {
            guard let close = hostPort.firstIndex(of: UInt8(ascii: "]")) else { throw Invalid(reason: "the IPv6 address of the host has no closing ']'") }
            host = hostPort[...close]
            let after = hostPort[(close + 1)...]
            if !after.isEmpty {
                guard after.first == UInt8(ascii: ":") else { throw Invalid(reason: "unexpected characters after the host's ']'") }
                port = after.dropFirst()
            }
        } else if let c = hostPort.lastIndex(of: UInt8(ascii: ":")) {
            host = hostPort[..<c]
            port = hostPort[(c + 1)...]
        }
        guard !host.isEmpty else { throw Invalid(reason: "no host") }
        if host.first == UInt8(ascii: "[") {
            // An IP literal: hex digits, colons and dots (an IPv4 tail) inside the brackets.
            let inside = host.dropFirst().dropLast()
            guard !inside.isEmpty, inside.allSatisfy({ hexValue($0) != nil || $0 == UInt8(ascii: ":") || $0 == UInt8(ascii: ".") }) else {
                throw Invalid(reason: "the host '\(String(decoding: host, as: UTF8.self))' is not an IPv6 address")
            }
        } else if let bad = host.first(where: { !isHostByte($0) }) {
            if bad >= 0x80 { throw Invalid(reason: "the host is not ASCII: write it as its xn-- (punycode) name") }
            throw Invalid(reason: "the host contains '\(String(UnicodeScalar(bad)))', which no host name has")
        }
        out += host.map(lower)
        guard port.allSatisfy(isDigit), port.count <= 5 else {
            throw Invalid(reason: "the port '\(String(decoding: port, as: UTF8.self))' is not a number")
        }
        if let number = Int(String(decoding: port, as: UTF8.self)) {
            guard number <= 65535 else { throw Invalid(reason: "the port \(number) is out of range") }
            if !(scheme == "http" && number == 80) && !(scheme == "https" && number == 443) {
                out.append(UInt8(ascii: ":"))
                out += Array(String(number).utf8)
            }
        }
    }

    private static func encode(_ bytes: ArraySlice<UInt8>, part: Part, into out: inout [UInt8]) {
        var i = bytes.startIndex
        while i < bytes.endIndex {
            let b = bytes[i]
            if b == UInt8(ascii: "%"), i + 2 < bytes.endIndex,
               let hi = hexValue(bytes[i + 1]), let lo = hexValue(bytes[i + 2]) {
                let v = hi << 4 | lo
                if isUnreserved(v) || (part == .path && fixedChoice(v)) {
                    out.append(v)
                } else {
                    out += [UInt8(ascii: "%"), hexDigit(v >> 4), hexDigit(v & 15)]
                }
                i += 3
                continue
            }
            if b == UInt8(ascii: "%") {
                out += Array("%25".utf8)
            } else if isAllowed(b, in: part) {
                out.append(b)
            } else {
                out += [UInt8(ascii: "%"), hexDigit(b >> 4), hexDigit(b & 15)]
            }
            i += 1
        }
    }

    /// RFC 3986 §5.2.4, on a path whose dots are already decoded.
    static func removingDotSegments(_ path: [UInt8]) -> [UInt8] {
        let segments = path.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false).dropFirst()
        guard segments.contains(where: { $0.elementsEqual([0x2E]) || $0.elementsEqual([0x2E, 0x2E]) }) else { return path }
        var kept: [ArraySlice<UInt8>] = []
        for (n, s) in segments.enumerated() {
            let last = n == segments.count - 1
            if s.elementsEqual([0x2E]) {
                if last { kept.append([]) }
            } else if s.elementsEqual([0x2E, 0x2E]) {
                if !kept.isEmpty { kept.removeLast() }
                if last { kept.append([]) }
            } else {
                kept.append(s)
            }
        }
        var out: [UInt8] = []
        for s in kept { out.append(UInt8(ascii: "/")); out += s }
        return out.isEmpty ? [UInt8(ascii: "/")] : out
    }

    // MARK: Character classes

    private static func isUnreserved(_ b: UInt8) -> Bool {
        isAlpha(b) || isDigit(b) || b == UInt8(ascii: "-") || b == UInt8(ascii: ".") || b == UInt8(ascii: "_") || b == UInt8(ascii: "~")
    }

    /// The sub-delimiters written raw in a path (see the type's note for why these five).
    private static func fixedChoice(_ b: UInt8) -> Bool { "!'()*".utf8.contains(b) }

    private static func isAllowed(_ b: UInt8, in part: Part) -> Bool {
        if isUnreserved(b) || "!$&'()*+,;=".utf8.contains(b) { return true }
        switch part {
        case .userInfo: return b == UInt8(ascii: ":")
        case .path: return b == UInt8(ascii: ":") || b == UInt8(ascii: "@") || b == UInt8(ascii: "/")
        case .query: return b == UInt8(ascii: ":") || b == UInt8(ascii: "@") || b == UInt8(ascii: "/") || b == UInt8(ascii: "?")
        }
    }

    /// A host name's characters: letters, digits, `-`, `.`, `_`, `~` (RFC 3986 allows escapes
    /// and sub-delimiters in a reg-name too, but no resolver takes them).
    private static func isHostByte(_ b: UInt8) -> Bool { isUnreserved(b) }

    private static func isAlpha(_ b: UInt8) -> Bool { (0x41...0x5A).contains(b) || (0x61...0x7A).contains(b) }
    private static func isDigit(_ b: UInt8) -> Bool { (0x30...0x39).contains(b) }
    private static func lower(_ b: UInt8) -> UInt8 { (0x41...0x5A).contains(b) ? b | 0x20 : b }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: return b - 0x30
        case 0x41...0x46: return b - 0x41 + 10
        case 0x61...0x66: return b - 0x61 + 10
        default: return nil
        }
    }

    private static func hexDigit(_ v: UInt8) -> UInt8 { v < 10 ? 0x30 + v : 0x41 + v - 10 }
}
