import CoreTypes

/// The reads waiting on an entry, after they began to wait: bytes landed (`waitersWoken`), the
/// entry moved to another version (`staleWaitersRemoved`), a transfer ended and what the waiters
/// still miss must be fetched again (`waitersReplanned`), their reader went away
/// (`readerClosed`). Pure as the rest of the machine: the engine calls these under the shard lock
/// and answers, fails, launches and cancels what they return.
extension EntryStateMachine {
    /// What the waiters find when they look again.
    package struct WaiterFacts {
        package var generation: Int64
        package var length: Int64?
        package var acceptsRanges: Bool
        package var coverage: RangeSet
        package var pending: PendingBytes

        package init(generation: Int64, length: Int64? = nil, acceptsRanges: Bool, coverage: RangeSet, pending: PendingBytes) {
            self.generation = generation
            self.length = length
            self.acceptsRanges = acceptsRanges
            self.coverage = coverage
            self.pending = pending
        }
    }

    // MARK: Bytes landed

    /// A waiter whose bytes are all here, with the part of its range that exists (its range
    /// clipped to the file's length; empty: answer with no bytes).
    package struct Woken {
        package var waiter: Waiter
        package var clip: Range<Int64>
    }

    /// Takes out every waiter whose bytes are all here now (in memory, as they arrived or queued
    /// for the writer, or on disk), in the order they came. If any was, the transfers' classes
    /// change (`prioritized`).
    package mutating func waitersWoken(_ facts: WaiterFacts) -> [Woken] {
        guard !reads.waiters.isEmpty else { return [] }
        var woken: [Woken] = []
        var still: [Waiter] = []
        for w in reads.waiters {
            let clip = w.range.lowerBound..<max(w.range.lowerBound, min(w.range.upperBound, facts.length ?? Int64.max))
            if w.isComplete(within: clip, cached: facts.coverage, pending: facts.pending.ranges) {
                woken.append(Woken(waiter: w, clip: clip))
            } else {
                still.append(w)
            }
        }
        guard !woken.isEmpty else { return [] }
        reads.waiters = still
        return woken
    }

    // MARK: Another version

    /// Takes out every waiter of another version than `generation`: its reader is bound to the
    /// version it opened, and fails (`remoteChanged`).
    package mutating func staleWaitersRemoved(generation: Int64) -> [Waiter] {
        guard reads.waiters.contains(where: { $0.generation != generation }) else { return [] }
        let stale = reads.waiters.filter { $0.generation != generation }
        reads.waiters.removeAll { $0.generation != generation }
        return stale
    }

    // MARK: A transfer ended

    package enum ReplanFailure: Equatable {
        /// It needed bytes of the transfer that failed, and does not have them.
        case transferFailed
        /// Transfers keep ending early on their own: it needed yet another fetch more than
        /// `maxReplans` times.
        case endsEarly
    }

    package struct ReplanAction {
        package var failed: [(waiter: Waiter, why: ReplanFailure)] = []
        package var launches: [PlannedFetch] = []
        package var priorities: [InFlightTable.PriorityChange] = []
    }

    /// How many transfers that ended short on their own a waiting read sits through.
    package static var maxReplans: Int { 8 }

    /// Plans every waiter again after a transfer ended (or the version changed): fetches start
    /// for bytes nobody fetches any more. Call after `staleWaitersRemoved`.
    /// - Parameters:
    ///   - failedRange: the bytes the transfer that failed did not deliver: waiters that need
    ///     them and do not have them fail.
    ///   - endedShort: the transfer delivered less than it promised on its own (not stopped by
    ///     us): waiters that need yet another fetch count it.
    mutating func waitersReplanned(_ facts: WaiterFacts, failedRange: Range<Int64>?, endedShort: Bool,
                                   inflight: inout InFlightTable, now: Double, uptime: Double,
                                   makeFetchID: () -> Int) -> ReplanAction {
        var action = ReplanAction()
        var still: [Waiter] = []
        let planner = ReadPlanner(readAhead: 0)
        for w in reads.waiters {
            // What it has: bytes on disk, bytes queued for the writer (which reach it even if the
            // disk refuses them), and bytes that reached it in memory (a full disk).
            var have = facts.pending.adding(to: facts.coverage)
            for r in w.filled.ranges { have.insert(r) }
            if let failedRange, w.range.overlaps(failedRange), !have.contains(w.range) {
                action.failed.append((w, .transferFailed))
                continue
            }
            let running = inflight.running(generation: facts.generation, now: now)
            var plan = planner.plan(request: w.range, length: facts.length, cached: have, running: running)
            if !facts.acceptsRanges { Self.wholeBodyOnly(&plan, running: running) }
            if !plan.fetches.isEmpty && endedShort {
                w.replans += 1
                if w.replans > Self.maxReplans {
                    action.failed.append((w, .endsEarly))
                    continue
                }
            }
            for step in plan.steps { if case let .wait(_, id) = step { inflight.addInterest(w.reader, in: id) } }
            for f in plan.fetches {
                let id = makeFetchID()
                inflight.start(id: id, generation: facts.generation, start: f.start, end: f.end,
                               reader: w.reader, readerClass: w.readerClass, pinned: !facts.acceptsRanges, now: now)
                action.launches.append(PlannedFetch(id: id, fetch: f, bytes: (f.end ?? facts.length).map { $0 - f.start }))
            }
            still.append(w)
        }
        reads.waiters = still
        action.priorities = prioritized(&inflight, uptime: uptime)
        return action
    }

    // MARK: The reader went away

    /// Takes out the reader's waiters (they fail, cancelled) and its interest in the transfers:
    /// returns the transfers nobody wants any more (cancel them; they would stop at their next
    /// chunk anyway).
    mutating func readerClosed(_ reader: Int, inflight: inout InFlightTable, uptime: Double)
        -> (waiters: [Waiter], orphaned: [Int], priorities: [InFlightTable.PriorityChange]) {
        let mine = reads.waiters.filter { $0.reader == reader }
        if !mine.isEmpty { reads.waiters.removeAll { $0.reader == reader } }
        let orphaned = inflight.release(reader: reader)
        return (mine, orphaned, mine.isEmpty ? [] : prioritized(&inflight, uptime: uptime))
    }
}
