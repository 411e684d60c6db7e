import Foundation
import Glibc
import TestSupport
import XCTest

/// `--egress-budget` on a real mount (the binary, as root) of this process's origin, which counts
/// the requests it gets: past the budget a read that needs the origin fails with EIO, without a
/// request; what is cached still reads; the next daemon start remembers the use.
final class EgressBudgetMountTests: XCTestCase {
    var origin: OriginServer!
    var temp: TemporaryDirectory!
    var runner: CLIRunner!
    var mountpoint: String { temp.appending("mnt") }
    var logFile: String { temp.appending("daemon.log") }

    override func setUpWithError() throws {
        origin = try OriginServer()
        temp = TemporaryDirectory(prefix: "httpcachefs-budget")
        runner = CLIRunner(temp: temp)
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let names = ["a.bin", "c.bin", "d.bin"]
        let rows = names.map { "<a href=\"\($0)\">\($0)</a>                 01-Jan-2024 00:00    -\n" }.joined()
        let html = "<html><head><title>Index of /lib/</title></head><body><h1>Index of /lib/</h1><hr><pre>\(rows)</pre><hr></body></html>\n"
        origin.setResponse("/lib/", status: 200, headers: [("Content-Type", "text/html")], body: Array(html.utf8))
        origin.setGeneratedFile("/lib/a.bin", length: 600_000, seed: 91)
        origin.setGeneratedFile("/lib/c.bin", length: 600_000, seed: 92)
        origin.setGeneratedFile("/lib/d.bin", length: 100_000, seed: 93)
    }

    override func tearDown() {
        if let runner, isMounted(mountpoint) {
            _ = try? runner.run(["unmount", mountpoint], cacheDirectory: nil)
            if isMounted(mountpoint) { _ = umount2(mountpoint, Int32(MNT_DETACH)) }
        }
        origin?.stop()
        temp?.remove()
    }

    func mount() throws {
        let r = try runner.run(["mount", mountpoint, "--index", origin.url("/lib/"), "--no-proxy", "--log-file", logFile,
                                "--egress-budget", "1M/day"])
        XCTAssertEqual(r.status, 0, r.stderr)
    }

    func unmount() throws {
        let r = try runner.run(["unmount", mountpoint], cacheDirectory: nil)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertFalse(isMounted(mountpoint))
    }

    /// Every byte of `path`, or the errno that ended the open or a read.
    func readAll(_ path: String) -> Result<[UInt8], POSIXError> {
        let fd = open(path, O_RDONLY)
        guard fd >= 0 else { return .failure(POSIXError(POSIXErrorCode(rawValue: errno) ?? .EPERM)) }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 128 << 10)
        while true {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 { return .failure(POSIXError(POSIXErrorCode(rawValue: errno) ?? .EPERM)) }
            if n == 0 { return .success(bytes) }
            bytes += buffer[0..<n]
        }
    }

    func testPastTheBudgetReadsFailWithEIOCachedBytesStillReadAndTheNextStartRemembers() throws {
        try mount()
        let a = mountpoint + "/a.bin"
        XCTAssertEqual(try readAll(a).get(), OriginServer.generatedBytes(seed: 91, offset: 0, count: 600_000), "within the budget")
        // c.bin's request starts within the budget (400 KB left) and brings its 600 KB: the budget
        // is passed by at most one request (on loopback, curl takes it in one turn of the loop).
        XCTAssertEqual(try readAll(mountpoint + "/c.bin").get(), OriginServer.generatedBytes(seed: 92, offset: 0, count: 600_000))
        XCTAssertEqual(readAll(mountpoint + "/d.bin").failure?.code, .EIO, "spent: a read that needs the origin fails")
        let log = try String(contentsOfFile: logFile, encoding: .utf8)
        XCTAssertEqual(log.split(separator: "\n").filter { $0.contains("egress budget spent:") }.count, 1, "one line says so: \(log)")
        XCTAssertFalse(log.split(separator: "\n").contains { $0.contains("fetch failed") && $0.contains("/lib/c.bin") },
                       "the request that passed the budget ended as it should: \(log)")
        XCTAssertEqual(origin.requestCount(path: "/lib/d.bin"), 0, "without a request")
        let aRequests = origin.requestCount(path: "/lib/a.bin")
        XCTAssertEqual(try readAll(a).get(), OriginServer.generatedBytes(seed: 91, offset: 0, count: 600_000), "cached bytes are served as ever")
        XCTAssertEqual(origin.requestCount(path: "/lib/a.bin"), aRequests)
        try unmount()

        let saved = try String(contentsOfFile: runner.cacheDir + "/egress-budget.json", encoding: .utf8)
        XCTAssertTrue(saved.contains("\"origin\" : \"\(origin.url(""))\""), saved)
        try mount()
        XCTAssertEqual(readAll(mountpoint + "/d.bin").failure?.code, .EIO, "the next start remembers the use")
        XCTAssertEqual(origin.requestCount(path: "/lib/d.bin"), 0)
        XCTAssertEqual(try readAll(a).get().count, 600_000)
        try unmount()
    }
}

private extension Result {
    var failure: Failure? {
        if case let .failure(f) = self { return f }
        return nil
    }
}
