import XCTest

final class ProxyPlaceholderTests: XCTestCase {
    func testBuilds() {}
}
