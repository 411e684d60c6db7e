import XCTest

final class CacheCorePlaceholderTests: XCTestCase {
    func testBuilds() {}
}
