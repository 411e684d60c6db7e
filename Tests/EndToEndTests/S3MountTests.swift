import Foundation
import Glibc
import TestSupport
import XCTest

/// Buckets as libraries (issue 48), on a real mount (the binary, as root) of a real S3 server on
/// loopback (moto, `MotoS3`): `--index s3://BUCKET/PREFIX/` lists the prefix's folders and
/// objects by ListObjectsV2 and reads their bytes by signed ranged GETs; moto checking signatures
/// takes the mount's, and refuses a wrong secret's. Skipped, saying why, without moto.
final class S3MountTests: XCTestCase {
    var temp: TemporaryDirectory!
    var runner: CLIRunner!
    var moto: MotoS3?
    var mounted: [String] = []
    let film = OriginServer.generatedBytes(seed: 48, offset: 0, count: 700_000)
    let extra = OriginServer.generatedBytes(seed: 49, offset: 0, count: 3_000)

    override func setUpWithError() throws {
        temp = TemporaryDirectory(prefix: "httpcachefs-s3")
        runner = CLIRunner(temp: temp)
    }

    override func tearDown() {
        for path in mounted where isMounted(path) {
            _ = try? runner.run(["unmount", path], cacheDirectory: nil)
            if isMounted(path) { _ = umount2(path, Int32(MNT_DETACH)) }
        }
        moto?.stop()
        temp?.remove()
    }

    func startMoto(checkSignatures: Bool, objects given: [(key: String, bytes: [UInt8])]? = nil) throws -> MotoS3 {
        do {
            // moto's own signature check fails boto3's uploads of keys that need encoding.
            let objects: [(key: String, bytes: [UInt8])] = given ?? (checkSignatures ? [("films/a.mp4", film)] : [
                ("films/a film.mp4", film), ("films/extras/b.bin", extra), ("films/x\u{202E}y.bin", extra),
                ("music/c.bin", extra),
            ])
            let server = try MotoS3(bucket: "media", objects: objects, checkSignatures: checkSignatures)
            moto = server
            return server
        } catch let e as MotoS3.Unavailable {
            throw XCTSkip("S3 tests skipped: \(e)")
        }
    }

    func mountpoint(_ name: String) throws -> String {
        let path = temp.appending(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    func testIndexOfABucketPrefixListsFoldersAndObjectsAndReadsTheirBytes() throws {
        let s3 = try startMoto(checkSignatures: false)
        let mnt = try mountpoint("mnt")
        let r = try runner.run(["mount", mnt, "--index", "s3://media/films/", "--s3-endpoint", s3.endpoint, "--no-proxy",
                                "--log-file", temp.appending("daemon.log")],
                               environment: ["AWS_ACCESS_KEY_ID": s3.accessKeyID, "AWS_SECRET_ACCESS_KEY": s3.secretAccessKey])
        XCTAssertEqual(r.status, 0, r.stderr)
        mounted.append(mnt)
        let names = try FileManager.default.contentsOfDirectory(atPath: mnt).sorted()
        // A name with a character that reorders text is shown escaped, not dropped; music/ is
        // outside the prefix.
        XCTAssertEqual(names, ["a film.mp4", "extras", "x%E2%80%AEy.bin"])
        let attributes = try FileManager.default.attributesOfItem(atPath: mnt + "/a film.mp4")
        XCTAssertEqual((attributes[.size] as? NSNumber)?.intValue, film.count, "the listing's size")
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: mnt + "/a film.mp4"))), film)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mnt + "/extras"), ["b.bin"])
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: mnt + "/extras/b.bin"))), extra)
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: mnt + "/x%E2%80%AEy.bin"))), extra)
        // A range in the middle, on its own.
        let fd = open(mnt + "/a film.mp4", O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        var buffer = [UInt8](repeating: 0, count: 1000)
        XCTAssertEqual(buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 1000, 500_000) }, 1000)
        close(fd)
        XCTAssertEqual(buffer, Array(film[500_000..<501_000]))
        let log = (try? String(contentsOfFile: temp.appending("daemon.log"), encoding: .utf8)) ?? ""
        XCTAssertFalse(log.contains(s3.secretAccessKey), "the secret is in no log line")

        // A bucket that is not there: one line that says so.
        let missing = try runner.run(["mount", try mountpoint("missing"), "--index", "s3://nosuchbucket/films/", "--s3-endpoint", s3.endpoint,
                                      "--no-proxy", "--log-file", temp.appending("missing.log")],
                                     cacheDirectory: temp.appending("cache2"),
                                     environment: ["AWS_ACCESS_KEY_ID": s3.accessKeyID, "AWS_SECRET_ACCESS_KEY": s3.secretAccessKey])
        XCTAssertNotEqual(missing.status, 0)
        XCTAssertTrue(missing.stderr.contains("HTTP 404 (S3: NoSuchBucket: The specified bucket does not exist)"), missing.stderr)
        // A URL list of s3:// URLs, named or not.
        let list = temp.appending("films.list")
        try "s3://media/films/extras/b.bin\nrenamed/c.bin = s3://media/music/c.bin   # a comment\n"
            .write(toFile: list, atomically: true, encoding: .utf8)
        let listed = try mountpoint("listed")
        let fromList = try runner.run(["mount", listed, "--url-list", list, "--s3-endpoint", s3.endpoint, "--no-proxy",
                                       "--log-file", temp.appending("listed.log")],
                                      cacheDirectory: temp.appending("cache4"),
                                      environment: ["AWS_ACCESS_KEY_ID": s3.accessKeyID, "AWS_SECRET_ACCESS_KEY": s3.secretAccessKey])
        XCTAssertEqual(fromList.status, 0, fromList.stderr)
        mounted.append(listed)
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: listed + "/b.bin"))), extra)
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: listed + "/renamed/c.bin"))), extra)
        // mount(8)'s helper, as an fstab line would run it: the bucket's prefix as the source.
        let helper = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("mount-helpers/mount.httpcachefs").path
        let fstab = try mountpoint("fstab")
        let viaHelper = try runner.run(["/bin/sh", helper, "s3://media/films/extras/", fstab, "-o",
                                        "cache_dir=\(temp.appending("cache7")),s3_endpoint=\(s3.endpoint),no_proxy,log_file=\(temp.appending("fstab.log"))"],
                                       environment: ["HTTPCACHEFS": try CLIRunner.binary().path,
                                                     "AWS_ACCESS_KEY_ID": s3.accessKeyID, "AWS_SECRET_ACCESS_KEY": s3.secretAccessKey],
                                       raw: true)
        XCTAssertEqual(viaHelper.status, 0, viaHelper.stderr)
        mounted.append(fstab)
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: fstab), ["b.bin"])
        // preload --recursive walks the bucket's folders like the mount.
        let preload = try runner.run(["preload", "--recursive", "s3://media/films/", "--s3-endpoint", s3.endpoint],
                                     cacheDirectory: temp.appending("cache5"),
                                     environment: ["AWS_ACCESS_KEY_ID": s3.accessKeyID, "AWS_SECRET_ACCESS_KEY": s3.secretAccessKey])
        XCTAssertEqual(preload.status, 0, preload.stderr)
        XCTAssertTrue((preload.text + preload.stderr).contains("recursively: 3 of 3 files in 2 folders"), preload.text + preload.stderr)
    }

    /// An object replaced while it is open: a read of the open file gets the old version's bytes
    /// or an error, never the new one's (S3 ETags differ per version; every answer's is compared).
    func testAnObjectReplacedWhileOpenIsNeverMixed() throws {
        let length = 6 << 20
        let v1 = OriginServer.generatedBytes(seed: 60, offset: 0, count: length)
        let v2 = OriginServer.generatedBytes(seed: 61, offset: 0, count: length)
        let s3 = try startMoto(checkSignatures: true, objects: [("films/big.bin", v1)])
        let mnt = try mountpoint("mnt")
        let r = try runner.run(["mount", mnt, "s3://media/films/big.bin", "--s3-endpoint", s3.endpoint, "--no-proxy",
                                "--read-ahead-max", "256K", "--log-file", temp.appending("daemon.log")],
                               environment: ["AWS_ACCESS_KEY_ID": s3.accessKeyID, "AWS_SECRET_ACCESS_KEY": s3.secretAccessKey])
        XCTAssertEqual(r.status, 0, r.stderr)
        mounted.append(mnt)
        let fd = open(mnt + "/big.bin", O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var head = [UInt8](repeating: 0, count: 4096)
        XCTAssertEqual(head.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 4096, 0) }, 4096)
        XCTAssertEqual(head, Array(v1[0..<4096]))
        try s3.put(key: "films/big.bin", bytes: v2)
        var tail = [UInt8](repeating: 0, count: 4096)
        let n = tail.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 4096, off_t(length - 8192)) }
        print("S3MountTests: the read after the replacement: \(n == 4096 ? "the old version's bytes" : "errno \(errno)")")
        if n == 4096 {
            XCTAssertEqual(tail, Array(v1[(length - 8192)..<(length - 4096)]), "an open file reads one version: the one it opened")
        } else {
            XCTAssertEqual(n, -1, "a short read")
            XCTAssertEqual(errno, EIO, "the version changed: an error, not other bytes")
            // The range was asked with If-Match (the version opened): moto answered 412, and
            // the engine learnt the new version from the request asked again without it.
            let next = open(mnt + "/big.bin", O_RDONLY)
            XCTAssertGreaterThanOrEqual(next, 0)
            defer { close(next) }
            XCTAssertEqual(tail.withUnsafeMutableBytes { pread(next, $0.baseAddress, 4096, off_t(length - 8192)) }, 4096)
            XCTAssertEqual(tail, Array(v2[(length - 8192)..<(length - 4096)]), "the next open reads the new version")
        }
    }

    /// With the keys and endpoint of an AWS CLI profile (`AWS_PROFILE`, the shared files).
    func testFFprobeAndFFmpegReadAFilmFromTheBucket() throws {
        guard let ffmpeg = ExternalTool.find("ffmpeg"), let ffprobe = ExternalTool.find("ffprobe") else {
            print("⚠️  SKIPPED S3MountTests.testFFprobeAndFFmpegReadAFilmFromTheBucket: ffmpeg/ffprobe not installed")
            throw XCTSkip("ffmpeg/ffprobe not installed")
        }
        let movie = temp.appending("movie.mp4")
        let made = try ExternalTool.run(ffmpeg, ["-v", "error", "-y", "-f", "lavfi", "-i", "testsrc=duration=3:size=160x120:rate=10",
                                                 "-f", "lavfi", "-i", "sine=frequency=440:duration=3", "-c:v", "libx264",
                                                 "-preset", "ultrafast", "-g", "10", "-c:a", "aac", "-shortest", movie])
        XCTAssertEqual(made.status, 0, made.stderr)
        let bytes = Array(try Data(contentsOf: URL(fileURLWithPath: movie)))
        let s3 = try startMoto(checkSignatures: true, objects: [("films/movie.mp4", bytes)])
        let mnt = try mountpoint("mnt")
        // The keys and the endpoint from an AWS CLI profile (moto checks the signatures).
        try "[films]\naws_access_key_id = \(s3.accessKeyID)\naws_secret_access_key = \(s3.secretAccessKey)\n"
            .write(toFile: temp.appending("aws-credentials"), atomically: true, encoding: .utf8)
        try "[profile films]\nregion = us-east-1\nendpoint_url = \(s3.endpoint)\n"
            .write(toFile: temp.appending("aws-config"), atomically: true, encoding: .utf8)
        let r = try runner.run(["mount", mnt, "s3://media/films/movie.mp4", "--no-proxy", "--log-file", temp.appending("daemon.log")],
                               environment: ["AWS_PROFILE": "films", "AWS_SHARED_CREDENTIALS_FILE": temp.appending("aws-credentials"),
                                             "AWS_CONFIG_FILE": temp.appending("aws-config"), "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "",
                                             "AWS_ENDPOINT_URL": "", "AWS_REGION": ""])
        XCTAssertEqual(r.status, 0, r.stderr)
        mounted.append(mnt)
        let probe = try ExternalTool.run(ffprobe, ["-v", "error", "-show_entries", "stream=codec_type", "-of", "default=noprint_wrappers=1",
                                                   mnt + "/movie.mp4"])
        XCTAssertEqual(probe.status, 0, probe.stderr)
        XCTAssertTrue(probe.stdout.contains("codec_type=video") && probe.stdout.contains("codec_type=audio"), probe.stdout)
        let decoded = try ExternalTool.run(ffmpeg, ["-v", "error", "-i", mnt + "/movie.mp4", "-f", "null", "-"])
        XCTAssertEqual(decoded.status, 0, decoded.stderr)
    }

    func testMotoCheckingSignaturesTakesTheMountsAndRefusesAWrongSecret() throws {
        let s3 = try startMoto(checkSignatures: true)
        let mnt = try mountpoint("mnt")
        let good = try runner.run(["mount", mnt, "s3://media/films/a.mp4", "--s3-endpoint", s3.endpoint, "--no-proxy",
                                   "--s3-access-key-id", s3.accessKeyID, "--s3-secret-access-key", s3.secretAccessKey,
                                   "--log-file", temp.appending("good.log"), "--log-level", "debug"])
        XCTAssertEqual(good.status, 0, good.stderr)
        mounted.append(mnt)
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: mnt + "/a.mp4"))), film, "every range signed, and taken")
        // The daemon's `ps` line: the key id may show, the secret not.
        let daemons = try FileManager.default.contentsOfDirectory(atPath: "/proc").compactMap { pid -> String? in
            guard Int(pid) != nil, let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") else { return nil }
            let line = String(decoding: data, as: UTF8.self)
            return line.contains("--s3-endpoint") && line.contains(mnt) ? line : nil
        }
        XCTAssertEqual(daemons.count, 1, "\(daemons)")
        for line in daemons {
            XCTAssertFalse(line.contains(s3.secretAccessKey), line)
            XCTAssertTrue(line.contains("--s3-secret-access-key\u{0}" + String(repeating: "*", count: s3.secretAccessKey.utf8.count)), line)
        }

        // cat: through its own cache, signed too; the daemon's runs no proxy to go through (as for
        // any URL; with one, RcloneServeS3Tests goes through it).
        let keys = ["AWS_ACCESS_KEY_ID": s3.accessKeyID, "AWS_SECRET_ACCESS_KEY": s3.secretAccessKey]
        let cat = try runner.run(["cat", "s3://media/films/a.mp4", "--s3-endpoint", s3.endpoint, "--range", "1000-1999"],
                                 cacheDirectory: temp.appending("cache3"), environment: keys)
        XCTAssertEqual(cat.status, 0, cat.stderr)
        XCTAssertEqual(cat.stdout, Array(film[1000..<2000]))
        let catThroughDaemon = try runner.run(["cat", "s3://media/films/a.mp4", "--s3-endpoint", s3.endpoint], environment: keys)
        XCTAssertNotEqual(catThroughDaemon.status, 0)
        XCTAssertTrue(catThroughDaemon.stderr.contains("is in use by"), catThroughDaemon.stderr)

        // A half-set AWS environment (other tools' business) is told only to a command given s3:// URLs.
        let half = ["AWS_ACCESS_KEY_ID": s3.accessKeyID, "AWS_SECRET_ACCESS_KEY": ""]
        let plain = try runner.run(["cat", s3.endpoint + "/media/films/a.mp4", "--range", "0-9"],
                                   cacheDirectory: temp.appending("cache6"), environment: half)
        XCTAssertFalse(plain.stderr.contains("S3"), plain.stderr)
        let needsKeys = try runner.run(["cat", "s3://media/films/a.mp4", "--s3-endpoint", s3.endpoint],
                                       cacheDirectory: temp.appending("cache6"), environment: half)
        XCTAssertNotEqual(needsKeys.status, 0)
        XCTAssertTrue(needsKeys.stderr.contains("an S3 access key id needs its secret"), needsKeys.stderr)

        let other = try mountpoint("other")
        let bad = try runner.run(["mount", other, "s3://media/films/a.mp4", "--s3-endpoint", s3.endpoint, "--no-proxy",
                                  "--log-file", temp.appending("bad.log")],
                                 cacheDirectory: temp.appending("cache2"),
                                 environment: ["AWS_ACCESS_KEY_ID": s3.accessKeyID, "AWS_SECRET_ACCESS_KEY": "wrong" + s3.secretAccessKey])
        if bad.status == 0 { mounted.append(other) }
        XCTAssertNotEqual(bad.status, 0, "a wrong secret's requests are refused: nothing to mount")
        XCTAssertTrue(bad.stderr.contains("HTTP 403 (S3: SignatureDoesNotMatch: The request signature we calculated does not match"), bad.stderr)
        XCTAssertFalse(bad.stderr.contains(s3.secretAccessKey), bad.stderr)
        for log in ["good.log", "bad.log"] {
            let text = (try? String(contentsOfFile: temp.appending(log), encoding: .utf8)) ?? ""
            XCTAssertFalse(text.contains(s3.secretAccessKey), "no log line holds the secret, even at debug: \(log)")
        }
    }

    /// A mount joining a running daemon brings its own keys for its own bucket (issue 48): the
    /// daemon's keys (its environment's, here not the bucket's) never sign it, the joining
    /// mount's do (moto checks them); the same bucket named again with other keys is refused in
    /// one line (one bucket, one set of keys per daemon: its bytes are keyed by them); the daemon
    /// lists the joined mount's arguments without the secret.
    func testAMountJoiningADaemonSignsItsBucketWithItsOwnKeysAndOtherKeysForTheSameBucketAreRefused() throws {
        let s3 = try startMoto(checkSignatures: true)
        let origin = try OriginServer()
        defer { origin.stop() }
        origin.setGeneratedFile("/plain.bin", length: 100_000, seed: 5)
        let log = temp.appending("daemon.log")
        let first = try mountpoint("first")
        let daemon = try runner.run(["mount", first, origin.url("/plain.bin"), "--proxy-port", "0", "--log-file", log],
                                    environment: ["AWS_ACCESS_KEY_ID": "AKIDDAEMONKEYS", "AWS_SECRET_ACCESS_KEY": "daemon-secret", "HOME": temp.path])
        XCTAssertEqual(daemon.status, 0, daemon.stderr)
        mounted.append(first)

        let joined = try mountpoint("joined")
        let join = try runner.run(["mount", joined, "s3://media/films/a.mp4", "--s3-endpoint", s3.endpoint, "--proxy-port", "0", "--log-file", log],
                                  environment: ["AWS_ACCESS_KEY_ID": s3.accessKeyID, "AWS_SECRET_ACCESS_KEY": s3.secretAccessKey, "HOME": temp.path])
        XCTAssertEqual(join.status, 0, join.stderr)
        mounted.append(joined)
        XCTAssertTrue(join.stderr.contains("on the daemon (pid"), "joined, not a daemon of its own: \(join.stderr)")
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: joined + "/a.mp4"))), film, "signed with the joining mount's keys, which moto takes")

        let third = try mountpoint("third")
        let other = try runner.run(["mount", third, "s3://media/films/a.mp4", "--s3-endpoint", s3.endpoint, "--proxy-port", "0", "--log-file", log],
                                   environment: ["AWS_ACCESS_KEY_ID": s3.accessKeyID, "AWS_SECRET_ACCESS_KEY": "other" + s3.secretAccessKey, "HOME": temp.path])
        if other.status == 0 { mounted.append(third) }
        XCTAssertNotEqual(other.status, 0)
        XCTAssertTrue(other.stderr.contains("is already read with other S3 keys or another region"), other.stderr)

        for name in (try? FileManager.default.contentsOfDirectory(atPath: runner.cacheDir)) ?? [] {
            let path = runner.cacheDir + "/" + name
            guard let data = FileManager.default.contents(atPath: path), data.count < 1 << 20 else { continue }
            XCTAssertFalse(String(decoding: data, as: UTF8.self).contains(s3.secretAccessKey), "the secret is in \(name)")
        }
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        XCTAssertFalse(text.contains(s3.secretAccessKey), "no log line holds the secret")
    }

    /// A profile's `credential_process` gives the keys (moto checks them); a profile that takes
    /// its keys from SSO is refused in one line that names the AWS CLI's way around it.
    func testAProfilesCredentialProcessSignsAndAnSSOProfileIsToldWithTheWayAround() throws {
        let s3 = try startMoto(checkSignatures: true)
        let script = temp.appending("creds.sh")
        try "#!/bin/sh\nprintf '{\"Version\": 1, \"AccessKeyId\": \"%s\", \"SecretAccessKey\": \"%s\"}' \"$ID\" \"$SECRET\"\n"
            .write(toFile: script, atomically: true, encoding: .utf8)
        XCTAssertEqual(chmod(script, 0o755), 0)
        try "[profile tool]\ncredential_process = \(script)\n[profile work]\nsso_session = work\nsso_account_id = 123456789012\n"
            .write(toFile: temp.appending("aws-config"), atomically: true, encoding: .utf8)
        var environment = ["AWS_CONFIG_FILE": temp.appending("aws-config"), "AWS_SHARED_CREDENTIALS_FILE": temp.appending("none"),
                           "AWS_ACCESS_KEY_ID": "", "AWS_SECRET_ACCESS_KEY": "", "HOME": temp.path,
                           "ID": s3.accessKeyID, "SECRET": s3.secretAccessKey, "AWS_PROFILE": "tool"]
        let mnt = try mountpoint("mnt")
        let r = try runner.run(["mount", mnt, "s3://media/films/a.mp4", "--s3-endpoint", s3.endpoint, "--no-proxy",
                                "--log-file", temp.appending("daemon.log")], environment: environment)
        XCTAssertEqual(r.status, 0, r.stderr)
        mounted.append(mnt)
        XCTAssertEqual(Array(try Data(contentsOf: URL(fileURLWithPath: mnt + "/a.mp4"))), film, "signed with the process's keys")

        environment["AWS_PROFILE"] = "work"
        let sso = try runner.run(["cat", "s3://media/films/a.mp4", "--s3-endpoint", s3.endpoint], cacheDirectory: temp.appending("cache2"),
                                 environment: environment)
        XCTAssertNotEqual(sso.status, 0)
        XCTAssertTrue(sso.stderr.contains("the AWS profile 'work' takes its keys from AWS SSO"), sso.stderr)
        XCTAssertTrue(sso.stderr.contains("aws configure export-credentials --profile work --format process"), sso.stderr)
    }
}
