import XCTest
@testable import FuseMount

/// How far ahead of a sequential reader without passthrough the data file is read, read by read.
final class DataFileReadAheadTests: XCTestCase {
    let mib: Int64 = 1 << 20
    let size: Int64 = 1 << 30

    func testAFirstReadReadsNothingAheadTheSecondInARowReadsAWindowPastIt() {
        var ahead = DataFileReadAhead(window: 32 * mib)
        XCTAssertNil(ahead.read(0..<mib, size: size), "one read is not yet a sequential reader")
        XCTAssertEqual(ahead.read(mib..<(2 * mib), size: size), (2 * mib)..<(34 * mib))
        XCTAssertEqual(ahead.until, 34 * mib)
    }

    func testItGoesOnInStepsNotOnEveryRead() {
        var ahead = DataFileReadAhead(window: 32 * mib, step: 4 * mib)
        _ = ahead.read(0..<mib, size: size)
        _ = ahead.read(mib..<(2 * mib), size: size)
        XCTAssertNil(ahead.read((2 * mib)..<(3 * mib), size: size), "1 MiB further is less than a step")
        XCTAssertNil(ahead.read((3 * mib)..<(4 * mib), size: size))
        XCTAssertNil(ahead.read((4 * mib)..<(5 * mib), size: size))
        XCTAssertEqual(ahead.read((5 * mib)..<(6 * mib), size: size), (34 * mib)..<(38 * mib))
    }

    func testReadsSlightlyOutOfOrderStayInSequence() {
        // The kernel's read-ahead requests can reach the daemon's threads out of order.
        var ahead = DataFileReadAhead(window: 32 * mib, step: 4 * mib)
        _ = ahead.read(0..<mib, size: size)
        _ = ahead.read((2 * mib)..<(3 * mib), size: size)
        XCTAssertNil(ahead.read(mib..<(2 * mib), size: size), "a read behind the latest neither seeks nor reads more")
        XCTAssertEqual(ahead.lastEnd, 3 * mib)
        XCTAssertEqual(ahead.until, 35 * mib)
    }

    func testASeekReadsNothingAheadAndTheNextReadOnFromThereStartsAgain() {
        var ahead = DataFileReadAhead(window: 32 * mib)
        _ = ahead.read(0..<mib, size: size)
        _ = ahead.read(mib..<(2 * mib), size: size)
        XCTAssertNil(ahead.read((500 * mib)..<(501 * mib), size: size), "a seek")
        XCTAssertEqual(ahead.until, 501 * mib)
        XCTAssertEqual(ahead.read((501 * mib)..<(502 * mib), size: size), (502 * mib)..<(534 * mib))
    }

    func testItStopsAtTheEndOfTheFileAndReadsTheLastShortStep() {
        var ahead = DataFileReadAhead(window: 32 * mib, step: 4 * mib)
        let size = 20 * mib + 5
        _ = ahead.read(0..<mib, size: size)
        XCTAssertEqual(ahead.read(mib..<(2 * mib), size: size), (2 * mib)..<size)
        XCTAssertNil(ahead.read((2 * mib)..<(3 * mib), size: size), "all of it is read ahead already")
        XCTAssertNil(ahead.read((19 * mib)..<(20 * mib), size: size))
    }

    func testARefusedJobIsAskedForAgainAtTheNextRead() {
        var ahead = DataFileReadAhead(window: 32 * mib, step: 4 * mib)
        _ = ahead.read(0..<mib, size: size)
        let first = ahead.read(mib..<(2 * mib), size: size)
        XCTAssertEqual(first, (2 * mib)..<(34 * mib))
        ahead.refused(first!)
        XCTAssertEqual(ahead.until, 2 * mib)
        XCTAssertEqual(ahead.read((2 * mib)..<(3 * mib), size: size), (3 * mib)..<(35 * mib))
    }

    func testAWindowOfZeroReadsNothingAhead() {
        var ahead = DataFileReadAhead(window: 0)
        XCTAssertNil(ahead.read(0..<mib, size: size))
        XCTAssertNil(ahead.read(mib..<(2 * mib), size: size))
    }

    func testTheMountReadsThirtyTwoMebibytesAheadByDefault() {
        XCTAssertEqual(MountOptions().dataFileReadAhead, 32 * mib)
    }
}
