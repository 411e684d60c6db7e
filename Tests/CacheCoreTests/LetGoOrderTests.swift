import XCTest
@testable import CacheCore

/// The order idle entries are let go in (`LetGoOrder`, SIEVE): a sweep through more entries than
/// the budget holds leaves the ones used again; entries in use are never let go; one batch goes
/// down to the budget; an entry loaded for a look is the first let go.
final class LetGoOrderTests: XCTestCase {
    /// A table of `budget` entries, trimmed as `EntryLoader` does: once past the budget by a
    /// quarter, down to the budget in one batch. Returns what was let go.
    private struct Table {
        var order = LetGoOrder<Int>()
        let budget: Int
        var inUse: Set<Int> = []
        var letGo: [Int] = []

        mutating func use(_ key: Int) {
            if order.contains(key) { order.touch(key) } else { order.insert(key) }
            if order.count > budget + budget / 4 { trim() }
        }

        mutating func trim() {
            let busy = inUse
            letGo += order.letGo(order.count - budget) { !busy.contains($0) }
        }
    }

    func testASweepThroughTenTimesTheBudgetKeepsTheEntriesUsedAgain() {
        var table = Table(budget: 40)
        let hot = Array(0..<10)
        for k in hot { table.use(k) }
        for k in hot { table.use(k) }
        for k in 1000..<1400 { table.use(k) }
        XCTAssertEqual(hot.filter { !table.order.contains($0) }, [], "every entry used again is still in")
        XCTAssertFalse(table.letGo.contains { hot.contains($0) })
        XCTAssertLessThanOrEqual(table.order.count, 50)
    }

    func testTheHotSetStaysWhenItIsUsedDuringTheSweep() {
        var table = Table(budget: 40)
        let hot = Array(0..<10)
        for k in hot { table.use(k) }
        for (i, k) in (1000..<3000).enumerated() {
            table.use(k)
            if i % 100 == 0 { for h in hot { table.use(h) } }
        }
        XCTAssertEqual(hot.filter { !table.order.contains($0) }, [])
    }

    func testEntriesInUseAreNeverLetGo() {
        var table = Table(budget: 8)
        table.inUse = [3, 4, 5]
        for k in 0..<100 { table.use(k) }
        table.trim()
        for k in [3, 4, 5] { XCTAssertTrue(table.order.contains(k), "entry \(k) is in use") }
        XCTAssertFalse(table.letGo.contains { [3, 4, 5].contains($0) })
        XCTAssertEqual(table.order.count, 8)
    }

    func testAWalkWhereEverythingIsInUseLetsNothingGoAndEnds() {
        var order = LetGoOrder<Int>()
        for k in 0..<10 { order.insert(k) }
        for k in 0..<5 { order.touch(k) }
        XCTAssertEqual(order.letGo(5) { _ in false }, [])
        XCTAssertEqual(order.count, 10)
    }

    func testOneBatchGoesDownToTheBudget() {
        var order = LetGoOrder<Int>()
        for k in 0..<100 { order.insert(k) }
        for k in stride(from: 0, to: 100, by: 2) { order.touch(k) }
        let out = order.letGo(60) { _ in true }
        XCTAssertEqual(out.count, 60)
        XCTAssertEqual(order.count, 40)
        XCTAssertEqual(Array(out.prefix(50)), Array(stride(from: 1, to: 100, by: 2)), "the ones not used again first, oldest first")
    }

    func testAnEntryLoadedForALookIsTheFirstLetGo() {
        var order = LetGoOrder<Int>()
        for k in 0..<10 { order.insert(k) }
        order.insert(99, nextOut: true)
        XCTAssertEqual(order.letGo(1) { _ in true }, [99])
        XCTAssertEqual(order.letGo(1) { _ in true }, [0])
        order.insert(98, nextOut: true)
        XCTAssertEqual(order.letGo(1) { _ in true }, [98])
    }

    func testRemovedAndReinsertedKeysComeInAsNew() {
        var order = LetGoOrder<Int>()
        for k in 0..<5 { order.insert(k) }
        order.touch(0)
        order.remove(0)
        XCTAssertFalse(order.contains(0))
        order.insert(0)
        XCTAssertFalse(order.wasUsed(0), "a key put in again is new")
        XCTAssertEqual(order.letGo(5) { _ in true }, [1, 2, 3, 4, 0])
        XCTAssertEqual(order.count, 0)
        order.insert(7)
        XCTAssertEqual(order.letGo(3) { _ in true }, [7])
    }
}
