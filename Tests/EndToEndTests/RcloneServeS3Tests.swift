import Foundation
import Glibc
import TestSupport
import XCTest

/// Buckets as libraries against a second S3 implementation: `rclone serve s3` (`RcloneS3`), which
/// checks every signature. A mount of a bucket lists and reads what it serves; a wrong secret is
/// refused in one line; an object replaced while open reads as one version. Skipped, saying why,
/// without rclone 1.65 or later.
final class RcloneServeS3Tests: XCTestCase {
    var temp: TemporaryDirectory!
    var runner: CLIRunner!
    var server: RcloneS3?
    var mounted: [String] = []
    let film = OriginServer.generatedBytes(seed: 148, offset: 0, count: 3 << 20)
    let extra = OriginServer.generatedBytes(seed: 149, offset: 0, count: 5_000)

    override func setUpWithError() throws {
        temp = TemporaryDirectory(prefix: "httpcachefs-rclone-s3-test")
        runner = CLIRunner(temp: temp)
        do {
            server = try RcloneS3(buckets: ["media": [("films/a film.mp4", film), ("films/extras/b.bin", extra), ("music/c.bin", extra)]])
        } catch let e as RcloneS3.Unavailable {
            print("⚠️  SKIPPED RcloneServeS3Tests: \(e)")
            throw XCTSkip("rclone serve s3 tests skipped: \(e)")
        }
    }

    override func tearDown() {
        for path in mounted {
            _ = try? runner.run(["unmount", path], cacheDirectory: nil)
            _ = umount2(path, Int32(MNT_DETACH))
        }
        server?.stop()
        temp?.remove()
    }

    private func mountpoint(_ name: String) throws -> String {
        let path = temp.appending(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    private func mount(_ path: String, _ source: [String], secret: String, cache: String = "cache", extra: [String] = []) throws -> CLIRunner.Result {
        let s3 = try XCTUnwrap(server)
        return try runner.run(["mount", path] + source + ["--s3-endpoint", s3.endpoint, "--no-proxy", "--log-file", temp.appending("\(cache).log")] + extra,
                              cacheDirectory: temp.appending(cache),
                              environment: ["AWS_ACCESS_KEY_ID": s3.accessKeyID, "AWS_SECRET_ACCESS_KEY": secret, "HOME": temp.path])
    }

    func testABucketListsAndReadsWhatRcloneServesAndAWrongSecretIsRefused() throws {
        let s3 = try XCTUnwrap(server)
        let mnt = try mountpoint("mnt")
        let r = try mount(mnt, ["--index", "s3://media/films/"], secret: s3.secretAccessKey)
        XCTAssertEqual(r.status, 0, r.stderr)
        mounted.append(mnt)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mnt).sorted(), ["a film.mp4", "extras"])
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mnt + "/extras"), ["b.bin"])
        let fd = open(mnt + "/a film.mp4", O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        var middle = [UInt8](repeating: 0, count: 100_000)
        XCTAssertEqual(middle.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 100_000, 2_000_000) }, 100_000)
        close(fd)
        XCTAssertEqual(middle, Array(film[2_000_000..<2_100_000]), "a range in the middle, signed, answered as that range")
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: mnt + "/a film.mp4"))), film)
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: mnt + "/extras/b.bin"))), extra)

        let other = try mountpoint("other")
        let bad = try mount(other, ["s3://media/music/c.bin"], secret: "wrong" + s3.secretAccessKey, cache: "cache2")
        if bad.status == 0 { mounted.append(other) }
        XCTAssertNotEqual(bad.status, 0, "rclone checks the signature")
        print("RcloneServeS3Tests: a wrong secret: \(bad.stderr)")
        XCTAssertTrue(bad.stderr.contains("HTTP 403 (S3: SignatureDoesNotMatch: "), bad.stderr)
        XCTAssertFalse(bad.stderr.contains(s3.secretAccessKey), bad.stderr)
    }

    /// rclone answers If-Match by ignoring it; the ETag (the file's MD5) of every answer is
    /// compared: the old version's bytes or EIO, never mixed, and the next open reads the new one.
    func testAnObjectReplacedWhileOpenReadsAsOneVersion() throws {
        let s3 = try XCTUnwrap(server)
        let mnt = try mountpoint("mnt")
        let r = try mount(mnt, ["s3://media/films/a film.mp4"], secret: s3.secretAccessKey, extra: ["--read-ahead-max", "256K"])
        XCTAssertEqual(r.status, 0, r.stderr)
        mounted.append(mnt)
        let fd = open(mnt + "/a film.mp4", O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var head = [UInt8](repeating: 0, count: 4096)
        XCTAssertEqual(head.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 4096, 0) }, 4096)
        XCTAssertEqual(head, Array(film[0..<4096]))
        let v2 = OriginServer.generatedBytes(seed: 150, offset: 0, count: film.count)
        try s3.write(bucket: "media", key: "films/a film.mp4", bytes: v2)
        var tail = [UInt8](repeating: 0, count: 4096)
        let at = film.count - 8192
        let n = tail.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 4096, off_t(at)) }
        print("RcloneServeS3Tests: the read after the replacement: \(n == 4096 ? "the old version's bytes" : "errno \(errno)")")
        if n == 4096 {
            XCTAssertEqual(tail, Array(film[at..<(at + 4096)]), "an open file reads the version it opened")
        } else {
            XCTAssertEqual(errno, EIO, "the version changed: an error, not other bytes")
            let next = open(mnt + "/a film.mp4", O_RDONLY)
            XCTAssertGreaterThanOrEqual(next, 0)
            defer { close(next) }
            XCTAssertEqual(tail.withUnsafeMutableBytes { pread(next, $0.baseAddress, 4096, off_t(at)) }, 4096)
            XCTAssertEqual(tail, Array(v2[at..<(at + 4096)]), "the next open reads the new version")
        }
    }
}
