import CoreTypes

/// Which of an entry's fetched bytes no read has read yet, by who fetched them: the reader
/// class whose read or read-ahead started the transfer, or the open's metadata probe (`nil`),
/// which starts before any reader is known. Bytes that leave the cache still marked (evicted, a
/// data file found unreadable, a new version of the file) were fetched for nothing: they are
/// counted as that fetcher's waste (`CacheMetrics`' `httpcachefs_reader_wasted_bytes_total`).
///
/// Why here: the entry already knows, for each byte it holds, whether a read took it
/// (`EntryReads.unreadAhead`); splitting that by fetcher is a few range sets per entry (one per
/// class that fetched, usually one, none once all is read), kept in memory under the shard lock
/// with the rest of the entry's state. Nothing is written: after a restart the bytes cached
/// before it are neither read nor wasted (the counts, like every counter, start at zero).
///
/// Bytes a waiting read asked for are not marked: they are read as they land.
package struct UnreadFetched: Sendable, Equatable {
    /// By `Self.index(of:)`; empty until a first mark.
    private var sets: [RangeSet] = []

    package static let owners = ReaderClass.allCases.count + 1

    /// The slot of a fetcher: its class's index, the probe's after them.
    package static func index(of owner: ReaderClass?) -> Int { owner?.index ?? ReaderClass.allCases.count }

    package var isEmpty: Bool { sets.allSatisfy(\.isEmpty) }

    /// Bytes `range` arrived for `owner`'s fetch and no read waits for them.
    package mutating func mark(_ range: Range<Int64>, by owner: ReaderClass?) {
        guard !range.isEmpty else { return }
        if sets.isEmpty { sets = Array(repeating: RangeSet(), count: Self.owners) }
        let i = Self.index(of: owner)
        // Fetched again by another (after a seek, a probe's bytes that a read-ahead also asked
        // for): the newest fetcher owns them.
        for j in sets.indices where j != i && !sets[j].isEmpty { _ = sets[j].remove(range) }
        _ = sets[i].insert(range)
    }

    /// A read took `range`: none of it can be wasted any more.
    package mutating func read(_ range: Range<Int64>) {
        for j in sets.indices where !sets[j].isEmpty { _ = sets[j].remove(range) }
    }

    /// Bytes `range` left the cache: those still unread, by fetcher.
    package mutating func dropped(_ range: Range<Int64>) -> WastedBytes {
        var wasted = WastedBytes()
        for j in sets.indices where !sets[j].isEmpty { wasted.bytes[j] += sets[j].remove(range) }
        return wasted
    }

    /// Every byte of the entry left the cache (a new version).
    package mutating func droppedAll() -> WastedBytes {
        var wasted = WastedBytes()
        for j in sets.indices { wasted.bytes[j] = sets[j].count }
        sets = []
        return wasted
    }

    /// The unread bytes `owner` fetched (tests, the status of one file).
    package func unread(by owner: ReaderClass?) -> RangeSet {
        sets.isEmpty ? RangeSet() : sets[Self.index(of: owner)]
    }
}

/// Bytes fetched that left the cache unread, by fetcher (`UnreadFetched.index(of:)`).
package struct WastedBytes: Sendable, Equatable {
    package var bytes = [Int64](repeating: 0, count: UnreadFetched.owners)

    package var isEmpty: Bool { bytes.allSatisfy { $0 == 0 } }

    package static func += (lhs: inout WastedBytes, rhs: WastedBytes) {
        for i in lhs.bytes.indices { lhs.bytes[i] += rhs.bytes[i] }
    }

    package subscript(owner: ReaderClass?) -> Int64 { bytes[UnreadFetched.index(of: owner)] }
}
