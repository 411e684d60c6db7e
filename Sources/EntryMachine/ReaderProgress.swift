import CoreTypes

/// What a reader's reads so far say about it (`ReaderState.progress`): where its last read ended,
/// its read-ahead window, its pace and tempo, and whether it earned read-ahead. A read
/// (`EntryStateMachine.readRequested`) changes it under the entry's shard lock.
package struct ReaderProgress: Sendable {
    package var lastEnd: Int64 = -1
    package var readAhead: Int64
    /// How it consumes, since its last seek: see `ReaderPace`.
    package var pace = ReaderPace(now: 0, at: 0)
    /// Watched or bulk, from the times of its reads since its first (`ReaderTempo`); nil for
    /// a class whose fetches have a fixed class anyway (scanner, background) and before its
    /// first read.
    package var tempo: ReaderTempo?
    package var closed = false
    /// Reads in a row so far that continued the one before; and whether it has earned
    /// read-ahead (an unknown reader, once that reached `ReaderClass.earnAfter`).
    package var inARow = 0
    package var earned = true
    /// For a reader that pays for what it reads (every one but a player, and the engine's own
    /// warm-up: `ReaderClass.readsAheadFromOpen`): the read-ahead it earned (`EarnedReadAhead`).
    /// nil: read-ahead as a player's.
    package var earning: EarnedReadAhead?

    package init(readAhead: Int64) { self.readAhead = readAhead }
}
