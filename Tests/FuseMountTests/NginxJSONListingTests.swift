import Foundation
import Logging
import TestSupport
import XCTest
@testable import FuseMount

/// nginx's JSON autoindex decoded a run of elements at a time gives exactly what the document
/// decoded whole gives: the same entries, or a refusal where the whole was refused.
final class NginxJSONListingTests: XCTestCase {
    let base = URL(string: "http://example.com/pub/")!
    let silent = Logger(label: "test") { _ in SwiftLogNoOpLogHandler() }

    // MARK: where the runs fall

    private func runs(_ text: String, perRun: Int) throws -> [String] {
        var out: [String] = []
        try JSONArrayRuns.forEachRun(Array(text.utf8), perRun: perRun) { out.append(String(decoding: $0, as: UTF8.self)) }
        return out
    }

    func testAnArrayIsHandedOutInRunsOfWholeElements() throws {
        XCTAssertEqual(try runs("[1,2,3,4,5]", perRun: 2), ["[1,2]", "[3,4]", "[5]"])
        XCTAssertEqual(try runs(" [ {\"a\":[1,2]} , {\"b\":{}} ] \n", perRun: 1), ["[{\"a\":[1,2]} ]", "[ {\"b\":{}} ]"])
        XCTAssertEqual(try runs("[1,2]", perRun: 4096), ["[1,2]"])
    }

    func testAnEmptyArrayHasNoRun() throws {
        XCTAssertEqual(try runs("[]", perRun: 3), [])
        XCTAssertEqual(try runs(" [ \t\r\n ] ", perRun: 3), [])
    }

    func testACommaAfterTheLastElementIsTakenAsFoundationTakesIt() throws {
        XCTAssertEqual(try runs("[1,2,]", perRun: 1), ["[1]", "[2]"])
        XCTAssertEqual(try runs("[1 , ] ", perRun: 4), ["[1 ]"])
    }

    func testCommasAndBracketsInStringsAreNoEnds() throws {
        let element = #"{"name":"a,b]c}\"d\\","type":"file"}"#
        XCTAssertEqual(try runs("[\(element),2]", perRun: 1), ["[\(element)]", "[2]"])
    }

    func testWhatIsNoArrayOfElementsIsRefused() {
        for text in ["", " ", "{}", "[", "[1", "[1,", "[,]", "[1,,]", "[,1]", "[1,,2]", "[1]x", "[1]]", "[\"a]", "[}]", "[{]", "x[1]"] {
            XCTAssertThrowsError(try runs(text, perRun: 2), "\(text.debugDescription) was taken") {
                XCTAssertTrue($0 is JSONArrayRuns.Malformed, "\(text.debugDescription): \($0)")
            }
        }
    }

    // MARK: against the whole document

    /// What the listing was before runs: the document decoded whole, then the same entries made.
    private func decodedWhole(_ bytes: [UInt8]) -> [ListingEntry]? {
        guard let items = try? JSONDecoder().decode([DirectoryListing.JSONItem].self, from: Data(bytes)) else { return nil }
        var made = DirectoryListing.JSONEntries(base: base, logger: silent, maxEntries: .max)
        for item in items { try? made.add(item) }
        return made.entries
    }

    private func decodedInRuns(_ bytes: [UInt8], perRun: Int) -> [ListingEntry]? {
        do { return try DirectoryListing.parseNginxJSON(bytes, base: base, logger: silent, itemsPerRun: perRun) } catch {
            guard case ListingError.notAListing = error else {
                XCTFail("not the whole document's refusal: \(error)")
                return nil
            }
            return nil
        }
    }

    func testRunsOfAnyLengthGiveWhatTheWholeDocumentGives() {
        var rng = SplitMix64(state: 51)
        var refused = 0, taken = 0
        for round in 0..<400 {
            var bytes = Array(Self.listing(&rng, count: rng.below(round % 50 == 0 ? 600 : 12)).utf8)
            if round % 2 == 1 { Self.damage(&bytes, &rng) }
            let whole = decodedWhole(bytes)
            if whole == nil { refused += 1 } else { taken += 1 }
            for perRun in [1, 2, 3, 7, DirectoryListing.jsonItemsPerRun] {
                XCTAssertEqual(decodedInRuns(bytes, perRun: perRun), whole,
                               "round \(round), \(perRun) a run: \(String(decoding: bytes, as: UTF8.self).prefix(300))")
            }
        }
        // Both kinds were tried, or the comparison says little.
        XCTAssertGreaterThan(refused, 100)
        XCTAssertGreaterThan(taken, 100)
    }

    func testAListingPastItsLimitFailsAtTheFirstEntryTooMany() {
        var rng = SplitMix64(state: 7)
        let bytes = Array(Self.listing(&rng, count: 50, plain: true).utf8)
        XCTAssertThrowsError(try DirectoryListing.parseNginxJSON(bytes, base: base, logger: silent, maxEntries: 49, itemsPerRun: 4)) {
            guard case ListingError.tooManyEntries(_, 49) = $0 else { return XCTFail("\($0)") }
        }
        XCTAssertEqual(try DirectoryListing.parseNginxJSON(bytes, base: base, logger: silent, maxEntries: 50, itemsPerRun: 4).count, 50)
    }

    // MARK: listings made up

    /// A listing of `count` objects in nginx's shape, with what servers and hostile pages put in
    /// them: escapes, commas and brackets in names, nested values, other types, odd sizes,
    /// names twice, whitespace anywhere. `plain`: distinct, usable file names only.
    static func listing(_ rng: inout SplitMix64, count: Int, plain: Bool = false) -> String {
        let names = [#"a.mkv"#, #"My Movie.mp4"#, #"x,y]z}.nfo"#, #"q\"uote"#, #"back\\slash"#, #"\u00e9t\u00e9.srt"#,
                     #"[brackets]{braces}"#, #"tab\there"#, #".."#, #"a/b"#, #"poster.jpg"#, "ü ñ 😀.mp4"]
        let sizes = ["1024", "0", "-1", "1.5", "1e3", "\"12\"", "99999999999999999999", "null", "[1,2]", "{\"n\":1}"]
        let types = ["\"file\"", "\"directory\"", "\"other\"", "1", "null"]
        var items: [String] = []
        for i in 0..<count {
            if plain {
                items.append(#"{"name":"f\#(i).bin","type":"file","size":\#(i)}"#)
                continue
            }
            var fields = [#""name":"\#(names[rng.below(names.count)])\#(rng.below(4) == 0 ? "" : String(rng.below(30)))""#,
                          #""type":\#(types[rng.below(4) == 0 ? rng.below(types.count) : 0])"#]
            if rng.below(2) == 0 { fields.append(#""mtime":"Thu, 04 Jan 2024 10:00:00 GMT""#) }
            if rng.below(3) != 0 { fields.append(#""size":\#(sizes[rng.below(sizes.count)])"#) }
            if rng.below(8) == 0 { fields.append(#""extra":{"deep":[1,{"x":"],"}],"s":"}"}"#) }
            if rng.below(10) == 0 { fields.shuffle(using: &rng) }
            let space = [" ", "", "\n", "\t", "  "][rng.below(5)]
            items.append("{" + space + fields.joined(separator: "," + space) + space + "}")
        }
        let separator = [",", ", ", ",\n", " ,"][rng.below(4)]
        return [" ", "", "\n"][rng.below(3)] + "[" + items.joined(separator: separator) + "]" + ["", "\n", " "][rng.below(3)]
    }

    /// One byte taken out, put in or changed, among those the runs' ends turn on.
    static func damage(_ bytes: inout [UInt8], _ rng: inout SplitMix64) {
        let significant = Array(#",[]{}"\ :a1"#.utf8)
        if rng.below(8) == 0, let close = bytes.lastIndex(of: UInt8(ascii: "]")) {
            bytes.insert(UInt8(ascii: ","), at: close)   // a comma after the last element
            return
        }
        let at = bytes.isEmpty ? 0 : rng.below(bytes.count)
        switch rng.below(3) {
        case 0 where !bytes.isEmpty: bytes.remove(at: at)
        case 1: bytes.insert(significant[rng.below(significant.count)], at: at)
        default: if !bytes.isEmpty { bytes[at] = significant[rng.below(significant.count)] }
        }
    }
}

private extension SplitMix64 {
    mutating func below(_ n: Int) -> Int { n <= 0 ? 0 : Int(next() % UInt64(n)) }
}
