import XCTest

final class FetcherPlaceholderTests: XCTestCase {
    func testBuilds() {}
}
