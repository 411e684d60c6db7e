import XCTest
@testable import CacheCore
#if canImport(Glibc)
import Glibc
import TestSupport
#endif

/// The cache on a small file system of its own (a 24 MiB tmpfs), with a cap far above it, so only
/// the free-space floor protects the disk; then another program fills the disk to the last byte.
final class FullDiskTests: XCTestCase {
    private var mountpoint: String!
    private let url = "http://origin.test/big.mkv"

    override func setUpWithError() throws {
        guard getuid() == 0 else { throw XCTSkip("SKIPPED LOUDLY: mounting a small tmpfs needs root") }
        mountpoint = NSTemporaryDirectory() + "httpcachefs-fulldisk-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        guard run("/bin/mount", ["-t", "tmpfs", "-o", "size=24m", "tmpfs", mountpoint]) == 0 else {
            throw XCTSkip("SKIPPED LOUDLY: cannot mount a tmpfs at \(mountpoint!)")
        }
    }

    override func tearDown() {
        guard let mountpoint else { return }
        _ = run("/bin/umount", ["-l", mountpoint])
        try? FileManager.default.removeItem(atPath: mountpoint)
    }

    private func run(_ tool: String, _ args: [String]) -> Int32 {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: tool)
        p.arguments = args
        do { try p.run() } catch { return -1 }
        p.waitUntilExit()
        return p.terminationStatus
    }

    private func space() -> (free: Int64, total: Int64) {
        var fs = statvfs()
        XCTAssertEqual(statvfs(mountpoint, &fs), 0)
        return (Int64(fs.f_bavail) * Int64(fs.f_frsize), Int64(fs.f_blocks) * Int64(fs.f_frsize))
    }

    /// Fills the file system to the last byte, as another program would.
    private func fillDisk(_ name: String) -> String {
        let path = mountpoint + "/" + name
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        let block = [UInt8](repeating: 7, count: 64 << 10)
        while block.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) > 0 {}
        var one: UInt8 = 1
        while write(fd, &one, 1) > 0 {}
        close(fd)
        return path
    }

    func testTheFloorHoldsAndAFullDiskNeverFailsAReadNorNeedsARestart() async throws {
        let data = randomBytes(64 << 20, seed: 77)
        let source = ScriptedSource(chunk: 128 << 10)
        source.set(url, .init(bytes: data, etag: "\"v1\""))
        let floor = 0.10
        let cache = try CacheEngine(configuration: CacheConfiguration(
            directory: mountpoint + "/cache", capacity: 1 << 30, freeSpaceFloor: floor, sliceSize: 1 << 20,
            readTimeout: 20, engineClock: .realTime), source: source)
        let info = try await cache.open(url: url)
        let reader = cache.makeReader(for: info)

        // 1. Streaming 64 MiB through a 24 MiB disk: eviction runs before writing, so the floor
        //    holds all along (within one transfer buffer), and every byte is right.
        let floorBytes = Int64(Double(space().total) * floor)
        var lowest = Int64.max
        for offset in stride(from: 0, to: data.count, by: 1 << 20) {
            let got = try await reader.read(offset: Int64(offset), length: 1 << 20)
            XCTAssertTrue(got == Array(data[offset..<(offset + (1 << 20))]), "bytes at \(offset)")
            lowest = min(lowest, space().free)
        }
        XCTAssertGreaterThanOrEqual(lowest, floorBytes - (256 << 10),
                                    "free space stayed above the floor (lowest \(lowest), floor \(floorBytes))")
        XCTAssertGreaterThan(cache.usage.bytes, 0)
        // 2. Another program fills the disk to zero: reads of bytes not cached are still served,
        //    straight from the network, with the right bytes.
        cache.core.writes.waitIdle()   // the writer may still be making room after a read returned
        let filler = fillDisk("someone-elses-file")
        XCTAssertLessThan(space().free, 64 << 10)
        let cold = cache.makeReader(for: info)
        // The cache gives way (it evicts its own slices); the other program takes that room too.
        let first = try await cold.read(offset: 0, length: 1 << 20)
        XCTAssertTrue(first == Array(data[0..<(1 << 20)]))
        cache.core.writes.waitIdle()
        let filler2 = fillDisk("someone-elses-second-file")
        XCTAssertLessThan(space().free, 64 << 10)
        for offset in stride(from: 1 << 20, to: 16 << 20, by: 3 << 20) {
            let got = try await cold.read(offset: Int64(offset), length: 1 << 20)
            XCTAssertTrue(got == Array(data[offset..<(offset + (1 << 20))]), "bytes at \(offset) on a full disk")
        }
        // 3. The disk gets room again: caching resumes without a restart, and the index commits.
        unlink(filler)
        unlink(filler2)
        let before = cache.usage.bytes
        let again = cache.makeReader(for: info)
        let got = try await again.read(offset: 40 << 20, length: 2 << 20)
        XCTAssertTrue(got == Array(data[(40 << 20)..<(42 << 20)]))
        XCTAssertGreaterThan(cache.usage.bytes, before, "bytes are cached again")
        let report = cache.verify()
        XCTAssertEqual(report.problems, [], "the cache verifies clean")
        reader.close(); cold.close(); again.close()

        // 4. The index caught up with memory: a restart finds exactly the bytes that were cached.
        let cached = try XCTUnwrap(cache.status(url: url)).cachedRanges
        cache.shutdown()
        let restarted = try CacheEngine(configuration: CacheConfiguration(
            directory: mountpoint + "/cache", capacity: 1 << 30, freeSpaceFloor: floor, sliceSize: 1 << 20, engineClock: .realTime),
            source: source)
        XCTAssertEqual(restarted.status(url: url)?.cachedRanges, cached, "nothing lost, nothing extra")
        XCTAssertEqual(restarted.verify().problems, [])
        restarted.shutdown()
    }
}
