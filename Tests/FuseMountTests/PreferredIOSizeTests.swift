import XCTest
@testable import FuseMount

/// The preferred I/O size `stat` shows: the whole file up to 1 MiB, never below a page.
final class PreferredIOSizeTests: XCTestCase {
    func testSmallFilesAskForAPageFilmsForAMebibyte() {
        XCTAssertEqual(FuseOperations.preferredIOSize(0), 4096)
        XCTAssertEqual(FuseOperations.preferredIOSize(4096), 4096)
        XCTAssertEqual(FuseOperations.preferredIOSize(4097), 8192)
        XCTAssertEqual(FuseOperations.preferredIOSize(100_000), 131_072)
        XCTAssertEqual(FuseOperations.preferredIOSize(1 << 20), 1 << 20)
        XCTAssertEqual(FuseOperations.preferredIOSize(Int64(1) << 40), 1 << 20)
    }
}
