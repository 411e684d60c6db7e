import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// Reads through a real mount over the real cache and a loopback origin.
final class FuseEngineTests: XCTestCase {
    static func expected(_ seed: UInt64, _ offset: Int64, _ count: Int) -> [UInt8] {
        OriginServer.generatedBytes(seed: seed, offset: offset, count: count)
    }

    func testSequentialReadIsByteExactAndTheSecondReadComesFromTheCache() throws {
        let length: Int64 = 24 << 20
        let m = try EngineMount(tree: { try treeFromList("v.bin = \($0.url("/v.bin"))") },
                                setup: { $0.setGeneratedFile("/v.bin", length: length, seed: 11) })
        defer { m.stop() }
        XCTAssertEqual(try POSIX.stat(m.path("v.bin")).st_size, Int(length))
        let bytes = try withinBound(120, "sequential read") { try POSIX.readAll(m.path("v.bin")) }
        XCTAssertEqual(bytes.count, Int(length))
        XCTAssertTrue(bytes == Self.expected(11, 0, Int(length)), "bytes differ from the origin's")
        let served = m.origin.bytesServed(path: "/v.bin")
        XCTAssertLessThan(served, length + length / 4, "each byte fetched about once: \(served)")

        // Drop the kernel's copy: the cache on disk must answer without the origin.
        m.origin.resetLog()
        let fd = try POSIX.open(m.path("v.bin"))
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
        close(fd)
        XCTAssertTrue(try POSIX.readAll(m.path("v.bin")) == Self.expected(11, 0, Int(length)))
        XCTAssertEqual(m.origin.bytesServed(path: "/v.bin"), 0)
    }

    func testRevalidationBelongsToTheOpenNotToEachRead() throws {
        let length: Int64 = 16 << 20
        let m = try EngineMount(tree: { try treeFromList("v.bin = \($0.url("/v.bin"))") },
                                cache: { $0.revalidateAfter = 0 },
                                setup: { $0.setGeneratedFile("/v.bin", length: length, seed: 13) })
        defer { m.stop() }
        XCTAssertTrue(try POSIX.readAll(m.path("v.bin")) == Self.expected(13, 0, Int(length)))   // now fully cached
        // One open, the file read again from the disk cache (the kernel's copy dropped), with
        // stats in between: one revalidation for the open, none per read or per stat.
        let fd = try POSIX.open(m.path("v.bin"))
        defer { close(fd) }
        _ = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED)
        m.origin.resetLog()
        var offset: Int64 = 0
        while offset < length {
            let chunk = try POSIX.pread(fd, offset: offset, count: 1 << 20)
            XCTAssertTrue(chunk == Self.expected(13, offset, chunk.count), "bytes at \(offset)")
            _ = try POSIX.stat(m.path("v.bin"))
            offset += Int64(chunk.count)
        }
        XCTAssertEqual(m.origin.requests.count, 0, "reads and stats of an open file ask the origin nothing: \(m.origin.requests)")
    }

    func testAnOpenFileKeepsItsVersionOrFailsAndANewOpenSeesTheNewOne() throws {
        let length: Int64 = 8 << 20
        let m = try EngineMount(tree: { try treeFromList("v.bin = \($0.url("/v.bin"))") },
                                cache: { $0.revalidateAfter = 0; $0.initialReadAhead = 64 << 10; $0.maxReadAhead = 64 << 10 },
                                setup: { $0.setGeneratedFile("/v.bin", length: length, seed: 31) })
        defer { m.stop() }
        let fd = try POSIX.open(m.path("v.bin"))
        defer { close(fd) }
        XCTAssertTrue(try POSIX.pread(fd, offset: 0, count: 64 << 10) == Self.expected(31, 0, 64 << 10))
        // The origin replaces the file with another version of the same size.
        m.origin.setGeneratedFile("/v.bin", length: length, seed: 32)
        // The open file's next uncached read finds the new version: an error, never its bytes.
        XCTAssertThrowsError(try POSIX.pread(fd, offset: 4 << 20, count: 64 << 10), "a read of the old version") { error in
            XCTAssertEqual((error as? POSIX.Failure)?.errno, EIO, "\(error)")
        }
        // A new open revalidates and reads the new version only.
        let again = try POSIX.open(m.path("v.bin"))
        defer { close(again) }
        XCTAssertTrue(try POSIX.pread(again, offset: 0, count: 64 << 10) == Self.expected(32, 0, 64 << 10), "new bytes from the start")
        XCTAssertTrue(try POSIX.pread(again, offset: 4 << 20, count: 64 << 10) == Self.expected(32, 4 << 20, 64 << 10))
    }

    func testRandomReadsAreByteExact() throws {
        let length: Int64 = 16 << 20
        let m = try EngineMount(tree: { try treeFromList("r.bin = \($0.url("/r.bin"))") },
                                setup: { $0.setGeneratedFile("/r.bin", length: length, seed: 12) })
        defer { m.stop() }
        let fd = try POSIX.open(m.path("r.bin"))
        defer { close(fd) }
        try withinBound(120, "random reads") {
            var rng = SplitMix64(state: 42)
            for _ in 0..<150 {
                let offset = Int64.random(in: 0..<length, using: &rng)
                let count = Int.random(in: 1...(300 << 10), using: &rng)
                let got = try POSIX.pread(fd, offset: offset, count: count)
                let want = Int(min(Int64(count), length - offset))
                XCTAssertEqual(got.count, want)
                XCTAssertTrue(got == Self.expected(12, offset, want), "mismatch at \(offset)+\(count)")
            }
        }
        XCTAssertEqual(try POSIX.pread(fd, offset: length, count: 10), [], "EOF")
    }

    func testConcurrentReadsFromManyThreadsAreByteExact() throws {
        let length: Int64 = 12 << 20
        let m = try EngineMount(tree: { o in try treeFromList("a.bin = \(o.url("/a.bin"))\nb.bin = \(o.url("/b.bin"))") },
                                setup: {
                                    $0.setGeneratedFile("/a.bin", length: length, seed: 21)
                                    $0.setGeneratedFile("/b.bin", length: length / 2, seed: 22)
                                })
        defer { m.stop() }
        let failures = NSLock()
        nonisolated(unsafe) var problems: [String] = []
        try withinBound(180, "concurrent reads") {
            DispatchQueue.concurrentPerform(iterations: 12) { worker in
                let (name, seed, len): (String, UInt64, Int64) = worker % 3 == 2 ? ("b.bin", 22, length / 2) : ("a.bin", 21, length)
                do {
                    if worker % 4 == 0 {
                        let all = try POSIX.readAll(m.path(name), chunk: 256 << 10)
                        if all != Self.expected(seed, 0, Int(len)) { failures.withLock { problems.append("\(worker): whole-file read differs") } }
                        return
                    }
                    let fd = try POSIX.open(m.path(name))
                    defer { close(fd) }
                    var rng = SplitMix64(state: UInt64(worker))
                    for _ in 0..<40 {
                        let off = Int64.random(in: 0..<len, using: &rng)
                        let n = Int.random(in: 1...(128 << 10), using: &rng)
                        let got = try POSIX.pread(fd, offset: off, count: n)
                        if got != Self.expected(seed, off, Int(min(Int64(n), len - off))) {
                            failures.withLock { problems.append("\(worker): \(name) \(off)+\(n) differs") }
                        }
                    }
                } catch {
                    failures.withLock { problems.append("\(worker): \(error)") }
                }
            }
        }
        XCTAssertEqual(problems, [])
    }

    func testNotFoundAndForbiddenAtLookup() throws {
        let m = try EngineMount(tree: { o in
            try treeFromList("missing.bin = \(o.url("/missing.bin"))\ngone.bin = \(o.url("/gone.bin"))\nsecret.bin = \(o.url("/secret.bin"))\nauth.bin = \(o.url("/auth.bin"))")
        }, setup: {
            $0.setFaults("/gone.bin", Faults(status: 410))
            $0.setFaults("/secret.bin", Faults(status: 403))
            $0.setFaults("/auth.bin", Faults(status: 401))
        })
        defer { m.stop() }
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.stat(m.path("missing.bin")) }, ENOENT)
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.stat(m.path("gone.bin")) }, ENOENT)
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.stat(m.path("secret.bin")) }, EACCES)
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.open(m.path("auth.bin")) }, EACCES)
    }

    func testAServerErrorAfterRetriesIsEIOOnRead() throws {
        let m = try EngineMount(tree: { try treeFromList("v.bin = \($0.url("/v.bin"))") },
                                setup: { $0.setGeneratedFile("/v.bin", length: 8 << 20, seed: 3) })
        defer { m.stop() }
        let fd = try POSIX.open(m.path("v.bin"))
        defer { close(fd) }
        m.origin.setFaults("/v.bin", Faults(status: 503))
        let err = try withinBound(60, "read against a failing origin") {
            POSIX.errnoOf { _ = try POSIX.pread(fd, offset: 6 << 20, count: 4096) }
        }
        XCTAssertEqual(err, EIO)
    }

    func testASilentOriginFailsTheReadWithEIOWithinTheReadTimeout() throws {
        let m = try EngineMount(tree: { try treeFromList("v.bin = \($0.url("/v.bin"))") },
                                cache: { $0.readTimeout = 2 },
                                setup: { $0.setGeneratedFile("/v.bin", length: 32 << 20, seed: 4) })
        defer { m.stop() }
        let fd = try POSIX.open(m.path("v.bin"))
        defer { close(fd) }
        m.origin.setFaults("*", Faults(silent: true))
        m.origin.setFaults("/v.bin", Faults(silent: true))
        let err = try withinBound(30, "read against a silent origin") {
            POSIX.errnoOf { _ = try POSIX.pread(fd, offset: 20 << 20, count: 4096) }
        }
        XCTAssertEqual(err, EIO)
    }

    func testARemoteChangeWhileMountedShowsTheNewBytesNeverMixed() throws {
        let old = testBytes(count: 3 << 20, seed: 1)
        let sameSize = testBytes(count: 3 << 20, seed: 2)
        let longer = testBytes(count: (3 << 20) + 12345, seed: 3)
        let m = try EngineMount(tree: { try treeFromList("c.bin = \($0.url("/c.bin"))") },
                                cache: { $0.revalidateAfter = 0 },
                                setup: { $0.setFile("/c.bin", data: old) })
        defer { m.stop() }
        XCTAssertTrue(try POSIX.readAll(m.path("c.bin")) == old)

        m.origin.setFile("/c.bin", data: sameSize)
        XCTAssertTrue(try POSIX.readAll(m.path("c.bin")) == sameSize, "same size, new ETag: new bytes")

        m.origin.setFile("/c.bin", data: longer)
        XCTAssertTrue(try POSIX.readAll(m.path("c.bin")) == longer, "new length: new bytes, all of them")
        XCTAssertEqual(try POSIX.stat(m.path("c.bin")).st_size, longer.count)
    }

    func testADirectoryIndexFromTheOrigin() throws {
        let m = try EngineMount(tree: { o in
            try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex("nginx = \(o.url("/pub/"))"),
                                              try MountTreeSpec.parseIndex("apache = \(o.url("/apache/"))")])
        }, setup: { o in
            o.setResponse("/pub/", status: 200, headers: [("Content-Type", "text/html")],
                          body: Array(ListingFixtures.nginxHTML.utf8))
            o.setResponse("/apache/", status: 200, headers: [("Content-Type", "text/html"), ("Transfer-Encoding", "chunked")],
                          body: Array(ListingFixtures.apacheTable.utf8))
            o.setFile("/pub/My%20Movie.mp4", data: testBytes(count: 1_048_576, seed: 5))
            o.setFile("/apache/small.txt", data: testBytes(count: 123, seed: 6))
            o.setFile("/apache/My%20Movie.mp4", data: testBytes(count: 777, seed: 7))
        })
        defer { m.stop() }
        XCTAssertEqual(try POSIX.list(m.path("nginx")), ["My Movie.mp4", "a&b.txt",
                                                         "a-very-long-file-name-that-nginx-truncates-in-the-link-text.mkv", "docs"])
        XCTAssertEqual(try POSIX.stat(m.path("nginx/My Movie.mp4")).st_size, 1_048_576)
        XCTAssertEqual(m.origin.requestCount(path: "/pub/My%20Movie.mp4"), 0, "sizes come from the listing")
        XCTAssertTrue(try POSIX.readAll(m.path("nginx/My Movie.mp4")) == testBytes(count: 1_048_576, seed: 5))

        XCTAssertEqual(try POSIX.list(m.path("apache")), ["My Movie.mp4", "docs", "small.txt"])
        XCTAssertEqual(try POSIX.stat(m.path("apache/My Movie.mp4")).st_size, 777, "1.0M in the listing: asked the cache")
        XCTAssertEqual(try POSIX.readAll(m.path("apache/small.txt")), testBytes(count: 123, seed: 6))
    }
}
