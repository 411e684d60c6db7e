import CacheCore
import NIOCore
import NIOHTTP1
import NIOPosix

/// Sends one planned response, pulling bytes from the cache only as fast as the client takes them.
///
/// Each chunk is a `ReadLease`: cached bytes go out as file regions of the data file
/// (`sendfile`, no copy through user space), bytes that arrived from the network while the read
/// waited as buffers (copied once from the pooled chunks they landed in). A lease with file
/// pieces (and with it the pins on its slices) is released when its last write completed; one
/// of memory only as soon as it is copied.
///
/// Backpressure: the next chunk is leased only after the previous one was handed to the channel
/// and while the channel is writable (it stops being writable above the high water mark);
/// `resume()` is called when it becomes writable again. So a paused player holds at most one
/// chunk plus the socket buffers, and the engine's read-ahead, not this loop, decides how far
/// ahead the origin is fetched.
///
/// The head is held back until the first bytes are in hand: an origin error that shows up on the
/// first read still becomes a proper status. After the head, an error can only close the
/// connection (the client sees a short body, never wrong bytes). The reader is bound to the
/// version the response started with: a remote change cuts the response off there.
///
/// Confined to the channel's event loop. Leasing does no disk I/O (at most it opens a data file
/// once per reader), so it is asked right from the loop; a read that waits for the network
/// completes on an engine thread and hops back (through a `NIOLoopBound`, so this class need not
/// be `Sendable`).
final class ResponseStream {
    enum Source {
        case reader(CacheReader)
        case memory([UInt8])
        case none
    }

    enum Outcome {
        case completed
        /// Nothing was sent yet: the caller answers with an error status instead.
        case failedBeforeHead(CacheError)
        /// Part of the response went out; the connection must be closed.
        case aborted(String)
    }

    private let context: ChannelHandlerContext
    private let head: HTTPResponseHead
    private let source: Source
    private let onDone: (Outcome) -> Void
    private var body: ResponseBodyState
    /// Untouched parts of the body wait here until the head goes out.
    private var pending: [(IOData, EventLoopPromise<Void>?)] = []
    private var headSent = false

    var waitingForWritable: Bool { body.waitingForWritable }
    var bodyBytesSent: Int64 { body.bodyBytesSent }

    init(context: ChannelHandlerContext, head: HTTPResponseHead, body: ResponseBody, source: Source,
         onDone: @escaping (Outcome) -> Void) {
        self.context = context
        self.head = head
        self.body = ResponseBodyState(body)
        self.source = source
        self.onDone = onDone
    }

    func start() { pump() }

    /// The channel became writable again.
    func resume() {
        if body.writable() { pump() }
    }

    /// The client went away: stop reading, release the reader.
    func cancel() {
        guard !body.isDone else { return }
        body.stop()
        closeReader()
    }

    /// Carries out the body's next steps until it waits (for a read or for the channel).
    private func pump() {
        while true {
            switch body.next(writable: context.channel.isWritable) {
            case let .literal(bytes):
                send(.byteBuffer(context.channel.allocator.buffer(bytes: bytes)), commit: false)
            case let .read(offset, length):
                issueRead(offset: offset, length: length)
                return
            case .finish:
                finish()
                return
            case .waitForWritable, .none:
                return
            }
        }
    }

    private func issueRead(offset: Int64, length: Int) {
        switch source {
        case let .memory(bytes):
            let lo = Int(min(offset, Int64(bytes.count)))
            let hi = min(bytes.count, lo + length)
            didRead(.success(ReadLease(bytes: Array(bytes[lo..<hi]))))
        case .none:
            didRead(.failure(.badResponse(url: "", message: "no body source")))
        case let .reader(reader):
            let loop = context.eventLoop
            let bound = NIOLoopBound(self, eventLoop: loop)
            reader.lease(offset: offset, length: length) { result in
                // Always a new turn of the loop, even for a hit answered at once: no recursion.
                loop.execute { bound.value.didRead(result) }
            }
        }
    }

    private func didRead(_ result: Result<ReadLease, CacheError>) {
        guard !body.isDone else {
            if case let .success(lease) = result { lease.release() }
            return
        }
        switch result {
        case let .failure(error):
            fail(error)
        case let .success(lease):
            switch body.didRead(count: lease.count) {
            case .finish:
                finish()
            case let .fail(why):
                fail(.badResponse(url: "", message: why))
            case .send:
                guard let parts = bodyParts(of: lease) else {
                    lease.release()
                    fail(.storage(path: "", message: "cannot duplicate a data file descriptor: \(String(cString: strerror(errno)))"))
                    return
                }
                let written = context.eventLoop.makePromise(of: Void.self)
                if lease.readsFromDisk {
                    // File pieces stay pinned (and their descriptors open) until the kernel sent them.
                    written.futureResult.whenComplete { _ in
                        for part in parts { if case let .fileRegion(region) = part { try? region.fileHandle.close() } }
                        lease.release()
                    }
                } else {
                    // Memory only: the buffers are copies, so the chunks go back now, not when a
                    // slow client has taken them (they count in the reads' memory share).
                    lease.release()
                }
                for (i, part) in parts.enumerated() {
                    send(part, commit: true, promise: i == parts.count - 1 ? written : nil)
                }
                pump()
            }
        }
    }

    /// The lease's pieces as body parts: file regions over their own descriptors (the channel
    /// may still send them after the reader moved on), memory as buffers (a chunk's bytes are
    /// copied once, here: the engine knows no NIO).
    private func bodyParts(of lease: ReadLease) -> [IOData]? {
        var parts: [IOData] = []
        for piece in lease.pieces {
            switch piece {
            case let .memory(bytes):
                parts.append(.byteBuffer(context.channel.allocator.buffer(bytes: bytes)))
            case let .chunk(c):
                var buffer = context.channel.allocator.buffer(capacity: c.count)
                buffer.writeBytes(c.bytes)
                parts.append(.byteBuffer(buffer))
            case let .file(fd, offset, count):
                let copy = dup(fd)
                guard copy >= 0 else {
                    for case let .fileRegion(r) in parts { try? r.fileHandle.close() }
                    return nil
                }
                let handle = NIOFileHandle(_deprecatedTakingOwnershipOfDescriptor: copy)
                parts.append(.fileRegion(FileRegion(fileHandle: handle, readerIndex: Int(offset), endIndex: Int(offset) + count)))
            }
        }
        return parts
    }

    /// Writes body bytes, or holds them (with the head) until `commit`: bytes read from the
    /// source commit the response, framing literals alone do not.
    private func send(_ part: IOData, commit: Bool, promise: EventLoopPromise<Void>? = nil) {
        guard headSent else {
            pending.append((part, promise))
            if commit { sendHead() }
            return
        }
        context.writeAndFlush(NIOAny(HTTPServerResponsePart.body(part)), promise: promise)
    }

    private func sendHead() {
        guard !headSent else { return }
        headSent = true
        context.write(NIOAny(HTTPServerResponsePart.head(head)), promise: nil)
        for (part, promise) in pending { context.write(NIOAny(HTTPServerResponsePart.body(part)), promise: promise) }
        pending = []
        context.flush()
    }

    private func finish() {
        sendHead()
        body.stop()
        closeReader()
        onDone(.completed)
    }

    private func fail(_ error: CacheError) {
        body.stop()
        closeReader()
        if headSent { onDone(.aborted("\(error)")) } else { onDone(.failedBeforeHead(error)) }
    }

    private func closeReader() {
        if case let .reader(r) = source { r.close() }
    }
}
