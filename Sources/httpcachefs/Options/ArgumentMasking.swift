import Foundation

/// Hides the secrets in a long-running process's own arguments, which `ps` and
/// `/proc/PID/cmdline` show to every user on the machine: the password of a URL's user-info
/// (`https://user:***@host/`), the value of every `--header` (each is a credential: an API key, a
/// session, `X-Auth-Password` look like any other header), also as an fstab word
/// (`-o header=Name: ***`), the proxy's `--token`, the remote control's `--rc-pass`, and
/// `--s3-secret-access-key` and `--s3-session-token`.
///
/// The background mount re-executes itself with the user's arguments, so without this a password
/// typed once would stay on view for the daemon's whole life. Its own options never need it:
/// `--password-file` and netrc files carry only paths. The bytes are overwritten in place, as
/// mysql does with `-p`: the kernel reads the arguments from the process's memory, and
/// ArgumentParser has long copied them into Swift strings. The process that was started by hand
/// shows them until it returns; prefer the files.
enum ArgumentMasking {
    /// Masks this process's argument vector. Call once the arguments were parsed.
    static func maskOwnArguments() {
        let argv = CommandLine.unsafeArgv
        var previous: String?
        for i in 1..<Int(CommandLine.argc) {
            guard let p = argv[i] else { continue }
            let text = String(cString: p)
            let utf8 = text.utf8
            // Offsets below are into the C string: skip one that was not valid UTF-8 (repaired).
            if utf8.count == strlen(p) {
                for range in secretRanges(text, after: previous) {
                    let start = utf8.distance(from: utf8.startIndex, to: range.lowerBound)
                    let end = utf8.distance(from: utf8.startIndex, to: range.upperBound)
                    for j in start..<end { p[j] = CChar(UInt8(ascii: "*")) }   // same length: nothing moves
                }
            }
            previous = text
        }
    }

    /// `arguments` with their secrets masked, as `maskOwnArguments` leaves its own: for
    /// arguments a daemon keeps and lists (a joining mount's).
    static func masked(_ arguments: [String]) -> [String] {
        var previous: String?
        return arguments.map { text in
            defer { previous = text }
            var masked = text
            for range in secretRanges(text, after: previous).reversed() {
                masked.replaceSubrange(range, with: String(repeating: "*", count: text[range].count))
            }
            return masked
        }
    }

    /// Where `argument` (which follows `previous` on the command line) holds a secret.
    static func secretRanges(_ argument: String, after previous: String?) -> [Range<String.Index>] {
        for option in ["--token", "--rc-pass", "--s3-secret-access-key", "--s3-session-token"] {
            if previous == option { return argument.isEmpty ? [] : [argument.startIndex..<argument.endIndex] }
            if argument.hasPrefix(option + "=") {
                let start = argument.index(argument.startIndex, offsetBy: option.count + 1)
                return start < argument.endIndex ? [start..<argument.endIndex] : []
            }
        }
        if previous == "--header" { return headerValue(argument).map { [$0] } ?? [] }
        if argument.hasPrefix("--header=") {
            return headerValue(argument, from: argument.index(argument.startIndex, offsetBy: "--header=".count)).map { [$0] } ?? []
        }
        if previous == "-o" || argument.hasPrefix("-o") { return fstabHeaderValues(argument) + (userInfoPassword(argument).map { [$0] } ?? []) }
        return userInfoPassword(argument).map { [$0] } ?? []
    }

    /// The values of `header=Name: value` words in a `-o` list (a value ends at the next comma).
    static func fstabHeaderValues(_ text: String) -> [Range<String.Index>] {
        var ranges: [Range<String.Index>] = []
        var from = text.startIndex
        while let word = text.range(of: "header=", range: from..<text.endIndex) {
            let end = text[word.upperBound...].firstIndex(of: ",") ?? text.endIndex
            if let colon = text[word.upperBound..<end].firstIndex(of: ":") {
                let value = text[text.index(after: colon)..<end].drop { $0 == " " }
                if !value.isEmpty { ranges.append(value.startIndex..<value.endIndex) }
            }
            from = end
        }
        return ranges
    }

    /// The password in the user-info of a URL inside `text` (`NAME=https://u:PW@host/...` too).
    static func userInfoPassword(_ text: String) -> Range<String.Index>? {
        guard let scheme = text.range(of: "://") else { return nil }
        let authorityEnd = text[scheme.upperBound...].firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? text.endIndex
        let authority = text[scheme.upperBound..<authorityEnd]
        guard let at = authority.lastIndex(of: "@"), let colon = authority[..<at].firstIndex(of: ":") else { return nil }
        let start = text.index(after: colon)
        return start < at ? start..<at : nil
    }

    /// The value of a `--header`: every one is taken for a credential (a name list missed
    /// `X-Auth-Password`; the header's name stays readable).
    static func headerValue(_ text: String, from start: String.Index? = nil) -> Range<String.Index>? {
        let line = text[(start ?? text.startIndex)...]
        guard let colon = line.firstIndex(of: ":") else { return nil }
        let value = text[text.index(after: colon)...].drop { $0 == " " }
        return value.isEmpty ? nil : value.startIndex..<value.endIndex
    }
}
