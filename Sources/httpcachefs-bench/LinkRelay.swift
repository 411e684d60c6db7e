import ArgumentParser
import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A home link in front of a server that runs as a process of its own (`rclone serve s3`), which
/// the in-process origin's link emulation cannot reach: a TCP relay on loopback that holds each
/// chunk a client sends for one round trip (a request waits `rtt` before the server sees it), and
/// paces what the server sends through one shared token bucket of `bytesPerSecond` (the link's
/// downstream, shared by every connection). Coarser than the origin's emulation (a request's
/// answer gets no second half-trip, a chunk is up to 64 KiB), the same for every client.
///
/// It counts the requests it carries by what their request line asks (`requests`): S3 listing
/// pages (`list-type=2` or a `delimiter=`), HEADs and GETs (a request line is in the first chunk a request sends).
///
/// Threads: one accepting, two per connection (blocking reads and writes); `stop()` closes the
/// listener, connections end with their peers.
final class LinkRelay: @unchecked Sendable {
    let port: Int
    private let listener: Int32
    private let rtt: TimeInterval
    private let bytesPerSecond: Double
    private let lock = NSLock()
    /// When the link is free again for the next downstream chunk.
    private var nextFree = DispatchTime.now().uptimeNanoseconds

    /// Requests carried so far (under `lock`).
    struct Requests: Equatable {
        var listPages = 0
        var heads = 0
        var gets = 0

        static func - (a: Requests, b: Requests) -> Requests {
            Requests(listPages: a.listPages - b.listPages, heads: a.heads - b.heads, gets: a.gets - b.gets)
        }

        /// Counts the request lines in `chunk` (bytes a client sent).
        mutating func count(_ chunk: UnsafeRawBufferPointer) {
            let text = String(decoding: chunk, as: UTF8.self)
            for line in text.split(separator: "\r\n", omittingEmptySubsequences: true) where line.hasSuffix(" HTTP/1.1") || line.hasSuffix(" HTTP/1.0") {
                if line.hasPrefix("HEAD ") { heads += 1 }
                if line.hasPrefix("GET ") {
                    // ListObjectsV2 (ours) or V1 (rclone's s3 backend with provider Other): both ask
                    // with a delimiter.
                    if line.contains("list-type=2") || line.contains("delimiter=") { listPages += 1 } else { gets += 1 }
                }
            }
        }
    }
    private var counted = Requests()
    var requests: Requests { lock.withLock { counted } }

    init(toPort target: Int, rtt: TimeInterval, bytesPerSecond: Int) throws {
        self.rtt = rtt
        self.bytesPerSecond = Double(bytesPerSecond)
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ValidationError("relay: socket: \(String(cString: strerror(errno)))") }
        var address = Self.loopback(port: 0)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(fd, 64) == 0 else { close(fd); throw ValidationError("relay: bind/listen: \(String(cString: strerror(errno)))") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) } }
        listener = fd
        port = Int(UInt16(bigEndian: address.sin_port))
        let listener = self.listener
        Thread.detachNewThread { [self] in
            while true {
                let client = accept(listener, nil, nil)
                if client < 0 { if errno == EINTR { continue } else { return } }
                let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
                var to = Self.loopback(port: target)
                let connected = withUnsafePointer(to: &to) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
                guard connected == 0 else { close(client); close(server); continue }
                var one: Int32 = 1
                for fd in [client, server] { setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size)) }
                Thread.detachNewThread { self.pump(from: client, to: server, upstream: true) }
                Thread.detachNewThread { self.pump(from: server, to: client, upstream: false) }
            }
        }
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var a = sockaddr_in()
        a.sin_family = sa_family_t(AF_INET)
        a.sin_port = UInt16(port).bigEndian
        a.sin_addr.s_addr = UInt32(0x7F00_0001).bigEndian
        return a
    }

    /// Copies until either side ends; then ends both directions.
    private func pump(from source: Int32, to sink: Int32, upstream: Bool) {
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n > 0 else { break }
            if upstream {
                buffer.withUnsafeBytes { b in lock.withLock { counted.count(UnsafeRawBufferPointer(rebasing: b[0..<n])) } }
                usleep(useconds_t(rtt * 1e6))
            } else {
                let cost = UInt64(Double(n) / bytesPerSecond * 1e9)
                let start: UInt64 = lock.withLock {
                    let s = max(DispatchTime.now().uptimeNanoseconds, nextFree)
                    nextFree = s + cost
                    return s + cost
                }
                let now = DispatchTime.now().uptimeNanoseconds
                if start > now { usleep(useconds_t((start - now) / 1000)) }
            }
            var sent = 0
            while sent < n {
                let w = buffer.withUnsafeBytes { send(sink, $0.baseAddress! + sent, n - sent, Int32(MSG_NOSIGNAL)) }
                if w < 0 && errno == EINTR { continue }
                guard w > 0 else { break }
                sent += w
            }
            guard sent == n else { shutdown(source, Int32(SHUT_RDWR)); break }
        }
        shutdown(sink, Int32(SHUT_WR))
        shutdown(source, Int32(SHUT_RD))
        // Each descriptor is closed by the second of its connection's two pumps to end.
        let done: [Int32] = lock.withLock {
            closing[source, default: 0] += 1
            closing[sink, default: 0] += 1
            let both = [source, sink].filter { closing[$0] == 2 }
            for fd in both { closing[fd] = nil }
            return both
        }
        for fd in done { close(fd) }
    }
    private var closing: [Int32: Int] = [:]

    func stop() { shutdown(listener, Int32(SHUT_RDWR)); close(listener) }
}
