import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// The mount command with the options media-server users set: owner and modes (checked by the
/// kernel as other users), fstab spelling through the mount helper, and how the daemon presents
/// itself to the origin (User-Agent, credentials from a file that never reach its command line).
final class OwnerAndOriginMountTests: XCTestCase {
    var h: DaemonHarness!

    override func setUpWithError() throws {
        h = try DaemonHarness()
        h.origin.setFile("/b.txt", data: Array("bee\n".utf8))
        chmod(h.directory.path, 0o755)
    }

    override func tearDown() {
        h?.cleanup()
    }

    /// `cat PATH` as another user (uid, gid, no supplementary groups).
    private func cat(_ path: String, uid: Int, gid: Int) throws -> DaemonHarness.Outcome {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else {
            throw XCTSkip("SKIPPED LOUDLY: no /usr/bin/setpriv to act as another user")
        }
        return try h.run("/usr/bin/setpriv", ["--reuid=\(uid)", "--regid=\(gid)", "--clear-groups", "/bin/cat", path])
    }

    private func unmount() throws {
        let pid = try XCTUnwrap(h.daemonPID())
        XCTAssertEqual(try h.run("/bin/fusermount3", ["-u", h.mountpoint]).status, 0)
        h.waitForMountTable("unmounted") { !Mountpoint.isMounted(h.mountpoint) }
        h.waitForExit(pid, "the daemon is gone")
    }

    func testOwnerAndUmaskAreWhatStatShowsAndWhatTheKernelEnforces() throws {
        let r = try h.mount([h.origin.url("/b.txt"), "-o", "uid=1234,gid=2345,umask=027,allow_other"])
        XCTAssertEqual(r.status, 0, r.stderr)
        let file = try POSIX.stat(h.path("b.txt"))
        XCTAssertEqual([file.st_uid, file.st_gid], [1234, 2345])
        XCTAssertEqual(file.st_mode & 0o7777, 0o440)
        let root = try POSIX.stat(h.mountpoint)
        XCTAssertEqual([root.st_uid, root.st_gid], [1234, 2345])
        XCTAssertEqual(root.st_mode & 0o7777, 0o550)

        XCTAssertEqual(try cat(h.path("b.txt"), uid: 1234, gid: 1234).stdout, "bee\n", "the owner reads")
        XCTAssertEqual(try cat(h.path("b.txt"), uid: 4321, gid: 2345).stdout, "bee\n", "the group reads")
        let other = try cat(h.path("b.txt"), uid: 65534, gid: 65534)
        XCTAssertNotEqual(other.status, 0, "others are refused by the mode")
        XCTAssertTrue(other.stderr.contains("Permission denied"), other.stderr)
        try unmount()

        // Without allow_other the mode is not reached: only the mounting user gets in at all.
        XCTAssertEqual(try h.mount([h.origin.url("/b.txt"), "--uid", "1234", "--gid", "2345"]).status, 0)
        XCTAssertEqual(try POSIX.stat(h.path("b.txt")).st_mode & 0o7777, 0o444, "no umask: the default modes")
        XCTAssertNotEqual(try cat(h.path("b.txt"), uid: 1234, gid: 2345).status, 0, "the owner shown is not let in")
    }

    func testTheMountHelperPassesOwnerAndModeFromFstab() throws {
        let helper = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("mount-helpers/mount.httpcachefs").path
        let options = "defaults,uid=1234,gid=2345,umask=077,allow_other,cache_dir=\(h.cacheDirectory),log_file=\(h.logFile),no_proxy"
        let r = try h.run(helper, [h.origin.url("/b.txt"), h.mountpoint, "-o", options], environment: ["HTTPCACHEFS": h.binary])
        XCTAssertEqual(r.status, 0, r.stderr)
        let st = try POSIX.stat(h.path("b.txt"))
        XCTAssertEqual([st.st_uid, st.st_gid], [1234, 2345])
        XCTAssertEqual(st.st_mode & 0o7777, 0o400)
        XCTAssertEqual(try cat(h.path("b.txt"), uid: 1234, gid: 1234).stdout, "bee\n")
    }

    func testConflictingAndBadOwnerOptionsFailBeforeMounting() throws {
        let conflict = try h.mount([h.origin.url("/b.txt"), "--uid", "1", "-o", "uid=2"])
        XCTAssertEqual(conflict.status, 64)
        XCTAssertEqual(conflict.stderr, "httpcachefs: error: --uid 1 and -o uid=... disagree: give one of them\n")
        let bad = try h.mount([h.origin.url("/b.txt"), "-o", "umask=999"])
        XCTAssertEqual(bad.status, 64)
        XCTAssertTrue(bad.stderr.hasPrefix("httpcachefs: error: invalid umask '999' for -o umask"), bad.stderr)
        XCTAssertFalse(Mountpoint.isMounted(h.mountpoint))
    }

    func testTheDaemonSendsUserAgentAndCredentialsFromAFileThatNeverReachItsCommandLine() throws {
        let password = "pw-\(UUID().uuidString)"
        let passwordFile = h.directory.appending("password")
        try (password + "\n").write(toFile: passwordFile, atomically: true, encoding: .utf8)
        let r = try h.mount([h.origin.url("/b.txt"), "--user-agent", "MediaBox/3.1", "--user", "alice",
                             "--password-file", passwordFile])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try POSIX.readAll(h.path("b.txt")), Array("bee\n".utf8))
        let requests = h.origin.requests
        XCTAssertFalse(requests.isEmpty)
        for request in requests {
            XCTAssertEqual(request.header("user-agent"), "MediaBox/3.1")
            XCTAssertEqual(request.header("authorization"), "Basic " + Data("alice:\(password)".utf8).base64EncodedString())
        }
        let pid = try XCTUnwrap(h.daemonPID())
        let cmdline = String(decoding: FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") ?? Data(), as: UTF8.self)
        XCTAssertTrue(cmdline.contains(passwordFile), "the daemon got the file's path")
        XCTAssertFalse(cmdline.contains(password), "the password is not in the daemon's arguments")
        let environ = String(decoding: FileManager.default.contents(atPath: "/proc/\(pid)/environ") ?? Data(), as: UTF8.self)
        XCTAssertFalse(environ.contains(password), "nor in its environment")
        XCTAssertFalse(h.log.contains(password), "nor in its log")
    }

    func testSecretsTypedOnTheCommandLineAreMaskedInTheDaemonsPSLine() throws {
        let url = h.origin.url("/b.txt").replacingOccurrences(of: "http://", with: "http://bob:url-secret@")
        let r = try h.mount([url, "--header", "X-Api-Key: key-secret", "--header", "X-Client: tv"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try POSIX.readAll(h.path("b.txt")), Array("bee\n".utf8))
        XCTAssertEqual(h.origin.requests.last?.header("authorization"), "Basic " + Data("bob:url-secret".utf8).base64EncodedString())
        XCTAssertEqual(h.origin.requests.last?.header("x-api-key"), "key-secret")
        let pid = try XCTUnwrap(h.daemonPID())
        let args = (FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") ?? Data()).split(separator: 0)
            .map { String(decoding: $0, as: UTF8.self) }
        XCTAssertTrue(args.contains(h.origin.url("/b.txt").replacingOccurrences(of: "http://", with: "http://bob:**********@")), "\(args)")
        XCTAssertTrue(args.contains("X-Api-Key: **********"), "\(args)")
        XCTAssertTrue(args.contains("X-Client: **"), "every header is a credential, its name stays readable: \(args)")
    }

    func testReadAheadMaxCapsWhatOneSequentialReaderAsksFor() throws {
        h.origin.setGeneratedFile("/big.bin", length: 24 << 20, seed: 8)
        let expected = OriginServer.generatedBytes(seed: 8, offset: 0, count: 24 << 20)
        /// The largest range the origin was asked for while `cat` read the file through the mount.
        func largestRequest(_ extra: [String]) throws -> Int64 {
            h.origin.resetLog()
            XCTAssertEqual(try h.mount([h.origin.url("/big.bin")] + extra).status, 0)
            XCTAssertTrue(try POSIX.readAll(h.path("big.bin"), chunk: 1 << 20) == expected)
            try unmount()
            try? FileManager.default.removeItem(atPath: h.cacheDirectory)
            return h.origin.requests.compactMap { r -> Int64? in
                guard let spec = r.range?.dropFirst("bytes=".count), let dash = spec.firstIndex(of: "-"),
                      let first = Int64(spec[..<dash]) else { return nil }
                let last = Int64(spec[spec.index(after: dash)...]) ?? (24 << 20) - 1
                return last - first + 1
            }.max() ?? 0
        }
        // The kernel asks for up to 1 MiB per read; each fetch is at most that plus the read-ahead.
        let capped = try largestRequest(["--read-ahead-max", "512K"])
        XCTAssertLessThanOrEqual(capped, (1 << 20) + (512 << 10))
        XCTAssertGreaterThan(try largestRequest([]), (1 << 20) + (512 << 10), "by default read-ahead grows past that")
    }
}
