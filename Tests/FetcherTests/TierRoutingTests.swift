import CacheCore
@testable import Fetcher
import XCTest

/// The tier's pure parts as tables: `--tier` parsing, which URLs a tier covers, the node URL,
/// slice-aligned pieces, rendezvous order, back-off, and the version check on every answer.
final class TierRoutingTests: XCTestCase {
    func testTierOptionParsesOriginNodesAndSlice() throws {
        let cases: [(String, TierSpec)] = [
            ("https://media.example.com=http://10.0.0.5:8080,http://10.0.0.6:8080",
             TierSpec(scheme: "https", host: "media.example.com", port: 443, nodes: ["http://10.0.0.5:8080", "http://10.0.0.6:8080"])),
            ("http://Origin:81/lib/=10.0.0.5:8080,slice=1M",
             TierSpec(scheme: "http", host: "origin", port: 81, pathPrefix: "/lib", nodes: ["http://10.0.0.5:8080"], sliceSize: 1 << 20)),
            ("http://o=http://[::1]:9000, http://n2:9000 ,slice=512K",
             TierSpec(scheme: "http", host: "o", port: 80, nodes: ["http://[::1]:9000", "http://n2:9000"], sliceSize: 512 << 10)),
        ]
        for (text, want) in cases { XCTAssertEqual(try TierSpec.parse(text), want, text) }
    }

    func testBadTierOptionsSayWhy() {
        let cases: [(String, String)] = [
            ("https://media.example.com", "no '='"),
            ("ftp://o=http://n:1", "not an http or https URL"),
            ("http://o?x=1=http://n:1", "no query"),
            ("http://o=", "no tier node"),
            ("http://o=http://n:1/path", "not a base URL"),
            ("http://o=http://n:1,slice=3", "not a size"),
            ("http://o=http://n:1,slice=2G", "not a size"),
            ("http://o=http://n:1,http://n:1", "named twice"),
            ("http://o=http://u:p@n:1", "no user"),
            ("http://o=http://n:1#x", "no user, fragment"),
            ("http://o=http://n:99999", "port past 65535"),
            ("http://o:70000=http://n:1", "no valid port"),
        ]
        for (text, why) in cases {
            XCTAssertThrowsError(try TierSpec.parse(text), text) { error in
                XCTAssertTrue("\(error)".contains(why), "\(text): \(error)")
                XCTAssertTrue("\(error)".contains(text), "the message names the value: \(error)")
            }
        }
    }

    func testATierCoversItsSchemeHostPortAndPathPrefixOnly() throws {
        let spec = try TierSpec.parse("https://media.example.com/lib=http://n:1")
        let cases: [(String, Bool)] = [
            ("https://media.example.com/lib/a.mkv", true),
            ("https://MEDIA.example.com:443/lib/sub/a.mkv?token=1", true),
            ("https://media.example.com/lib", true),
            ("https://media.example.com/library/a.mkv", false),
            ("https://media.example.com/other/a.mkv", false),
            ("http://media.example.com/lib/a.mkv", false),
            ("https://media.example.com:8443/lib/a.mkv", false),
            ("https://other.example.com/lib/a.mkv", false),
        ]
        for (url, covered) in cases { XCTAssertEqual(spec.covers(url), covered, url) }
        XCTAssertEqual(TierSpec.nodePath(for: "https://media.example.com/lib/a%20b.mkv?token=x&t=2"),
                       "/lib/a%20b.mkv?token=x&t=2")
        XCTAssertEqual(TierSpec.nodePath(for: "https://media.example.com"), "/")
    }

    func testPiecesEndAtSliceBoundariesAndAskOnlyForTheBytesWanted() {
        let router = TierRouter(nodes: ["a"], sliceSize: 100)
        let cases: [(Int64, Int64, [TierRouter.Piece])] = [
            (0, 100, [.init(index: 0, start: 0, end: 100)]),
            (10, 20, [.init(index: 0, start: 10, end: 20)]),
            (90, 250, [.init(index: 0, start: 90, end: 100), .init(index: 1, start: 100, end: 200), .init(index: 2, start: 200, end: 250)]),
            (100, 101, [.init(index: 1, start: 100, end: 101)]),
            (199, 201, [.init(index: 1, start: 199, end: 200), .init(index: 2, start: 200, end: 201)]),
        ]
        for (start, end, want) in cases { XCTAssertEqual(router.pieces(start: start, end: end), want, "\(start)..<\(end)") }
    }

    func testRendezvousOrderIsTheSameEverywhereAndSpreadsSlices() {
        let nodes = ["http://a:1", "http://b:1", "http://c:1"]
        let router = TierRouter(nodes: nodes, sliceSize: 4 << 20)
        // Another host, nodes listed in another order: the same home for every slice.
        let other = TierRouter(nodes: nodes.reversed(), sliceSize: 4 << 20)
        var homes: [String: Int] = [:]
        for slice in Int64(0)..<300 {
            let home = nodes[router.order(key: "https://o/film.mkv", slice: slice)[0]]
            XCTAssertEqual(other.nodes[other.order(key: "https://o/film.mkv", slice: slice)[0]], home)
            XCTAssertEqual(Set(router.order(key: "https://o/film.mkv", slice: slice)), [0, 1, 2])
            homes[home, default: 0] += 1
        }
        // Each node is home to a fair share (300 slices, 3 nodes: about 100 each).
        for node in nodes { XCTAssertGreaterThan(homes[node] ?? 0, 60, "\(node) holds \(homes[node] ?? 0) of 300") }
    }

    func testLosingANodeMovesOnlyItsSlices() {
        let three = TierRouter(nodes: ["http://a:1", "http://b:1", "http://c:1"], sliceSize: 1 << 20)
        let two = TierRouter(nodes: ["http://a:1", "http://c:1"], sliceSize: 1 << 20)
        for slice in Int64(0)..<200 {
            let before = three.nodes[three.order(key: "k", slice: slice)[0]]
            let after = two.nodes[two.order(key: "k", slice: slice)[0]]
            if before != "http://b:1" { XCTAssertEqual(after, before, "slice \(slice) moved though its home stayed") }
            // b's slices go to their second choice on three nodes.
            else { XCTAssertEqual(after, three.nodes[three.order(key: "k", slice: slice)[1]]) }
        }
    }

    func testAFailedNodeBacksOffDoublingUntilItAnswersAgain() {
        var h = TierHealth(baseDelay: 2, maxDelay: 10)
        // (event, time, available at that time after the event, backed-off list)
        h.failed("a", now: 100, error: "connect")
        XCTAssertFalse(h.isAvailable("a", now: 101.9))
        XCTAssertTrue(h.isAvailable("a", now: 102))
        XCTAssertTrue(h.isAvailable("b", now: 101))
        h.failed("a", now: 102, error: "502")
        XCTAssertFalse(h.isAvailable("a", now: 105.9))
        XCTAssertTrue(h.isAvailable("a", now: 106))
        for t in [106.0, 200, 300] { h.failed("a", now: t, error: "timeout") }
        XCTAssertEqual(h.nodes["a"]?.until, 310, "capped at maxDelay")
        XCTAssertEqual(h.backedOff(now: 305), ["a"])
        h.succeeded("a")
        XCTAssertTrue(h.isAvailable("a", now: 305))
        XCTAssertEqual(h.backedOff(now: 305), [])
        h.failed("a", now: 400, error: "x")
        XCTAssertEqual(h.nodes["a"]?.until, 402, "one success starts the doubling again")
    }

    func testOnlyAnAnswerOfTheBoundVersionAtTheAskedOffsetIsTaken() {
        let strong = TierVersion(validator: "\"v1\"", length: 1000)
        let dated = TierVersion(validator: "Mon, 01 Jan 2024 00:00:00 GMT", length: 1000)
        func head(_ status: Int = 206, start: Int64 = 100, total: Int64? = 1000, etag: String? = "\"v1\"",
                  lm: String? = "Mon, 01 Jan 2024 00:00:00 GMT") -> ResponseHead {
            ResponseHead(status: status, finalURL: "u", bodyStart: start, totalLength: total, etag: etag, lastModified: lm, acceptsRanges: true)
        }
        let cases: [(TierVersion, ResponseHead, Int64, String?)] = [
            (strong, head(), 100, nil),
            (strong, head(etag: "\"v2\""), 100, "version \"v2\", not \"v1\""),
            (strong, head(etag: nil), 100, "version none, not \"v1\""),
            (strong, head(total: 999), 100, "length 999, not 1000"),
            (strong, head(total: nil), 100, "length unknown, not 1000"),
            (strong, head(start: 0), 100, "body starts at 0, not 100"),
            (strong, head(200, start: 0), 100, "status 200, not 206"),
            (strong, head(200, start: 0), 0, nil),
            (dated, head(etag: "\"other\""), 100, nil),
            (dated, head(lm: "Tue, 02 Jan 2024 00:00:00 GMT"), 100, "version Tue, 02 Jan 2024 00:00:00 GMT, not Mon, 01 Jan 2024 00:00:00 GMT"),
            (TierVersion(validator: "\"v1\"", length: 1000, ignoreETag: true), head(etag: "\"v9\"", lm: nil), 100, "version none, not \"v1\""),
        ]
        for (i, (version, h, offset, want)) in cases.enumerated() {
            XCTAssertEqual(version.mismatch(h, offset: offset), want, "case \(i)")
        }
    }

    func testTierHeadersAreOneLineAndAgreeWithPercentEncodingEverywhere() {
        let visible = CharacterSet(charactersIn: Unicode.Scalar(0x21)...Unicode.Scalar(0x7e))
        for key in ["http://o/film.mkv?sig=a%2Fb&x=1", "http://o/a b", "http://o/caf\u{e9}", "http://o/\r\nX: y",
                    "http://o/~!*'()", "", "http://o/\u{7f}", "http://o/\u{1F3AC}"] {
            XCTAssertEqual(TierTransfer.headerSafe(key), key.addingPercentEncoding(withAllowedCharacters: visible), key)
        }
        XCTAssertEqual(TierVersion(validator: "\"v1\"", length: 10).headerValue, "\"v1\" 10")
        XCTAssertEqual(TierVersion(validator: "\"a\nb\"", length: 10).headerValue, "\"a b\" 10")
    }
}
