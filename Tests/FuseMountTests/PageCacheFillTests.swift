import XCTest
@testable import FuseMount

/// Where the page cache is filled ahead of a sequential reader of cached bytes, read by read.
final class PageCacheFillTests: XCTestCase {
    let mib: Int64 = 1 << 20
    let page = PageCacheFill.page

    func testAFirstReadFillsNothingTheSecondInARowFillsAWindowLessItsTripwire() {
        var fill = PageCacheFill(window: 8 * mib, initial: 8 * mib)
        XCTAssertEqual(fill.read(0..<mib, hit: true, size: 100 * mib), [], "one read is not yet a sequential reader")
        let stretch = fill.read(mib..<(2 * mib), hit: true, size: 100 * mib)
        XCTAssertEqual(stretch, [(2 * mib)..<(6 * mib), (6 * mib + page)..<(10 * mib)])
        XCTAssertEqual(fill.tripwire, 6 * mib)
        XCTAssertEqual(fill.end, 10 * mib)
    }

    func testTheKernelsOwnReadAheadInsideTheStretchFillsNothingMore() {
        var fill = PageCacheFill(window: 8 * mib, initial: 8 * mib)
        _ = fill.read(0..<mib, hit: true, size: 100 * mib)
        _ = fill.read(mib..<(2 * mib), hit: true, size: 100 * mib)
        XCTAssertEqual(fill.read((2 * mib)..<(3 * mib), hit: true, size: 100 * mib), [])
        XCTAssertEqual(fill.read((5 * mib)..<(6 * mib), hit: true, size: 100 * mib), [])
        XCTAssertEqual(fill.end, 10 * mib)
    }

    func testAReadPastTheTripwireCountsAsReachingIt() {
        // The kernel's read-ahead may have asked for the tripwire's page within a larger read.
        var fill = PageCacheFill(window: 8 * mib, initial: 8 * mib)
        _ = fill.read(0..<mib, hit: true, size: 100 * mib)
        _ = fill.read(mib..<(2 * mib), hit: true, size: 100 * mib)
        XCTAssertEqual(fill.read((8 * mib)..<(9 * mib), hit: true, size: 100 * mib).first?.lowerBound, 10 * mib)
    }

    func testTheReadOfTheTripwireFillsTheNextStretchFromTheEnd() {
        var fill = PageCacheFill(window: 8 * mib, initial: 8 * mib)
        _ = fill.read(0..<mib, hit: true, size: 100 * mib)
        _ = fill.read(mib..<(2 * mib), hit: true, size: 100 * mib)
        let next = fill.read((6 * mib)..<(6 * mib + page), hit: true, size: 100 * mib)
        XCTAssertEqual(next, [(10 * mib)..<(14 * mib), (14 * mib + page)..<(18 * mib)])
        // The kernel may ask for the tripwire with pages before it that were not stored yet.
        let later = fill.read((14 * mib - 2 * page)..<(14 * mib + page), hit: true, size: 100 * mib)
        XCTAssertEqual(later.first?.lowerBound, 18 * mib)
    }

    func testAReadThatWaitedForTheNetworkStopsTheFill() {
        var fill = PageCacheFill(window: 8 * mib, initial: 8 * mib)
        _ = fill.read(0..<mib, hit: true, size: 100 * mib)
        _ = fill.read(mib..<(2 * mib), hit: true, size: 100 * mib)
        XCTAssertEqual(fill.read((6 * mib)..<(7 * mib), hit: false, size: 100 * mib), [], "a miss fills nothing")
        XCTAssertNil(fill.tripwire)
        XCTAssertEqual(fill.end, 0)
        // Hits in a row again: filling starts again after the latest read.
        XCTAssertEqual(fill.read((7 * mib)..<(8 * mib), hit: true, size: 100 * mib).first?.lowerBound, 8 * mib)
    }

    func testASeekStopsTheFillAndTheNextReadOnFromThereStartsIt() {
        var fill = PageCacheFill(window: 8 * mib, initial: 8 * mib)
        _ = fill.read(0..<mib, hit: true, size: 100 * mib)
        _ = fill.read(mib..<(2 * mib), hit: true, size: 100 * mib)
        XCTAssertEqual(fill.read((50 * mib)..<(51 * mib), hit: true, size: 100 * mib), [], "a seek")
        XCTAssertNil(fill.tripwire)
        XCTAssertEqual(fill.read((51 * mib)..<(52 * mib), hit: true, size: 100 * mib).first?.lowerBound, 52 * mib)
    }

    func testTheFillEndsAtTheEndOfTheFile() {
        var fill = PageCacheFill(window: 8 * mib, initial: 8 * mib)
        let size = 5 * mib + 123
        _ = fill.read(0..<mib, hit: true, size: size)
        let stretch = fill.read(mib..<(2 * mib), hit: true, size: size)
        XCTAssertEqual(stretch.last?.upperBound, size, "never past the file's size (the kernel would grow the file)")
        let wire = try! XCTUnwrap(fill.tripwire)
        XCTAssertEqual(fill.read(wire..<(wire + page), hit: true, size: size), [], "nothing left after the end")
        XCTAssertEqual(fill.read((4 * mib)..<size, hit: true, size: size), [], "the rest, read by the kernel, fills nothing")
    }

    func testALittleLeftIsFilledWithoutATripwire() {
        var fill = PageCacheFill(window: 8 * mib, initial: 8 * mib)
        let size = 2 * mib + 3 * page
        _ = fill.read(0..<mib, hit: true, size: size)
        XCTAssertEqual(fill.read(mib..<(2 * mib), hit: true, size: size), [(2 * mib)..<size])
        XCTAssertNil(fill.tripwire)
    }

    func testStretchesStartSmallAndDoubleUpToTheWindow() {
        var fill = PageCacheFill(window: 8 * mib, initial: mib)
        _ = fill.read(0..<mib, hit: true, size: 100 * mib)
        var lengths: [Int64] = []
        var stretch = fill.read(mib..<(2 * mib), hit: true, size: 100 * mib)
        for _ in 0..<5 {
            lengths.append(stretch.reduce(Int64(0)) { $0 + Int64($1.count) } + page)
            let wire = try! XCTUnwrap(fill.tripwire)
            stretch = fill.read(wire..<(wire + page), hit: true, size: 100 * mib)
        }
        XCTAssertEqual(lengths, [mib, 2 * mib, 4 * mib, 8 * mib, 8 * mib])
        // A seek starts small again.
        _ = fill.read((90 * mib)..<(91 * mib), hit: true, size: 100 * mib)
        XCTAssertEqual(fill.read((91 * mib)..<(92 * mib), hit: true, size: 100 * mib).reduce(Int64(0)) { $0 + Int64($1.count) } + page, mib)
    }

    func testAWindowOfNothingFillsNothing() {
        var fill = PageCacheFill(window: 0)
        _ = fill.read(0..<mib, hit: true, size: 100 * mib)
        XCTAssertEqual(fill.read(mib..<(2 * mib), hit: true, size: 100 * mib), [])
    }
}
