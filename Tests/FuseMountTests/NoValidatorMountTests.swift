import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// Issue 46, item 8, through a real mount: an origin that sends neither ETag nor Last-Modified
/// replaces a file while it is open. A seek past an uncached stretch read 8 MiB of the old
/// version and 8 MiB of the new in one open, and the first fresh open after the change was found
/// failed all its reads with EIO. Now the seek's fetch samples the cached head first
/// (`VersionSample`): the open's reads fail (EIO) or give the old bytes, never the new after the
/// old, and the next open reads the new version whole.
final class NoValidatorMountTests: XCTestCase {
    private let length = 32 << 20

    private func plainMount(_ data: [UInt8]) throws -> EngineMount {
        try EngineMount(tree: { try treeFromList("v.bin = \($0.url("/v.bin"))") },
                        setup: { origin in
                            origin.setFile("/v.bin", data: data, etag: "")
                            var faults = Faults()
                            faults.noLastModified = true
                            origin.setFaults("/v.bin", faults)
                        })
    }

    func testASeekAfterTheFileChangedNeverMixesAndTheNextOpenReadsTheNewVersionWhole() throws {
        let length = self.length
        let old = OriginServer.generatedBytes(seed: 101, offset: 0, count: length)
        for newLength in [length, length + (3 << 20), length - (5 << 20)] {
            let new = OriginServer.generatedBytes(seed: 102, offset: 0, count: newLength)
            let m = try plainMount(old)
            defer { m.stop() }
            try withinBound(60, "a seek after the change (new length \(newLength))") {
                let fd = try POSIX.open(m.path("v.bin"))
                defer { close(fd) }
                XCTAssertTrue(try POSIX.pread(fd, offset: 0, count: 1 << 20) == Array(old[0..<(1 << 20)]))

                m.origin.setFile("/v.bin", data: new, etag: "")
                // Past the open's read-ahead: no cached byte next to it.
                var delivered: [Int] = []
                for offset in stride(from: 20 << 20, to: length, by: 1 << 20) {
                    let got: [UInt8]
                    do {
                        got = try POSIX.pread(fd, offset: Int64(offset), count: 1 << 20)
                    } catch let failure as POSIX.Failure {
                        XCTAssertTrue([EIO, ESTALE].contains(failure.errno), "\(failure)")
                        continue
                    }
                    XCTAssertTrue(got.elementsEqual(old[offset..<(offset + got.count)]),
                                  "new length \(newLength): the open read bytes at \(offset) that are not the old version's")
                    delivered.append(offset)
                }
                _ = delivered
            }
            try withinBound(60, "the next open (new length \(newLength))") {
                let whole = try POSIX.readAll(m.path("v.bin"))
                XCTAssertEqual(whole.count, newLength)
                XCTAssertTrue(whole == new, "new length \(newLength): the next open reads the new version whole")
            }
        }
    }

    /// The change found by the overlap next to the cached head (not by a sample): the open's read
    /// fails, and the first fresh open after it reads all of the new version, no read failing.
    func testTheFirstOpenAfterAChangeWasFoundReadsEveryByte() throws {
        let length = self.length
        let old = OriginServer.generatedBytes(seed: 103, offset: 0, count: length)
        let new = OriginServer.generatedBytes(seed: 104, offset: 0, count: length)
        let m = try plainMount(old)
        defer { m.stop() }
        try withinBound(60, "reads across the change") {
            let fd = try POSIX.open(m.path("v.bin"))
            defer { close(fd) }
            XCTAssertTrue(try POSIX.pread(fd, offset: 0, count: 1 << 20) == Array(old[0..<(1 << 20)]))
            m.origin.setFile("/v.bin", data: new, etag: "")
            var offset = 1 << 20
            while offset < length {
                do {
                    let got = try POSIX.pread(fd, offset: Int64(offset), count: 1 << 20)
                    XCTAssertTrue(got.elementsEqual(old[offset..<(offset + got.count)]), "bytes at \(offset) not of the old version")
                } catch let failure as POSIX.Failure {
                    XCTAssertTrue([EIO, ESTALE].contains(failure.errno), "\(failure)")
                }
                offset += 1 << 20
            }
        }
        try withinBound(60, "the first open after the change was found") {
            let fd = try POSIX.open(m.path("v.bin"))
            defer { close(fd) }
            var failed: [Int] = []
            var offset = 0
            while offset < length {
                do {
                    let got = try POSIX.pread(fd, offset: Int64(offset), count: 1 << 20)
                    XCTAssertTrue(got == Array(new[offset..<(offset + (1 << 20))]), "bytes at \(offset) not of the new version")
                } catch {
                    failed.append(offset)
                }
                offset += 1 << 20
            }
            XCTAssertEqual(failed, [], "reads that failed")
        }
    }

    /// The file replaced between two opens, the second one checking it (`--revalidate-after 0`):
    /// its check samples the cached head first, and it reads the new version, every read of it.
    func testAnOpenThatChecksAFileReplacedSinceReadsTheNewVersion() throws {
        let length = 8 << 20
        let old = OriginServer.generatedBytes(seed: 105, offset: 0, count: length)
        let m = try EngineMount(tree: { try treeFromList("v.bin = \($0.url("/v.bin"))") },
                                cache: { $0.revalidateAfter = 0 },
                                setup: { origin in
                                    origin.setFile("/v.bin", data: old, etag: "")
                                    var faults = Faults()
                                    faults.noLastModified = true
                                    origin.setFaults("/v.bin", faults)
                                })
        defer { m.stop() }
        try withinBound(60, "the first open") {
            XCTAssertTrue(try POSIX.readAll(m.path("v.bin")) == old)
        }
        for newLength in [length, length + (1 << 20)] {
            let new = OriginServer.generatedBytes(seed: UInt64(106 + newLength), offset: 0, count: newLength)
            m.origin.setFile("/v.bin", data: new, etag: "")
            try withinBound(60, "an open after the change (length \(newLength))") {
                let whole = try POSIX.readAll(m.path("v.bin"))
                XCTAssertEqual(whole.count, newLength)
                XCTAssertTrue(whole == new, "length \(newLength): the open reads the new version")
            }
        }
    }
}
