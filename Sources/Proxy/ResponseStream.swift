import CacheCore
import NIOCore
import NIOHTTP1
import NIOPosix

/// Sends one planned response, pulling bytes from the cache only as fast as the client takes them.
///
/// Backpressure: the next chunk is read from the `CacheReader` only after the previous one was
/// written and while the channel is writable (it stops being writable above the high water
/// mark); `resume()` is called when it becomes writable again. So a paused player holds at most
/// one chunk plus the socket buffers, and the engine's read-ahead, not this loop, decides how
/// far ahead the origin is fetched.
///
/// The head is held back until the first bytes are in hand: an origin error that shows up on the
/// first read still becomes a proper status. After the head, an error can only close the
/// connection (the client sees a short body, never wrong bytes). The reader is bound to the
/// version the response started with: a remote change cuts the response off there.
///
/// Confined to the channel's event loop; reads run on the thread pool (a cache hit is a disk
/// read, which must not stall the event loop) and hop back.
final class ResponseStream: @unchecked Sendable {
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

    static let firstChunk = 64 << 10
    static let chunk = 256 << 10

    private let context: ChannelHandlerContext
    private let head: HTTPResponseHead
    private let parts: [BodyPart]
    private let untilEnd: Bool
    private let source: Source
    private let threadPool: NIOThreadPool
    private let onDone: (Outcome) -> Void

    private var partIndex = 0
    private var offsetInPart: Int64 = 0
    /// Untouched parts of the body wait here until the head goes out.
    private var pending: [ByteBuffer] = []
    private var headSent = false
    private var readInFlight = false
    private(set) var waitingForWritable = false
    private var finished = false
    private var nextChunk = ResponseStream.firstChunk
    private(set) var bodyBytesSent: Int64 = 0

    init(context: ChannelHandlerContext, head: HTTPResponseHead, body: ResponseBody, source: Source,
         threadPool: NIOThreadPool, onDone: @escaping (Outcome) -> Void) {
        self.context = context
        self.head = head
        switch body {
        case let .parts(p): parts = p; untilEnd = false
        case .untilEnd: parts = []; untilEnd = true
        }
        self.source = source
        self.threadPool = threadPool
        self.onDone = onDone
    }

    func start() { pump() }

    /// The channel became writable again.
    func resume() {
        guard waitingForWritable else { return }
        waitingForWritable = false
        pump()
    }

    /// The client went away: stop reading, release the reader.
    func cancel() {
        guard !finished else { return }
        finished = true
        closeReader()
    }

    private func pump() {
        guard !finished, !readInFlight else { return }
        if untilEnd {
            guard context.channel.isWritable else { waitingForWritable = true; return }
            issueRead(offset: offsetInPart, length: nextChunk)
            return
        }
        while partIndex < parts.count {
            switch parts[partIndex] {
            case let .literal(bytes):
                send(context.channel.allocator.buffer(bytes: bytes), commit: false)
                partIndex += 1
            case let .bytes(range):
                let start = range.lowerBound + offsetInPart
                guard start < range.upperBound else {
                    partIndex += 1
                    offsetInPart = 0
                    continue
                }
                guard context.channel.isWritable else { waitingForWritable = true; return }
                issueRead(offset: start, length: Int(min(Int64(nextChunk), range.upperBound - start)))
                return
            }
        }
        finish()
    }

    private func issueRead(offset: Int64, length: Int) {
        readInFlight = true
        switch source {
        case let .memory(bytes):
            let lo = Int(min(offset, Int64(bytes.count)))
            let hi = min(bytes.count, lo + length)
            didRead(.success(Array(bytes[lo..<hi])), requested: length)
        case .none:
            didRead(.failure(.badResponse(url: "", message: "no body source")), requested: length)
        case let .reader(reader):
            let loop = context.eventLoop
            threadPool.submit { state in
                guard case .active = state else {
                    loop.execute { self.didRead(.failure(.cancelled), requested: length) }
                    return
                }
                reader.read(offset: offset, length: length) { result in
                    loop.execute { self.didRead(result, requested: length) }
                }
            }
        }
    }

    private func didRead(_ result: Result<[UInt8], CacheError>, requested: Int) {
        readInFlight = false
        guard !finished else { return }
        switch result {
        case let .failure(error):
            fail(error)
        case let .success(bytes):
            if bytes.isEmpty {
                if untilEnd { finish() } else {
                    fail(.badResponse(url: "", message: "the file ended before its announced length"))
                }
                return
            }
            offsetInPart += Int64(bytes.count)
            bodyBytesSent += Int64(bytes.count)
            nextChunk = Self.chunk
            send(context.channel.allocator.buffer(bytes: bytes), commit: true)
            pump()
        }
    }

    /// Writes body bytes, or holds them (with the head) until `commit`: bytes read from the
    /// source commit the response, framing literals alone do not.
    private func send(_ buffer: ByteBuffer, commit: Bool) {
        guard headSent else {
            pending.append(buffer)
            if commit { sendHead() }
            return
        }
        context.writeAndFlush(NIOAny(HTTPServerResponsePart.body(.byteBuffer(buffer))), promise: nil)
    }

    private func sendHead() {
        guard !headSent else { return }
        headSent = true
        context.write(NIOAny(HTTPServerResponsePart.head(head)), promise: nil)
        for b in pending { context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(b))), promise: nil) }
        pending = []
        context.flush()
    }

    private func finish() {
        guard !finished else { return }
        sendHead()
        finished = true
        closeReader()
        onDone(.completed)
    }

    private func fail(_ error: CacheError) {
        guard !finished else { return }
        finished = true
        closeReader()
        if headSent { onDone(.aborted("\(error)")) } else { onDone(.failedBeforeHead(error)) }
    }

    private func closeReader() {
        if case let .reader(r) = source { r.close() }
    }
}
