import XCTest

final class FuseMountPlaceholderTests: XCTestCase {
    func testBuilds() {}
}
