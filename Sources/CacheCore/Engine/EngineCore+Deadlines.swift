import Foundation

/// Opens and reads past their deadlines: what the sweeper (`Maintenance`) calls through
/// `expireLate`, holding no lock. It takes each shard's lock in turn only to take the late work
/// out (`EntryStateMachine.tick`; `OpenDeadlines.tick` under the opens' locks), and fails the late
/// ones' answers as jobs of `pool`. The opens waiting
/// and the abandoned transfers are `EngineCore.waitingOpens` and `abandonedOpens`.
extension EngineCore {
    /// How long a transfer whose opens all timed out goes on without anyone waiting. An open
    /// waits for the end of a body without a length, so a slow one (a generated file) fails
    /// its first open while its download goes on, and an open again within this time finds it
    /// done or nearer; an endless one (a radio station) is stopped, instead of downloading up
    /// to half the cache's capacity for nobody.
    static let abandonedTransferGrace = Duration.seconds(60)

    /// Fails opens past their deadline (`waitingOpens`); their answers are submitted to `pool`.
    /// A URL left with no open waiting has its transfer without a length stopped
    /// `abandonedTransferGrace` later, unless an open for it comes meanwhile (`OpenDeadlines`).
    /// `now`: the engine clock's monotonic time, which the deadlines are on.
    func expireOpens(now: MonotonicInstant) {
        let (late, stop) = waitingOpens.withLock { opens in
            // Under the same lock as the opens: an open registered meanwhile is seen here.
            abandonedOpens.withLock { abandoned in
                OpenDeadlines.tick(opens: &opens, abandoned: &abandoned, now: now, grace: Self.abandonedTransferGrace,
                                   isAnswered: { $0.isAnswered },
                                   key: { try? self.recentKey(for: $0) })
            }
        }
        for (url, answer) in late {
            // An open of a file the cache holds that timed out waiting on its check (an origin
            // that accepts and never answers) gets the cached copy, as for an origin known to be
            // down: it failed with EIO, because the transfer's own timeout (the same length)
            // came a moment after the open's, and only then was the origin marked down.
            if let info = cachedInfo(url: url), info.length != nil {
                logger.warning("the origin did not answer the open's check in time; serving the cached copy",
                               metadata: ["url": "\(DisplayURL.redacted(url))"])
                pool.submit { answer.fire(.success(info)) }
                continue
            }
            logger.warning("open timed out", metadata: ["url": "\(DisplayURL.redacted(url))"])
            pool.submit { answer.fire(.failure(.timeout(url: url))) }
        }
        for url in stop { stopTransfersWithoutLength(url: url) }
    }

    /// Cancels the transfers of `url`'s entry while its length is unknown: no open was answered
    /// (an open waits for the end of such a body), so no reader reads it and nobody waits.
    func stopTransfersWithoutLength(url: String) {
        guard let key = try? configuration.keyRules.key(for: url) else { return }
        let ids: [Int] = shard(for: key).locked { entries in
            guard let entry = entries[key], entry.info.length == nil else { return [] }
            return Array(entry.inflight.fetches.keys)
        }
        let running = fetches.running(ids)
        guard !running.isEmpty else { return }
        logger.warning("stopped a download without a length that nobody waits for", metadata: [
            "url": "\(DisplayURL.redacted(url))", "after": "\(Self.abandonedTransferGrace.components.seconds)s without an open",
        ])
        running.forEach { $0.cancel() }
    }

    /// Fails reads that waited longer than `readTimeout`, and remembers them for a moment: the
    /// kernel asks a failed read-ahead again at once, and that retry fails now instead of
    /// waiting a second `readTimeout` (`EntryStateMachine.tick`). `now`: the engine clock's
    /// monotonic time, which the deadlines are on; the errors noted are stamped by its wall clock.
    func expireWaiters(now: MonotonicInstant) {
        let clock = configuration.engineClock
        for shard in shards {
            let expired: [(done: Waiter.Completion, range: Range<Int64>, url: String)] = shard.locked { entries in
                var out: [(done: Waiter.Completion, range: Range<Int64>, url: String)] = []
                for e in entries.all where !e.waiters.isEmpty {
                    for w in e.machine.tick(now: now) {
                        e.unpin(slices(of: w.range), generation: w.generation)
                        e.noteError("read \(w.range.lowerBound)-\(w.range.upperBound - 1) timed out", at: clock.wall())
                        out.append((w.completion, w.range, e.info.url))
                    }
                }
                return out
            }
            for (done, range, url) in expired {
                logger.warning("read timed out", metadata: ["url": "\(url)", "range": "\(range.lowerBound)-\(range.upperBound - 1)"])
                pool.submit { done(.failure(.timeout(url: url))) }
            }
        }
    }
}
