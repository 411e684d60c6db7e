import Foundation

/// Counts the reads of one `CacheReader`: bytes by source and door, hit or miss, latency, and
/// failures (with their range) for the recent-errors list. A proxy response's first answered
/// read is also its time to first byte.
///
/// Hit or miss is read off the answer itself (`ReadLease.originBytes`): a read answered from the
/// cache (data files, or bytes still queued for the writer) is a hit; one that waited for bytes
/// from the origin is a miss.
final class ReadAccounting: Sendable {
    let metrics: CacheMetrics
    let door: ReadDoor
    let readerClass: ReaderClass
    let url: String
    /// How long reads took (its monotonic clock).
    let clock: EngineClock
    /// Nil once the first byte was counted.
    private let requestStartedAt: LockedValue<MonotonicInstant?>

    init(metrics: CacheMetrics, door: ReadDoor, entry: EntryInfo, requestStartedAt: MonotonicInstant?, readerClass: ReaderClass = .player,
         clock: EngineClock) {
        self.clock = clock
        self.metrics = metrics
        self.door = door
        self.readerClass = readerClass
        self.url = entry.url
        self.requestStartedAt = LockedValue(requestStartedAt)
    }

    func readEnded(_ result: Result<ReadLease, CacheError>, offset: Int64, length: Int, startedAt: MonotonicInstant) {
        switch result {
        case let .success(lease):
            guard lease.count > 0 else { return }
            let fromOrigin = Int64(lease.originBytes), fromCache = Int64(lease.count) - fromOrigin
            let now = clock.monotonic
            metrics.noteRead(door: door, cacheBytes: fromCache, originBytes: fromOrigin,
                             nanoseconds: (now - startedAt).nanoseconds)
            metrics.noteRead(readerClass: readerClass, cacheBytes: fromCache, originBytes: fromOrigin)
            guard door == .proxy else { return }
            let requestStart = requestStartedAt.withLock { s in
                defer { s = nil }
                return s
            }
            if let requestStart, now >= requestStart {
                metrics.noteFirstByte(hit: fromOrigin == 0, nanoseconds: (now - requestStart).nanoseconds)
            }
        case let .failure(error):
            if error != .cancelled { metrics.noteFailedRead(door: door) }
            metrics.noteError(error, url: url, range: offset..<offset.addingClamped(Int64(max(1, length))))
        }
    }
}
