import XCTest
@testable import CacheCore
import TestSupport

/// Reads and opens time out by the engine's monotonic clock, which the sweeper's tick reads: on a
/// manual scheduler the test advances, a read or an open fails when that clock passes its
/// deadline (the read timeout, 10 s), not before, and a wall clock set forward fails neither.
final class DeadlineClockTests: GatedEngineTestCase {
    private func waitingReads(_ cache: CacheEngine) -> Int {
        var waiting = 0
        for shard in cache.core.shards { shard.locked { for e in $0.all { waiting += e.waiters.count } } }
        return waiting
    }

    private func waitingOpens(_ cache: CacheEngine) -> Int { cache.core.waitingOpens.withLock { $0.count } }

    func testAnOpenTimesOutWhenTheEnginesClockPassesItsDeadlineNotBefore() throws {
        let time = Scheduler.manual()
        let source = GatedSource()
        let cache = try engine(source, clock: .manual(time))
        defer { source.finishAll(); cache.shutdown() }
        let answered = expectation(description: "open answered")
        let box = ResultBox<EntryInfo>()
        cache.open(url: url) { box.set($0); answered.fulfill() }   // its check is never answered
        time.advance(by: .milliseconds(9_750))
        XCTAssertEqual(waitingOpens(cache), 1, "within the read timeout the open waits")
        time.advance(by: .milliseconds(250))
        wait(for: [answered], timeout: 5)
        XCTAssertEqual(waitingOpens(cache), 0)
        XCTAssertThrowsError(try box.get()) { XCTAssertEqual($0 as? CacheError, .timeout(url: self.url)) }
    }

    func testAWallClockSetForwardTimesOutNoReadAndNoOpen() throws {
        let time = Scheduler.manual()
        let wall = MovableClock()
        let source = GatedSource()
        let cache = try engine(source, clock: EngineClock(wall: { wall.now }, monotonic: { time.now }, scheduler: time))
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let reader = cache.makeReader(for: info)
        defer { reader.close() }
        reader.read(offset: 1 << 20, length: 65536) { _ in }
        cache.open(url: url + "?other") { _ in }
        wall.advance(3600)   // the wall clock set an hour forward
        time.advance(by: .seconds(1))   // four ticks of the sweeper
        XCTAssertEqual(waitingReads(cache), 1, "the read still waits")
        XCTAssertEqual(waitingOpens(cache), 1, "the open still waits")
    }
}
