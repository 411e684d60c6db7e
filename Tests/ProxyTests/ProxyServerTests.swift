import CacheCore
import Fetcher
import Foundation
import Proxy
import TestSupport
import XCTest

/// RFC 9110 over real HTTP: origin → libcurl → engine → proxy → a raw client.
final class ProxyServerTests: XCTestCase {
    var h: ProxyHarness!
    let size = 100_000
    var data: [UInt8] = []

    override func setUpWithError() throws {
        h = try ProxyHarness()
        data = testBytes(size)
        h.origin.setFile("/media/video.mp4", data: data, etag: "\"v1\"")
    }

    override func tearDown() { h.shutdown() }

    struct Case {
        var range: String?
        var ifRange: String? = nil
        var status: Int
        var contentRange: String?
        var body: Range<Int>?
    }

    func testRangeTable() throws {
        let cases: [Case] = [
            Case(range: nil, status: 200, contentRange: nil, body: 0..<100_000),
            Case(range: "bytes=0-499", status: 206, contentRange: "bytes 0-499/100000", body: 0..<500),
            Case(range: "bytes=99500-", status: 206, contentRange: "bytes 99500-99999/100000", body: 99500..<100_000),
            Case(range: "bytes=-500", status: 206, contentRange: "bytes 99500-99999/100000", body: 99500..<100_000),
            Case(range: "bytes=50000-50000", status: 206, contentRange: "bytes 50000-50000/100000", body: 50000..<50001),
            Case(range: "bytes=99999-200000", status: 206, contentRange: "bytes 99999-99999/100000", body: 99999..<100_000),
            Case(range: "bytes=-200000", status: 206, contentRange: "bytes 0-99999/100000", body: 0..<100_000),
            Case(range: "bytes=100000-", status: 416, contentRange: "bytes */100000", body: nil),
            Case(range: "bytes=-0", status: 416, contentRange: "bytes */100000", body: nil),
            Case(range: "bytes=500-100", status: 200, contentRange: nil, body: 0..<100_000),
            Case(range: "lines=1-2", status: 200, contentRange: nil, body: 0..<100_000),
            Case(range: "bytes=0-9", ifRange: "\"v1\"", status: 206, contentRange: "bytes 0-9/100000", body: 0..<10),
            Case(range: "bytes=0-9", ifRange: "\"v0\"", status: 200, contentRange: nil, body: 0..<100_000),
            Case(range: "bytes=0-9", ifRange: "Mon, 01 Jan 2024 00:00:00 GMT", status: 206, contentRange: "bytes 0-9/100000", body: 0..<10),
            Case(range: "bytes=0-9", ifRange: "Sun, 31 Dec 2023 00:00:00 GMT", status: 200, contentRange: nil, body: 0..<100_000),
        ]
        for c in cases {
            var headers: [(String, String)] = []
            if let r = c.range { headers.append(("Range", r)) }
            if let i = c.ifRange { headers.append(("If-Range", i)) }
            let label = "\(c.range ?? "-") / \(c.ifRange ?? "-")"
            let r = try h.get(h.path("/media/video.mp4"), headers)
            XCTAssertEqual(r.status, c.status, label)
            XCTAssertEqual(r.header("Content-Range"), c.contentRange, label)
            XCTAssertEqual(r.header("Accept-Ranges"), "bytes", label)
            XCTAssertEqual(r.header("Content-Length"), String(r.body.count), "Content-Length is exact: \(label)")
            XCTAssertTrue(r.complete, label)
            if let body = c.body {
                XCTAssertEqual(r.body, Array(data[body]), label)
                XCTAssertEqual(r.header("Content-Type"), "video/mp4", "type from the extension when the origin says octet-stream")
                XCTAssertEqual(r.header("ETag"), "\"v1\"", label)
                XCTAssertEqual(r.header("Last-Modified"), "Mon, 01 Jan 2024 00:00:00 GMT", label)
            }
        }
    }

    func testHeadSendsTheHeadersOfGetAndDownloadsNoBody() throws {
        let big = 16 << 20
        h.origin.setGeneratedFile("/big.mkv", length: Int64(big), seed: 7)
        let head = try h.get(h.path("/big.mkv"), method: "HEAD")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("Content-Length"), String(big))
        XCTAssertEqual(head.header("Content-Type"), "video/x-matroska")
        XCTAssertEqual(head.header("Accept-Ranges"), "bytes")
        XCTAssertTrue(head.body.isEmpty)
        let ranged = try h.get(h.path("/big.mkv"), [("Range", "bytes=-100")], method: "HEAD")
        XCTAssertEqual(ranged.status, 206)
        XCTAssertEqual(ranged.header("Content-Range"), "bytes \(big - 100)-\(big - 1)/\(big)")
        XCTAssertEqual(ranged.header("Content-Length"), "100")
        XCTAssertLessThanOrEqual(h.origin.bytesServed(path: "/big.mkv"), 1,
                                 "HEAD asks the origin for metadata (one byte), never for the body")
    }

    /// Small files with a generic type are sniffed for `#EXTM3U`, from the bytes the open
    /// already fetched: still no body download for HEAD.
    func testHeadOfASmallGenericFileDownloadsNoBodyEither() throws {
        h.origin.setFile("/small.bin", data: testBytes(900_000, seed: 5))
        let head = try h.get(h.path("/small.bin"), method: "HEAD")
        XCTAssertEqual(head.status, 200)
        XCTAssertEqual(head.header("Content-Length"), "900000")
        XCTAssertEqual(head.header("Content-Type"), "application/octet-stream")
        XCTAssertLessThanOrEqual(h.origin.bytesServed(path: "/small.bin"), 300_000)
    }

    func testMultipleRangesAreMultipart() throws {
        let r = try h.get(h.path("/media/video.mp4"), [("Range", "bytes=0-3,-4")])
        XCTAssertEqual(r.status, 206)
        let type = try XCTUnwrap(r.header("Content-Type"))
        XCTAssertTrue(type.hasPrefix("multipart/byteranges; boundary="), type)
        let boundary = String(type.dropFirst("multipart/byteranges; boundary=".count))
        let expected = Array("--\(boundary)\r\nContent-Type: video/mp4\r\nContent-Range: bytes 0-3/100000\r\n\r\n".utf8)
            + data[0..<4]
            + Array("\r\n--\(boundary)\r\nContent-Type: video/mp4\r\nContent-Range: bytes 99996-99999/100000\r\n\r\n".utf8)
            + data[99996..<100_000]
            + Array("\r\n--\(boundary)--\r\n".utf8)
        XCTAssertEqual(r.body, expected)
        XCTAssertEqual(r.header("Content-Length"), String(expected.count))
    }

    func testConditionalGet() throws {
        let r = try h.get(h.path("/media/video.mp4"), [("If-None-Match", "\"v1\"")])
        XCTAssertEqual(r.status, 304)
        XCTAssertEqual(r.header("ETag"), "\"v1\"")
    }

    func testOriginErrorsBecomeStatusesAndNothingIsCached() throws {
        let cases: [(Faults, Int)] = [
            (Faults(status: 404), 404), (Faults(status: 410), 404), (Faults(status: 403), 403),
            (Faults(status: 401), 403), (Faults(status: 500), 502), (Faults(status: 503), 502),
        ]
        for (i, (faults, expected)) in cases.enumerated() {
            let path = "/err\(i).mp4"
            h.origin.setFile(path, data: data)
            h.origin.setFaults(path, faults)
            let r = try h.get(h.path(path))
            XCTAssertEqual(r.status, expected, "origin \(faults.status!)")
            XCTAssertEqual(r.header("Content-Type"), "text/plain; charset=utf-8")
            XCTAssertFalse(r.body.isEmpty, "a short text says why")
            XCTAssertNil(h.engine.cachedInfo(url: h.origin.url(path)), "an error is never cached")
        }
        // A port nobody listens on.
        let closed = try OriginServer()
        let deadURL = closed.url("/gone.mp4")
        closed.stop()
        let unreachable = try h.get(h.signed(deadURL))
        XCTAssertEqual(unreachable.status, 502)
    }

    func testOriginTimeoutIs504() throws {
        h.origin.setFile("/silent.mp4", data: data)
        h.origin.setFaults("/silent.mp4", Faults(silent: true))
        let r = try h.get(h.path("/silent.mp4"))
        XCTAssertEqual(r.status, 504)
    }

    func testSecondRequestIsACacheHit() throws {
        _ = try h.get(h.path("/media/video.mp4"))
        let before = h.origin.bytesServed(path: "/media/video.mp4")
        let again = try h.get(h.path("/media/video.mp4"), [("Range", "bytes=1000-1999")])
        XCTAssertEqual(again.body, Array(data[1000..<2000]))
        XCTAssertEqual(h.origin.bytesServed(path: "/media/video.mp4"), before, "served from the cache")
    }

    func testQueryForm() throws {
        let original = h.origin.url("/media/video.mp4")
        let encoded = original.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        let signature = h.configuration.signingKey.signature(for: original)
        XCTAssertEqual(try h.get("/?url=" + encoded).status, 403, "unsigned")
        let r = try h.get("/?url=" + encoded + "&sig=" + signature, [("Range", "bytes=0-9")])
        XCTAssertEqual(r.status, 206)
        XCTAssertEqual(r.body, Array(data[0..<10]))
    }

    func testChunkedOriginIsStreamedWhole() throws {
        h.origin.setFile("/live.ts", data: data)
        h.origin.setFaults("/live.ts", Faults(noAcceptRanges: true, noContentLength: true))
        let r = try h.get(h.path("/live.ts"))
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.body, data)
        XCTAssertTrue(r.complete)
    }

    func testPingAndStatus() throws {
        let ping = try h.get("/ping")
        XCTAssertEqual(ping.status, 200)
        let status = try h.get("/.httpcachefs/status")
        XCTAssertEqual(status.status, 200)
        XCTAssertEqual(status.header("Content-Type"), "application/json")
        let json = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(status.body)) as? [String: Any])
        XCTAssertEqual(json["service"] as? String, "httpcachefs")
        XCTAssertEqual(json["version"] as? String, "test")
        XCTAssertEqual(json["port"] as? Int, h.port)
        XCTAssertNil(json["cacheDirectory"], "the cache directory is for the owner's key only")
        XCTAssertEqual(ProxyStatus.decode(try h.get("/.httpcachefs/status", h.ownerHeaders).body)?.cacheDirectory, h.directory.path)
        XCTAssertEqual(ProxyStatus.decode(status.body)?.port, h.port)

        // The runtime file lets `httpcachefs url` find a proxy on any port; it goes with the proxy.
        let file = try XCTUnwrap(ProxyStatus.readRuntimeFile(cacheDirectory: h.directory.path))
        XCTAssertEqual(file.port, h.port)
        XCTAssertEqual(file.pid, getpid())
        h.server.stop()
        XCTAssertNil(ProxyStatus.readRuntimeFile(cacheDirectory: h.directory.path))
    }

    func testPipelinedRequestsAreAnsweredInOrder() throws {
        let p = h.path("/media/video.mp4")
        let raw = "GET \(p) HTTP/1.1\r\nHost: 127.0.0.1\r\nRange: bytes=0-4\r\n\r\n"
            + "HEAD \(p) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            + "GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nRange: bytes=5-9\r\nConnection: close\r\n\r\n"
        let bytes = try RawHTTP.exchange(port: h.port, send: Array(raw.utf8), timeout: 20)
        let text = String(decoding: bytes, as: UTF8.self)
        let statuses = text.components(separatedBy: "HTTP/1.1 ").dropFirst().map { String($0.prefix(3)) }
        XCTAssertEqual(statuses, ["206", "200", "200"])
        let first = try RawHTTP.parse(bytes)
        XCTAssertEqual(first.body, Array(data[0..<5]))
        XCTAssertTrue(text.hasSuffix("pong\n"))
    }

    func testKeepAliveServesSeveralRequestsOnOneConnection() throws {
        let p = h.path("/media/video.mp4")
        var raw = ""
        for i in 0..<5 { raw += "GET \(p) HTTP/1.1\r\nHost: 127.0.0.1\r\nRange: bytes=\(i * 10)-\(i * 10 + 9)\r\n\r\n" }
        raw += "GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        let text = String(decoding: try RawHTTP.exchange(port: h.port, send: Array(raw.utf8), timeout: 20), as: UTF8.self)
        XCTAssertEqual(text.components(separatedBy: "HTTP/1.1 206 Partial Content").count - 1, 5)
    }

    /// Once the entry is fresh its opens answer on the event loop itself, inside the request's
    /// turn (no hop to an engine thread): pipelined requests still get their own bytes, in order,
    /// and a miss among hits (bytes not cached yet) waits its turn.
    func testPipelinedRangesOfAFreshEntryAreServedInOrderAndByteExact() throws {
        let p = h.path("/media/video.mp4")
        XCTAssertEqual(try h.get(p, [("Range", "bytes=0-99")]).status, 206)   // the entry is fresh from here on
        let ranges = [0..<100, 50..<150, 90_000..<95_000, 10..<20, 99_990..<100_000]
        var raw = ""
        for r in ranges { raw += "GET \(p) HTTP/1.1\r\nHost: 127.0.0.1\r\nRange: bytes=\(r.lowerBound)-\(r.upperBound - 1)\r\n\r\n" }
        raw += "GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        var rest = try RawHTTP.exchange(port: h.port, send: Array(raw.utf8), timeout: 20)[...]
        for r in ranges {
            let head = try XCTUnwrap(rest.firstRange(of: [13, 10, 13, 10]), "a response for \(r)")
            let text = String(decoding: rest[rest.startIndex..<head.lowerBound], as: UTF8.self)
            XCTAssertTrue(text.hasPrefix("HTTP/1.1 206"), text)
            XCTAssertTrue(text.contains("Content-Range: bytes \(r.lowerBound)-\(r.upperBound - 1)/\(size)"), text)
            let body = rest[head.upperBound..<(head.upperBound + r.count)]
            XCTAssertEqual(Array(body), Array(data[r]), "bytes of \(r)")
            rest = rest[(head.upperBound + r.count)...]
        }
        XCTAssertTrue(String(decoding: rest, as: UTF8.self).hasSuffix("pong\n"))
    }

    /// Two players on one cold file: one download (the engine's single flight).
    func testConcurrentClientsOnOneColdFileCauseOneDownload() throws {
        let length = 8 << 20
        h.origin.setGeneratedFile("/shared.mp4", length: Int64(length), seed: 3)
        let expected = OriginServer.generatedBytes(seed: 3, offset: 0, count: length)
        let results = ResultBox()
        let group = DispatchGroup()
        for _ in 0..<4 {
            group.enter()
            Thread.detachNewThread { [h] in
                defer { group.leave() }
                results.add(Result { try h!.get(h!.path("/shared.mp4")) })
            }
        }
        XCTAssertEqual(group.wait(timeout: .now() + 60), .success)
        for r in results.all {
            let response = try r.get()
            XCTAssertEqual(response.status, 200)
            XCTAssertTrue(response.body == expected, "every client gets the file")
        }
        let served = h.origin.bytesServed(path: "/shared.mp4")
        XCTAssertLessThanOrEqual(Double(served), Double(length) * 1.1, "origin bytes ≈ file size: \(served)")
    }

    /// A client that leaves mid-body frees its reader; the next client is served normally.
    func testClientLeavingMidBody() throws {
        h.origin.setGeneratedFile("/long.mp4", length: 512 << 20, seed: 9)
        let raw = "GET \(h.path("/long.mp4")) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
        // Read a little, then close.
        try RawHTTP.readSomeAndClose(port: h.port, send: Array(raw.utf8), bytes: 200_000)
        let r = try h.get(h.path("/long.mp4"), [("Range", "bytes=0-99")])
        XCTAssertEqual(r.status, 206)
        XCTAssertEqual(r.body, OriginServer.generatedBytes(seed: 9, offset: 0, count: 100))
        XCTAssertLessThan(h.origin.bytesServed(path: "/long.mp4"), 128 << 20,
                          "closing the reader stopped the download (512 MiB file, a player that took 200 KB)")
    }
}

final class ResultBox: @unchecked Sendable {
    private let lock = NSLock()
    private var results: [Result<RawHTTP.Response, Error>] = []
    func add(_ r: Result<RawHTTP.Response, Error>) { lock.lock(); results.append(r); lock.unlock() }
    var all: [Result<RawHTTP.Response, Error>] { lock.lock(); defer { lock.unlock() }; return results }
}

struct SocketFailure: Error, CustomStringConvertible { var description: String }

extension RawHTTP {
    /// Sends a request, reads at least `bytes` bytes of the answer, and closes the socket.
    static func readSomeAndClose(port: Int, send request: [UInt8], bytes wanted: Int) throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var tv = timeval(tv_sec: 20, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr)
        let ok = withUnsafePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard ok == 0 else { throw SocketFailure(description: "connect failed") }
        _ = request.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        var got = 0
        var buffer = [UInt8](repeating: 0, count: 64 << 10)
        while got < wanted {
            let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if n <= 0 { throw SocketFailure(description: "connection ended after \(got) bytes") }
            got += n
        }
    }
}
