import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Which local user a TCP client of the proxy is, read from `/proc/net/tcp` and `tcp6`.
///
/// Every local user (and every program) can connect to 127.0.0.1, so being on loopback proves
/// nothing; the status document lists every cached URL, query tokens included. The kernel's
/// socket tables say which uid owns each socket of this network namespace: the client's socket
/// is the one whose local address is the connection's remote end and whose remote address is
/// the proxy's end. A client not found there (another machine, or gone already) is no local
/// user. Run on the event loop for the few requests that need it (the status pages and
/// `/metrics`, once per connection): the tables are generated in memory by the kernel, a read
/// costs about a millisecond with thousands of sockets.
enum PeerOwner {
    /// One end of a TCP connection: the address in network byte order (4 bytes for IPv4, 16 for
    /// IPv6; an IPv4-mapped IPv6 address counts as its IPv4 address) and the port.
    struct Endpoint: Equatable, Sendable {
        var address: [UInt8]
        var port: Int

        init(address: [UInt8], port: Int) {
            self.address = Self.unmapped(address)
            self.port = port
        }

        init?(ip: String, port: Int?) {
            guard let literal = IPLiteral(ip), let port else { return nil }
            self.init(address: literal.bytes, port: port)
        }

        /// `::ffff:a.b.c.d` as `a.b.c.d`: a dual-stack listener reports an IPv4 client that way,
        /// while the client's socket is in the IPv4 table.
        static func unmapped(_ bytes: [UInt8]) -> [UInt8] {
            guard bytes.count == 16, bytes[0..<12].elementsEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF]) else { return bytes }
            return Array(bytes[12...])
        }
    }

    /// The uid owning the socket at `peer` that is connected to `local`, from the text of
    /// `/proc/net/tcp` or `tcp6` tables; nil when no such socket is listed.
    /// - Parameter littleEndian: the machine's byte order: the kernel prints each 32-bit word of
    ///   an address as a native integer (127.0.0.1 is `0100007F` on x86 and arm64).
    static func uid(peer: Endpoint, local: Endpoint, tables: [String], littleEndian: Bool = hostIsLittleEndian) -> UInt32? {
        for table in tables {
            for line in table.split(separator: "\n").dropFirst() {
                let fields = line.split(separator: " ", omittingEmptySubsequences: true)
                guard fields.count > 7,
                      let from = endpoint(fields[1], littleEndian: littleEndian), from == peer,
                      let to = endpoint(fields[2], littleEndian: littleEndian), to == local,
                      let uid = UInt32(fields[7]) else { continue }
                return uid
            }
        }
        return nil
    }

    /// `0100007F:1F90` (IPv4) or 32 hex digits and a port (IPv6), as the tables write them.
    static func endpoint(_ field: Substring, littleEndian: Bool) -> Endpoint? {
        guard let colon = field.lastIndex(of: ":"), let port = Int(field[field.index(after: colon)...], radix: 16) else { return nil }
        let hex = field[..<colon]
        guard hex.count == 8 || hex.count == 32 else { return nil }
        var bytes: [UInt8] = []
        var i = hex.startIndex
        while i < hex.endIndex {
            let next = hex.index(i, offsetBy: 8)
            guard let word = UInt32(hex[i..<next], radix: 16) else { return nil }
            let be = [UInt8(word >> 24), UInt8(truncatingIfNeeded: word >> 16), UInt8(truncatingIfNeeded: word >> 8),
                      UInt8(truncatingIfNeeded: word)]
            bytes += littleEndian ? be.reversed() : be
            i = next
        }
        return Endpoint(address: bytes, port: port)
    }

    static let hostIsLittleEndian = UInt32(1).littleEndian == 1

    /// The uid of the local process at `peer`, read from this machine's tables; nil when it is
    /// not a local process (or the tables cannot be read).
    static func uid(peer: Endpoint, local: Endpoint, procRoot: String = "/proc") -> UInt32? {
        let tables = ["tcp", "tcp6"].compactMap { ProcFile.read("\(procRoot)/net/\($0)") }
        return uid(peer: peer, local: local, tables: tables)
    }
}

/// Files under `/proc`, read whole.
public enum ProcFile {
    /// A `/proc` file read to its end. Foundation's `String(contentsOfFile:)` trusts the size
    /// `stat` reports, which is 0 for these files, and returns what one read gave: the first
    /// 4 KiB of a table of hundreds of sockets.
    public static func read(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            bytes += buffer[0..<n]
            if bytes.count > 64 << 20 { break }   // a bound, far beyond any real table
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
