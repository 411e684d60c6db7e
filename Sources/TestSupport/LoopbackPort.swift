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
