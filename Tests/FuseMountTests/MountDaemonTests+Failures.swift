import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// A background mount that cannot start says why on the terminal, where the user looks, and
/// where the daemon's log is: never `ExitCode(rawValue: 1)`.
extension MountDaemonTests {
    /// A cache another mount daemon of the user holds is joined (SeveralMountsSharedCacheTests);
    /// one a `proxy` holds is not: the daemon fails on the cache's lock and says so.
    func testAMountOnACacheHeldByAProxyPrintsTheDaemonsReasonAndItsLog() throws {
        let holder = try Subprocess.spawn(h.binary, ["proxy", "--cache-dir", h.cacheDirectory, "--proxy-port", "0"])
        defer {
            kill(holder, SIGTERM)
            _ = Subprocess.wait(holder, timeout: 30)
        }
        h.waitForFiles(in: h.cacheDirectory, "the proxy holds the cache") { FileManager.default.fileExists(atPath: h.cacheDirectory + "/proxy.json") }
        let second = try secondMountpoint()
        defer { unmountQuietly(second) }
        // No --log-file: the default log, under $XDG_STATE_HOME, named after the mountpoint.
        let state = h.directory.appending("state")
        let r = try h.run(h.binary, ["mount", second, h.origin.url("/c.txt"), "--cache-dir", h.cacheDirectory, "--no-proxy"],
                          environment: ["XDG_STATE_HOME": state])
        XCTAssertEqual(r.status, 1)
        assertOneLine(r.stderr, contains: ["is in use by process \(holder)", "(daemon log: \(state)/httpcachefs/\(second.split(separator: "/").joined(separator: "-")).log)"])
        XCTAssertFalse(Mountpoint.isMounted(second))
    }

    func testAnOptionLibfuseRejectsIsNamedPlainly() throws {
        let r = try h.mount([h.origin.url("/b.txt"), "-o", "allow_other,bogus_opt"])
        XCTAssertEqual(r.status, 1)
        assertOneLine(r.stderr, contains: ["unknown mount option 'bogus_opt' (given with -o)", "(daemon log: \(h.logFile))"])
        XCTAssertFalse(r.stderr.contains("`;"), "libfuse's message arrives whole: \(r.stderr)")
        XCTAssertFalse(Mountpoint.isMounted(h.mountpoint))
        XCTAssertTrue(h.log.contains("unknown option(s): `-o bogus_opt'"), "the log has libfuse's own line: \(h.log)")
    }

    func testALogFileThatCannotBeOpenedIsNamed() throws {
        let log = h.directory.appending("no-such-dir/mount.log")
        let r = try h.run(h.binary, ["mount", h.mountpoint, h.origin.url("/b.txt"), "--cache-dir", h.cacheDirectory,
                                     "--log-file", log, "--no-proxy"])
        XCTAssertEqual(r.status, 1)
        assertOneLine(r.stderr, contains: ["cannot open the mount daemon's log file \(log): No such file or directory"])
        XCTAssertFalse(Mountpoint.isMounted(h.mountpoint))
    }

    func testABusyProxyPortFailsTheMountNamingThePortAndTheWayOut() throws {
        // A port some other program listens on (the test origin).
        let busy = h.origin.port
        var r = try h.mount([h.origin.url("/b.txt"), "--proxy-port", String(busy)], proxy: true)
        XCTAssertEqual(r.status, 1)
        assertOneLine(r.stderr, contains: ["cannot listen on 127.0.0.1:\(busy): the port is in use;", "--proxy-port N", "--no-proxy"])
        XCTAssertFalse(Mountpoint.isMounted(h.mountpoint), "nothing is mounted without its proxy")
        XCTAssertNil(h.daemonPID())

        // A port another mount's proxy has: the message says whose, and `url` tells the two apart.
        XCTAssertEqual(try h.mount([h.origin.url("/b.txt"), "--proxy-port", "0"], proxy: true).status, 0)
        let line = try XCTUnwrap(h.log.split(separator: "\n").last { $0.contains("proxy listening on http://127.0.0.1:") })
        let port = try XCTUnwrap(Int(line.split(separator: ":").last.map(String.init) ?? ""), String(line))
        let second = try secondMountpoint()
        defer { unmountQuietly(second) }
        let otherCache = h.directory.appending("cache2")
        r = try h.run(h.binary, ["mount", second, h.origin.url("/c.txt"), "--cache-dir", otherCache,
                                 "--log-file", h.logFile, "--proxy-port", String(port)])
        XCTAssertEqual(r.status, 1)
        assertOneLine(r.stderr, contains: ["in use by another httpcachefs proxy (cache \(h.cacheDirectory))"])

        let mine = try h.run(h.binary, ["url", h.origin.url("/b.txt"), "--cache-dir", h.cacheDirectory])
        XCTAssertEqual(mine.status, 0, mine.stderr)
        XCTAssertTrue(mine.stdout.hasPrefix("http://127.0.0.1:\(port)/s/"), "a signed proxy URL: \(mine.stdout)")
        let notMine = try h.run(h.binary, ["url", h.origin.url("/b.txt"), "--cache-dir", otherCache])
        XCTAssertEqual(notMine.status, 1)
        XCTAssertEqual(notMine.stdout, "", "never the URL of another cache's proxy")
    }

    // MARK: helpers

    private func secondMountpoint() throws -> String {
        let path = h.directory.appending("mnt2")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Leaves no mount behind at `path` if a test failed half-way: its daemon (found by its
    /// command line, never by name) is killed and the mount lazily removed.
    private func unmountQuietly(_ path: String) {
        for entry in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
            guard let pid = pid_t(entry), pid != getpid(),
                  let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { continue }
            let args = data.split(separator: 0).map { String(decoding: $0, as: UTF8.self) }
            if args.contains("--foreground") && args.contains(path) { kill(pid, SIGKILL) }
        }
        if Mountpoint.isMounted(path) { _ = umount2(path, Int32(MNT_DETACH)) }
    }

    private func assertOneLine(_ stderr: String, contains fragments: [String], file: StaticString = #filePath, line: UInt = #line) {
        let lines = stderr.split(separator: "\n").filter { !$0.isEmpty }
        XCTAssertEqual(lines.count, 1, "one line expected: \(stderr)", file: file, line: line)
        XCTAssertTrue(stderr.hasPrefix("httpcachefs: error: "), stderr, file: file, line: line)
        XCTAssertFalse(stderr.contains("ExitCode"), stderr, file: file, line: line)
        for fragment in fragments {
            XCTAssertTrue(stderr.contains(fragment), "'\(fragment)' not in: \(stderr)", file: file, line: line)
        }
    }
}
