import Foundation
import FuseMount
import Glibc
import TestSupport
import XCTest

/// Several mountpoints on one cache: a `mount` whose cache a running daemon holds adds its
/// mountpoint to that daemon (one process, one engine and cap, one proxy), each mountpoint with
/// its own tree; the daemon ends with its last mountpoint. Real mounts of the real binary.
final class SeveralMountsSharedCacheTests: XCTestCase {
    private var h: DaemonHarness!
    private var second: String { h.directory.appending("tv") }

    override func setUpWithError() throws {
        h = try DaemonHarness()
        try FileManager.default.createDirectory(atPath: second, withIntermediateDirectories: true)
        h.origin.setGeneratedFile("/movies/film.mkv", length: 5 << 20, seed: 81)
        h.origin.setGeneratedFile("/tv/episode.mkv", length: 3 << 20, seed: 82)
    }

    /// Leaves nothing behind: a process of the second mountpoint (a daemon of its own, had a
    /// test failed, or an attached command), found by its command line, then the mounts.
    override func tearDown() {
        guard h != nil else { return }
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(entry), pid != getpid(),
                  let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { continue }
            let args = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            if args.contains("--foreground") && args.contains(second) { kill(pid, SIGKILL) }
        }
        if Mountpoint.isMounted(second) { _ = umount2(second, Int32(MNT_DETACH)) }
        h.cleanup()
    }

    /// `mount` of the second mountpoint on the same cache, as a user types it.
    private func mountSecond(_ extra: [String] = []) throws -> DaemonHarness.Outcome {
        try h.run(h.binary, ["mount", second, h.origin.url("/tv/episode.mkv"), "--cache-dir", h.cacheDirectory,
                             "--log-file", h.logFile, "--proxy-port", "0"] + extra)
    }

    private func mountFirst() throws -> pid_t {
        let first = try h.mount([h.origin.url("/movies/film.mkv"), "--proxy-port", "0", "--cache-size", "64M"], proxy: true)
        XCTAssertEqual(first.status, 0, first.stderr + h.log)
        return try XCTUnwrap(h.daemonPID())
    }

    /// The daemons `status --json` reports for our cache.
    private func statusOfOurCache() throws -> [[String: Any]] {
        let json = try h.run(h.binary, ["status", "--json"])
        XCTAssertEqual(json.status, 0, json.stderr)
        let all = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.stdout.utf8)) as? [[String: Any]], json.stdout)
        return all.filter { ($0["cacheDirectory"] as? String) == h.cacheDirectory }
    }

    func testASecondMountOnTheSameCacheJoinsTheRunningDaemonAndEachUnmountLetsOneGo() throws {
        let pid = try mountFirst()
        let r = try mountSecond()
        XCTAssertEqual(r.status, 0, r.stderr + h.log)
        XCTAssertTrue(r.stderr.contains("mounted \(second) on the daemon (pid \(pid))"), r.stderr)
        XCTAssertEqual(Mountpoint.entry(at: second)?.fsType, "fuse.httpcachefs")

        // Each tree is its own; both are byte-exact.
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["film.mkv"])
        XCTAssertEqual(try POSIX.list(second), ["episode.mkv"])
        XCTAssertTrue(try POSIX.readAll(h.path("film.mkv")) == OriginServer.generatedBytes(seed: 81, offset: 0, count: 5 << 20))
        XCTAssertTrue(try POSIX.readAll(second + "/episode.mkv") == OriginServer.generatedBytes(seed: 82, offset: 0, count: 3 << 20))

        // One daemon, one cap (the first mount's 64M), one status document listing both mounts.
        let daemons = try statusOfOurCache()
        XCTAssertEqual(daemons.map { $0["pid"] as? Int }, [Int(pid)], "one process serves the cache")
        let status = try XCTUnwrap(daemons.first?["status"] as? [String: Any])
        let capacity = (status["cache"] as? [String: Any])?["capacityBytes"] as? Int
        XCTAssertEqual(capacity, 64 << 20)
        let mounts = ((status["doors"] as? [[String: Any]]) ?? []).compactMap { $0["mountpoint"] as? String }
        XCTAssertEqual(Set(mounts), [h.mountpoint, second], "\(status["doors"] ?? "")")
        // Each mount says what it serves, for the page's view by mountpoint.
        let serves = Dictionary(((status["doors"] as? [[String: Any]]) ?? []).compactMap { d in
            (d["mountpoint"] as? String).map { ($0, d["urls"] as? [String] ?? []) }
        }, uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(serves[h.mountpoint], [h.origin.url("/movies/")])
        XCTAssertEqual(serves[second], [h.origin.url("/tv/")])

        // Unmounting the first keeps the second (and the daemon); the last one ends it.
        let unmount = try h.run(h.binary, ["unmount", h.mountpoint])
        XCTAssertEqual(unmount.status, 0, unmount.stderr)
        h.waitForLog("unmounted \(h.mountpoint); 1 mountpoint still served")
        XCTAssertTrue(h.isAlive(pid), h.log)
        XCTAssertTrue(try POSIX.readAll(second + "/episode.mkv") == OriginServer.generatedBytes(seed: 82, offset: 0, count: 3 << 20))

        XCTAssertEqual(try h.run("/bin/fusermount3", ["-u", second]).status, 0, "unmounted from outside")
        h.waitForExit(pid, "the daemon ends with its last mountpoint")
        XCTAssertTrue(h.log.contains("unmounted \(second): it was the last mountpoint, the daemon ends"), h.log)
    }

    /// `url PATH` and `refresh PATH` act on the tree of the mountpoint PATH is in, even where
    /// both trees have a file of the same name.
    func testUrlAndRefreshOfAPathUseTheTreeOfItsOwnMountpoint() throws {
        let first = try h.mount(["a.mkv=" + h.origin.url("/movies/film.mkv"), "--proxy-port", "0"], proxy: true)
        XCTAssertEqual(first.status, 0, first.stderr + h.log)
        let list = h.directory.appending("tv.list")
        try "a.mkv = \(h.origin.url("/tv/episode.mkv"))\n".write(toFile: list, atomically: true, encoding: .utf8)
        let r = try h.run(h.binary, ["mount", second, "--url-list", list, "--cache-dir", h.cacheDirectory,
                                     "--log-file", h.logFile, "--proxy-port", "0"])
        XCTAssertEqual(r.status, 0, r.stderr + h.log)

        for (mountpoint, seed) in [(h.mountpoint, UInt64(81)), (second, 82)] {
            let url = try h.run(h.binary, ["url", mountpoint + "/a.mkv"])
            XCTAssertEqual(url.status, 0, url.stderr)
            let c = try XCTUnwrap(URLComponents(string: url.stdout.trimmingCharacters(in: .whitespacesAndNewlines)), url.stdout)
            let response = try RawHTTP.request(port: try XCTUnwrap(c.port), path: c.percentEncodedPath, headers: [("Range", "bytes=0-99")], timeout: 30)
            XCTAssertEqual(response.status, 206)
            XCTAssertEqual(response.body, OriginServer.generatedBytes(seed: seed, offset: 0, count: 100), "url \(mountpoint)/a.mkv")
        }

        try "a.mkv = \(h.origin.url("/tv/episode.mkv"))\nb.mkv = \(h.origin.url("/tv/episode.mkv"))\n"
            .write(toFile: list, atomically: true, encoding: .utf8)
        let refresh = try h.run(h.binary, ["refresh", second])
        XCTAssertEqual(refresh.status, 0, refresh.stderr)
        XCTAssertEqual(try POSIX.list(second).sorted(), ["a.mkv", "b.mkv"], refresh.stdout)
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["a.mkv"])
    }

    /// Two fstab lines naming one cache_dir: the second helper's mount joins the first's daemon;
    /// `umount` of either lets only that one go.
    func testTwoFstabMountsOfOneCacheShareTheDaemon() throws {
        let helper = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("mount-helpers/mount.httpcachefs").path
        let options = "_netdev,nofail,cache_dir=\(h.cacheDirectory),log_file=\(h.logFile),proxy_port=0"
        for (source, mountpoint) in [(h.origin.url("/movies/film.mkv"), h.mountpoint), (h.origin.url("/tv/episode.mkv"), second)] {
            let r = try h.run(helper, [source, mountpoint, "-o", options], environment: ["HTTPCACHEFS": h.binary])
            XCTAssertEqual(r.status, 0, r.stderr + h.log)
        }
        let pid = try XCTUnwrap(h.daemonPID())
        XCTAssertEqual(try statusOfOurCache().map { $0["pid"] as? Int }, [Int(pid)])
        XCTAssertTrue(try POSIX.readAll(second + "/episode.mkv") == OriginServer.generatedBytes(seed: 82, offset: 0, count: 3 << 20))

        XCTAssertEqual(try h.run("/bin/umount", [second]).status, 0)
        h.waitForLog("unmounted \(second); 1 mountpoint still served")
        XCTAssertTrue(h.isAlive(pid))
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["film.mkv"])
        XCTAssertEqual(try h.run("/bin/umount", [h.mountpoint]).status, 0)
        h.waitForExit(pid, "the daemon ends with its last mountpoint")
    }

    /// Mounts of one cache started together (fstab at boot): whichever daemon loses the race for
    /// the cache's lock, its mount joins the winner's; both succeed, one daemon serves both.
    func testTwoMountsOfOneCacheStartedTogetherEndUpOnOneDaemon() throws {
        let outputs = (0..<2).map { h.directory.appending("together-\($0).err") }
        let commands = [(h.mountpoint, h.origin.url("/movies/film.mkv")), (second, h.origin.url("/tv/episode.mkv"))]
        let pids = try zip(commands, outputs).map { command, err in
            try Subprocess.spawn(h.binary, ["mount", command.0, command.1, "--cache-dir", h.cacheDirectory,
                                            "--log-file", h.logFile, "--proxy-port", "0"], stderr: err)
        }
        for (pid, err) in zip(pids, outputs) {
            XCTAssertEqual(Subprocess.wait(pid, timeout: 120), 0, ((try? String(contentsOfFile: err, encoding: .utf8)) ?? "") + h.log)
        }
        XCTAssertEqual(try statusOfOurCache().count, 1, "one daemon serves the cache")
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["film.mkv"])
        XCTAssertEqual(try POSIX.list(second), ["episode.mkv"])
    }

    func testAMountAskingForAnotherCacheSizeIsRefusedInOneLine() throws {
        let pid = try mountFirst()
        let r = try mountSecond(["--cache-size", "128M"])
        XCTAssertNotEqual(r.status, 0)
        let lines = r.stderr.split(separator: "\n")
        XCTAssertEqual(lines.count, 1, r.stderr)
        XCTAssertTrue(r.stderr.contains("(pid \(pid)) serving cache \(h.cacheDirectory) runs with --cache-size 64"), r.stderr)
        XCTAssertTrue(r.stderr.contains("this mount asks for --cache-size 128"), r.stderr)
        XCTAssertTrue(r.stderr.contains("give this mount its own --cache-dir"), r.stderr)
        XCTAssertFalse(Mountpoint.isMounted(second))
        XCTAssertTrue(h.isAlive(pid))

        // The proxy is the daemon's too; a secret is named, never shown.
        let port = try h.run(h.binary, ["mount", second, h.origin.url("/tv/episode.mkv"), "--cache-dir", h.cacheDirectory,
                                        "--log-file", h.logFile, "--proxy-port", "8719"])
        XCTAssertEqual(port.stderr.split(separator: "\n").count, 1, port.stderr)
        XCTAssertTrue(port.stderr.contains("runs with --proxy-port 0; this mount asks for --proxy-port 8719: drop --proxy-port"), port.stderr)
        let token = try mountSecond(["--token", "s3cret-value"])
        XCTAssertNotEqual(token.status, 0)
        XCTAssertTrue(token.stderr.contains("asks for another --token"), token.stderr)
        XCTAssertFalse(token.stderr.contains("s3cret-value") || h.log.contains("s3cret-value"), token.stderr)
        XCTAssertFalse(Mountpoint.isMounted(second))

        // The same value, said again, is no conflict.
        let same = try mountSecond(["--cache-size", "64M"])
        XCTAssertEqual(same.status, 0, same.stderr + h.log)
    }

    /// Issue 50: the refusal names where the mount's value came from: a config file's line is
    /// not "drop --cache-size" (the user typed no such flag).
    func testARefusedValueFromTheConfigFileNamesItsLine() throws {
        let pid = try mountFirst()
        let config = h.directory.appending("joining.conf")
        try "# settings\ncache-size = 128M\n".write(toFile: config, atomically: true, encoding: .utf8)
        let r = try mountSecond(["--config", config])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertEqual(r.stderr.split(separator: "\n").count, 1, r.stderr)
        XCTAssertTrue(r.stderr.contains("this mount asks for --cache-size 128"), r.stderr)
        XCTAssertTrue(r.stderr.contains("drop 'cache-size' at \(config):2 in the config file (or give the same value)"), r.stderr)
        XCTAssertFalse(r.stderr.contains("drop --cache-size"), r.stderr)
        XCTAssertFalse(Mountpoint.isMounted(second))
        XCTAssertTrue(h.isAlive(pid))
    }

    func testADaemonWithoutAProxyTakesNoMoreMountsAndSaysWhatToDo() throws {
        XCTAssertEqual(try h.mount([h.origin.url("/movies/film.mkv")]).status, 0, h.log)   // --no-proxy
        let pid = try XCTUnwrap(h.daemonPID())
        let r = try mountSecond()
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr.split(separator: "\n").count, 1, r.stderr)
        XCTAssertTrue(r.stderr.contains("is in use by process \(pid), a mount daemon run with --no-proxy"), r.stderr)
        XCTAssertTrue(r.stderr.contains("restart it without --no-proxy"), r.stderr)
        XCTAssertFalse(Mountpoint.isMounted(second))
    }

    func testAMountpointAlreadyMountedIsRefusedBeforeTheDaemonIsAsked() throws {
        _ = try mountFirst()
        let r = try h.run(h.binary, ["mount", h.mountpoint, h.origin.url("/tv/episode.mkv"), "--cache-dir", h.cacheDirectory])
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stderr.split(separator: "\n").count, 1, r.stderr)
        XCTAssertTrue(r.stderr.contains("busy"), r.stderr)
        XCTAssertEqual(try POSIX.list(h.mountpoint), ["film.mkv"], "the first mount is untouched")
    }

    /// A systemd instance (`mount --foreground`) on a running daemon's cache stays attached: it
    /// ends when its mountpoint goes, and SIGTERM (systemctl stop) unmounts only its own.
    func testAnAttachedForegroundMountEndsWithItsMountpointAndUnmountsItOnSIGTERM() throws {
        let pid = try mountFirst()
        let err = h.directory.appending("attached.err")
        let attached = try Subprocess.spawn(h.binary, ["mount", "--foreground", second, h.origin.url("/tv/episode.mkv"),
                                                        "--cache-dir", h.cacheDirectory, "--log-file", h.logFile, "--proxy-port", "0"],
                                            stderr: err)
        h.waitForMountTable("the second mountpoint is mounted") { Mountpoint.entry(at: second)?.fsType == "fuse.httpcachefs" }
        XCTAssertTrue(try POSIX.readAll(second + "/episode.mkv") == OriginServer.generatedBytes(seed: 82, offset: 0, count: 3 << 20))
        XCTAssertNil(Subprocess.wait(attached, timeout: 0), "the attached command stays while its mountpoint is mounted")

        kill(attached, SIGTERM)
        XCTAssertEqual(Subprocess.wait(attached, timeout: 30), 0, (try? String(contentsOfFile: err, encoding: .utf8)) ?? "")
        XCTAssertFalse(Mountpoint.isMounted(second))
        XCTAssertTrue(Mountpoint.isMounted(h.mountpoint), "only the attached command's mountpoint goes")
        XCTAssertTrue(h.isAlive(pid))
    }
}
