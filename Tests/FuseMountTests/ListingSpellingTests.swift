import XCTest
@testable import FuseMount

/// Listings hand out each file's URL in its one spelling (`URLSpelling`), whatever the server's
/// links look like: one file, one cache entry, whichever way it was reached.
final class ListingSpellingTests: XCTestCase {
    func testHTMLAndJSONListingsGiveAFileTheSameURL() throws {
        let html = #"<pre><a href="Alpha%20Centauri%20%281971%29.mp4">Alpha Centauri (1971).mp4</a>  01-Jan-2024 00:00  5</pre>"#
        let json = #"[{"name":"Alpha Centauri (1971).mp4","type":"file","size":5}]"#
        let fromHTML = try DirectoryListing.parse(Array(html.utf8), url: "http://o/m/").map(\.url)
        let fromJSON = try DirectoryListing.parse(Array(json.utf8), url: "http://o/m/").map(\.url)
        XCTAssertEqual(fromHTML, ["http://o/m/Alpha%20Centauri%20(1971).mp4"])
        XCTAssertEqual(fromJSON, fromHTML)
    }
}
