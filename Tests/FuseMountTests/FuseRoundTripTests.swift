import XCTest
@testable import FuseMount
import CacheCore
#if canImport(Glibc)
import Glibc
#endif

/// What reading a cached file costs the daemon in FUSE requests (issue 51): the kernel keeps the
/// name and the attributes (for their timeouts) and, for an unchanged version, the bytes
/// (`keep_cache`), so a second `cat` of a small file is an OPEN and a RELEASE. No FLUSH: nothing
/// is ever written here, so the open replies say so (`noflush`) and the daemon has no handler.
///
/// Deterministic without waiting: a `close` queues its RELEASE before it returns, and the
/// kernel hands requests to the daemon in order, so once the answer to a later request (a
/// lookup of a name that does not exist, never kept by the kernel) is back, the RELEASE has been
/// received.
final class FuseRoundTripTests: XCTestCase {
    private let backend = FakeBackend()

    private func cat(_ path: String) throws -> [UInt8] { try POSIX.readAll(path) }

    /// Every request before this call has been received by the daemon; costs one LOOKUP.
    private func settle(_ mount: InProcessMount) {
        var st = stat()
        XCTAssertEqual(stat(mount.path("not-there"), &st), -1)
        XCTAssertEqual(errno, ENOENT)
    }

    private func difference(_ after: [String: Int], _ before: [String: Int]) -> [String: Int] {
        var out: [String: Int] = [:]
        for (op, n) in after where n != before[op] ?? 0 { out[op] = n - (before[op] ?? 0) }
        return out
    }

    func testACachedFileReadAgainIsAnOpenAndAReleaseAndNeverAFlush() throws {
        let bytes = testBytes(count: 4096)
        backend.setFile("http://o/a.bin", bytes)
        let mount = try InProcessMount(backend: backend, tree: try MountTreeSpec.build(urlList: try URLListParser.parse("http://o/a.bin")))
        defer { mount.stop() }
        let requests = mount.fs.session.requests
        XCTAssertEqual(try cat(mount.path("a.bin")), bytes)
        settle(mount)
        let first = requests.snapshot()
        XCTAssertEqual(first["lookup"], 2, "the file's name, then the probe's")
        XCTAssertEqual(first["open"], 1)
        XCTAssertEqual(first["release"], 1)
        XCTAssertNil(first["flush"], "the open said there is nothing to flush")

        for _ in 0..<3 { XCTAssertEqual(try cat(mount.path("a.bin")), bytes) }
        settle(mount)
        XCTAssertEqual(difference(requests.snapshot(), first), ["open": 3, "release": 3, "lookup": 1],
                       "name, attributes and bytes kept by the kernel: an open and a release per cat (and the probe's lookup)")
    }
}
