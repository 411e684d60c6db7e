import Foundation
import Glibc
import TestSupport
import XCTest

/// Every front door of a daemon run by a normal user, not root: the mount, a byte-exact read,
/// `httpcachefs url` and its proxy URL, the status page, `status.json`, `/metrics`, `preload`,
/// `refresh` and `unmount`, against the loopback origin of this process.
///
/// Everything else runs as root, which hid a proxy that reset every connection of a normal user
/// (a socket option only root may set was asked for). Here the daemon and every command run as
/// `httpcachefs-test` with its own HOME, so its default cache (`~/.cache/httpcachefs`) and log
/// (`~/.local/state/httpcachefs/`) are the ones a user gets. Proxy URLs are only ever taken from
/// what `httpcachefs url` prints, never built here.
final class UnprivilegedUserTests: XCTestCase {
    var origin: OriginServer!
    /// The test's directory under /tmp (not $TMPDIR: the user must reach it), the user's.
    var root: String?
    var user: UnprivilegedUser!
    /// The mode of /dev/fuse to put back, when the set-up had to open it up.
    var fuseModeToRestore: mode_t?
    var mountpoint: String { user.root + "/mnt" }

    override func setUpWithError() throws {
        let binary = try BinaryUnderTest.locate()
        var template = Array("/tmp/httpcachefs-user.XXXXXX".utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ mkdtemp($0.baseAddress!) }) else {
            throw UnprivilegedUser.Failure("mkdtemp under /tmp: \(String(cString: strerror(errno)))")
        }
        root = String(cString: made)
        user = try UnprivilegedUser.prepare(binaryUnderTest: binary, root: root!)
        // Debian's udev makes /dev/fuse 0666 (fusermount3, setuid root, does the mounting); a
        // container's device node may be 0600. Give it Debian's mode for the test, and say so.
        if try !user.canOpenFuseDevice() {
            var st = stat()
            if stat("/dev/fuse", &st) == 0 { fuseModeToRestore = st.st_mode & 0o7777 }
            print("⚠️  /dev/fuse is not open to \(UnprivilegedUser.name); setting mode 0666 (Debian's) for this test")
            chmod("/dev/fuse", 0o666)
        }
        origin = try OriginServer()
        origin.setAutoindex("/lib/", ["movie.bin", "extra.txt", "sub/"])
        origin.setAutoindex("/lib/sub/", ["s1.txt"])
        origin.setGeneratedFile("/lib/movie.bin", length: 5 << 20 + 4321, seed: 39)
        origin.setFile("/lib/extra.txt", data: Array("extra\n".utf8))
        origin.setFile("/lib/sub/s1.txt", data: Array("s1\n".utf8))
        origin.setFile("/lib/sub/s2.txt", data: Array("s2\n".utf8))
        origin.setGeneratedFile("/lib/later.bin", length: 3 << 20, seed: 40)
    }

    override func tearDown() {
        if let user {
            // Every process of this test (its directory is in their command lines), by pid.
            for pid in processes(mentioning: user.root) {
                kill(pid, SIGKILL)
                var status: Int32 = 0
                _ = waitpid(pid, &status, 0)   // reaps what `start` spawned; others are not ours (ECHILD)
            }
            if isMounted(mountpoint) { _ = umount2(mountpoint, Int32(MNT_DETACH)) }
        }
        if let mode = fuseModeToRestore { chmod("/dev/fuse", mode) }
        origin?.stop()
        if let root { try? FileManager.default.removeItem(atPath: root) }
    }

    func testADaemonOfANormalUserServesEveryFrontDoor() throws {
        // mount: in the background, with the user's default cache and log.
        let mount = try user.httpcachefs(["mount", mountpoint, "--index", origin.url("/lib/"), "--index-ttl", "1h",
                                          "--proxy-port", "0"])
        XCTAssertEqual(mount.status, 0, "mount as \(UnprivilegedUser.name): \(mount.stderr)")
        guard mount.status == 0 else { return }
        XCTAssertTrue(isMounted(mountpoint), "not mounted after the command returned")
        let log = user.home + "/.local/state/httpcachefs/" + mountpoint.split(separator: "/").joined(separator: "-") + ".log"
        XCTAssertTrue(FileManager.default.fileExists(atPath: log), "the daemon logs to \(log)")
        XCTAssertTrue(FileManager.default.fileExists(atPath: user.home + "/.cache/httpcachefs/index.sqlite"),
                      "the user's default cache is ~/.cache/httpcachefs")

        // A byte-exact read through the mount (only the user may look in: no allow_other).
        let movie = OriginServer.generatedBytes(seed: 39, offset: 0, count: 5 << 20 + 4321)
        let cat = try user.run("/bin/cat", [mountpoint + "/movie.bin"])
        XCTAssertEqual(cat.status, 0, cat.stderr)
        XCTAssertTrue(cat.stdout == movie, "the mount served \(cat.stdout.count) bytes that differ from the origin's")

        // url: the proxy URL of the file, taken as printed, and fetched.
        let url = try user.httpcachefs(["url", origin.url("/lib/movie.bin")])
        XCTAssertEqual(url.status, 0, "url: \(url.stderr)")
        let proxyURL = try XCTUnwrap(URLComponents(string: url.text.trimmingCharacters(in: .whitespacesAndNewlines)), url.text)
        let port = try XCTUnwrap(proxyURL.port, url.text)
        let target = proxyURL.percentEncodedPath + (proxyURL.percentEncodedQuery.map { "?" + $0 } ?? "")
        origin.resetLog()
        let ranged = try RawHTTP.request(port: port, path: target, headers: [("Range", "bytes=1000-1999")])
        XCTAssertEqual(ranged.status, 206, "\(url.text): \(ranged.status)")
        XCTAssertTrue(ranged.body == Array(movie[1000..<2000]), "the proxy served other bytes")
        let whole = try RawHTTP.request(port: port, path: target)
        XCTAssertEqual(whole.status, 200)
        XCTAssertTrue(whole.body == movie, "the proxy's whole file differs from the origin's")
        XCTAssertEqual(origin.bytesServed(path: "/lib/movie.bin"), 0, "bytes read through the mount are hits for the proxy")

        // The status page, status.json and /metrics on the same port: owner-only, so without
        // the key refused even to the daemon's own user; the page at the address `status`
        // prints (it carries the key), the document and the metrics with that key.
        for path in ["/.httpcachefs/", "/.httpcachefs/status.json", "/metrics"] {
            let refused = try user.run("/usr/bin/curl", ["--noproxy", "*", "-s", "-o", "/dev/null", "-w", "%{http_code}", "http://127.0.0.1:\(port)\(path)"])
            XCTAssertEqual(refused.text, "403", "\(path) without the key, as the owner's user")
        }
        let status = try user.httpcachefs(["status"])
        XCTAssertEqual(status.status, 0, status.stderr)
        let address = try XCTUnwrap(status.text.split(whereSeparator: { $0 == " " || $0 == "\n" })
            .first { $0.hasPrefix("http://") && $0.contains("/.httpcachefs/?key=") }, status.text)
        let pageURL = try XCTUnwrap(URLComponents(string: String(address)))
        let key = try XCTUnwrap(pageURL.queryItems?.first { $0.name == "key" }?.value)
        XCTAssertEqual(pageURL.port, port)
        let page = try RawHTTP.request(port: port, path: pageURL.percentEncodedPath + "?" + (pageURL.percentEncodedQuery ?? ""))
        XCTAssertEqual(page.status, 200)
        XCTAssertTrue(String(decoding: page.body, as: UTF8.self).contains("<html"), "the status page is HTML")
        let document = try RawHTTP.request(port: port, path: "/.httpcachefs/status.json", headers: [("X-Httpcachefs-Control", key)])
        XCTAssertEqual(document.status, 200)
        XCTAssertTrue(String(decoding: document.body, as: UTF8.self).contains("movie.bin"), "status.json lists the cached file")
        let metrics = try RawHTTP.request(port: port, path: "/metrics?key=" + key)
        XCTAssertEqual(metrics.status, 200)
        XCTAssertTrue(String(decoding: metrics.body, as: UTF8.self).contains("httpcachefs_"), "Prometheus text")

        // Root's `status` lists this user's daemon from what its proxy publishes (asked with the
        // key of the user's own runtime file), and prints no key of it.
        let rootStatus = try UnprivilegedUser.exec(try BinaryUnderTest.locate(), ["status"])
        XCTAssertEqual(rootStatus.status, 0, rootStatus.stderr)
        XCTAssertTrue(rootStatus.text.contains(user.home + "/.cache/httpcachefs"), rootStatus.text)
        XCTAssertTrue(rootStatus.text.contains("mount:      \(mountpoint)") || rootStatus.text.contains(mountpoint), rootStatus.text)
        XCTAssertFalse(rootStatus.text.contains(key), "root's listing prints another user's key")

        // preload, through the running daemon: afterwards the file is read with no origin bytes.
        let preload = try user.httpcachefs(["preload", origin.url("/lib/later.bin")])
        XCTAssertEqual(preload.status, 0, "preload: \(preload.stderr)")
        XCTAssertTrue((preload.text + preload.stderr).contains("through the running daemon"), preload.text + preload.stderr)
        origin.resetLog()
        let later = try user.httpcachefs(["cat", origin.url("/lib/later.bin")])
        XCTAssertEqual(later.status, 0, later.stderr)
        XCTAssertTrue(later.stdout == OriginServer.generatedBytes(seed: 40, offset: 0, count: 3 << 20))
        XCTAssertEqual(origin.bytesServed(path: "/lib/later.bin"), 0, "preload left bytes uncached")

        // refresh: a file added at the origin shows up in the mount now.
        origin.setAutoindex("/lib/sub/", ["s1.txt", "s2.txt"])
        let refresh = try user.httpcachefs(["refresh", mountpoint + "/sub"])
        XCTAssertEqual(refresh.status, 0, "refresh: \(refresh.stderr)")
        let ls = try user.run("/bin/ls", [mountpoint + "/sub"])
        XCTAssertEqual(ls.text.split(separator: "\n"), ["s1.txt", "s2.txt"], ls.stderr)

        // unmount: the mount goes, and so does the daemon.
        let pid = daemonPID()
        let unmount = try user.httpcachefs(["unmount", mountpoint])
        XCTAssertEqual(unmount.status, 0, "unmount: \(unmount.stderr)")
        XCTAssertFalse(isMounted(mountpoint))
        if let pid {
            XCTAssertTrue(ProcessExit.wait(pid, timeout: 30), "the daemon \(pid) outlived its mount")
        }
    }

    /// Commands without --cache-dir use the one running daemon's cache (here not the default
    /// one); `url` takes a path inside the mount, `--proxy-port` and URLs as people write them;
    /// both spellings of a name are one cache entry; with two daemons, commands ask which.
    /// As the test user, so no daemon of another test (all root) is counted.
    func testCommandsFindTheirDaemonAndTakeURLsAsPeopleWriteThem() throws {
        origin.setGeneratedFile("/lib/Zero Hour (1995).mkv", length: 2 << 20 + 17, seed: 41)
        origin.setGeneratedFile("/lib/Alpha Centauri (1971).mp4", length: 1 << 20, seed: 42)
        origin.setAutoindex("/lib/", ["movie.bin", "Zero%20Hour%20(1995).mkv", "sub/"])
        let cache = user.home + "/media-cache"
        let mount = try user.httpcachefs(["mount", mountpoint, "--index", origin.url("/lib/"), "--cache-dir", cache,
                                          "--proxy-port", "0"])
        XCTAssertEqual(mount.status, 0, "mount: \(mount.stderr)")
        guard mount.status == 0 else { return }

        // A raw space and parentheses, without --cache-dir: the daemon's cache, a working link.
        let zero = OriginServer.generatedBytes(seed: 41, offset: 0, count: 2 << 20 + 17)
        let raw = try user.httpcachefs(["url", origin.url("/lib/Zero Hour (1995).mkv")])
        XCTAssertEqual(raw.status, 0, "url with a raw space: \(raw.stderr)")
        XCTAssertTrue(raw.text.hasSuffix("/Zero%20Hour%20(1995).mkv\n"), raw.text)
        XCTAssertTrue(try fetch(raw.text) == zero, "the proxy URL of a raw-space URL serves the file")

        // A path inside the mount: the same file, the same cache entry.
        let byPath = try user.httpcachefs(["url", mountpoint + "/Zero Hour (1995).mkv"])
        XCTAssertEqual(byPath.status, 0, "url PATH: \(byPath.stderr)")
        XCTAssertEqual(byPath.text, raw.text, "a mounted file's proxy URL is its URL's")
        let port = try XCTUnwrap(URLComponents(string: raw.text.trimmingCharacters(in: .whitespacesAndNewlines))?.port)
        let named = try user.httpcachefs(["url", "--proxy-port", String(port), origin.url("/lib/movie.bin")])
        XCTAssertEqual(named.status, 0, "url --proxy-port, as mount names it: \(named.stderr)")
        let outside = try user.httpcachefs(["url", user.home])
        XCTAssertEqual(outside.status, 1)
        XCTAssertTrue(outside.stderr.contains("neither an http(s) URL nor a path inside an httpcachefs mount"), outside.stderr)

        // Two spellings, one entry: preloaded as Python's quote writes it, read as typed.
        let encoded = origin.url("/lib/Alpha%20Centauri%20%281971%29.mp4")
        let preload = try user.httpcachefs(["preload", encoded])
        XCTAssertEqual(preload.status, 0, "preload: \(preload.stderr)")
        XCTAssertTrue(preload.text.contains("through the running daemon"), preload.text)
        XCTAssertFalse(FileManager.default.fileExists(atPath: user.home + "/.cache/httpcachefs/index.sqlite"),
                       "preload without --cache-dir filled the default cache, not the daemon's")
        origin.resetLog()
        let typed = try user.httpcachefs(["url", origin.url("/lib/Alpha Centauri (1971).mp4")])
        XCTAssertEqual(typed.status, 0, typed.stderr)
        XCTAssertTrue(try fetch(typed.text) == OriginServer.generatedBytes(seed: 42, offset: 0, count: 1 << 20))
        XCTAssertEqual(origin.requests.reduce(0) { $0 + $1.bodyBytes }, 0, "the typed spelling missed the preloaded entry")
        let ls = try user.httpcachefs(["cache", "ls"])
        XCTAssertEqual(ls.status, 0, ls.stderr)
        XCTAssertEqual(ls.text.split(separator: "\n").filter { $0.contains("Alpha") }.count, 1, ls.text)

        // A second daemon: commands name both and ask.
        _ = try user.start(["proxy", "--proxy-port", "0", "--cache-dir", user.home + "/second"])
        XCTAssertTrue(FileEvents.wait(in: user.home + "/second") { FileManager.default.fileExists(atPath: self.user.home + "/second/proxy.json") },
                      "the second proxy wrote its proxy.json")
        let which = try user.httpcachefs(["url", origin.url("/lib/movie.bin")])
        XCTAssertEqual(which.status, 64, which.stderr)
        XCTAssertTrue(which.stderr.contains("2 httpcachefs daemons of yours are running"), which.stderr)
        XCTAssertTrue(which.stderr.contains("cache \(cache), mounted on \(mountpoint)"), which.stderr)
        XCTAssertTrue(which.stderr.contains("--cache-dir"), which.stderr)
        XCTAssertEqual(which.stderr.split(separator: "\n").count, 1, which.stderr)
        let byPort = try user.httpcachefs(["url", "--proxy-port", String(port), origin.url("/lib/movie.bin")])
        XCTAssertEqual(byPort.status, 0, "a port names the daemon: \(byPort.stderr)")
        XCTAssertEqual(byPort.stderr, "", "its own cache, no warning about another")
    }

    /// A mount written as an rclone user writes it: rclone's names for the same settings work,
    /// --file-perms/--dir-perms become the modes (write bits dropped: read-only).
    func testAMountWithRclonesNames() throws {
        let mount = try user.httpcachefs(["mount", mountpoint, "--index", origin.url("/lib/"), "--no-proxy",
                                          "--daemon", "--read-only", "--dir-cache-time", "5m0s", "--vfs-cache-max-size", "1G",
                                          "--buffer-size", "16M", "--vfs-cache-max-age", "30d",
                                          "--file-perms", "0640", "--dir-perms", "0750", "--exclude", "*.txt"])
        XCTAssertEqual(mount.status, 0, "mount with rclone's names: \(mount.stderr)")
        guard mount.status == 0 else { return }
        let modes = try user.run("/usr/bin/stat", ["-c", "%a %n", mountpoint + "/movie.bin", mountpoint + "/sub"])
        XCTAssertEqual(modes.text, "440 \(mountpoint)/movie.bin\n550 \(mountpoint)/sub\n", modes.stderr)
        // --exclude, as rclone's filter reads it: every .txt of every listing left out.
        let ls = try user.run("/bin/ls", [mountpoint, mountpoint + "/sub"])
        XCTAssertEqual(ls.text, "\(mountpoint):\nmovie.bin\nsub\n\n\(mountpoint)/sub:\n", ls.stderr)
        XCTAssertEqual(try user.httpcachefs(["unmount", mountpoint]).status, 0)
    }

    /// rclone's remote control of a normal user's daemon, driven by Debian's `rclone rc` run as
    /// that user, logging in with the control key of its own 0600 proxy.json.
    func testRclonesRemoteControl() throws {
        guard let rclone = ExternalTool.find("rclone") else {
            print("⚠️  SKIPPING testRclonesRemoteControl: rclone is not installed (apt-get install -y rclone)")
            throw XCTSkip("rclone is not installed")
        }
        let port = try LoopbackPort.free()
        let mount = try user.httpcachefs(["mount", mountpoint, "--index", origin.url("/lib/"), "--proxy-port", "0",
                                          "--vfs-cache-mode", "full", "-v", "--rc", "--rc-addr", "localhost:\(port)"])
        XCTAssertEqual(mount.status, 0, "mount --rc as \(UnprivilegedUser.name): \(mount.stderr)")
        guard mount.status == 0 else { return }
        let runtime = user.home + "/.cache/httpcachefs/proxy.json"
        var st = stat()
        XCTAssertEqual(stat(runtime, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o600, "only its owner reads the key")
        let key = try XCTUnwrap((try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: runtime))) as? [String: Any])?["controlKey"] as? String)
        XCTAssertEqual(try user.run("/bin/ls", [mountpoint + "/sub"]).text, "s1.txt\n")
        origin.setAutoindex("/lib/sub/", ["s1.txt", "s2.txt"])
        let base = ["rc", "--config", user.home + "/rclone.conf", "--url", "http://127.0.0.1:\(port)/"]
        let refresh = try user.run(rclone, base + ["--user", "httpcachefs", "--pass", key, "vfs/refresh", "dir=sub", "recursive=true"])
        XCTAssertEqual(refresh.status, 0, refresh.stderr)
        XCTAssertTrue(refresh.text.contains("\"sub\": \"OK\""), refresh.text)
        XCTAssertEqual(try user.run("/bin/ls", [mountpoint + "/sub"]).text, "s1.txt\ns2.txt\n")
        let anonymous = try user.run(rclone, base + ["rc/noop"])
        XCTAssertNotEqual(anonymous.status, 0, "no login, no call")
        // rclone 1.60 prints the status (401), 1.65 and later the error alone.
        XCTAssertTrue(anonymous.stderr.contains("401") || anonymous.stderr.contains("log in: --user and --pass"), anonymous.stderr)
        XCTAssertEqual(try user.httpcachefs(["unmount", mountpoint]).status, 0)
    }

    /// What a normal user meets, each one line with the fix: a cache directory of root's, a
    /// second mount on a mountpoint, /dev/fuse closed to them.
    func testMessagesANormalUserMeetsSayWhatToDo() throws {
        let rootsCache = user.root + "/roots-cache"
        try FileManager.default.createDirectory(atPath: rootsCache, withIntermediateDirectories: true)   // root's, 0755
        let cat = try user.httpcachefs(["cat", origin.url("/lib/extra.txt"), "--cache-dir", rootsCache])
        XCTAssertEqual(cat.status, 1)
        XCTAssertTrue(cat.stderr.contains("cache directory \(rootsCache) exists but is not writable by you (owner root, mode 0755)"), cat.stderr)
        XCTAssertTrue(cat.stderr.contains("--cache-dir"), cat.stderr)
        XCTAssertEqual(cat.stderr.split(separator: "\n").count, 1, cat.stderr)

        XCTAssertEqual(try user.httpcachefs(["mount", mountpoint, origin.url("/lib/extra.txt"), "--no-proxy"]).status, 0)
        let twice = try user.httpcachefs(["mount", mountpoint, origin.url("/lib/extra.txt"), "--no-proxy"])
        XCTAssertNotEqual(twice.status, 0)
        XCTAssertTrue(twice.stderr.contains("unmount it first (httpcachefs unmount \(mountpoint))"), twice.stderr)
        XCTAssertEqual(try user.httpcachefs(["unmount", mountpoint]).status, 0)

        var st = stat()
        guard stat("/dev/fuse", &st) == 0 else { return }
        chmod("/dev/fuse", 0o600)
        defer { chmod("/dev/fuse", st.st_mode & 0o7777) }
        let closed = try user.httpcachefs(["mount", mountpoint, origin.url("/lib/extra.txt"), "--no-proxy"])
        XCTAssertNotEqual(closed.status, 0)
        XCTAssertTrue(closed.stderr.contains("/dev/fuse (mode 0600) cannot be opened by this user: as root, chmod 0666 /dev/fuse"), closed.stderr)
        XCTAssertEqual(closed.stderr.split(separator: "\n").count, 1, closed.stderr)
    }

    // MARK: helpers

    /// GET of a proxy URL as `url` printed it.
    func fetch(_ printed: String) throws -> [UInt8] {
        let c = try XCTUnwrap(URLComponents(string: printed.trimmingCharacters(in: .whitespacesAndNewlines)), printed)
        let response = try RawHTTP.request(port: try XCTUnwrap(c.port), path: c.percentEncodedPath + (c.percentEncodedQuery.map { "?" + $0 } ?? ""))
        XCTAssertEqual(response.status, 200, printed)
        return response.body
    }

    /// An nginx-style autoindex page for `names` (directories end in `/`).
    /// The daemon serving our mountpoint, by its command line (never by name).
    func daemonPID() -> pid_t? {
        processes(mentioning: mountpoint).first { pid in
            let data = FileManager.default.contents(atPath: "/proc/\(pid)/cmdline") ?? Data()
            return data.split(separator: 0).contains { String(decoding: $0, as: UTF8.self) == "--foreground" }
        }
    }

    /// Processes with an argument that contains `text` (this test's unique directory).
    func processes(mentioning text: String) -> [pid_t] {
        ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { entry in
            guard let pid = pid_t(entry), pid != getpid(),
                  let data = FileManager.default.contents(atPath: "/proc/\(entry)/cmdline") else { return nil }
            return data.split(separator: 0).contains { String(decoding: $0, as: UTF8.self).contains(text) } ? pid : nil
        }
    }
}
