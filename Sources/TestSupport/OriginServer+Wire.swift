import Foundation
import NIOCore

// Wire bytes: what actually crossed to the clients, as an origin's bill (a CDN's egress) counts it.
//
// The origin's other counter (`RequestRecord.bodyBytes`, `bytesServed(path:)`) counts body bytes
// as the handler hands them to its channel. Most of the time that is what the client gets, but
// not when a client cuts an answer: everything queued in the channel (up to the 1 MiB write
// watermark) and accepted by the kernel's send buffer counts as served, although it never left
// the machine. The kernel knows better: Linux keeps, per TCP socket, the bytes the peer
// acknowledged (`tcpi_bytes_acked`, RFC 4898 tcpEStatsAppHCThruOctetsAcked) and the bytes sent
// (`tcpi_bytes_sent`, retransmissions included).
//
// SwiftNIO has `getTCPInfo()`, but it cannot answer once the channel is closed, and a connection
// reset by the client is closed by NIO before any handler sees it. So each accepted connection's
// socket is dup'ed when it is accepted (NIO does not show its descriptor: the one whose local and
// peer addresses are the channel's is found in /proc/self/fd), read when the channel closes, and
// closed then. The dup keeps the socket open only until the channel's close future runs, on the
// same event loop, so the peer sees the close when it would without the dup.
//
// Glibc's `struct tcp_info` stops before these fields, so they are read at their offsets in
// <linux/tcp.h> (120 and 200; the struct only ever grows at its end). Linux only; elsewhere, or on
// a kernel without them (before 4.19), the counters stay nil.
//
// What it counts: heads and bodies (all paths) of every connection, acknowledged by the time the
// connection closed (or by now, for open ones). A connection the origin closes itself (a drop
// fault, `Connection: close`) may have its last segments unacknowledged at that moment; a
// connection the client closes or resets is counted exactly.

/// Per-connection TCP counters of the origin's sockets (see the note above).
final class WireLedger: @unchecked Sendable {
    struct Counters: Equatable {
        var acked: Int64 = 0
        var sent: Int64 = 0
        static func + (a: Counters, b: Counters) -> Counters { Counters(acked: a.acked + b.acked, sent: a.sent + b.sent) }
        static func - (a: Counters, b: Counters) -> Counters { Counters(acked: a.acked - b.acked, sent: a.sent - b.sent) }
    }

    private let lock = NSLock()
    /// Dup'ed descriptors of open connections and their numbers, by channel.
    private var open: [ObjectIdentifier: (fd: Int32, connection: Int)] = [:]  // guarded by lock
    /// Final counters of each closed connection, by number.
    private var byConnection: [Int: Counters] = [:]  // guarded by lock
    /// Counters of the connections closed so far.
    private var closed = Counters()  // guarded by lock
    /// `total` at the last `reset()`.
    private var base = Counters()  // guarded by lock
    /// A connection's socket could not be found or read: the totals are not known.
    private var unknown = false  // guarded by lock

    /// A connection was accepted: keep a copy of its socket. On its event loop.
    func track(_ channel: Channel, connection: Int) {
        guard let local = channel.localAddress, let remote = channel.remoteAddress,
              let fd = Self.dupSocket(local: local, remote: remote) else {
            lock.withLock { unknown = true }
            return
        }
        guard Self.read(fd) != nil else {
            close(fd)
            lock.withLock { unknown = true }
            return
        }
        lock.withLock { open[ObjectIdentifier(channel)] = (fd, connection) }
    }

    /// The channel closed (from its close future): its final counters, then its copy closed.
    func closed(_ channel: Channel) {
        guard let (fd, connection) = lock.withLock({ open.removeValue(forKey: ObjectIdentifier(channel)) }) else { return }
        finish(fd, connection: connection)
    }

    private func finish(_ fd: Int32, connection: Int) {
        let counters = Self.read(fd)
        close(fd)
        lock.withLock {
            if let counters {
                closed = closed + counters
                byConnection[connection] = counters
            } else {
                unknown = true
            }
        }
    }

    /// The final counters of closed connection number `connection`, or nil (open, or not known).
    func counters(connection: Int) -> Counters? { lock.withLock { byConnection[connection] } }

    /// Counters since the last `reset()`: closed connections, plus open ones as they stand.
    var total: Counters? {
        lock.withLock {
            guard !unknown else { return nil }
            var sum = closed
            for (fd, _) in open.values {
                guard let c = Self.read(fd) else { return nil }
                sum = sum + c
            }
            return sum - base
        }
    }

    func reset() {
        let now = total
        lock.withLock { if let now { base = base + now } }
    }

    /// Counts and closes the copies of connections whose close was never seen (the event loops
    /// are gone).
    func closeAll() {
        let left = lock.withLock { () -> [(fd: Int32, connection: Int)] in
            defer { open.removeAll() }
            return Array(open.values)
        }
        for (fd, connection) in left { finish(fd, connection: connection) }
    }

    #if os(Linux)
    /// `tcpi_bytes_acked` and `tcpi_bytes_sent` of a TCP socket, from <linux/tcp.h>'s layout.
    static func read(_ fd: Int32) -> Counters? {
        var info = [UInt8](repeating: 0, count: 256)
        var length = socklen_t(info.count)
        let rc = info.withUnsafeMutableBytes { getsockopt(fd, Int32(IPPROTO_TCP), TCP_INFO, $0.baseAddress, &length) }
        guard rc == 0, length >= 208 else { return nil }
        return info.withUnsafeBytes {
            Counters(acked: Int64($0.loadUnaligned(fromByteOffset: 120, as: UInt64.self)),
                     sent: Int64($0.loadUnaligned(fromByteOffset: 200, as: UInt64.self)))
        }
    }

    /// A duplicate of this process's socket whose local and peer addresses are these, or nil.
    static func dupSocket(local: SocketAddress, remote: SocketAddress) -> Int32? {
        guard let dir = opendir("/proc/self/fd") else { return nil }
        defer { closedir(dir) }
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            guard let fd = Int32(name), matches(fd, local: local, remote: remote) else { continue }
            // The number may have been reused since it was listed: check the copy itself.
            let copy = fcntl(fd, F_DUPFD_CLOEXEC, 0)
            guard copy >= 0 else { continue }
            if matches(copy, local: local, remote: remote) { return copy }
            close(copy)
        }
        return nil
    }

    private static func matches(_ fd: Int32, local: SocketAddress, remote: SocketAddress) -> Bool {
        same(local, fd, getsockname) && same(remote, fd, getpeername)
    }

    /// The address `get` gives for `fd` is `address` (family, port and host bytes).
    private static func same(_ address: SocketAddress, _ fd: Int32,
                             _ get: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32) -> Bool {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { get(fd, $0, &length) }
        }
        guard rc == 0 else { return false }
        let family = Int32(storage.ss_family)
        return withUnsafeBytes(of: &storage) { mine in
            switch address {
            case let .v4(a):
                guard family == AF_INET else { return false }
                var theirs = a.address
                return withUnsafeBytes(of: &theirs) { t in
                    mine.loadUnaligned(fromByteOffset: 2, as: UInt16.self) == t.loadUnaligned(fromByteOffset: 2, as: UInt16.self)
                        && mine.loadUnaligned(fromByteOffset: 4, as: UInt32.self) == t.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
                }
            case let .v6(a):
                guard family == AF_INET6 else { return false }
                var theirs = a.address
                // sin6_port at 2, sin6_addr at 8 (16 bytes).
                return withUnsafeBytes(of: &theirs) { t in
                    t[2..<4].elementsEqual(mine[2..<4]) && t[8..<24].elementsEqual(mine[8..<24])
                }
            case .unixDomainSocket:
                return false
            }
        }
    }
    #else
    static func read(_ fd: Int32) -> Counters? { nil }
    static func dupSocket(local: SocketAddress, remote: SocketAddress) -> Int32? { nil }
    #endif
}

extension OriginServer {
    /// Bytes (heads and bodies, all paths) the clients' TCP acknowledged since start or the last
    /// `resetLog()`: what crossed the wire, as an origin's bill counts it. Unlike `bytesServed`,
    /// it leaves out what a client that cut an answer never received (the origin's queues and
    /// send buffer). Nil if the kernel does not say (not Linux, or a socket could not be read).
    public var bytesAcked: Int64? { state.wire.total?.acked }

    /// Bytes (heads and bodies) the origin's TCP sent, retransmissions included, over the same
    /// connections: at least `bytesAcked`; what was in flight when a client reset is the difference.
    public var bytesSentByTCP: Int64? { state.wire.total?.sent }

    /// Bytes (heads and bodies) the client acknowledged on connection number `connection`
    /// (`RequestRecord.connection`), once it has closed; nil while open or if not known. With the
    /// request log it says what one answer that a client cut cost on the wire.
    public func wireBytes(connection: Int) -> Int64? { state.wire.counters(connection: connection)?.acked }
}
