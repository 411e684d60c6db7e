import Foundation
import Glibc
import TestSupport
import XCTest

/// Issue 46 item 1: root's `httpcachefs status` lists every user's daemons, and any local user
/// can make a process look like one (an fd held on a file named `lock` beside an `index.sqlite`).
/// Root's command must open nothing of such a cache by a path its user controls (no index
/// opened, migrated or given a reserve, no `credential.key` made), and a fake that answers one
/// byte at a time must not hold it.
///
/// The fake daemon is a Python process of `httpcachefs-test` (its command line names the test's
/// directory, so the tear-down ends it); the files it is handed point at files of root's.
extension UnprivilegedUserTests {
    /// The fake daemon: holds `DIR/lock` open; with `trickle`, also listens on loopback, writes a
    /// `proxy.json` naming its port, and answers every request one byte a second, for ever.
    /// Writes `DIR/ready` once set up.
    private static let fakeDaemon = """
        import json, os, socket, sys, time
        d, mode = sys.argv[1], sys.argv[2]
        lock = os.open(d + "/lock", os.O_RDONLY)
        if mode == "trickle":
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            s.listen(8)
            status = {"service": "httpcachefs", "version": "fake", "port": s.getsockname()[1], "bindAddress": "127.0.0.1",
                      "tokenRequired": False, "pid": os.getpid(), "controlKey": "fake-key"}
            with open(d + "/proxy.json.tmp", "w") as f:
                json.dump(status, f)
            os.rename(d + "/proxy.json.tmp", d + "/proxy.json")
        open(d + "/ready", "w").close()
        if mode == "trickle":
            while True:
                c, _ = s.accept()
                c.recv(65536)
                c.sendall(b"HTTP/1.0 200 OK\\r\\nContent-Type: application/json\\r\\n\\r\\n")
                try:
                    while True:
                        c.sendall(b" ")
                        time.sleep(1)
                except OSError:
                    c.close()
        else:
            time.sleep(3600)
        """

    /// A cache-looking directory of the user's, with `names` as symlinks to `targets`; its fake
    /// daemon started, ready.
    private func plantFake(_ name: String, mode: String, links: [String: String], files: [String]) throws -> (dir: String, pid: pid_t) {
        let dir = user.root + "/" + name
        XCTAssertEqual(mkdir(dir, 0o755), 0)
        XCTAssertEqual(chown(dir, user.uid, user.gid), 0)
        for file in files {
            XCTAssertTrue(FileManager.default.createFile(atPath: dir + "/" + file, contents: Data()))
            XCTAssertEqual(chown(dir + "/" + file, user.uid, user.gid), 0)
        }
        for (link, target) in links {
            XCTAssertEqual(symlink(target, dir + "/" + link), 0, link)
            XCTAssertEqual(lchown(dir + "/" + link, user.uid, user.gid), 0, link)
        }
        let pid = try user.spawn("/usr/bin/python3", ["-c", Self.fakeDaemon, dir, mode])
        XCTAssertTrue(FileEvents.wait(in: dir, orExitOf: pid) { FileManager.default.fileExists(atPath: dir + "/ready") },
                      "the fake daemon never got ready")
        return (dir, pid)
    }

    /// Files of root's in a root-only directory: what the planted symlinks point at.
    private func victims() throws -> (dir: TemporaryDirectory, files: [String: [UInt8]]) {
        let dir = TemporaryDirectory(prefix: "httpcachefs-victims")
        chmod(dir.path, 0o700)
        let files: [String: [UInt8]] = [
            // An empty file is an empty SQLite database: opening it read-write would migrate it.
            "other-program.db": [],
            "precious.bin": Array("root's bytes\n".utf8),
            "secret.key": Array("root's key material\n".utf8),
        ]
        for (name, bytes) in files {
            XCTAssertTrue(FileManager.default.createFile(atPath: dir.appending(name), contents: Data(bytes),
                                                         attributes: [.posixPermissions: 0o600]))
        }
        return (dir, files)
    }

    private func rootStatus(_ args: [String] = []) throws -> UnprivilegedUser.Outcome {
        try UnprivilegedUser.exec(try BinaryUnderTest.locate(), ["status"] + args, timeout: 90)
    }

    /// Before: root's `status` opened the fake's "index" read-write through the symlink (the
    /// empty database of another program got the cache's tables and WAL mode), set aside its
    /// 4 MiB reserve through `index.reserve.new` (root's file became zeros), and made
    /// `credential.key`. After: nothing of root's changes, nothing is created in the fake's
    /// directory, and the daemon is still listed, its cache not opened.
    func testRootsStatusOpensNothingOfAnotherUsersCache() throws {
        let (victimDir, victimFiles) = try victims()
        defer { victimDir.remove() }
        let fake = try plantFake("fake-cache", mode: "sleep", links: [
            "index.sqlite": victimDir.appending("other-program.db"),
            "index.reserve.new": victimDir.appending("precious.bin"),
            "credential.key": victimDir.appending("secret.key"),
            "mounts.json": victimDir.appending("secret.key"),
            "proxy.json": victimDir.appending("secret.key"),
        ], files: ["lock"])
        let before = try FileManager.default.contentsOfDirectory(atPath: fake.dir).sorted()

        for args in [[], ["--json"]] {
            let status = try rootStatus(args)
            XCTAssertEqual(status.status, 0, status.stderr)
            XCTAssertTrue(status.text.contains(fake.dir), "the fake daemon is listed: \(status.text)")
            XCTAssertTrue(status.text.contains("its cache is not opened"), status.text)
            XCTAssertFalse(status.text.contains("root's key material"), "a file of root's was shown")
        }
        for (name, bytes) in victimFiles {
            let now = Array(FileManager.default.contents(atPath: victimDir.appending(name)) ?? Data())
            XCTAssertTrue(now == bytes, "\(name) of root's changed: \(bytes.count) bytes before, \(now.count) after")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: fake.dir).sorted(), before, "files appeared in the user's directory")
    }

    /// Root's commands refuse another user's cache outright rather than open it: `cache ls` and
    /// `cat` (which would open, lock and write it) with `--cache-dir` of the user's.
    func testRootsCommandsRefuseAnotherUsersCacheDirectory() throws {
        let (victimDir, victimFiles) = try victims()
        defer { victimDir.remove() }
        let dir = user.root + "/other-cache"
        XCTAssertEqual(mkdir(dir, 0o700), 0)
        XCTAssertEqual(chown(dir, user.uid, user.gid), 0)
        XCTAssertEqual(symlink(victimDir.appending("other-program.db"), dir + "/index.sqlite"), 0)
        XCTAssertEqual(lchown(dir + "/index.sqlite", user.uid, user.gid), 0)
        let binary = try BinaryUnderTest.locate()
        for args in [["cache", "ls", "--cache-dir", dir], ["cat", origin.url("/lib/extra.txt"), "--cache-dir", dir]] {
            let run = try UnprivilegedUser.exec(binary, args)
            XCTAssertNotEqual(run.status, 0, "\(args): \(run.text)")
            XCTAssertTrue(run.stderr.contains("uid \(user.uid)"), "\(args): says whose it is: \(run.stderr)")
        }
        for (name, bytes) in victimFiles {
            let now = Array(FileManager.default.contents(atPath: victimDir.appending(name)) ?? Data())
            XCTAssertTrue(now == bytes, "\(name) of root's changed: \(bytes.count) bytes before, \(now.count) after")
        }
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir), ["index.sqlite"], "root made files in the user's cache")
    }

    /// Before: a fake daemon answering one byte a second held root's `status` for as long as it
    /// liked (each byte reset a per-read timeout). After: every exchange has a deadline; the
    /// fake is listed without a document, and the command ends (the exec's bound is a hang
    /// guard, never a measurement).
    func testATricklingFakeDaemonDoesNotHoldRootsStatus() throws {
        let fake = try plantFake("fake-trickle", mode: "trickle", links: [:], files: ["lock", "index.sqlite"])
        let status = try rootStatus()
        XCTAssertEqual(status.status, 0, status.stderr)
        XCTAssertTrue(status.text.contains("pid \(try fakePID(fake.dir))"), status.text)
        XCTAssertTrue(status.text.contains("did not answer with a status document"), status.text)
        XCTAssertFalse(status.text.contains("key=fake-key"), "another user's key is not printed in a page address")
    }

    /// Before: root's `status` looked into a cache-looking folder on the user's own FUSE mount
    /// (`allow_other`): its stat and its open of `proxy.json` went to the user's FUSE daemon,
    /// which may hold them for as long as it likes (an origin that never answers held the open
    /// for the read timeout). Here that daemon is an httpcachefs mount whose origin logs every
    /// request: root's `status` must send it none.
    func testRootsStatusDoesNotLookIntoAnotherUsersFuseMount() throws {
        // Needs user_allow_other in /etc/fuse.conf (without it no other user, root included, can
        // look into the user's mount): added for this test when missing, as the set-up opens
        // /dev/fuse, and put back afterwards.
        let confPath = "/etc/fuse.conf"
        let conf = try? String(contentsOfFile: confPath, encoding: .utf8)
        if !(conf ?? "").split(separator: "\n").contains(where: { $0.trimmingCharacters(in: .whitespaces) == "user_allow_other" }) {
            guard geteuid() == 0 else {
                throw XCTSkip("needs user_allow_other in /etc/fuse.conf, which only root may add")
            }
            print("⚠️  /etc/fuse.conf lacks user_allow_other: adding it for this test")
            let before = conf ?? ""
            try (before + (before.isEmpty || before.hasSuffix("\n") ? "" : "\n") + "user_allow_other\n")
                .write(toFile: confPath, atomically: false, encoding: .utf8)
        }
        defer {
            if let conf { try? conf.write(toFile: confPath, atomically: false, encoding: .utf8) } else { unlink(confPath) }
        }
        origin.setAutoindex("/fake/", ["lock", "index.sqlite", "proxy.json"])
        for name in ["lock", "index.sqlite", "proxy.json"] { origin.setFile("/fake/" + name, data: Array("0123456789".utf8)) }
        let mount = try user.httpcachefs(["mount", mountpoint, "--index", origin.url("/fake/"), "--index-ttl", "1h",
                                          "--proxy-port", "0", "-o", "allow_other"])
        XCTAssertEqual(mount.status, 0, mount.stderr)
        guard mount.status == 0 else { return }
        let holding = user.root + "/holding"
        let holder = try user.spawn("/usr/bin/python3", ["-c", "import os, sys, time\nfd = os.open(sys.argv[1] + '/lock', os.O_RDONLY)\nopen(sys.argv[2], 'w').close()\ntime.sleep(3600)",
                                                         mountpoint, holding])
        XCTAssertTrue(FileEvents.wait(in: user.root, orExitOf: holder) { FileManager.default.fileExists(atPath: holding) },
                      "the holder never opened the mount's lock")

        let status = try rootStatus()
        XCTAssertEqual(status.status, 0, status.stderr)
        XCTAssertEqual(origin.requests.filter { $0.path == "/fake/proxy.json" }.count, 0,
                       "root's status opened proxy.json on the user's FUSE mount: \(status.text)")
        XCTAssertFalse(status.text.contains("'/lock'"), "the holder is listed as a daemon: \(status.text)")
    }

    /// The Python process holding the fake's lock (runuser's child).
    private func fakePID(_ dir: String) throws -> pid_t {
        try XCTUnwrap(processes(mentioning: dir).first { pid in
            (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/exe"))?.contains("python") == true
        })
    }
}
