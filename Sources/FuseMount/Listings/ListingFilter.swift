import Foundation

/// `--include GLOB` / `--exclude GLOB` on listings, read as rclone's filter rules read them.
///
/// rclone's glob syntax (`GlobMatcher`): `*` is any run of characters but `/`, `**` any run at
/// all, `?` one character but `/`, `[...]` a class, `{a,b}` either, `\x` the character x. A glob
/// starting with `/` is matched from the mount's root; any other matches at the end of the path,
/// from a segment's start (`*.mkv` matches `/Films/a.mkv`). A glob ending in `/` is for
/// directories (`--exclude Extras/` hides them and all under them). Matching takes time linear in
/// the path whatever the glob: names come from the origin, and a backtracking regexp would spend
/// minutes of CPU on a listing of long names against a glob of several stars (`GlobMatcher`).
///
/// Order, as rclone: the includes in the order given, then the excludes, then, if there was an
/// include, "exclude everything else"; the first rule that matches says. A file is tested by its
/// path from the mount's root (`/Films/a.mkv`); a directory by its path with a `/` (`/Films/`)
/// against the given rules only, so include rules for files never hide the folders they are in.
/// Pure and immutable: built once at mount, used under the file system's lock when a listing is
/// applied.
public struct ListingFilter: Sendable, Equatable {
    struct Rule: Equatable {
        var include: Bool
        var glob: String
        var matcher: GlobMatcher
        static func == (a: Rule, b: Rule) -> Bool { a.include == b.include && a.glob == b.glob }
    }

    let rules: [Rule]
    let excludeTheRest: Bool

    /// nil when there is nothing to filter; throws `Invalid` naming a glob that does not compile.
    public init?(include: [String], exclude: [String]) throws {
        guard !include.isEmpty || !exclude.isEmpty else { return nil }
        rules = try include.map { Rule(include: true, glob: $0, matcher: try Self.matcher($0)) }
            + exclude.map { Rule(include: false, glob: $0, matcher: try Self.matcher($0)) }
        excludeTheRest = !include.isEmpty
    }

    public struct Invalid: Error, CustomStringConvertible {
        public var description: String
    }

    /// Whether the entry at `path` (from the mount's root, starting with `/`) stays.
    public func allows(_ path: String, isDirectory: Bool) -> Bool {
        var steps = 0
        return allows(path, isDirectory: isDirectory, steps: &steps)
    }

    /// `allows`, counting the matchers' steps (tests bound them).
    func allows(_ path: String, isDirectory: Bool, steps: inout Int) -> Bool {
        let subject = isDirectory ? (path.hasSuffix("/") ? path : path + "/") : path
        for rule in rules where rule.matcher.matches(subject, steps: &steps) {
            return rule.include
        }
        return isDirectory || !excludeTheRest
    }

    static func matcher(_ glob: String) throws -> GlobMatcher {
        do { return try GlobMatcher(glob) } catch let error as GlobMatcher.Invalid {
            throw Invalid(description: error.description)
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
