import Foundation

/// Turns names under `MOUNTPOINT/.url/SCHEME/HOST/` back into URLs.
///
/// Names are usually pasted from URLs, so valid `%XX` escapes are kept as they are and only
/// characters a URL path cannot hold are encoded; the first `?` of a name starts its query.
enum ByURLPath {
    static let schemes: Set<String> = ["http", "https"]

    /// A host name (with optional `:port`) that can form a URL, or nil.
    static func validHost(_ name: String) -> Bool {
        guard !name.isEmpty, name.utf8.count <= 255,
              !name.contains(where: { $0 == "/" || $0 == "?" || $0 == "#" || $0 == "@" || $0.isWhitespace || $0 == "%" })
        else { return false }
        guard let c = URLComponents(string: "http://\(name)/"), let host = c.host, !host.isEmpty else { return false }
        return true
    }

    /// `base` + `/` + the name encoded as one path segment (plus its query, if any).
    static func childURL(base: String, name: String) -> String {
        let (path, query) = split(name)
        var url = base + "/" + encode(path, allowed: segmentAllowed)
        if let query { url += "?" + encode(query, allowed: queryAllowed) }
        return url
    }

    static func split(_ name: String) -> (String, String?) {
        guard let q = name.firstIndex(of: "?") else { return (name, nil) }
        return (String(name[..<q]), String(name[name.index(after: q)...]))
    }

    static let segmentAllowed: CharacterSet = {
        var s = CharacterSet.urlPathAllowed
        s.remove(charactersIn: "/;?#")
        return s
    }()

    static let queryAllowed: CharacterSet = {
        var s = CharacterSet.urlQueryAllowed
        s.remove(charactersIn: "#")
        return s
    }()

    /// Percent-encodes what `allowed` lacks, keeping well-formed `%XX` escapes intact.
    static func encode(_ s: String, allowed: CharacterSet) -> String {
        var out = ""
        let scalars = Array(s.unicodeScalars)
        var i = 0
        func isHex(_ c: Unicode.Scalar) -> Bool { c.properties.isASCIIHexDigit }
        while i < scalars.count {
            let c = scalars[i]
            if c == "%" {
                if i + 2 < scalars.count, isHex(scalars[i + 1]), isHex(scalars[i + 2]) {
                    out.unicodeScalars.append(contentsOf: scalars[i...(i + 2)])
                    i += 3
                    continue
                }
                out += "%25"
            } else if allowed.contains(c) {
                out.unicodeScalars.append(c)
            } else {
                for b in String(c).utf8 { out += String(format: "%%%02X", b) }
            }
            i += 1
        }
        return out
    }
}
