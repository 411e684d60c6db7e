import Foundation
import TestSupport
import XCTest

/// Pins the test origin's own behaviour, since every other suite trusts it.
final class OriginServerTests: XCTestCase {
    var origin: OriginServer!
    let data: [UInt8] = (0..<1000).map { UInt8(truncatingIfNeeded: $0 &* 7) }

    override func setUpWithError() throws {
        origin = try OriginServer()
        origin.setFile("/f.bin", data: data, contentType: "video/mp4")
    }

    override func tearDown() {
        origin.stop()
        origin = nil
    }

    private func get(_ path: String, _ headers: [(String, String)] = [], method: String = "GET") throws -> RawHTTP.Response {
        try RawHTTP.request(port: origin.port, method: method, path: path, headers: headers)
    }

    func testFullGetCarriesValidatorsAndAcceptRanges() throws {
        let r = try get("/f.bin")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.body, data)
        XCTAssertEqual(r.header("content-length"), "1000")
        XCTAssertEqual(r.header("accept-ranges"), "bytes")
        XCTAssertEqual(r.header("content-type"), "video/mp4")
        XCTAssertEqual(r.header("last-modified"), "Mon, 01 Jan 2024 00:00:00 GMT")
        XCTAssertNotNil(r.header("etag"))
        XCTAssertEqual(origin.url("/f.bin"), "http://127.0.0.1:\(origin.port)/f.bin")
    }

    func testRangesFollowRFC9110() throws {
        let closed = try get("/f.bin", [("Range", "bytes=10-19")])
        XCTAssertEqual(closed.status, 206)
        XCTAssertEqual(closed.header("content-range"), "bytes 10-19/1000")
        XCTAssertEqual(closed.body, Array(data[10..<20]))

        let open = try get("/f.bin", [("Range", "bytes=990-")])
        XCTAssertEqual(open.header("content-range"), "bytes 990-999/1000")
        XCTAssertEqual(open.body, Array(data[990...]))

        let suffix = try get("/f.bin", [("Range", "bytes=-5")])
        XCTAssertEqual(suffix.status, 206)
        XCTAssertEqual(suffix.body, Array(data[995...]))

        let clamped = try get("/f.bin", [("Range", "bytes=995-5000")])
        XCTAssertEqual(clamped.header("content-range"), "bytes 995-999/1000")

        let past = try get("/f.bin", [("Range", "bytes=1000-")])
        XCTAssertEqual(past.status, 416)
        XCTAssertEqual(past.header("content-range"), "bytes */1000")

        XCTAssertEqual(try get("/f.bin", [("Range", "bytes=0-1,5-6")]).status, 200, "multi-range is ignored")
        XCTAssertEqual(try get("/f.bin", [("Range", "pages=1-2")]).status, 200, "unparseable range is ignored")
    }

    func testIfRangeHonoursOnlyTheCurrentValidator() throws {
        let etag = try XCTUnwrap(try get("/f.bin", method: "HEAD").header("etag"))
        XCTAssertEqual(try get("/f.bin", [("Range", "bytes=0-9"), ("If-Range", etag)]).status, 206)
        XCTAssertEqual(try get("/f.bin", [("Range", "bytes=0-9"), ("If-Range", "Mon, 01 Jan 2024 00:00:00 GMT")]).status, 206)
        let stale = try get("/f.bin", [("Range", "bytes=0-9"), ("If-Range", "\"old\"")])
        XCTAssertEqual(stale.status, 200)
        XCTAssertEqual(stale.body, data)

        origin.setFile("/f.bin", data: Array(data.reversed()))
        XCTAssertNotEqual(try get("/f.bin", method: "HEAD").header("etag"), etag, "new content, new ETag")
        XCTAssertEqual(try get("/f.bin", [("Range", "bytes=0-9"), ("If-Range", etag)]).status, 200)
    }

    func testHeadHasHeadersButNoBody() throws {
        let r = try get("/f.bin", method: "HEAD")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(r.header("content-length"), "1000")
        XCTAssertEqual(origin.bytesServed(path: "/f.bin"), 0)
        XCTAssertEqual(try get("/missing").status, 404)
    }

    func testGeneratedFilesAreDeterministicAtAnyOffset() throws {
        let whole = OriginServer.generatedBytes(seed: 42, offset: 0, count: 100)
        for offset in 0..<20 {
            XCTAssertEqual(OriginServer.generatedBytes(seed: 42, offset: Int64(offset), count: 100 - offset - 3),
                           Array(whole[offset..<97]))
        }
        XCTAssertNotEqual(OriginServer.generatedBytes(seed: 43, offset: 0, count: 100), whole)

        origin.setGeneratedFile("/g", length: 3 << 20, seed: 7)
        let r = try get("/g", [("Range", "bytes=1000001-2500002")])
        XCTAssertEqual(r.status, 206)
        XCTAssertEqual(r.body, OriginServer.generatedBytes(seed: 7, offset: 1_000_001, count: 1_500_002))
    }

    func testLargeGeneratedBodyIsStreamedWhole() throws {
        let length = 24 << 20
        origin.setGeneratedFile("/big", length: Int64(length), seed: 1)
        let r = try get("/big")
        XCTAssertEqual(r.body.count, length)
        XCTAssertTrue(r.body == OriginServer.generatedBytes(seed: 1, offset: 0, count: length))
        XCTAssertEqual(origin.bytesServed(path: "/big"), Int64(length))
    }

    func testStatusFaultForTheFirstRequestsThenNormal() throws {
        origin.setFaults("/f.bin", Faults(status: 503, statusCount: 2, retryAfter: 1))
        let first = try get("/f.bin")
        XCTAssertEqual(first.status, 503)
        XCTAssertEqual(first.header("retry-after"), "1")
        XCTAssertEqual(try get("/f.bin").status, 503)
        XCTAssertEqual(try get("/f.bin").status, 200)
        XCTAssertEqual(origin.requests.map(\.status), [503, 503, 200])
    }

    func testDropClosesAfterNBodyBytesForTheFirstResponsesOnly() throws {
        origin.setFaults("/f.bin", Faults(dropAfterBytes: 300, dropCount: 1))
        let dropped = try get("/f.bin")
        XCTAssertFalse(dropped.complete)
        XCTAssertEqual(dropped.body, Array(data[0..<300]))
        let resumed = try get("/f.bin", [("Range", "bytes=300-")])
        XCTAssertTrue(resumed.complete)
        XCTAssertEqual(resumed.body, Array(data[300...]))
        XCTAssertEqual(origin.bytesServed(path: "/f.bin"), 1000)
        XCTAssertEqual(origin.requests.map(\.range), [nil, "bytes=300-"])
    }

    func testADiskFileIsReadAsItStreamsAndOneThatShrankEndsShortNeverPadded() throws {
        let temp = TemporaryDirectory(prefix: "origin-disk")
        defer { temp.remove() }
        let path = temp.appending("movie.bin")
        let bytes = OriginServer.generatedBytes(seed: 5, offset: 0, count: 3 << 20)
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(bytes)))
        try origin.setDiskFile("/movie.bin", file: path)
        XCTAssertEqual(try get("/movie.bin").body, bytes)
        let range = try get("/movie.bin", [("Range", "bytes=1000000-1999999")])
        XCTAssertEqual(range.status, 206)
        XCTAssertEqual(range.body, Array(bytes[1_000_000..<2_000_000]))
        XCTAssertNotNil(range.header("etag"))

        XCTAssertEqual(truncate(path, 1 << 20), 0)
        let short = try get("/movie.bin")
        XCTAssertEqual(short.header("content-length"), String(3 << 20), "the length it had when it was set")
        XCTAssertFalse(short.complete, "the connection closed at the end of what is left")
        XCTAssertEqual(short.body, Array(bytes[0..<short.body.count]), "and every byte sent was the file's")
        XCTAssertLessThanOrEqual(short.body.count, 1 << 20)
        XCTAssertThrowsError(try origin.setDiskFile("/gone", file: temp.appending("missing")))
    }

    func testIgnoreRangeNoAcceptRangesAndChunked() throws {
        origin.setFaults("/f.bin", Faults(ignoreRange: true, noAcceptRanges: true, noContentLength: true))
        let r = try get("/f.bin", [("Range", "bytes=10-19")])
        XCTAssertEqual(r.status, 200)
        XCTAssertNil(r.header("accept-ranges"))
        XCTAssertNil(r.header("content-length"))
        XCTAssertEqual(r.header("transfer-encoding"), "chunked")
        XCTAssertTrue(r.complete)
        XCTAssertEqual(r.body, data)
    }

    func testRedirectAndFaultsByWildcardAndQuery() throws {
        origin.setFaults("/old", Faults(redirectTo: "/f.bin"))
        let r = try get("/old?x=1")
        XCTAssertEqual(r.status, 302)
        XCTAssertEqual(r.header("location"), origin.url("/f.bin"))

        XCTAssertEqual(try get("/f.bin?token=abc").body, data, "files match without their query")
        XCTAssertEqual(origin.requestCount(path: "/f.bin"), 1)
        XCTAssertEqual(origin.requests.last?.path, "/f.bin?token=abc")

        origin.setFaults("*", Faults(status: 500))
        XCTAssertEqual(try get("/f.bin").status, 500)
        origin.setFaults("*", Faults())
        XCTAssertEqual(try get("/f.bin").status, 200)
    }

    func testSetResponseServesCannedAnswers() throws {
        origin.setResponse("/list.m3u8", status: 200, headers: [("Content-Type", "application/vnd.apple.mpegurl")],
                           body: Array("#EXTM3U\n".utf8))
        let r = try get("/list.m3u8")
        XCTAssertEqual(r.status, 200)
        XCTAssertEqual(String(decoding: r.body, as: UTF8.self), "#EXTM3U\n")
        origin.remove("/list.m3u8")
        XCTAssertEqual(try get("/list.m3u8").status, 404)
    }

    func testKeepAliveAnswersSeveralRequestsOnOneConnection() throws {
        let two = "GET /f.bin HTTP/1.1\r\nHost: x\r\nRange: bytes=0-0\r\n\r\nGET /f.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        let raw = try RawHTTP.exchange(port: origin.port, send: Array(two.utf8))
        let text = String(decoding: raw, as: UTF8.self)
        XCTAssertEqual(text.components(separatedBy: "HTTP/1.1 206").count - 1, 1)
        XCTAssertEqual(text.components(separatedBy: "HTTP/1.1 200").count - 1, 1)
    }

    func testConcurrentConnections() throws {
        origin.setGeneratedFile("/g", length: 1 << 20, seed: 9)
        let expected = OriginServer.generatedBytes(seed: 9, offset: 0, count: 1 << 20)
        let port = origin.port
        let good = Locked(0)
        DispatchQueue.concurrentPerform(iterations: 12) { _ in
            if let r = try? RawHTTP.request(port: port, path: "/g"), r.body == expected {
                good.mutate { $0 += 1 }
            }
        }
        XCTAssertEqual(good.value, 12)
    }

    func testTemporaryDirectoryIsCreatedAndRemoved() throws {
        let dir = TemporaryDirectory()
        var isDir: ObjCBool = false
        XCTAssertTrue(FileManager.default.fileExists(atPath: dir.path, isDirectory: &isDir) && isDir.boolValue)
        _ = FileManager.default.createFile(atPath: dir.appending("x"), contents: Data([1]))
        dir.remove()
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir.path))
    }
}
