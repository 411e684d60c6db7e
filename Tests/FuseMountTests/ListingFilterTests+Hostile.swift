import Foundation
import XCTest
@testable import FuseMount

/// Issue 46, item 7: globs of several stars against long names an origin chooses take steps
/// linear in the name (a backtracking regexp took seconds a name), and the glob syntax's corners.
extension ListingFilterTests {
    func testSeveralStarsAgainstLongHostileNamesTakeLinearSteps() throws {
        let globs = ["*a*a*a*a*a*a*a*a*b.mkv", "**a**a**a**a**a**b", "*{a,aa}*{a,aa}*{a,aa}*{a,aa}*.nfo",
                     "/**/*a*?*a*?*a*?*a*c", "*[ab]*[ab]*[ab]*[ab]*[ab]*z"]
        let long = String(repeating: "a", count: 250)
        let names = ["/" + long, "/Films/" + long + ".mkv", "/" + String(repeating: "a/", count: 125),
                     "/x/" + String(repeating: "ab", count: 125) + "a", "/" + long + "b.mkx"]
        for glob in globs {
            let filter = try XCTUnwrap(try ListingFilter(include: [], exclude: [glob]))
            let size = try XCTUnwrap(filter.rules.first).matcher.program.count
            for name in names {
                for isDirectory in [false, true] {
                    var steps = 0
                    XCTAssertTrue(filter.allows(name, isDirectory: isDirectory, steps: &steps), "\(glob) \(name): no match")
                    let characters = name.unicodeScalars.count + 1
                    // Per character: each instruction visited at most once as a state and once
                    // as a move's target.
                    XCTAssertLessThanOrEqual(steps, 2 * size * (characters + 1), "\(glob) against \(name.count) characters: \(steps) steps")
                }
            }
        }
        // And where they match, they still do.
        let filter = try XCTUnwrap(try ListingFilter(include: [], exclude: ["*a*a*a*a*a*a*a*a*b.mkv"]))
        XCTAssertFalse(filter.allows("/Films/" + long + "b.mkv", isDirectory: false))
    }

    func testTheGlobSyntaxCorners() throws {
        let cases: [(glob: String, path: String, matches: Bool, why: String)] = [
            ("*.{mkv,{nfo,jpg}}", "/a.jpg", true, "nested braces"),
            ("a{,.old}.mkv", "/a.mkv", true, "an empty alternative"),
            ("a{,.old}.mkv", "/a.old.mkv", true, "the other alternative"),
            ("[]x].mkv", "/].mkv", true, "] first is a member"),
            ("[a-c]?.mkv", "/b9.mkv", true, "a range"),
            ("[a-c]?.mkv", "/d9.mkv", false, "outside the range"),
            ("[^a-c].mkv", "/d.mkv", true, "^ negates as !"),
            ("[\\].mkv", "/\\.mkv", true, "a \\ in a class is itself"),
            ("a,b}.mkv", "/a,b}.mkv", true, ", and } outside braces are themselves"),
            ("?.mkv", "/é.mkv", true, "? is one character"),
            ("*.mkv", "/Films/", false, "a file glob against a folder"),
            ("**", "/x/y", true, "** is everything"),
            ("/a/**/b", "/a/x/y/b", true, "** across segments, anchored"),
            ("/a/*/b", "/a/x/y/b", false, "* within one segment"),
            ("b*", "/ab", false, "unanchored: from a segment's start"),
            ("b*", "/a/b", true, "any segment's start"),
        ]
        for c in cases {
            let filter = try XCTUnwrap(try ListingFilter(include: [], exclude: [c.glob]))
            XCTAssertEqual(!filter.allows(c.path, isDirectory: c.path.hasSuffix("/")), c.matches, "\(c.glob) \(c.path): \(c.why)")
        }
        for (glob, message) in [("[z-a]", "backwards"), ("[[:digit:]]", "named class"), ("{a,{b}", "'{' without its '}'")] {
            XCTAssertThrowsError(try ListingFilter(include: [], exclude: [glob])) { error in
                XCTAssertTrue("\(error)".contains(message), "\(glob): \(error)")
            }
        }
    }
}

/// The matcher against the regexps the filter used before (rclone's glob-to-regexp, kept here as
/// the reference), over a grid of globs and paths short enough for a regexp.
extension ListingFilterTests {
    func testTheMatcherAgreesWithRclonesRegexps() throws {
        let globs = ["*.mkv", "/Films/*.mkv", "/Films/**.mkv", "**/Extras/", "Extras/", "a?.mkv", "[ab]*", "[!ab]*.nfo",
                     "*.{mkv,nfo}", "{Films,TV}/**", "/*/*", "*a*b*", "**", "*", "\\*.mkv", "x{a,{b,c}d}y", "[a-c]?[!x]",
                     "/TV/*/S??E??.mkv", "*{,.old}", "}a,b"]
        let paths = ["/a.mkv", "/Films/a.mkv", "/Films/sub/a.mkv", "/Films/", "/Films/Extras/", "/Extras/", "/ab.mkv",
                     "/b.nfo", "/c.nfo", "/TV/Show/S01E02.mkv", "/TV/Show/", "/xcdy", "/xby", "/xdy", "/*.mkv",
                     "/abc", "/acx", "/a.mkv.old", "/}a,b", "/é.mkv", "/"]
        for glob in globs {
            let matcher = try GlobMatcher(glob)
            let regex = try Self.rcloneRegex(glob)
            for path in paths {
                let expected = regex.firstMatch(in: path, range: NSRange(path.startIndex..., in: path)) != nil
                XCTAssertEqual(matcher.matches(path), expected, "\(glob) against \(path)")
            }
        }
    }

    /// rclone's glob-to-regexp, as `ListingFilter` compiled globs before issue 46.
    static func rcloneRegex(_ glob: String) throws -> NSRegularExpression {
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
                let next = chars.first!
                chars = chars.dropFirst()
                out += NSRegularExpression.escapedPattern(for: String(next))
            case "*":
                if chars.first == "*" { chars = chars.dropFirst(); out += ".*" } else { out += "[^/]*" }
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
        return try NSRegularExpression(pattern: out + "$")
    }
}
