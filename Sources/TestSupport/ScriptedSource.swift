import CacheCore
import Foundation

/// An in-memory origin behind the RangeSource protocol: serves one or more files in chunks on a
/// background queue, honours ranges (unless told not to), and counts what it sent.
public final class ScriptedSource: RangeSource, @unchecked Sendable {
    public struct File: Sendable {
        public var bytes: [UInt8]
        /// Nil: the answer names no ETag (nor, unless `lastModified`, any validator).
        public var etag: String?
        public var status: Int? = nil
        public var ignoresRanges = false
        public var lastModified: String? = nil
        /// A whole answer without a length (chunked: nginx's autoindex page).
        public var hidesLength = false

        public init(bytes: [UInt8], etag: String? = nil, status: Int? = nil, ignoresRanges: Bool = false,
                    lastModified: String? = nil, hidesLength: Bool = false) {
            self.bytes = bytes
            self.etag = etag
            self.status = status
            self.ignoresRanges = ignoresRanges
            self.lastModified = lastModified
            self.hidesLength = hidesLength
        }
    }

    private let lock = NSLock()
    private var files: [String: File] = [:]
    private var requests: [FetchRequest] = []
    private var served: Int64 = 0
    public let chunk: Int
    /// Pause between chunks, to let tests act while a transfer runs.
    public let chunkDelay: useconds_t
    let queue = DispatchQueue(label: "scripted", attributes: .concurrent)

    public init(chunk: Int = 16 << 10, chunkDelay: useconds_t = 0) {
        self.chunk = chunk
        self.chunkDelay = chunkDelay
    }

    public func set(_ url: String, _ file: File) { lock.lock(); files[url] = file; lock.unlock() }
    public var bytesServed: Int64 { lock.lock(); defer { lock.unlock() }; return served }
    public var requestLog: [FetchRequest] { lock.lock(); defer { lock.unlock() }; return requests }
    public func resetCounters() { lock.lock(); served = 0; requests = []; lock.unlock() }

    public final class Handle: FetchHandle, @unchecked Sendable {
        let lock = NSLock()
        var cancelled = false
        public init() {}
        public func cancel() { lock.lock(); cancelled = true; lock.unlock() }
        public var isCancelled: Bool { lock.lock(); defer { lock.unlock() }; return cancelled }
    }

    public func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle {
        let handle = Handle()
        lock.lock()
        requests.append(request)
        let file = files[request.url]
        lock.unlock()
        queue.async { [self] in
            guard let file else { sink.fetchDidFinish(.http(status: 404, url: request.url)); return }
            if let status = file.status { sink.fetchDidFinish(.http(status: status, url: request.url)); return }
            let len = Int64(file.bytes.count)
            let whole = file.ignoresRanges
            let start = whole ? 0 : request.start
            let end = whole ? len : min(request.end ?? len, len)
            let head = ResponseHead(status: whole ? 200 : 206, finalURL: request.url, bodyStart: start,
                                    totalLength: whole && file.hidesLength ? nil : len,
                                    contentType: "video/mp4", etag: file.etag, lastModified: file.lastModified, acceptsRanges: !whole)
            guard sink.fetchDidReceiveHead(head) else { sink.fetchDidFinish(.cancelled); return }
            var p = start
            while p < end {
                if handle.isCancelled { sink.fetchDidFinish(.cancelled); return }
                let n = min(Int64(chunk), end - p)
                lock.lock(); served += n; lock.unlock()
                let ok = file.bytes.withUnsafeBytes { sink.fetchDidReceive(UnsafeRawBufferPointer(rebasing: $0[Int(p)..<Int(p + n)])) }
                p += n
                if !ok { sink.fetchDidFinish(.cancelled); return }
                if chunkDelay > 0 { usleep(chunkDelay) }
            }
            sink.fetchDidFinish(nil)
        }
        return handle
    }
}

/// Deterministic test bytes, from the one generator the origin serves too.
public func randomBytes(_ n: Int, seed: UInt64) -> [UInt8] {
    OriginServer.generatedBytes(seed: seed, offset: 0, count: n)
}
