/// URLs as they are shown: in log lines, `cache ls` and `cache info`, the status document and
/// the status page. A password in a URL's userinfo (`https://user:pw@host/`) is the user's secret,
/// and these are read by other programs, pasted into bug reports, kept in journals: it becomes
/// `user:***`. The cache itself keeps and fetches the URL as given.
public enum DisplayURL {
    /// `url` with the password of its userinfo masked; unchanged when it has none.
    public static func redacted(_ url: String) -> String {
        redactingPasswords(in: url)
    }

    /// `text` with the password of every `scheme://user:password@` in it masked: a log line or an
    /// error message that quotes URLs anywhere.
    public static func redactingPasswords(in text: String) -> String {
        let bytes = Array(text.utf8)
        guard bytes.count >= 4, text.contains("://") else { return text }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var i = 0
        var changed = false
        while i < bytes.count {
            // At "://": the authority runs to the first "/", "?", "#" or white space; its userinfo,
            // if any, ends at its last "@".
            if bytes[i] == UInt8(ascii: ":"), i + 2 < bytes.count, bytes[i + 1] == UInt8(ascii: "/"), bytes[i + 2] == UInt8(ascii: "/") {
                out.append(contentsOf: bytes[i..<(i + 3)])
                let start = i + 3
                var end = start
                while end < bytes.count, !Self.endsAuthority(bytes[end]) { end += 1 }
                if let at = bytes[start..<end].lastIndex(of: UInt8(ascii: "@")),
                   let colon = bytes[start..<at].firstIndex(of: UInt8(ascii: ":")), colon + 1 < at {
                    out.append(contentsOf: bytes[start...colon])
                    out.append(contentsOf: Array("***".utf8))
                    out.append(contentsOf: bytes[at..<end])
                    changed = true
                } else {
                    out.append(contentsOf: bytes[start..<end])
                }
                i = end
                continue
            }
            out.append(bytes[i])
            i += 1
        }
        return changed ? String(decoding: out, as: UTF8.self) : text
    }

    private static func endsAuthority(_ b: UInt8) -> Bool {
        b == UInt8(ascii: "/") || b == UInt8(ascii: "?") || b == UInt8(ascii: "#") || b == UInt8(ascii: " ")
            || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\n") || b == UInt8(ascii: "\t") || b == UInt8(ascii: "'")
            || b == UInt8(ascii: "<") || b == UInt8(ascii: ">")
    }
}
