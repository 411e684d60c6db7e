import Foundation
import Logging
#if canImport(Glibc)
import Glibc
#endif

/// The slice store: the cache's bytes on disk and what is known of them, as one part.
///
/// *What it owns.* The data files (`DataFiles`: one sparse file per version of an entry), the
/// index (`CacheIndex`: entry rows and extents, written behind), the writer lanes of arriving
/// bytes (`WriteQueue`) and the read descriptors kept for the next reader (`IdleDataFiles`).
/// The engine's other parts hold this store, never those four: whatever they do to bytes on
/// disk goes through one API, so that a slice's bytes, its rows and its descriptors cannot
/// drift apart (rows go before files, a removed version's descriptors with it).
///
/// *Checksums travel with the extents.* A writer extends a `ChecksummedExtent` with each piece
/// it writes (the XXH64 of exactly the bytes of the extent, as mountpoint-s3's `ChecksummedBytes`
/// carry their CRC32C with their buffer) and hands it to `record` whole, after its bytes are on
/// disk; `check` reads an extent back and compares it with the checksum it was recorded with.
/// No caller computes or compares a checksum itself.
///
/// *Which thread runs it.* Anyone's: it has no lock of its own. Writes run on the writer lane of
/// their data file (`submit`), checks on the engine's pool, deletions on the thread that decided
/// them (an eviction round, a removal, a new version), opens for reading on the reader's thread
/// (a hit opens its file at most once per reader, and reuses a kept descriptor first).
///
/// *What it may block on.* The disk (`pwrite`, `pread`, `open`, hole punches, `unlink`) and the
/// index's commits (`deleteSliceRows`, `deleteEntries`): never call those under a shard lock.
/// `forgetFiles`, `keepForNextReader`, `record` and `save` only take leaf locks (the index's
/// pending rows, the kept descriptors) and are meant to be called under one.
///
/// Map of this folder (`Storage/`): everything on disk: bytes, index, and the directory itself.
/// - `SliceStore.swift` (this file): the part the engine holds: data files, index, writer lanes and
///   kept descriptors behind one API; `ChecksummedExtent`, an extent with its checksum.
/// - `DataFiles.swift`: one sparse data file per version; slices punched out.
/// - `CacheIndex.swift`: the SQLite index (entries, extents), written behind memory;
///   `CacheIndex+Respell.swift` its key-spelling migration; `DamagedIndex.swift` a damaged one set aside.
/// - `WriteQueue.swift`: the writer lane for arriving bytes (the engine pool's, keyed by file).
/// - `XXH64.swift`: the checksum of every extent.
/// - `IdleDataFiles.swift`: read descriptors kept for the next reader of the same version.
/// - `KeptDocuments.swift`: last good answers of document requests (WebDAV listings).
/// - `HeldDirectory.swift`: the cache directory held open; every path is relative to it.
/// - `DirectoryLock.swift`: one process per cache directory. `PrivateDirectory.swift`: 0700.
/// - `DirectoryNames.swift`: a listing that says why it failed. `LinuxFileCalls.swift`: punch
///   hole and friends, looked up by name.
/// Neighbours: the bottom layer; uses only `Keys/`, `Memory/`'s chunks (the writer), the engine's
/// clock and errors, `Entry/`'s rows, and `Read/`'s `readFully` and `DataFile`. `Engine/` opens
/// it (the start reads `DataFiles` and the index directly, before any part runs); `Fetch/`
/// writes, `Read/` reads, `Eviction/` and `Maintenance/` delete and check, all through `SliceStore`.
final class SliceStore: Sendable {
    /// One sparse file per version; moves bytes, knows nothing of which are valid.
    let files: DataFiles
    /// Entry rows and extents; also the pins, capacity and start records, which the engine's
    /// start and `Maintenance` read and write through it (they are not slices).
    let index: CacheIndex
    /// The writer lanes: every job for one data file on one lane, in order.
    let writes: WriteQueue
    /// Read descriptors readers gave back, for the next reader of the same version.
    let idleFiles: IdleDataFiles
    /// Bytes per slice, the unit of accounting and eviction (the one the cache was created with).
    var sliceSize: Int64 { files.sliceSize }

    init(files: DataFiles, index: CacheIndex, writes: WriteQueue, idleFiles: IdleDataFiles = IdleDataFiles()) {
        self.files = files
        self.index = index
        self.writes = writes
        self.idleFiles = idleFiles
    }

    /// The cache directory, held open (`HeldDirectory`).
    var held: HeldDirectory { files.held }

    // MARK: Slices

    func sliceIndex(of offset: Int64) -> Int64 { files.sliceIndex(of: offset) }
    func sliceRange(_ slice: Int64) -> Range<Int64> { files.sliceRange(slice) }
    /// The slices `range` touches (one for an empty range: the one it starts in).
    func slices(of range: Range<Int64>) -> ClosedRange<Int64> {
        sliceIndex(of: range.lowerBound)...sliceIndex(of: max(range.lowerBound, range.upperBound - 1))
    }

    // MARK: Writing (on a writer lane)

    /// A pooled buffer for arriving bytes, reserved in the queued share (`WriteQueue.buffer`).
    func buffer(capacity: Int, transfer: Int, onRoom: @escaping @Sendable () -> Void) -> ChunkStorage? {
        writes.buffer(capacity: capacity, transfer: transfer, onRoom: onRoom)
    }

    /// Runs `job` on the writer lane of `file` (every job of one data file on one lane, in order).
    func submit(file: Int, _ job: @escaping @Sendable () -> Void) {
        writes.submit(file: file, job)
    }

    func openForWriting(entry: Int64, generation: Int64) throws -> Int32 {
        try files.openForWriting(entry: entry, generation: generation)
    }

    /// Writes all of `piece` at `offset` of the data file open as `fd`. Its checksum is the
    /// caller's `ChecksummedExtent`'s, extended once the write succeeded.
    func write(_ piece: UnsafeRawBufferPointer, at offset: Int64, fd: Int32, entry: Int64, generation: Int64) throws {
        try files.write(fd: fd, piece, at: offset, path: files.path(entry: entry, generation: generation))
    }

    /// Deletes a data file nobody will record rows of (a writer's, created for an entry removed
    /// meanwhile).
    func removeFile(entry: Int64, generation: Int64) {
        files.remove(entry: entry, generation: generation)
    }

    /// Hands a written extent, with its checksum, to the index (written behind; a leaf lock).
    func record(_ extent: ChecksummedExtent) {
        index.addExtent(extent.row)
    }

    // MARK: Reading

    /// A descriptor of `entry`'s data file at `generation`: one a reader gave back, else a new
    /// one. Throws when the file cannot be opened (the caller forgets its bytes, never serves them).
    func readFile(of entry: EntryHandle, id: Int64, generation: Int64) throws -> DataFile {
        try idleFiles.take(entry, generation: generation)
            ?? DataFile(fd: files.openForReading(entry: id, generation: generation))
    }

    /// Keeps a closing reader's descriptor for the next reader (`IdleDataFiles.give`: under the
    /// shard lock, the entry current at `generation`); returns one let go of, to close after it.
    func keepForNextReader(_ file: DataFile, of entry: EntryHandle, generation: Int64) -> DataFile? {
        idleFiles.give(file, of: entry, generation: generation)
    }

    /// Forgets the kept descriptors of `entry` (a new version, a removal; under the shard lock).
    func forgetFiles(of entry: EntryHandle) {
        idleFiles.dropAll(of: entry)
    }

    /// A new descriptor of a whole data file (handed to the kernel: `WholeFile`).
    func openForReading(entry: Int64, generation: Int64) throws -> Int32 {
        try files.openForReading(entry: entry, generation: generation)
    }

    /// Reads `range` of a version, which the index says is on disk. Throws (`StorageError`) if the
    /// file is missing or short: a miss, never zeros.
    func read(entry: Int64, generation: Int64, range: Range<Int64>) throws -> [UInt8] {
        guard !range.isEmpty else { return [] }   // the shared empty array is not ours to write
        return try [UInt8](unsafeUninitializedCapacity: Int(range.length)) { buf, count in
            try files.read(entry: entry, generation: generation, range: range, into: UnsafeMutableRawBufferPointer(buf), at: 0)
            count = Int(range.length)
        }
    }

    // MARK: Checking

    /// The recorded extents of a version (of `slices` only, if given), each with its checksum.
    func extents(entryID: Int64, generation: Int64, slices: [Int64]? = nil) throws -> [CacheIndex.ExtentRow] {
        try index.extents(entryID: entryID, generation: generation, slices: slices)
    }

    /// What reading an extent back found.
    enum ExtentCheck {
        case matches
        /// Its bytes are not those it was recorded with.
        case differs
        /// Its bytes could not be read (a missing or short file).
        case unreadable(StorageError)
    }

    /// Reads `extent` back and compares it with the checksum it was recorded with. Blocking: call
    /// from a job of the engine's pool, with its slice pinned.
    func check(_ extent: CacheIndex.ExtentRow) -> ExtentCheck {
        do {
            let bytes = try read(entry: extent.entryID, generation: extent.generation, range: extent.start..<extent.end)
            return XXH64.hash(bytes) == extent.checksum ? .matches : .differs
        } catch let e as StorageError {
            return .unreadable(e)
        } catch {
            return .unreadable(StorageError(path: files.path(entry: extent.entryID, generation: extent.generation), message: "\(error)"))
        }
    }

    /// Marks `slice` as read by a scanner (the cap's scan share), written behind with the rows.
    func recordScanSlice(_ slice: CacheIndex.SliceID) {
        index.addScanSlice(slice)
    }

    /// Records an entry's pinned byte ranges (empty: no pins) in the index, at once. Blocking.
    func setPins(key: String, _ ranges: [Range<Int64>]) throws {
        try index.setPins(key: key, ranges)
    }

    /// Drops the rows of extents found damaged (their bytes are forgotten by the caller).
    func dropExtents(_ extents: [CacheIndex.ExtentRow]) {
        for x in extents { try? index.deleteExtent(x) }
    }

    // MARK: Entry rows

    /// A new entry's id (all its data files' names need; its row is written behind).
    func newEntryID() -> Int64 { index.newEntryID() }

    /// Hands `entry`'s row to the index unless it has it already (written behind; a leaf lock).
    func save(_ entry: EntryState) { entry.saveRow(to: index) }

    // MARK: Deleting: rows first, then bytes, except eviction's holes (see `Evictor`)

    /// Frees the blocks of `slices` (punched out of their data files, one file at a time); their
    /// rows stay until `deleteSliceRows`. Failures are logged: the bytes stay counted on disk.
    func freeBlocks(of slices: [CacheIndex.SliceID], logger: Logger) {
        let byFile = Dictionary(grouping: slices) { FileID(entry: $0.entryID, generation: $0.generation) }
        for (file, ids) in byFile {
            do {
                try files.punch(entry: file.entry, generation: file.generation, slices: ids.map(\.slice))
            } catch {
                logger.error("evicted bytes could not be freed on disk", metadata: ["error": "\(error)"])
            }
        }
    }

    /// Deletes the rows of `slices` (a commit; throws on a full disk, see `Evictor.finishEvictions`).
    func deleteSliceRows(_ slices: [CacheIndex.SliceID]) throws {
        try index.deleteSlices(slices) {}
    }

    /// An entry moved to version `keep`: the rows of its other versions go (behind), then the
    /// data file of `old`.
    func deleteOtherVersions(entryID: Int64, keep: Int64, old: Int64) {
        index.deleteOtherGenerations(entryID: entryID, keep: keep) { [files] in
            files.remove(entry: entryID, generation: old)
        }
    }

    /// Deletes removed entries (`files`: each id with its current generation): their rows (a
    /// commit), then their data files, by name through the held directory, never by path
    /// (`HeldDirectory`). A few entries (a `remove`): every data file of theirs, found by
    /// listing their folders only. Many (a page of `clear`): each current version's file,
    /// named, no folder listed (a page of 512 would list them all): a file of another version
    /// (a crash before its deletion) is one no row describes, which the next start deletes.
    func deleteEntries(_ files: [(id: Int64, generation: Int64)]) throws {
        let idSet = Set(files.map(\.id))
        let data = self.files
        try index.deleteEntries(files.map(\.id)) {
            let held = data.held
            let folders = Set(files.map { data.folder(entry: $0.id) })
            guard folders.count <= 4 else {
                for f in files { _ = held.unlink(data.relativePath(entry: f.id, generation: f.generation)) }
                return
            }
            for folder in folders {
                for name in held.names(in: folder) ?? [] {
                    if let p = DataFiles.parse(fileName: name), idSet.contains(p.entry) { _ = held.unlink(folder + "/" + name) }
                }
            }
        }
    }

    // MARK: Stopping

    /// Runs the writes queued, then ends the lanes (shutdown, after the last transfers).
    func stopWriting() { writes.stop() }

    /// Closes the index (shutdown, once nothing writes) leaving `totals` and how far the clean-up
    /// after the start got (`cleanUp`) and the last generation handed out (`generationFloor`) for
    /// the next start; on failure, flushes what it can.
    func close(totals: CacheIndex.StoredTotals? = nil, cleanUp: CacheIndex.CleanUpProgress? = nil,
               generationFloor: Int64? = nil) throws {
        do { try index.close(totals: totals, cleanUp: cleanUp, generationFloor: generationFloor) } catch {
            index.flush()
            throw error
        }
    }
}

/// Bytes of one slice written one after the other, with the XXH64 of exactly those bytes: what a
/// writer hands the index once they are on disk (`SliceStore.record`), and what a check reads
/// back and compares (`SliceStore.check`). The checksum is extended only with bytes written, so
/// an extent never claims bytes it does not hash; a write that failed ends it.
struct ChecksummedExtent {
    let entryID: Int64
    let generation: Int64
    let slice: Int64
    let start: Int64
    private(set) var end: Int64
    private(set) var hash = XXH64()

    /// An extent of `piece`, written at `offset` of `slice`.
    init(entryID: Int64, generation: Int64, slice: Int64, at offset: Int64, _ piece: UnsafeRawBufferPointer) {
        self.entryID = entryID
        self.generation = generation
        self.slice = slice
        start = offset
        end = offset
        append(piece)
    }

    /// Extents are kept under 1 MiB, so a damaged byte costs at most that much fetched again.
    static let maxLength: Int64 = 1 << 20

    /// True when a piece written at `offset` of `slice` continues this extent.
    func continues(slice: Int64, at offset: Int64) -> Bool {
        slice == self.slice && offset == end && end - start < Self.maxLength
    }

    /// Extends the extent with `piece`, written just after it.
    mutating func append(_ piece: UnsafeRawBufferPointer) {
        end += Int64(piece.count)
        hash.update(piece)
    }

    /// Its index row.
    var row: CacheIndex.ExtentRow {
        .init(entryID: entryID, generation: generation, slice: slice, start: start, end: end, checksum: hash.value)
    }
}
