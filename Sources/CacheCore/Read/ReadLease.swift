import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// The answer to a read: where its bytes are, not a copy of them.
///
/// Cached bytes are pieces of data files (descriptors the reader keeps open), so a front door
/// can hand them to the kernel without copying: FUSE replies with fd-backed buffers (spliced
/// where the kernel allows), the proxy with `sendfile`. Bytes that arrived from the network while
/// the read waited, or still wait for the writer, are pieces of the pooled chunks they landed in
/// (`ChunkBytes`: no copy; FUSE replies with their addresses, the proxy copies them once into a
/// `ByteBuffer`), held and counted in the `MemoryBudget` until the lease is gone. The slices stay
/// pinned (eviction leaves them alone) until
/// the lease is released: call `release()` once the reply is sent; `deinit` releases it too, so a
/// lease dropped on an error path never keeps its pins.
public final class ReadLease: Sendable {
    public enum Piece: Sendable {
        /// `count` bytes of an open data file at `offset` within the file.
        case file(fd: Int32, offset: Int64, count: Int)
        /// Bytes that arrived from the network, where they landed (no copy).
        case chunk(ChunkBytes)
        /// Bytes a source holds in an array (`init(bytes:)`: sources that hold them, tests).
        case memory([UInt8])

        public var count: Int {
            switch self {
            case let .file(_, _, count): return count
            case let .chunk(c): return c.count
            case let .memory(bytes): return bytes.count
            }
        }

        var isFile: Bool { if case .file = self { true } else { false } }
    }

    /// The bytes of the read, in order.
    public let pieces: [Piece]

    /// Some of the bytes are in data files: sending them may wait on the disk.
    public let readsFromDisk: Bool
    public let count: Int
    /// Keeps the descriptors of the file pieces open for as long as the lease lives.
    private let files: [DataFile]
    private let onRelease: LockedValue<(@Sendable () -> Void)?>

    /// Bytes the read waited for from the origin (the rest was in the cache, on disk or still
    /// in the writer's queue): what the counters call a miss.
    public let originBytes: Int

    /// - Parameter originBytes: nil: the memory pieces (bytes that arrived while the read waited,
    ///   or that wait for the writer).
    init(pieces: [Piece], files: [DataFile], originBytes: Int? = nil, onRelease: (@Sendable () -> Void)?) {
        self.pieces = pieces
        self.readsFromDisk = pieces.contains(where: \.isFile)
        self.count = pieces.reduce(0) { $0 + $1.count }
        self.originBytes = originBytes ?? pieces.reduce(0) { $1.isFile ? $0 : $0 + $1.count }
        self.files = files
        self.onRelease = LockedValue(onRelease)
    }

    /// A lease on bytes in memory (sources that hold them there, test fakes).
    public convenience init(bytes: [UInt8]) {
        self.init(pieces: bytes.isEmpty ? [] : [.memory(bytes)], files: [], onRelease: nil)
    }

    /// An empty read (at or past the end of the file).
    static let empty = ReadLease(pieces: [], files: [], onRelease: nil)

    /// The slices may be evicted again. Safe to call more than once.
    public func release() {
        onRelease.withLock { f in
            defer { f = nil }
            return f
        }?()
    }

    deinit { release() }

    /// The bytes themselves (file pieces are read with `pread`), for callers that parse them.
    /// Throws if a data file turned out short: never zeros for missing bytes.
    public func bytes() throws -> [UInt8] {
        if pieces.count == 1, case let .memory(bytes) = pieces[0] { return bytes }
        // Not for an empty read: a capacity of 0 is the shared empty array, whose count the
        // initializer would write from many threads at once.
        guard count > 0 else { return [] }
        return try [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
            var at = 0
            for piece in pieces {
                switch piece {
                case let .memory(bytes):
                    bytes.withUnsafeBufferPointer { src in
                        _ = UnsafeMutableBufferPointer(rebasing: buffer[at..<(at + bytes.count)]).initialize(from: src)
                    }
                case let .chunk(c):
                    UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[at..<(at + c.count)])
                        .copyMemory(from: c.bytes)
                case let .file(fd, offset, n):
                    do throws(ReadFullyFailure) {
                        try readFully(fd, into: UnsafeMutableRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[at..<(at + n)]),
                                      at: offset)
                    } catch {
                        throw StorageError(path: "data file (fd \(fd))", error)
                    }
                }
                at += piece.count
                initialized = at
            }
        }
    }
}

/// One open data file. Closed when the last reader or lease holding it lets go.
final class DataFile: Sendable {
    let fd: Int32

    init(fd: Int32) { self.fd = fd }

    deinit { close(fd) }
}

/// The data file one reader keeps open: reads do not open and close a file each time, and the
/// kernel keeps the file's read-ahead state across them. That read-ahead is the only one on
/// cached bytes: a sequential reader's sends (FUSE splices, the proxy's `sendfile`) make the
/// kernel read ahead on this descriptor as it does for `cat`, in large folios. (Asking for the
/// bytes ahead with `posix_fadvise(WILLNEED)` instead filled the page cache one 4 KiB page at a
/// time, and cost the daemon three times the CPU of the rest of a warm read.) A reader reads
/// one version, so one file; an evicted slice's blocks are freed by punching a hole, which an
/// open descriptor does not hold.
final class ReaderFiles: Sendable {
    private struct State {
        var file: DataFile?
        var closed = false
    }
    private let state = LockedValue(State())

    /// The open file, getting one from `open` if needed (a kept descriptor or a new one).
    func file(open: () throws -> DataFile) throws -> DataFile {
        if let f = state.withLock({ $0.file }) { return f }
        let f = try open()
        state.withLock { s in if !s.closed && s.file == nil { s.file = f } }
        return f
    }

    /// Lets go of the file (leases still holding it keep it open until they are released).
    /// Returns it, for the engine to keep for the next reader (`IdleDataFiles`).
    @discardableResult
    func closeAll() -> DataFile? {
        state.withLock { s in
            s.closed = true
            defer { s.file = nil }
            return s.file
        }
    }
}

/// Where one run of a read's bytes comes from, as the engine decides it under the shard lock;
/// the lease is built from runs after the lock is let go (so opens run without it).
struct ReadRun: Sendable {
    enum Source: Sendable {
        /// The data file.
        case disk
        /// Bytes that reached a waiting read (held in their chunk).
        case bytes(ChunkBytes)
        /// Bytes queued for the writer, held in their chunk when the lease is built.
        case pending(PendingBytes.View)
    }

    let range: Range<Int64>
    let source: Source

    /// A hit's runs as the machine gave them (`HitRun`).
    static func of(_ runs: [HitRun]) -> [ReadRun] {
        runs.map { ReadRun(range: $0.range, source: $0.pending.map(Source.pending) ?? .disk) }
    }
}
