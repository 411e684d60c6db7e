import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// Ports for servers the tests and benchmarks start themselves (nginx, daemons), which take a
/// port number rather than a socket.
public enum LoopbackPort {
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    /// A port on 127.0.0.1 that was free a moment ago: bound to port 0, read, released. Another
    /// process may take it before the caller does; callers that start a server on it check that
    /// it came up.
    public static func free() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Unavailable(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = 0
        var len = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) == 0 && getsockname(fd, $0, &len) == 0 }
        }
        guard bound else { throw Unavailable(description: "no free loopback port: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: addr.sin_port))
    }
}

extension LoopbackPort {
    /// A TCP socket connected to `host:port` (an IPv4 address), with a receive timeout so a
    /// server that stops answering fails the caller instead of hanging it. `receiveBuffer` sets
    /// `SO_RCVBUF` before the connect, so the window is scaled for it. The caller closes it.
    public static func connect(port: Int, host: String = "127.0.0.1", timeout: TimeInterval = 10,
                               receiveBuffer: Int? = nil) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Unavailable(description: "socket: \(String(cString: strerror(errno)))") }
        var tv = timeval(tv_sec: Int(timeout), tv_usec: Int((timeout - floor(timeout)) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        if var size = receiveBuffer.map(Int32.init) {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &addr.sin_addr) == 1 else {
            close(fd)
            throw Unavailable(description: "bad IPv4 host \(host)")
        }
        let connected = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard connected == 0 else {
            let cause = String(cString: strerror(errno))
            close(fd)
            throw Unavailable(description: "connect to \(host):\(port): \(cause)")
        }
        return fd
    }
}
