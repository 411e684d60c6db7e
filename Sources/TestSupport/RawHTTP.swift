import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A deliberately dumb blocking HTTP/1.1 client over a loopback socket, for tests that must see
/// exactly what went over the wire (status, raw headers, a truncated body) without a client
/// library retrying, decompressing or following redirects behind their back.
///
/// Blocking: call it from a test's thread or a `Thread`, never from Swift's cooperative pool.
public enum RawHTTP {
    public struct Response: Sendable {
        public var status: Int
        public var headers: [(String, String)]
        /// The body as received (chunked encoding removed).
        public var body: [UInt8]
        /// The body was complete: Content-Length bytes, or a final zero chunk.
        public var complete: Bool

        /// The first header called `name` (case-insensitive).
        public func header(_ name: String) -> String? {
            headers.first { $0.0.caseInsensitiveCompare(name) == .orderedSame }?.1
        }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Sends one request with `Connection: close` and reads the answer to EOF.
    public static func request(port: Int, method: String = "GET", path: String,
                               headers: [(String, String)] = [], host: String = "127.0.0.1",
                               timeout: TimeInterval = 10) throws -> Response {
        var text = "\(method) \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\n"
        for (name, value) in headers { text += "\(name): \(value)\r\n" }
        text += "Connection: close\r\n\r\n"
        let raw = try exchange(port: port, host: host, send: Array(text.utf8), timeout: timeout)
        return try parse(raw, isHead: method == "HEAD")
    }

    /// Sends `bytes` as is and returns everything received until the server closes.
    public static func exchange(port: Int, host: String = "127.0.0.1", send bytes: [UInt8],
                                timeout: TimeInterval = 10) throws -> [UInt8] {
        let fd: Int32
        do { fd = try LoopbackPort.connect(port: port, host: host, timeout: timeout) } catch {
            throw Failure(description: "\(error)")
        }
        defer { close(fd) }
        var sent = 0
        while sent < bytes.count {
            let n = bytes[sent...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure(description: "send: errno \(errno)") }
            sent += n
        }
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 256 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR { continue }
                if errno == ECONNRESET { break }
                throw Failure(description: "recv: errno \(errno) (timeout after \(timeout)s?)")
            }
            received.append(contentsOf: buffer[0..<n])
        }
        return received
    }

    /// Parses one response from raw bytes.
    public static func parse(_ raw: [UInt8], isHead: Bool = false) throws -> Response {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard let headEnd = raw.firstRange(of: separator)?.lowerBound else {
            throw Failure(description: "no complete response head in \(raw.count) bytes")
        }
        let lines = String(decoding: raw[0..<headEnd], as: UTF8.self).components(separatedBy: "\r\n")
        let statusParts = lines[0].split(separator: " ")
        guard statusParts.count >= 2, let status = Int(statusParts[1]) else {
            throw Failure(description: "bad status line: \(lines[0])")
        }
        var headers: [(String, String)] = []
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers.append((String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)))
        }
        var response = Response(status: status, headers: headers, body: [], complete: true)
        let rest = Array(raw[(headEnd + 4)...])
        if isHead || status == 304 || status == 204 { return response }
        if response.header("transfer-encoding")?.lowercased() == "chunked" {
            (response.body, response.complete) = dechunk(rest)
        } else if let length = response.header("content-length").flatMap(Int.init) {
            response.body = Array(rest.prefix(length))
            response.complete = rest.count >= length
        } else {
            response.body = rest
        }
        return response
    }

    private static func dechunk(_ data: [UInt8]) -> ([UInt8], Bool) {
        var body: [UInt8] = []
        var i = 0
        while i < data.count {
            guard let lineEnd = data[i...].firstRange(of: [13, 10])?.lowerBound else { return (body, false) }
            let sizeText = String(decoding: data[i..<lineEnd], as: UTF8.self).split(separator: ";").first ?? ""
            guard let size = Int(sizeText.trimmingCharacters(in: .whitespaces), radix: 16) else { return (body, false) }
            if size == 0 { return (body, true) }
            let start = lineEnd + 2
            guard start + size <= data.count else {
                body.append(contentsOf: data[start...])
                return (body, false)
            }
            body.append(contentsOf: data[start..<(start + size)])
            i = start + size + 2
        }
        return (body, false)
    }
}
