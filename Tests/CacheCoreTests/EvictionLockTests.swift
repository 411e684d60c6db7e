import Foundation
import XCTest
@testable import CacheCore
import TestSupport

/// Nothing slow under a lock that readers and writers need: eviction chooses under its lock and
/// frees the disk after letting it go.
final class EvictionLockTests: GatedEngineTestCase {
    /// A write that needs room evicts: the slices are chosen under the eviction lock, but their
    /// holes are punched and their rows deleted with no lock held, so the other writer lane, the
    /// sweeper and `--cache-max-age` do not wait for a disk's trims or an fsync.
    func testNoLockIsHeldWhileEvictedSlicesArePunchedAndCommitted() throws {
        try cacheWholeFileThenStop()
        let cache = try engine(GatedSource(), capacity: length)
        defer { cache.shutdown() }
        let core = cache.core
        let seen = LockedValue<(eviction: Bool, shards: Bool)?>(nil)
        core.testHook = { step in
            guard case .evictionFreedSlices = step else { return }
            let evictionFree = core.evictor.lock.try()
            if evictionFree { core.evictor.lock.unlock() }
            let shardsFree = core.shards.allSatisfy { shard in shard.lockedIfAvailable { _ in true } ?? false }
            seen.withLock { $0 = (evictionFree, shardsFree) }
        }
        core.space.refill(0)
        XCTAssertTrue(core.makeRoom(for: 1 << 20), "room made by evicting")
        XCTAssertLessThanOrEqual(core.totalBytes, length - (1 << 20), "a slice at least left")
        let locks = try XCTUnwrap(seen.withLock { $0 }, "an eviction ran")
        XCTAssertTrue(locks.eviction, "the eviction lock is free during the punch and the commit")
        XCTAssertTrue(locks.shards, "so is every shard lock")
    }
}
