import XCTest
@testable import FuseMount

/// `--include`/`--exclude` globs as rclone's filter rules read them, as a table.
final class ListingFilterTests: XCTestCase {
    func testGlobsAndTheirOrderAsRcloneReadsThem() throws {
        let cases: [(include: [String], exclude: [String], path: String, isDirectory: Bool, shown: Bool, why: String)] = [
            ([], ["*.nfo"], "/Films/a.nfo", false, false, "an unanchored glob matches at the end, from a segment's start"),
            ([], ["*.nfo"], "/Films/a.mkv", false, true, "no match: shown"),
            ([], ["*.nfo"], "/Films/", true, true, "a file glob never hides a folder"),
            ([], ["Extras/"], "/Films/Extras/", true, false, "a glob ending in / is for folders"),
            ([], ["Extras/"], "/Films/Extras", false, true, "and not for a file of that name"),
            ([], ["/Films/*.mkv"], "/Films/a.mkv", false, false, "a leading / anchors at the root"),
            ([], ["/Films/*.mkv"], "/TV/Films/a.mkv", false, true, "anchored: not deeper"),
            ([], ["/Films/*.mkv"], "/Films/sub/a.mkv", false, true, "* stops at /"),
            ([], ["/Films/**.mkv"], "/Films/sub/a.mkv", false, false, "** crosses /"),
            ([], ["a?.mkv"], "/ab.mkv", false, false, "? is one character"),
            ([], ["[ab].mkv"], "/b.mkv", false, false, "a class"),
            ([], ["[!ab].mkv"], "/b.mkv", false, true, "a negated class"),
            ([], ["*.{nfo,jpg}"], "/x/poster.jpg", false, false, "{a,b}"),
            ([], ["\\*.mkv"], "/*.mkv", false, false, "\\ escapes"),
            ([], ["\\*.mkv"], "/a.mkv", false, true, "escaped * is no wildcard"),
            (["*.mkv"], [], "/Films/a.mkv", false, true, "an include shows what it matches"),
            (["*.mkv"], [], "/Films/a.nfo", false, false, "and, as rclone adds, excludes the rest"),
            (["*.mkv"], [], "/Films/", true, true, "but never hides the folders they are in"),
            (["*.mkv"], ["Trailers/**"], "/Trailers/t.mkv", false, true, "includes first, then excludes (rclone's order)"),
            (["*.mkv"], ["Extras/"], "/Films/Extras/", true, false, "a folder exclude still hides the folder"),
        ]
        for c in cases {
            let filter = try XCTUnwrap(try ListingFilter(include: c.include, exclude: c.exclude))
            XCTAssertEqual(filter.allows(c.path, isDirectory: c.isDirectory), c.shown, "\(c.include) \(c.exclude) \(c.path): \(c.why)")
        }
        XCTAssertNil(try ListingFilter(include: [], exclude: []), "nothing to filter")
    }

    func testABrokenGlobSaysWhat() {
        for (glob, message) in [("[abc", "'[' without its ']'"), ("{a,b", "'{' without its '}'"), ("a\\", "lone '\\'")] {
            XCTAssertThrowsError(try ListingFilter(include: [], exclude: [glob])) { error in
                XCTAssertTrue("\(error)".contains(message), "\(glob): \(error)")
            }
        }
    }
}
