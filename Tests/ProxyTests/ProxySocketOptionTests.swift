import Foundation
import TestSupport
import XCTest

/// The options the proxy sets on a connection it accepts, read off that connection's own socket
/// in this process. The tests run as root, where the old bug hid: `socketOption(.tcp_nodelay)`
/// asked for SO_DEBUG (which root may set) and never for TCP_NODELAY; as a normal user the
/// kernel refused SO_DEBUG and every proxy connection was closed.
final class ProxySocketOptionTests: XCTestCase {
    func testAnAcceptedConnectionHasTCPNoDelayAndNoSODebug() throws {
        let h = try ProxyHarness()
        defer { h.shutdown() }
        let client = try Self.connectedSocket(port: h.port)
        defer { close(client) }
        // One answered request: the proxy has accepted and initialized the connection.
        let request = "GET /no-such-path HTTP/1.1\r\nHost: 127.0.0.1:\(h.port)\r\n\r\n"
        _ = request.withCString { send(client, $0, strlen($0), 0) }
        var buffer = [UInt8](repeating: 0, count: 512)
        XCTAssertGreaterThan(recv(client, &buffer, buffer.count, 0), 0, "the proxy answers")

        let clientPort = try Self.localPort(client)
        let accepted = try XCTUnwrap(Self.acceptedSocket(serverPort: h.port, peerPort: clientPort),
                                     "the proxy's end of the connection is a descriptor of this process")
        XCTAssertEqual(Self.option(accepted, level: Int32(IPPROTO_TCP), name: TCP_NODELAY), 1, "TCP_NODELAY is set")
        XCTAssertEqual(Self.option(accepted, level: SOL_SOCKET, name: SO_DEBUG), 0, "SO_DEBUG is not asked for")
    }

    static func connectedSocket(port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard rc == 0 else { close(fd); throw POSIXError(.ECONNREFUSED) }
        return fd
    }

    static func localPort(_ fd: Int32) throws -> Int {
        try port(fd, getsockname) ?? { throw POSIXError(.EBADF) }()
    }

    static func port(_ fd: Int32, _ call: (Int32, UnsafeMutablePointer<sockaddr>, UnsafeMutablePointer<socklen_t>) -> Int32) -> Int? {
        var address = sockaddr_in()
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let rc = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { call(fd, $0, &length) }
        }
        guard rc == 0, address.sin_family == sa_family_t(AF_INET) else { return nil }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    /// The descriptor whose local port is the proxy's and whose peer is the client's port.
    static func acceptedSocket(serverPort: Int, peerPort: Int) -> Int32? {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? []
        return fds.compactMap { Int32($0) }.first { fd in
            port(fd, getsockname) == serverPort && port(fd, getpeername) == peerPort
        }
    }

    static func option(_ fd: Int32, level: Int32, name: Int32) -> Int32 {
        var value: Int32 = -1
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(fd, level, name, &value, &length) == 0 else { return -1 }
        return value
    }
}
