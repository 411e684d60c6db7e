import GRDB
import XCTest
@testable import CacheCore

/// One spelling per resource (`URLSpelling`): what must be escaped is escaped as curl does,
/// RFC 3986 §6.2.2 holds, `! ' ( ) *` are raw in a path, and cache keys follow; old index rows
/// are respelled once.
final class URLSpellingTests: XCTestCase {
    func testEachRuleAsATable() throws {
        let cases: [(given: String, normal: String, rule: String)] = [
            ("http://h/Zero Hour (1995)/Zero Hour (1995).mkv", "http://h/Zero%20Hour%20(1995)/Zero%20Hour%20(1995).mkv", "a raw space is %20"),
            ("http://h/Alpha%20Centauri%20%281971%29.mp4", "http://h/Alpha%20Centauri%20(1971).mp4", "%28 %29 are written raw in a path"),
            ("http://h/%21%27%2a%2A", "http://h/!'**", "the five fixed sub-delimiters, either hex case"),
            ("http://h/a%2fb%3Fc", "http://h/a%2Fb%3Fc", "hex digits upper-case; %2F and %3F stay encoded"),
            ("http://h/%7euser/%41%2D%5F%2e", "http://h/~user/A-_.", "unreserved characters decoded"),
            ("HTTP://Media.Example.COM:80/A", "http://media.example.com/A", "scheme and host lower-case, default port dropped, path kept"),
            ("https://h:443/x", "https://h/x", "https's default port dropped"),
            ("https://h:0443/x", "https://h/x", "a port with leading zeros is its number"),
            ("http://h:8080/x", "http://h:8080/x", "another port kept"),
            ("http://h:/x", "http://h/x", "an empty port dropped"),
            ("http://h", "http://h/", "an empty path is /"),
            ("http://h/a/./b/../c", "http://h/a/c", "dot segments removed"),
            ("http://h/a/%2E%2E/b", "http://h/b", "encoded dot segments too, once decoded"),
            ("http://h/x.mp4#t=10", "http://h/x.mp4", "the fragment is never sent: dropped"),
            ("http://h/Café.mkv", "http://h/Caf%C3%A9.mkv", "non-ASCII as its UTF-8 bytes"),
            ("http://h/100% Pure.mkv", "http://h/100%25%20Pure.mkv", "a % that starts no escape is %25"),
            ("http://h/a\"<>\\^`{|}[].bin", "http://h/a%22%3C%3E%5C%5E%60%7B%7C%7D%5B%5D.bin", "characters a path may not hold"),
            ("http://h/a+b;c=d,e$&f", "http://h/a+b;c=d,e$&f", "other sub-delimiters keep their spelling"),
            ("http://h/x?q=a b&r=%28%7e%2b", "http://h/x?q=a%20b&r=%28~%2B", "a query: escaped and RFC rules only, no fixed choice"),
            ("http://h/x?a=(1)", "http://h/x?a=(1)", "raw parentheses in a query stay"),
            ("http://User:P%40ss@H/x", "http://User:P%40ss@h/x", "user-info keeps its case"),
            ("http://[::1]:8080/x", "http://[::1]:8080/x", "IPv6 literal hosts"),
            ("  http://h/x \t", "http://h/x", "spaces around a pasted URL trimmed"),
        ]
        for (given, normal, rule) in cases {
            XCTAssertEqual(try URLSpelling.normalize(given), normal, rule)
            XCTAssertEqual(try URLSpelling.normalize(normal), normal, "idempotent: \(rule)")
        }
    }

    /// The fuzz target's invariants (Fuzz/Sources/FuzzURLSpelling) over 20,000 seeded random
    /// URLs made of the characters that matter: accepted ones are printable ASCII that Foundation
    /// parses with a host (never a dead link), idempotent, and keyed as their input.
    func testEveryAcceptedURLIsValidIdempotentAndKeyedAsItsInput() throws {
        var rng = SplitMix(seed: 39)
        let pieces = ["a", "Z", "0", " ", "%", "%2", "%28", "%7e", "%2F", "(", ")", "'", "!", "*", "/", "./", "../", "?", "#",
                      "&", "=", "+", ";", ":", "@", "[", "]", "{", "|", "\\", "é", "\u{1F3AC}", "\"", "<", "~", ".", "-"]
        let heads = ["http://h", "HTTPS://Media.Example:443", "http://u:p@h:8080", "http://[::1]", "http://h:"]
        for _ in 0..<20_000 {
            var url = heads[Int(rng.next() % UInt64(heads.count))]
            for _ in 0..<Int(rng.next() % 12) { url += pieces[Int(rng.next() % UInt64(pieces.count))] }
            guard let normal = try? URLSpelling.normalize(url) else { continue }
            XCTAssertTrue(normal.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }, normal)
            XCTAssertNotNil(URLComponents(string: normal)?.host, "\(url) -> \(normal)")
            XCTAssertEqual(try URLSpelling.normalize(normal), normal, url)
            XCTAssertEqual(try KeyRules().key(for: normal), try KeyRules().key(for: url), url)
        }
    }

    func testURLsThatCannotBeMadeValidSayWhy() {
        let cases: [(String, String)] = [
            ("http://h/a\r\nX-Evil: 1", "contains a line break"),
            ("http://h/a\u{1}b", "contains a control character"),
            ("ftp://h/x", "only http and https URLs are supported"),
            ("Zero Hour (1995).mkv", "not a URL"),
            ("http:///x", "no host"),
            ("http://h:99999/x", "port 99999 is out of range"),
            ("http://h:12ab/x", "port '12ab' is not a number"),
            ("http://bücher.example/x", "xn--"),
            ("http://h h/x", "no host name has"),
        ]
        for (url, reason) in cases {
            XCTAssertThrowsError(try URLSpelling.normalize(url), url) { error in
                XCTAssertTrue("\(error)".contains(reason), "\(url): \(error)")
            }
        }
    }

    func testBothSpellingsOfAFileAreOneCacheKey() throws {
        let rules = KeyRules()
        let raw = try rules.key(for: "http://media.test/Movies/Alpha Centauri (1971).mp4")
        XCTAssertEqual(raw, try rules.key(for: "http://media.test/Movies/Alpha%20Centauri%20%281971%29.mp4"))
        XCTAssertEqual(raw, try rules.key(for: "HTTP://MEDIA.test:80/Movies/Alpha%20Centauri%20(1971).mp4"))
        XCTAssertEqual(raw.string, "http://media.test/Movies/Alpha%20Centauri%20(1971).mp4")
        // A key already in the spelling is what it always was.
        XCTAssertEqual(try rules.key(for: "http://media.test/a/b.mp4?x=1").string, "http://media.test/a/b.mp4?x=1")
    }

    func testOldKeysAreRespelledOnceWhenTheIndexOpens() throws {
        let dir = NSTemporaryDirectory() + "httpcachefs-respell-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/index.sqlite"
        do {
            let index = try CacheIndex(path: path)
            try index.pool.write { db in
                // As an earlier version wrote them: two spellings of one file (the second with
                // more bytes cached), one of another, and a pin.
                try Self.insert(db, id: 1, key: "http://h/Alpha%20Centauri%20%281971%29.mp4", bytes: 100)
                try Self.insert(db, id: 2, key: "http://h/Alpha%20Centauri%20(1971).mp4", bytes: 900)
                try Self.insert(db, id: 3, key: "http://h/%7ea/b%2a.mkv#cred-abc", bytes: 10)
                try db.execute(sql: "INSERT INTO pin (key, start, \"end\") VALUES ('http://h/%28x%29.mp4', 0, 10)")
                try db.execute(sql: "DELETE FROM grdb_migrations WHERE identifier = 'v4-url-spelling'")
            }
            try index.close()
        }
        let index = try CacheIndex(path: path)
        defer { try? index.close() }
        let rows = try index.pool.read { db in
            try Row.fetchAll(db, sql: "SELECT id, key FROM entry ORDER BY id").map { ($0["id"] as Int64, $0["key"] as String) }
        }
        XCTAssertEqual(rows.map(\.0), [2, 3], "the spelling with more bytes stays")
        XCTAssertEqual(rows.map(\.1), ["http://h/Alpha%20Centauri%20(1971).mp4", "http://h/~a/b*.mkv#cred-abc"])
        let pins = try index.pool.read { db in try String.fetchAll(db, sql: "SELECT key FROM pin") }
        XCTAssertEqual(pins, ["http://h/(x).mp4"])
    }

    private static func insert(_ db: Database, id: Int64, key: String, bytes: Int64) throws {
        try db.execute(sql: """
            INSERT INTO entry (id, key, url, final_url, length, accepts_ranges, generation, validated_at, last_access)
            VALUES (?, ?, ?, ?, 1000, 1, 1, 0, 0)
            """, arguments: [id, key, key, key])
        try db.execute(sql: "INSERT INTO extent (entry_id, generation, slice, start, \"end\", checksum) VALUES (?, 1, 0, 0, ?, 0)",
                       arguments: [id, bytes])
    }
}

/// A small seeded generator: the same URLs on every run.
struct SplitMix {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
