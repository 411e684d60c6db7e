import Dispatch
import Foundation

/// A reader that answers reads with leases: `CacheReader`, and the mount's readers (test fakes
/// among them) through `MountReader`.
public protocol LeaseReading: AnyObject, Sendable {
    func lease(offset: Int64, length: Int, completion: @escaping @Sendable (Result<ReadLease, CacheError>) -> Void)
    /// Where `ChunkedRead` reads this reader's chunks out and runs their consumer: the pool
    /// whose jobs answer its reads (an engine's), so one bounded pool does both.
    var blockingIO: BlockingIOPool { get }
}

extension LeaseReading {
    /// Readers of no engine (test fakes): a small pool of their own.
    public var blockingIO: BlockingIOPool { ChunkedRead.sharedPool }
}

extension CacheReader: LeaseReading {
    public var blockingIO: BlockingIOPool { core.pool }
}

/// Reading a byte range of an entry through to its end, chunk by chunk: the one loop behind
/// `cat`, `preload`, `cache export`, playlist loads, HLS segment preloads and directory listings.
///
/// Each chunk is leased from the reader and its bytes are read out (`pread`) and handed to the
/// consumer in a job of the reader's `blockingIO` pool (the engine's one pool for blocking I/O):
/// never on Swift's cooperative pool, whose threads must not block on I/O.
///
/// Threads: the loop never waits for its reads. A step asks for a chunk and returns; the read's
/// completion (inline for a hit, later from the fetch thread or a job of the same pool for a
/// read that waited) submits the next step as a new job. So a run holds a pool thread only
/// while it reads a chunk out and its consumer takes it, and however few threads the pool has,
/// the jobs that answer its reads are never queued behind a job that waits for them
/// (docs/threads.md). A consumer may block on its own I/O (`cat` writing to a pipe) but must not
/// wait for the engine. Reads are chained, the next one asked once the consumer took the
/// previous chunk, so memory holds one chunk at a time, and every step is a fresh job, so a long
/// run of cache hits (which complete inline) never deepens the stack. Three doors to the same
/// loop: a completion, `async`, and a blocking wait for the CLI's own pool (never a job of the
/// engine's pool, never a task's thread).
public enum ChunkedRead {
    public static let defaultChunkSize = 1 << 20

    /// The pool of readers that belong to no engine (test fakes).
    public static let sharedPool = BlockingIOPool(name: "httpcachefs-chunked", threads: 4)

    public enum Stop: Sendable, Equatable {
        /// The range was read to its end (or the file ended first).
        case end
        /// The consumer returned false.
        case consumerStopped
    }

    public struct Outcome: Sendable, Equatable {
        /// Bytes handed to the consumer.
        public var bytes: Int64
        public var stop: Stop

        public init(bytes: Int64, stop: Stop) {
            self.bytes = bytes
            self.stop = stop
        }
    }

    /// Hands the bytes of `[start, end)` (end nil: up to the end of the file) to `consume` in
    /// order, in chunks of at most `chunkSize`; `consume` returns false to stop early, or throws
    /// to fail the run. Completes once, with what was read or the first error. The reader is
    /// left open (its owner closes it).
    ///
    /// A reader is bound to one version: if the remote file changes between two chunks, the next
    /// read fails (`CacheError.remoteChanged`) and so does the run, never splicing two versions.
    /// - Returns: a cancellation switch: the run fails with `CancellationError` before its next chunk.
    @discardableResult
    public static func start(_ reader: LeaseReading, from start: Int64 = 0, to end: Int64?,
                             chunkSize: Int = defaultChunkSize,
                             consume: @escaping @Sendable ([UInt8]) throws -> Bool,
                             completion: @escaping @Sendable (Result<Outcome, Error>) -> Void) -> Cancellation {
        let loop = Loop(reader: reader, start: start, end: end, chunkSize: max(1, chunkSize),
                        consume: consume, completion: completion)
        reader.blockingIO.submit { loop.step() }
        return Cancellation(loop: loop)
    }

    /// The same, awaited. Task cancellation stops the run before its next chunk.
    @discardableResult
    public static func run(_ reader: LeaseReading, from start: Int64 = 0, to end: Int64?,
                           chunkSize: Int = defaultChunkSize,
                           consume: @escaping @Sendable ([UInt8]) throws -> Bool) async throws -> Outcome {
        let cancellation = CancellationBox()
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { continuation in
                cancellation.set(Self.start(reader, from: start, to: end, chunkSize: chunkSize, consume: consume) {
                    continuation.resume(with: $0)
                })
            }
        } onCancel: {
            cancellation.cancel()
        }
    }

    /// The same, waited for on the calling thread: the CLI's own pool only, never a task's thread
    /// and never a job of the reader's pool (its steps would queue behind the wait).
    @discardableResult
    public static func runWaiting(_ reader: LeaseReading, from start: Int64 = 0, to end: Int64?,
                                  chunkSize: Int = defaultChunkSize,
                                  consume: @escaping @Sendable ([UInt8]) throws -> Bool) throws -> Outcome {
        try waitFor { done in
            Self.start(reader, from: start, to: end, chunkSize: chunkSize, consume: consume, completion: done)
        }
    }

    /// The bytes of `[offset, offset+count)` (fewer at the end of the file), as one read.
    public static func read(_ reader: LeaseReading, offset: Int64, count: Int) async throws -> [UInt8] {
        let bytes = Collected()
        _ = try await run(reader, from: offset, to: offset.addingClamped(Int64(count)), chunkSize: count,
                          consume: bytes.append)
        return bytes.value
    }

    /// The same, waited for on the calling thread: dedicated threads only.
    public static func readWaiting(_ reader: LeaseReading, offset: Int64, count: Int) throws -> [UInt8] {
        let bytes = Collected()
        _ = try runWaiting(reader, from: offset, to: offset.addingClamped(Int64(count)), chunkSize: count,
                           consume: bytes.append)
        return bytes.value
    }

    /// A whole small body (a playlist, a directory listing) from offset 0, or nil once it proves
    /// longer than `limit` bytes.
    public static func readAll(_ reader: LeaseReading, limit: Int,
                               completion: @escaping @Sendable (Result<[UInt8]?, Error>) -> Void) {
        let bytes = Collected()
        start(reader, to: Int64(limit) + 1, consume: bytes.append) { result in
            completion(result.map { _ in bytes.value.count > limit ? nil : bytes.value })
        }
    }

    public static func readAll(_ reader: LeaseReading, limit: Int) async throws -> [UInt8]? {
        let bytes = Collected()
        _ = try await run(reader, to: Int64(limit) + 1, consume: bytes.append)
        return bytes.value.count > limit ? nil : bytes.value
    }

    /// Stops a run before its next chunk (the chunk being read completes first).
    public struct Cancellation: Sendable {
        fileprivate let loop: Loop
        public func cancel() { loop.cancel() }
    }

    /// One run: the position and the consumer. Steps are chained (one runs at a time, each
    /// started by the previous one's completion), so `offset` is never contended; it is kept
    /// with `cancelled` under one lock all the same, which makes each step's hand-over explicit.
    fileprivate final class Loop: Sendable {
        let reader: LeaseReading
        let start: Int64
        let end: Int64?
        let chunkSize: Int
        let consume: @Sendable ([UInt8]) throws -> Bool
        let completion: @Sendable (Result<Outcome, Error>) -> Void
        private struct Progress {
            var offset: Int64
            var cancelled = false
        }
        private let progress: LockedValue<Progress>
        var offset: Int64 {
            get { progress.withLock { $0.offset } }
            set { progress.withLock { $0.offset = newValue } }
        }

        init(reader: LeaseReading, start: Int64, end: Int64?, chunkSize: Int,
             consume: @escaping @Sendable ([UInt8]) throws -> Bool,
             completion: @escaping @Sendable (Result<Outcome, Error>) -> Void) {
            self.reader = reader
            self.start = start
            self.end = end
            self.chunkSize = chunkSize
            self.consume = consume
            self.completion = completion
            self.progress = LockedValue(Progress(offset: start))
        }

        func cancel() {
            progress.withLock { $0.cancelled = true }
        }

        private var isCancelled: Bool {
            progress.withLock { $0.cancelled }
        }

        /// Asks for the next chunk, or finishes.
        func step() {
            if isCancelled { return completion(.failure(CancellationError())) }
            if let end, offset >= end { return finish(.end) }
            let want = end.map { Int(min(Int64(chunkSize), $0 - offset)) } ?? chunkSize
            let pool = reader.blockingIO
            reader.lease(offset: offset, length: want) { result in
                pool.submit { self.received(result) }
            }
        }

        private func received(_ result: Result<ReadLease, CacheError>) {
            do {
                let lease = try result.get()
                defer { lease.release() }
                let bytes: [UInt8]
                do { bytes = try lease.bytes() } catch let e as StorageError { throw e.cacheError }
                if bytes.isEmpty { return finish(.end) }
                offset += Int64(bytes.count)
                if try !consume(bytes) { return finish(.consumerStopped) }
            } catch {
                return completion(.failure(error))
            }
            step()
        }

        private func finish(_ stop: Stop) {
            completion(.success(Outcome(bytes: offset - start, stop: stop)))
        }
    }
}

/// Waits on the calling thread for a completion-based call: for the CLI's own pool only. A task
/// calling it would starve Swift's cooperative pool; a job of a `BlockingIOPool` could wait for a
/// completion queued behind it (with every thread so waiting, for ever): asserted.
public func waitFor<T: Sendable, E: Error>(_ call: (@escaping @Sendable (Result<T, E>) -> Void) -> Void) throws -> T {
    assert(!BlockingIOPool.onAPoolThread, "a blocking wait on a thread of a BlockingIOPool (docs/threads.md)")
    let box = ResultBox<T, E>()
    call { box.set($0) }
    return try box.wait()
}

private final class ResultBox<T: Sendable, E: Error>: Sendable {
    private let semaphore = DispatchSemaphore(value: 0)
    private let result = LockedValue<Result<T, E>?>(nil)   // written once before the signal, read after the wait

    func set(_ r: Result<T, E>) {
        result.withLock { $0 = r }
        semaphore.signal()
    }

    func wait() throws -> T {
        semaphore.wait()
        return try result.withLock { $0 }!.get()
    }
}

/// The chunks of one run, gathered (runs are chained, so appends never overlap; the lock makes
/// the hand-over to the caller's thread explicit).
final class Collected: Sendable {
    private let bytes = LockedValue<[UInt8]>([])

    var value: [UInt8] { bytes.withLock { $0 } }

    @Sendable func append(_ chunk: [UInt8]) -> Bool {
        bytes.withLock { $0 += chunk }
        return true
    }
}

/// Hands a run's cancellation switch from the continuation to the cancellation handler, which
/// may run first.
private final class CancellationBox: Sendable {
    private struct State {
        var switchOff: ChunkedRead.Cancellation?
        var cancelled = false
    }
    private let state = LockedValue(State())

    func set(_ c: ChunkedRead.Cancellation) {
        let cancelNow = state.withLock { s in
            s.switchOff = c
            return s.cancelled
        }
        if cancelNow { c.cancel() }
    }

    func cancel() {
        state.withLock { s in
            s.cancelled = true
            return s.switchOff
        }?.cancel()
    }
}
