import Foundation

/// `--include GLOB` / `--exclude GLOB` on listings, read as rclone's filter rules read them.
///
/// A glob becomes a regular expression as rclone makes one: `*` is any run of characters but
/// `/`, `**` any run at all, `?` one character but `/`, `[...]` a class, `{a,b}` either, `\x` the
/// character x. A glob starting with `/` is matched from the mount's root; any other matches at
/// the end of the path, from a segment's start (`*.mkv` matches `/Films/a.mkv`). A glob ending
/// in `/` is for directories (`--exclude Extras/` hides them and all under them).
///
/// Order, as rclone: the includes in the order given, then the excludes, then, if there was an
/// include, "exclude everything else"; the first rule that matches says. A file is tested by its
/// path from the mount's root (`/Films/a.mkv`); a directory by its path with a `/` (`/Films/`)
/// against the given rules only, so include rules for files never hide the folders they are in.
/// Pure and immutable: built once at mount, used under the file system's lock when a listing is
/// applied. `@unchecked Sendable`: its only class, NSRegularExpression, is immutable and safe to
/// use from several threads (Foundation documents it so).
public struct ListingFilter: @unchecked Sendable, Equatable {
    struct Rule: Equatable {
        var include: Bool
        var glob: String
        var regex: NSRegularExpression
        static func == (a: Rule, b: Rule) -> Bool { a.include == b.include && a.glob == b.glob }
    }

    let rules: [Rule]
    let excludeTheRest: Bool

    /// nil when there is nothing to filter; throws `Invalid` naming a glob that does not compile.
    public init?(include: [String], exclude: [String]) throws {
        guard !include.isEmpty || !exclude.isEmpty else { return nil }
        rules = try include.map { Rule(include: true, glob: $0, regex: try Self.regex($0)) }
            + exclude.map { Rule(include: false, glob: $0, regex: try Self.regex($0)) }
        excludeTheRest = !include.isEmpty
    }

    public struct Invalid: Error, CustomStringConvertible {
        public var description: String
    }

    /// Whether the entry at `path` (from the mount's root, starting with `/`) stays.
    public func allows(_ path: String, isDirectory: Bool) -> Bool {
        let subject = isDirectory ? (path.hasSuffix("/") ? path : path + "/") : path
        let range = NSRange(subject.startIndex..., in: subject)
        for rule in rules where rule.regex.firstMatch(in: subject, range: range) != nil {
            return rule.include
        }
        return isDirectory || !excludeTheRest
    }

    /// rclone's glob-to-regexp.
    static func regex(_ glob: String) throws -> NSRegularExpression {
        var out = glob.hasPrefix("/") ? "^" : "(^|/)"
        var chars = Array(glob)[...]
        var braces = 0
        var inClass = false
        while let c = chars.first {
            chars = chars.dropFirst()
            if inClass {
                if c == "]" { inClass = false }
                out.append(c == "\\" ? "\\\\" : String(c))
                continue
            }
            switch c {
            case "\\":
                guard let next = chars.first else { throw Invalid(description: "glob '\(glob)' ends with a lone '\\'") }
                chars = chars.dropFirst()
                out += NSRegularExpression.escapedPattern(for: String(next))
            case "*":
                if chars.first == "*" {
                    chars = chars.dropFirst()
                    out += ".*"
                } else {
                    out += "[^/]*"
                }
            case "?": out += "[^/]"
            case "[":
                inClass = true
                out += "["
                if chars.first == "!" { chars = chars.dropFirst(); out += "^" }
            case "{": braces += 1; out += "("
            case "}" where braces > 0: braces -= 1; out += ")"
            case "," where braces > 0: out += "|"
            default: out += NSRegularExpression.escapedPattern(for: String(c))
            }
        }
        if inClass { throw Invalid(description: "glob '\(glob)' has a '[' without its ']'") }
        if braces > 0 { throw Invalid(description: "glob '\(glob)' has a '{' without its '}'") }
        do { return try NSRegularExpression(pattern: out + "$") } catch {
            throw Invalid(description: "glob '\(glob)' is not a pattern: \(error)")
        }
    }
}

extension InodeTable {
    /// `/dir/name` of `node` from the mount's root.
    func path(of node: Node) -> String {
        var names: [String] = []
        var current: Node? = node
        while let n = current, n.ino != Self.rootIno {
            names.append(n.name)
            current = self.node(n.parent)
        }
        return "/" + names.reversed().joined(separator: "/")
    }
}
