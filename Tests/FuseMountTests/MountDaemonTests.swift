import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// The `httpcachefs mount` command as users run it: a background daemon, signals, fusermount3,
/// crashes, bad input, and the mount(8) helper.
final class MountDaemonTests: XCTestCase {
    var h: DaemonHarness!

    override func setUpWithError() throws {
        h = try DaemonHarness()
        h.origin.setGeneratedFile("/a.bin", length: 3 << 20, seed: 31)
        h.origin.setFile("/b.txt", data: Array("bee\n".utf8))
        h.origin.setFile("/c.txt", data: Array("sea\n".utf8))
    }

    override func tearDown() {
        h?.cleanup()
    }

    func testInTheBackgroundTheCommandReturnsOnceUsableAndSIGTERMUnmountsCleanly() throws {
        let r = try h.mount([h.origin.url("/a.bin")])
        XCTAssertEqual(r.status, 0, r.stderr)
        // Usable the moment the command returns: no waiting here.
        XCTAssertTrue(try POSIX.readAll(h.path("a.bin")) == OriginServer.generatedBytes(seed: 31, offset: 0, count: 3 << 20))
        let pid = try XCTUnwrap(h.daemonPID())

        kill(pid, SIGTERM)
        h.waitForExit(pid, "the daemon exits after SIGTERM")
        XCTAssertFalse(Mountpoint.isMounted(h.mountpoint))
        XCTAssertTrue(h.log.contains("unmounted \(h.mountpoint)"), h.log)

        // The index was flushed and the cache lock released: a new engine sees the cached bytes.
        let engine = try CacheEngine(configuration: CacheConfiguration(directory: h.cacheDirectory, engineClock: .realTime), source: NoSource())
        defer { engine.shutdown() }
        XCTAssertEqual(engine.status(url: h.origin.url("/a.bin"))?.cachedBytes, 3 << 20)
    }

    func testFusermountUnmountEndsTheDaemon() throws {
        XCTAssertEqual(try h.mount([h.origin.url("/b.txt")]).status, 0)
        let pid = try XCTUnwrap(h.daemonPID())
        let r = try h.run("/bin/fusermount3", ["-u", h.mountpoint])
        XCTAssertEqual(r.status, 0, r.stderr)
        h.waitForExit(pid, "the daemon exits after fusermount3 -u")
        XCTAssertTrue(h.log.contains("unmounted"), h.log)
    }

    func testForegroundStaysAttachedAndSIGINTUnmounts() throws {
        let stderrPath = h.directory.appending("foreground.stderr")
        let pid = try Subprocess.spawn(h.binary, ["mount", "--foreground", h.mountpoint, h.origin.url("/b.txt"),
                                                  "--cache-dir", h.cacheDirectory, "--no-proxy"], stderr: stderrPath)
        h.waitForMountTable("the foreground mount is up") { Mountpoint.isMounted(h.mountpoint) }
        XCTAssertEqual(try POSIX.readAll(h.path("b.txt")), Array("bee\n".utf8))
        XCTAssertNil(Subprocess.wait(pid, timeout: 0), "stays attached")
        kill(pid, SIGINT)
        XCTAssertEqual(Subprocess.wait(pid, timeout: 30), 0)
        XCTAssertFalse(Mountpoint.isMounted(h.mountpoint))
        let stderr = (try? String(contentsOfFile: stderrPath, encoding: .utf8)) ?? ""
        XCTAssertTrue(stderr.contains("mounted \(h.mountpoint)"), "logs go to stderr: \(stderr)")
    }

    func testSIGHUPReloadsTheURLListWithoutRemount() throws {
        let list = h.directory.appending("list.txt")
        try "\(h.origin.url("/b.txt"))\n".write(toFile: list, atomically: true, encoding: .utf8)
        XCTAssertEqual(try h.mount(["--url-list", list]).status, 0)
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["b.txt"])
        let pid = try XCTUnwrap(h.daemonPID())

        try "# moved\nsea/c.txt = \(h.origin.url("/c.txt"))\n".write(toFile: list, atomically: true, encoding: .utf8)
        kill(pid, SIGHUP)
        h.waitForLog("reloaded \(list)")
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["sea"])
        XCTAssertEqual(try POSIX.readAll(h.path("sea/c.txt")), Array("sea\n".utf8))
        XCTAssertEqual(POSIX.errnoOf { _ = try POSIX.stat(h.path("b.txt")) }, ENOENT)

        try "not a url\n".write(toFile: list, atomically: true, encoding: .utf8)
        kill(pid, SIGHUP)
        h.waitForLog("keeping the current files")
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["sea"], "a bad list changes nothing")
        XCTAssertTrue(h.isAlive(pid))
    }

    func testAStaleMountFromACrashedDaemonIsCleanedAtTheNextMount() throws {
        XCTAssertEqual(try h.mount([h.origin.url("/b.txt")]).status, 0)
        let pid = try XCTUnwrap(h.daemonPID())
        kill(pid, SIGKILL)
        h.waitForExit(pid, "the daemon is gone")
        let dead = POSIX.errnoOf { _ = try POSIX.list(h.mountpoint) }
        XCTAssertTrue(dead == ENOTCONN || dead == ECONNABORTED, "a dead FUSE mount: \(String(describing: dead))")

        let r = try h.mount([h.origin.url("/b.txt")])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stderr.contains("stale mount"), r.stderr)
        XCTAssertEqual(try POSIX.readAll(h.path("b.txt")), Array("bee\n".utf8))
    }

    func testFailuresExitNonZeroWithTheReason() throws {
        var r = try h.run(h.binary, ["mount", h.directory.appending("nope"), h.origin.url("/b.txt"), "--cache-dir", h.cacheDirectory])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("does not exist"), r.stderr)

        let list = h.directory.appending("bad.txt")
        try "\(h.origin.url("/b.txt"))\nx.txt = ftp://nope/\n".write(toFile: list, atomically: true, encoding: .utf8)
        r = try h.mount(["--url-list", list])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("bad.txt:2"), r.stderr)

        r = try h.mount([h.origin.url("/x/b.txt"), h.origin.url("/y/b.txt")])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("name clash"), r.stderr)

        XCTAssertEqual(try h.mount([h.origin.url("/b.txt")]).status, 0)
        r = try h.mount([h.origin.url("/c.txt")])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("busy"), r.stderr)
        XCTAssertFalse(Mountpoint.isMounted(h.directory.appending("nope")))
    }

    func testTheProxyRunsOnTheSameCacheByDefault() throws {
        let r = try h.mount([h.origin.url("/a.bin"), "--proxy-port", "0"], proxy: true)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(try POSIX.readAll(h.path("a.bin")) == OriginServer.generatedBytes(seed: 31, offset: 0, count: 3 << 20))
        let line = try XCTUnwrap(h.log.split(separator: "\n").first { $0.contains("proxy listening on http://127.0.0.1:") })
        let port = try XCTUnwrap(Int(line.split(separator: ":").last.map(String.init) ?? ""), String(line))
        h.origin.resetLog()
        // The URL a user gets from `httpcachefs url` (signed with the cache's key).
        let url = try h.run(h.binary, ["url", h.origin.url("/a.bin"), "--cache-dir", h.cacheDirectory])
        XCTAssertEqual(url.status, 0, url.stderr)
        let base = "http://127.0.0.1:\(port)"
        XCTAssertTrue(url.stdout.hasPrefix(base + "/s/"), url.stdout)
        let path = String(url.stdout.trimmingCharacters(in: .whitespacesAndNewlines).dropFirst(base.count))
        let response = try RawHTTP.request(port: port, path: path, headers: [("Range", "bytes=0-99")])
        XCTAssertEqual(response.status, 206)
        XCTAssertEqual(response.body, OriginServer.generatedBytes(seed: 31, offset: 0, count: 100))
        XCTAssertEqual(h.origin.requestCount(path: "/a.bin"), 0, "bytes read through the mount are hits for the proxy")
    }

    func testAllowOtherLetsOtherUsersReadAndWithoutItTheyCannot() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/setpriv") else {
            print("⚠️  SKIPPING: no setpriv to act as another user")
            throw XCTSkip("no setpriv")
        }
        chmod(h.directory.path, 0o755)
        let asNobody = { (path: String) in
            try self.h.run("/usr/bin/setpriv", ["--reuid=65534", "--regid=65534", "--clear-groups", "/bin/cat", path])
        }
        XCTAssertEqual(try h.mount([h.origin.url("/b.txt")]).status, 0)
        XCTAssertNotEqual(try asNobody(h.path("b.txt")).status, 0, "without allow_other only the owner gets in")
        let pid = try XCTUnwrap(h.daemonPID())
        XCTAssertEqual(try h.run("/bin/fusermount3", ["-u", h.mountpoint]).status, 0)
        h.waitForMountTable("unmounted") { !Mountpoint.isMounted(h.mountpoint) }
        h.waitForExit(pid, "the daemon is gone")

        XCTAssertEqual(try h.mount([h.origin.url("/b.txt"), "-o", "allow_other"]).status, 0)
        let r = try asNobody(h.path("b.txt"))
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout, "bee\n")
    }

    func testTheMountHelperTranslatesFstabOptions() throws {
        let helper = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("mount-helpers/mount.httpcachefs").path
        let list = h.directory.appending("media.list")
        try "movies/a.bin = \(h.origin.url("/a.bin"))\n".write(toFile: list, atomically: true, encoding: .utf8)
        let options = "rw,noauto,_netdev,nofail,x-systemd.automount,cache_dir=\(h.cacheDirectory),log_file=\(h.logFile),no_proxy,by_url,allow_other"
        let r = try h.run(helper, [list, h.mountpoint, "-o", options], environment: ["HTTPCACHEFS": h.binary])
        XCTAssertEqual(r.status, 0, r.stderr)
        let entry = try XCTUnwrap(Mountpoint.entry(at: h.mountpoint))
        XCTAssertEqual(entry.fsType, "fuse.httpcachefs")
        XCTAssertEqual(entry.source, list, "the fstab source is the file system's name, so mount -a skips it once mounted")
        let mountOptions = (try? String(contentsOfFile: "/proc/self/mountinfo", encoding: .utf8))?
            .split(separator: "\n").first { $0.contains(" \(h.mountpoint) ") }.map(String.init) ?? ""
        XCTAssertTrue(mountOptions.contains("allow_other"), mountOptions)
        XCTAssertTrue(try POSIX.readAll(h.path("movies/a.bin")) == OriginServer.generatedBytes(seed: 31, offset: 0, count: 3 << 20))
        XCTAssertEqual(try POSIX.readAll(h.path(".url/" + h.origin.url("/b.txt").replacingOccurrences(of: "://", with: "/"))),
                       Array("bee\n".utf8), "by_url became --by-url")

        let pid = try XCTUnwrap(h.daemonPID())
        XCTAssertEqual(try h.run("/bin/umount", [h.mountpoint]).status, 0)
        h.waitForExit(pid, "the daemon exits after umount")
    }
}

/// A source for opening a cache read-only in a test: it never fetches.
final class NoSource: RangeSource {
    func start(_ request: FetchRequest, sink: FetchSink) -> FetchHandle {
        sink.fetchDidFinish(.network(url: request.url, message: "offline"))
        return NoHandle()
    }

    struct NoHandle: FetchHandle { func cancel() {} }
}

extension MountDaemonTests {
    /// A daemon without a proxy has no status document, yet `status` names its mount (from its
    /// command line, checked against its mount table).
    func testStatusNamesTheMountOfADaemonWithoutAProxy() throws {
        XCTAssertEqual(try h.mount([h.origin.url("/b.txt")]).status, 0)
        let pid = try XCTUnwrap(h.daemonPID())
        let json = try h.run(h.binary, ["status", "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        let daemons = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]], json.stdout)
        let mine = try XCTUnwrap(daemons.first { ($0["pid"] as? Int) == Int(pid) }, json.stdout)
        XCTAssertEqual(mine["mounts"] as? [String], [h.mountpoint], json.stdout)
        XCTAssertNil(mine["status"])
        let text = try h.run(h.binary, ["status"])
        XCTAssertTrue(text.stdout.contains("mount:  \(h.mountpoint)"), text.stdout)
    }
}
