import CoreTypes

/// A transfer's bytes, from their arrival to the disk: whether an arrival is taken at all, which
/// of its bytes are new and which of those are read-ahead, how they are cut into chunks for the
/// writer, what a finished write records, and when a writer that found no room tries again.
///
/// Design note. These are the arrival side's events (`bytesArrived`, `writeCompleted`) and the
/// rules the sink applies with them (`newBytes`, `readAhead`, `chunks`, `recordWritten`,
/// `mayWrite`); `EntrySink` calls them under the entry's shard lock (all but `mayWrite`, which
/// is the writer's own), on the source's thread for an arrival and on the file's writer lane for
/// a write, and carries out what they return. They are pure: no locks, no calls out, no
/// allocation beyond what the answer itself is (an arrival that is all read-ahead or all wanted
/// allocates nothing here), time only as a `now` parameter. The events are `mutating`, as every
/// event of the machine is, though they change none of its facts today: called in place on
/// `EntryState.machine`, never on a copy of it (one per arrival). The bookkeeping they change
/// (coverage, bytes per slice, read-ahead not read yet) is still `EntryState`'s: the caller
/// passes it `inout`, so what a write records is decided and done here in one place, and tested
/// as a table.
extension EntryStateMachine {
    // MARK: Bytes arrived

    package enum ArrivalAction: Equatable {
        /// Record nothing and stop the transfer: the entry left its shard, moved to another
        /// version, or took the fetch off its table.
        case ignore
        /// A body with no length passed the most it may bring: fail the transfer ("no length,
        /// and still no end after `limit` bytes"); `asked`: the limit was the open's own (a
        /// directory listing), not half the cache's capacity.
        case cutOff(limit: Int64, asked: Bool)
        /// Take them: register the new bytes as pending (`newBytes`, `readAhead`, `chunks`), hand
        /// them to the reads waiting, and advance the transfer's cursor.
        case take
    }

    /// Bytes `range` of a transfer arrived.
    /// - Parameters:
    ///   - current: the fetch is still on the entry's in-flight table, for the entry's version.
    ///   - length: the entry's length, if known.
    ///   - ownLimit: the most a body without a length may bring that its open asked for
    ///     (`EntryState.unknownLengthLimit`), if any.
    ///   - engineLimit: the engine's own limit (`TransferStarts.unknownLengthLimit`).
    package mutating func bytesArrived(range: Range<Int64>, current: Bool, length: Int64?, ownLimit: Int64?,
                      engineLimit: Int64) -> ArrivalAction {
        guard current, !isRemoved else { return .ignore }
        if length == nil {
            let limit = ownLimit ?? engineLimit
            if range.upperBound > limit { return .cutOff(limit: limit, asked: ownLimit != nil) }
        }
        return .take
    }

    /// The bytes of `range` neither on disk (`coverage`) nor pending already (through another
    /// fetch): those an arrival adds.
    package static func newBytes(in range: Range<Int64>, coverage: RangeSet, pending: RangeSet) -> [Range<Int64>] {
        let gaps = coverage.gaps(in: range)
        guard !pending.isEmpty else { return gaps }
        return gaps.flatMap { pending.gaps(in: $0) }
    }

    /// Which new bytes are read-ahead: the part no waiting read asked for.
    package enum ReadAhead: Equatable {
        /// All of them (no read waits for any): the common case, nothing allocated.
        case all
        /// Only these (empty: a read waits for every one of them).
        case only(RangeSet)
    }

    /// The read-ahead in `gap` (new bytes), given the ranges of the reads waiting for this version.
    package static func readAhead(in gap: Range<Int64>, waiting: some Sequence<Range<Int64>>) -> ReadAhead {
        guard waiting.contains(where: { $0.overlaps(gap) }) else { return .all }
        var early = RangeSet([gap])
        for r in waiting { _ = early.remove(r) }
        return .only(early)
    }

    /// Marks new bytes `gap` as read-ahead not read yet, as `readAhead` says, and returns how many
    /// were not marked before (for `CacheMetrics.readAheadBytes`).
    package static func markReadAhead(_ gap: Range<Int64>, _ ahead: ReadAhead, in unreadAhead: inout RangeSet) -> Int64 {
        switch ahead {
        case .all:
            return unreadAhead.insert(gap)
        case let .only(early):
            var added: Int64 = 0
            for r in early.ranges { added += unreadAhead.insert(r) }
            return added
        }
    }

    /// `gap` cut at slice boundaries: each chunk goes to one data file.
    package static func chunks(of gap: Range<Int64>, sliceSize: Int64) -> SliceChunks {
        SliceChunks(rest: gap, sliceSize: sliceSize)
    }

    // MARK: Write completed

    package enum WriteAction: Equatable {
        /// The entry moved to another version: drop the chunks from pending, record nothing.
        case dropPending
        /// Drop the chunks from pending, give the bytes the disk refused to the reads waiting
        /// for them (forced: nothing else holds them now), release the write's pins, and record
        /// the written ones (`recordWritten`).
        case record
    }

    /// The writer lane finished a job (its chunks written, or refused by the disk) for an entry
    /// still in its table (a removed one's pending bytes went with it: nothing to ask).
    /// - Parameter current: the entry is at the job's version.
    mutating func writeCompleted(current: Bool) -> WriteAction {
        guard current, !isRemoved else { return .dropPending }
        return .record
    }

    /// The writer lane finished a job of version `generation` in one event: its `chunks` leave
    /// the pending bytes (`pendingWritten`); if the entry is still at that version
    /// (`writeCompleted(current:)`), the bytes `written` are recorded (`recordWritten`) and the
    /// chunks the disk refused go to the reads waiting for them, which must hold them now (past
    /// the cap: nothing else holds them). Nil when the entry moved on (nothing recorded).
    package mutating func writeCompleted(_ chunks: [PendingBytes.Chunk], written: [Range<Int64>], generation: Int64,
                                         sliceSize: Int64, now: Double) -> Written? {
        let action = writeCompleted(current: isCurrent(generation))
        pendingWritten(chunks)
        guard action == .record else { return nil }
        var hold: [(waiter: Waiter, chunk: PendingBytes.Chunk)] = []
        for c in chunks where !written.contains(c.range) {
            for w in reads.waiters where w.generation == generation && w.range.overlaps(c.range) { hold.append((w, c)) }
        }
        return Written(added: recordWritten(written, sliceSize: sliceSize, now: now), hold: hold)
    }

    /// What a recorded write leaves the engine to do: count the bytes the coverage gained, and
    /// have each waiter hold the refused chunk it is paired with (forced: the only copy left).
    package struct Written {
        package var added: Int64
        package var hold: [(waiter: Waiter, chunk: PendingBytes.Chunk)]
    }

    /// Records bytes written to disk: in the coverage, in their slices' sizes, and as their
    /// slices' last access (`now`). Returns how many bytes the coverage gained (for the engine's
    /// total: a range written twice counts once).
    package static func recordWritten(_ written: [Range<Int64>], sliceSize: Int64, now: Double, coverage: inout RangeSet,
                              sliceBytes: inout [Int64: Int64], sliceAccess: inout [Int64: Double]) -> Int64 {
        var added: Int64 = 0
        for r in written {
            added += coverage.insert(r)
            let s = r.lowerBound / sliceSize
            sliceBytes[s, default: 0] += r.length
            sliceAccess[s] = now
        }
        return added
    }

    // MARK: Write refused

    /// How long a writer that found no room (a full disk, no room under the cap) sends its bytes
    /// only to the reads waiting for them before it tries the disk again, in seconds.
    package static var noRoomPause: Double { 1 }

    /// Whether a writer that last found no room `pausedUntil` may try the disk at `now`: once the
    /// pause is over, or when the clock went back to before it began (the engine's clock is the
    /// wall clock: set back an hour, it must not keep the cache from filling for an hour).
    package static func mayWrite(now: Double, pausedUntil: Double) -> Bool {
        now >= pausedUntil || now < pausedUntil - noRoomPause
    }
}

/// A range cut at slice boundaries, as a sequence that allocates nothing.
package struct SliceChunks: Sequence, IteratorProtocol {
    package var rest: Range<Int64>
    package let sliceSize: Int64

    package mutating func next() -> Range<Int64>? {
        guard !rest.isEmpty else { return nil }
        let end = Swift.min(rest.upperBound, (rest.lowerBound / sliceSize + 1) * sliceSize)
        defer { rest = end..<rest.upperBound }
        return rest.lowerBound..<end
    }
}

/// The ranges of the reads waiting for one version of an entry, as a sequence that allocates
/// nothing (what `readAhead` is given on the hot path).
package struct WaitingRanges: Sequence {
    package let waiters: [Waiter]
    package let generation: Int64

    package init(_ waiters: [Waiter], generation: Int64) {
        self.waiters = waiters
        self.generation = generation
    }

    package func makeIterator() -> Iterator { Iterator(base: waiters.makeIterator(), generation: generation) }

    package struct Iterator: IteratorProtocol {
        package var base: IndexingIterator<[Waiter]>
        package let generation: Int64

        package mutating func next() -> Range<Int64>? {
            while let w = base.next() {
                if w.generation == generation { return w.range }
            }
            return nil
        }
    }
}
