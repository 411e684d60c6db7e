import Foundation
import Glibc
import TestSupport
import XCTest

/// Buckets as libraries against a second S3 implementation: `rclone serve s3` (`RcloneS3`), which
/// checks every signature. A mount of a bucket lists and reads what it serves; a wrong secret is
/// refused in one line; an object replaced while open reads as one version; `cat` and `preload`
/// go through the daemon with the keys of the mount that named the bucket, and those keys leave
/// with that mount; `cache info` / `cache rm` find a signed bucket's entries without its keys.
/// Skipped, saying why, without rclone 1.65 or later.
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
            server = try RcloneS3(buckets: ["media": [("films/a film.mp4", film), ("films/extras/b.bin", extra), ("music/c.bin", extra)],
                                            "unnamed": [("x.bin", extra)]])
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

    private func env(secret: String?) throws -> [String: String] {
        let s3 = try XCTUnwrap(server)
        guard let secret else { return ["HOME": temp.path, "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": ""] }
        return ["AWS_ACCESS_KEY_ID": s3.accessKeyID, "AWS_SECRET_ACCESS_KEY": secret, "HOME": temp.path]
    }

    /// `cat` and `preload` of s3:// URLs while a daemon serves the cache go through it (issue 48):
    /// with the mount's keys (the command's own, the same, or none); refused in one line when the
    /// command's keys are other ones or no mount of the daemon named the bucket (a command hands
    /// no keys to a daemon).
    func testCatAndPreloadOfABucketGoThroughTheDaemonSignedWithTheKeysOfTheMountThatNamedIt() throws {
        let s3 = try XCTUnwrap(server)
        let mnt = try mountpoint("mnt")
        let r = try runner.run(["mount", mnt, "--index", "s3://media/films/", "--s3-endpoint", s3.endpoint, "--proxy-port", "0",
                                "--log-file", temp.appending("daemon.log")], environment: try env(secret: s3.secretAccessKey))
        XCTAssertEqual(r.status, 0, r.stderr)
        mounted.append(mnt)
        let endpoint = ["--s3-endpoint", s3.endpoint]

        let same = try runner.run(["cat", "s3://media/films/a film.mp4"] + endpoint, environment: try env(secret: s3.secretAccessKey))
        XCTAssertEqual(same.status, 0, same.stderr)
        XCTAssertEqual(same.stdout, film, "through the daemon, signed with the mount's keys, which are the command's")
        let keyless = try runner.run(["cat", "s3://media/music/c.bin", "--range", "0-999"] + endpoint, environment: try env(secret: nil))
        XCTAssertEqual(keyless.status, 0, keyless.stderr)
        XCTAssertEqual(keyless.stdout, Array(extra[0..<1000]), "a command without keys: the mount's sign the bucket it named")

        let preload = try runner.run(["preload", "s3://media/films/extras/b.bin"] + endpoint, environment: try env(secret: s3.secretAccessKey))
        XCTAssertEqual(preload.status, 0, preload.stderr)
        XCTAssertTrue(preload.text.contains("through the running daemon"), preload.text)
        let tree = try runner.run(["preload", "--recursive", "s3://media/films/extras/"] + endpoint, environment: try env(secret: s3.secretAccessKey))
        XCTAssertEqual(tree.status, 0, tree.stderr)

        let other = try runner.run(["cat", "s3://media/films/a film.mp4"] + endpoint, environment: try env(secret: "other" + s3.secretAccessKey))
        XCTAssertNotEqual(other.status, 0)
        XCTAssertTrue(other.stderr.contains("reads the bucket at \(s3.endpoint)/media/ with other S3 keys"), other.stderr)
        XCTAssertEqual(other.stderr.split(separator: "\n").count, 1, other.stderr)
        XCTAssertTrue(other.stdout.isEmpty)
        let unnamed = try runner.run(["preload", "s3://unnamed/x.bin"] + endpoint, environment: try env(secret: s3.secretAccessKey))
        XCTAssertNotEqual(unnamed.status, 0)
        XCTAssertTrue(unnamed.stderr.contains("no mount of the daemon (pid"), unnamed.stderr)
        XCTAssertTrue(unnamed.stderr.contains("reads the bucket at \(s3.endpoint)/unnamed/, and preload hands no S3 keys to a daemon"), unnamed.stderr)
        for result in [same, keyless, preload, tree, other, unnamed] {
            XCTAssertFalse(result.stderr.contains(s3.secretAccessKey) || result.text.contains(s3.secretAccessKey))
        }
        let text = (try? String(contentsOfFile: temp.appending("daemon.log"), encoding: .utf8)) ?? ""
        XCTAssertFalse(text.contains(s3.secretAccessKey), "no log line holds the secret")
    }

    /// A bucket's keys are the daemon's while the mount that named it is (issue 48): once it is
    /// unmounted they sign nothing more (a `cat` is told no mount names the bucket), and a
    /// later mount may name the bucket with other keys (the server judges them, no conflict).
    func testABucketsKeysLeaveTheDaemonWithTheMountThatNamedIt() throws {
        let s3 = try XCTUnwrap(server)
        let endpoint = ["--s3-endpoint", s3.endpoint, "--proxy-port", "0", "--log-file", temp.appending("daemon.log")]
        let first = try mountpoint("first")
        let daemon = try runner.run(["mount", first, "s3://unnamed/x.bin"] + endpoint, environment: try env(secret: s3.secretAccessKey))
        XCTAssertEqual(daemon.status, 0, daemon.stderr)
        mounted.append(first)
        let films = try mountpoint("films")
        let join = try runner.run(["mount", films, "s3://media/films/a film.mp4"] + endpoint, environment: try env(secret: s3.secretAccessKey))
        XCTAssertEqual(join.status, 0, join.stderr)
        XCTAssertTrue(join.stderr.contains("on the daemon (pid"), join.stderr)
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: films + "/a film.mp4"))), film)

        let gone = try runner.run(["unmount", films], cacheDirectory: nil)
        XCTAssertEqual(gone.status, 0, gone.stderr)
        // The daemon sees the session end after the kernel does: its log line says the keys left.
        let log = temp.appending("daemon.log")
        XCTAssertTrue(FileEvents.wait(in: temp.path) {
            ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").contains("/media/ left the daemon with")
        }, "the daemon logs that the bucket's keys left with the mount")
        let after = try runner.run(["cat", "s3://media/films/a film.mp4", "--s3-endpoint", s3.endpoint], environment: try env(secret: nil))
        XCTAssertNotEqual(after.status, 0)
        XCTAssertTrue(after.stderr.contains("no mount of the daemon (pid"), "the keys left with the mount: \(after.stderr)")

        let otherKeys = try mountpoint("other")
        let other = try runner.run(["mount", otherKeys, "s3://media/films/a film.mp4"] + endpoint, environment: try env(secret: "other" + s3.secretAccessKey))
        if other.status == 0 { mounted.append(otherKeys) }
        XCTAssertFalse(other.stderr.contains("is already read with other S3 keys"), "the bucket is free: \(other.stderr)")
        XCTAssertTrue(other.stderr.contains("SignatureDoesNotMatch"), "named with other keys, which rclone judges: \(other.stderr)")

        let again = try mountpoint("again")
        let back = try runner.run(["mount", again, "s3://media/films/a film.mp4"] + endpoint, environment: try env(secret: s3.secretAccessKey))
        XCTAssertEqual(back.status, 0, back.stderr)
        mounted.append(again)
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: again + "/a film.mp4"))), film)
    }

    /// `cache info` and `cache rm` find a signed bucket's entries, keyed by the keys' identity,
    /// from a process with the same keys (by their key) or none (by the URL, each identity
    /// named by its hash, no secret), with or without a daemon holding the cache.
    func testCacheInfoAndRmFindASignedBucketsEntriesWithoutItsKeys() throws {
        let s3 = try XCTUnwrap(server)
        let endpoint = ["--s3-endpoint", s3.endpoint]
        let url = s3.endpoint + "/media/films/extras/b.bin"
        XCTAssertEqual(try runner.run(["preload", "s3://media/films/extras/b.bin"] + endpoint, environment: try env(secret: s3.secretAccessKey)).status, 0)
        let byKeys = try runner.run(["cache", "info", "s3://media/films/extras/b.bin"] + endpoint, environment: try env(secret: s3.secretAccessKey))
        XCTAssertEqual(byKeys.status, 0, byKeys.stderr)
        XCTAssertTrue(byKeys.text.contains("5000 bytes") && byKeys.text.contains("#cred-"), byKeys.text)
        XCTAssertFalse(byKeys.text.contains("other credentials"), "found by its own key: \(byKeys.text)")
        let byURL = try runner.run(["cache", "info", url], environment: try env(secret: nil))
        XCTAssertEqual(byURL.status, 0, byURL.stderr)
        XCTAssertTrue(byURL.text.contains("cached under other credentials than this command's (1 of 1, credentials #"), byURL.text)
        let removed = try runner.run(["cache", "rm", url], environment: try env(secret: nil))
        XCTAssertEqual(removed.status, 0, removed.stderr)
        XCTAssertTrue(removed.text.contains("removed \(url) (4.9 KiB)") || removed.text.contains("removed \(url) ("), removed.text)
        XCTAssertNotEqual(try runner.run(["cache", "info", url], environment: try env(secret: nil)).status, 0, "gone")

        // A daemon holds the cache: the index it writes, read from here; its own key removes it.
        let mnt = try mountpoint("mnt")
        let r = try runner.run(["mount", mnt, "--index", "s3://media/films/"] + endpoint + ["--proxy-port", "0", "--log-file", temp.appending("daemon.log")],
                               environment: try env(secret: s3.secretAccessKey))
        XCTAssertEqual(r.status, 0, r.stderr)
        mounted.append(mnt)
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: mnt + "/extras/b.bin"))), extra)
        // The daemon writes the entry's row when the fetch ends, on its writer's thread: looked
        // at again at each change of the cache folder (its index's journal).
        var held = try runner.run(["cache", "info", url], environment: try env(secret: nil))
        FileEvents.wait(in: runner.cacheDir) {
            if held.status != 0 { held = (try? runner.run(["cache", "info", url], environment: (try? env(secret: nil)) ?? [:])) ?? held }
            return held.status == 0
        }
        XCTAssertEqual(held.status, 0, held.stderr)
        XCTAssertTrue(held.text.contains("credentials #"), held.text)
        let heldRm = try runner.run(["cache", "rm", url], environment: try env(secret: nil))
        XCTAssertEqual(heldRm.status, 0, heldRm.stderr)
        XCTAssertTrue(heldRm.text.contains("through the daemon holding the cache"), heldRm.text)
        for result in [byKeys, byURL, removed, held, heldRm] { XCTAssertFalse(result.text.contains(s3.secretAccessKey)) }
    }
}
