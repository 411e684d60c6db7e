import CacheCore
@testable import Fetcher
import XCTest

/// A library scan's fetches (`.scan`) take what the players leave of an origin's link: held while
/// any player's transfer to that origin runs (its waiting read or its read-ahead), and ahead of
/// warm-up. Time is passed in, never read.
final class TransferSchedulerScanTests: XCTestCase {
    let ms: UInt64 = 1_000_000
    let a = "http://a:80", b = "http://b:80"

    func testAPlayersWaitingReadGoesBeforeAScannersFetchAtOnce() {
        var s = TransferScheduler(patience: .nanoseconds(100 * ms))
        s.add(1, origin: a, priority: .scan, owner: 5, now: .at(0))
        s.add(2, origin: b, priority: .scan, owner: 6, now: .at(0))
        XCTAssertEqual(s.decide(now: .at(0)).held, [], "alone, a scan takes the link")
        s.add(3, origin: a, priority: .waiting, owner: 7, now: .at(0))
        XCTAssertEqual(s.decide(now: .at(0)).held, [1], "not only once the read is behind: at once; another origin's scan runs")
        s.remove(3)
        XCTAssertEqual(s.decide(now: .at(0)).held, [])
    }

    func testAScanYieldsToAPlayersReadAheadAndWarmUpToTheScan() {
        var s = TransferScheduler(patience: .nanoseconds(100 * ms))
        s.add(1, origin: a, priority: .scan, owner: 5, now: .at(0))
        s.add(2, origin: a, priority: .preload, owner: nil, now: .at(0))
        XCTAssertEqual(s.decide(now: .at(0)).held, [2], "warm-up takes what the scan leaves")
        s.add(3, origin: a, priority: .far, owner: 7, now: .at(0))
        XCTAssertEqual(s.decide(now: .at(0)).held, [1, 2], "a player's read-ahead goes before both")
        s.setPriority(3, .waiting, waited: .nanoseconds(200 * ms), now: .at(1000 * ms))
        XCTAssertEqual(s.decide(now: .at(1000 * ms)).held, [1, 2])
    }
}
