@testable import CacheCore
import XCTest

/// The checksum of the data files' extents (`XXH64`), against the reference's vectors.
final class XXH64Tests: XCTestCase {
    func testXXH64KnownVectors() {
        XCTAssertEqual(XXH64.hash([]), 0xEF46_DB37_51D8_E999)
        XCTAssertEqual(XXH64.hash(Array("abc".utf8)), 0x44BC_2CF5_AD77_0999)
        let long = Array("The quick brown fox jumps over the lazy dog, again and again and again.".utf8)
        var streamed = XXH64()
        for chunk in stride(from: 0, to: long.count, by: 7) {
            long[chunk..<min(chunk + 7, long.count)].withUnsafeBytes { streamed.update($0) }
        }
        XCTAssertEqual(streamed.value, 0x4CF8_A242_630A_C3EE, "streaming in odd chunks gives the reference hash")
    }
}
