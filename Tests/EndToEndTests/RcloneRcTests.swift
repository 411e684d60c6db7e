import Foundation
import Glibc
import TestSupport
import XCTest

/// rclone's remote control and mount flags against a real daemon (the binary, as root) with a
/// mount of this process's origin, driven by Debian's own `rclone rc` as plex_autoscan and
/// autoscan drive rclone (the normal user's: `UnprivilegedUserTests.testRclonesRemoteControl`).
/// Skipped, loudly, without rclone (`apt-get install -y rclone`).
final class RcloneRcTests: XCTestCase {
    var origin: OriginServer!
    var temp: TemporaryDirectory!
    var runner: CLIRunner!
    var rclone: String!
    var port = 0
    var mountpoint: String { temp.appending("mnt") }
    var logFile: String { temp.appending("daemon.log") }

    override func setUpWithError() throws {
        guard let found = ExternalTool.find("rclone") else {
            print("⚠️  SKIPPING RcloneRcTests: rclone is not installed (apt-get install -y rclone)")
            throw XCTSkip("rclone is not installed (apt-get install -y rclone)")
        }
        rclone = found
        origin = try OriginServer()
        temp = TemporaryDirectory(prefix: "httpcachefs-rc")
        runner = CLIRunner(temp: temp)
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        origin.setAutoindex("/lib/", ["movie.bin", "sub/"])
        origin.setAutoindex("/lib/sub/", ["s1.txt"])
        origin.setGeneratedFile("/lib/movie.bin", length: 3 << 20 + 17, seed: 51)
        origin.setFile("/lib/sub/s1.txt", data: Array("s1\n".utf8))
        origin.setFile("/lib/sub/s2.txt", data: Array("s2\n".utf8))
        port = try LoopbackPort.free()
    }

    override func tearDown() {
        if let runner, isMounted(mountpoint) {
            _ = try? runner.run(["unmount", mountpoint], cacheDirectory: nil)
            if isMounted(mountpoint) { _ = umount2(mountpoint, Int32(MNT_DETACH)) }
        }
        origin?.stop()
        temp?.remove()
    }

    // MARK: helpers

    /// `httpcachefs mount` of the origin's `/lib/` with the remote control on `port`.
    func mount(_ extra: [String], login: [String] = ["--rc-user", "u", "--rc-pass", "p"]) throws -> CLIRunner.Result {
        try runner.run(["mount", mountpoint, "--index", origin.url("/lib/"), "--proxy-port", "0", "--log-file", logFile,
                        "--rc", "--rc-addr", "127.0.0.1:\(port)"] + login + extra)
    }

    /// `rclone rc --url ... --user U --pass P ARGS...`, as a script runs it.
    func rc(_ args: [String], user: String = "u", pass: String = "p") throws -> ExternalTool.Output {
        try ExternalTool.run(rclone, ["rc", "--config", temp.appending("rclone.conf"), "--url", "http://127.0.0.1:\(port)/",
                                      "--user", user, "--pass", pass] + args, timeout: 60)
    }

    func json(_ output: ExternalTool.Output) throws -> [String: Any] {
        try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(output.stdout.utf8)) as? [String: Any], output.stdout + output.stderr)
    }

    func names(_ dir: String) throws -> [String] { try FileManager.default.contentsOfDirectory(atPath: dir).sorted() }

    // MARK: calls

    func testRefreshShowsANewFileAtOnce() throws {
        let m = try mount([])
        XCTAssertEqual(m.status, 0, m.stderr)
        guard m.status == 0 else { return }
        XCTAssertEqual(try names(mountpoint + "/sub"), ["s1.txt"])
        origin.setAutoindex("/lib/sub/", ["s1.txt", "s2.txt"])
        let r = try rc(["vfs/refresh", "recursive=true", "dir=sub"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try json(r)["result"] as? [String: String], ["sub": "OK"])
        XCTAssertEqual(try names(mountpoint + "/sub"), ["s1.txt", "s2.txt"], "the new file, without waiting for --dir-cache-time")
        XCTAssertEqual(try String(contentsOfFile: mountpoint + "/sub/s2.txt", encoding: .utf8), "s2\n")

        let missing = try rc(["vfs/refresh", "dir=nope"])
        XCTAssertEqual(try json(missing)["result"] as? [String: String], ["nope": "not in the mount: /nope"])
        let background = try rc(["vfs/refresh", "recursive=true", "_async=true"])
        XCTAssertEqual(background.status, 0, background.stderr)
        XCTAssertNotNil(try json(background)["jobid"] as? Int, background.stdout)
    }

    /// `recursive=true` after mounting (plex_autoscan's and the docker images' priming): every
    /// folder is read now, so a scan then finds the tree in memory.
    func testARecursiveRefreshReadsEveryFolderNotReadYet() throws {
        origin.setAutoindex("/lib/sub/", ["s1.txt", "deeper/"])
        origin.setAutoindex("/lib/sub/deeper/", ["d.txt"])
        origin.setFile("/lib/sub/deeper/d.txt", data: Array("d\n".utf8))
        XCTAssertEqual(try mount(["--dir-cache-time", "1h"]).status, 0)
        origin.resetLog()
        let r = try rc(["vfs/refresh", "recursive=true"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try json(r)["result"] as? [String: String], ["": "OK"])
        let listed = Set(origin.requests.map(\.path))
        XCTAssertTrue(listed.isSuperset(of: ["/lib/", "/lib/sub/", "/lib/sub/deeper/"]), "\(listed)")
        origin.resetLog()
        XCTAssertEqual(try names(mountpoint + "/sub/deeper"), ["d.txt"])
        XCTAssertEqual(origin.requests.map(\.path), [], "already read")
    }

    func testForgetFetchesAFileAnew() throws {
        XCTAssertEqual(try mount([]).status, 0)
        let path = mountpoint + "/movie.bin"
        let expected = OriginServer.generatedBytes(seed: 51, offset: 0, count: 3 << 20 + 17)
        XCTAssertTrue(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == expected)
        let r = try rc(["vfs/forget", "file=movie.bin"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try json(r)["forgotten"] as? [String], ["movie.bin"])
        let ls = try runner.run(["cache", "ls"])
        XCTAssertFalse(ls.text.contains("movie.bin"), "the cached copy is gone: \(ls.text)")
        origin.resetLog()
        XCTAssertTrue(Array(try Data(contentsOf: URL(fileURLWithPath: path))) == expected, "the same bytes, fetched anew")
        XCTAssertGreaterThan(origin.bytesServed(path: "/lib/movie.bin"), 0)
    }

    func testStatsListVersionAndNoop() throws {
        XCTAssertEqual(try mount([]).status, 0)
        _ = try Data(contentsOf: URL(fileURLWithPath: mountpoint + "/movie.bin"))
        let stats = try json(try rc(["vfs/stats"]))
        XCTAssertEqual(stats["fs"] as? String, mountpoint)
        let disk = try XCTUnwrap(stats["diskCache"] as? [String: Any])
        XCTAssertGreaterThanOrEqual(disk["bytesUsed"] as? Int ?? 0, 3 << 20)
        let core = try json(try rc(["core/stats"]))
        XCTAssertGreaterThanOrEqual(core["bytes"] as? Int ?? 0, 3 << 20, "what came from the origin")
        XCTAssertEqual(try json(try rc(["vfs/list"]))["vfses"] as? [String], [mountpoint])
        XCTAssertTrue((try json(try rc(["core/version"]))["version"] as? String ?? "").hasPrefix("httpcachefs "))
        XCTAssertEqual(try json(try rc(["rc/noop", "a=1"]))["a"] as? String, "1")
    }

    func testUnknownCallsAndWrongLoginsAreRclonesErrors() throws {
        XCTAssertEqual(try mount([]).status, 0)
        let unknown = try rc(["operations/purge", "fs=/"])
        XCTAssertNotEqual(unknown.status, 0)
        // rclone 1.60 (Debian's) prints the status and the error document; 1.65 and later the
        // document's error alone: either way, rclone's own words for an unknown method.
        if unknown.stderr.contains("404 Not Found") {
            XCTAssertTrue(unknown.stderr.contains("couldn't find method \\\"operations/purge\\\""), unknown.stderr)
            XCTAssertTrue(unknown.stderr.contains("\"path\": \"operations/purge\""), unknown.stderr)
        } else {
            XCTAssertTrue(unknown.stderr.contains("couldn't find method \"operations/purge\""), unknown.stderr)
        }
        let wrong = try rc(["rc/noop"], pass: "guess")
        XCTAssertNotEqual(wrong.status, 0)
        XCTAssertTrue(wrong.stderr.contains("401 Unauthorized") || wrong.stderr.contains("wrong login for the remote control"),
                      wrong.stderr)
        // A web page's request, with the right login even: refused.
        let page = try RawHTTP.request(port: port, method: "POST", path: "/rc/noop",
                                       headers: [("Origin", "http://evil.example"), ("Content-Length", "0"),
                                                 ("Authorization", "Basic \(Data("u:p".utf8).base64EncodedString())")])
        XCTAssertEqual(page.status, 403)
    }

    /// Without --rc-user/--rc-pass: user `httpcachefs`, password the control key of the
    /// daemon's 0600 proxy.json.
    func testTheOwnersKeyIsTheLoginByDefault() throws {
        let m = try mount([], login: [])
        XCTAssertEqual(m.status, 0, m.stderr)
        let runtime = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: runner.cacheDir + "/proxy.json"))) as? [String: Any])
        let key = try XCTUnwrap(runtime["controlKey"] as? String)
        let r = try rc(["vfs/list"], user: "httpcachefs", pass: key)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try rc(["vfs/list"], user: "httpcachefs", pass: "x").status == 0, false)
    }

    /// With --no-proxy there is no control key: a login of its own, and the calls work the same.
    func testWithoutAProxyTheRemoteControlTakesItsOwnLogin() throws {
        let m = try runner.run(["mount", mountpoint, "--index", origin.url("/lib/"), "--no-proxy", "--log-file", logFile,
                                "--rc", "--rc-addr", "127.0.0.1:\(port)", "--rc-user", "u", "--rc-pass", "p"])
        XCTAssertEqual(m.status, 0, m.stderr)
        XCTAssertEqual(try names(mountpoint + "/sub"), ["s1.txt"])
        origin.setAutoindex("/lib/sub/", ["s1.txt", "s2.txt"])
        XCTAssertEqual(try json(try rc(["vfs/refresh", "dir=sub"]))["result"] as? [String: String], ["sub": "OK"])
        XCTAssertEqual(try names(mountpoint + "/sub"), ["s1.txt", "s2.txt"])
    }

    /// `ps` shows the daemon's command line to every user: `--rc-pass` is masked there.
    func testTheRcPasswordIsNotInTheDaemonsCommandLine() throws {
        XCTAssertEqual(try mount([], login: ["--rc-user", "u", "--rc-pass", "s3cret-pass"]).status, 0)
        let runtime = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: runner.cacheDir + "/proxy.json"))) as? [String: Any])
        let pid = try XCTUnwrap(runtime["pid"] as? Int)
        let cmdline = String(decoding: try Data(contentsOf: URL(fileURLWithPath: "/proc/\(pid)/cmdline")), as: UTF8.self)
        XCTAssertTrue(cmdline.contains("--rc-pass\u{0}***********\u{0}"), cmdline)
        XCTAssertFalse(cmdline.contains("s3cret"), cmdline)
        XCTAssertEqual(try rc(["rc/noop"], pass: "s3cret-pass").status, 0, "the daemon still knows it")
    }

    // MARK: flags

    /// A unit file's rclone flags as they are: the mount works, notes say what changes nothing,
    /// -vv logs at debug, --poll-interval re-reads the listings (--on-change hears of it).
    func testAUnitFilesRcloneFlagsMountAndDoWhatTheyMean() throws {
        let heard = temp.appending("heard")
        try FileManager.default.createDirectory(atPath: heard, withIntermediateDirectories: true)
        let m = try mount(["--vfs-cache-mode", "full", "-vv", "--no-modtime", "--attr-timeout", "1s", "--poll-interval", "1s",
                           "--vfs-read-chunk-size", "32M", "--vfs-read-chunk-size-limit", "off", "--dir-cache-time", "1000h",
                           "--on-change", "cat > \(heard)/paths"])
        XCTAssertEqual(m.status, 0, m.stderr)
        guard m.status == 0 else { return }
        for note in ["--no-modtime changes nothing", "--vfs-read-chunk-size changes nothing", "--vfs-read-chunk-size-limit changes nothing"] {
            XCTAssertTrue(m.stderr.contains("httpcachefs: note: ") && m.stderr.contains(note), m.stderr)
        }
        XCTAssertEqual(try names(mountpoint + "/sub"), ["s1.txt"])
        origin.setAutoindex("/lib/sub/", ["s1.txt", "s2.txt"])
        // No refresh asked for, and the listing kept for 1000h: only the poll re-reads it.
        let polled = FileEvents.wait(in: heard, timeout: 30) {
            (try? String(contentsOfFile: heard + "/paths", encoding: .utf8))?.contains("sub/s2.txt") == true
        }
        XCTAssertTrue(polled, "--poll-interval 1s re-read the listing; the log: \((try? String(contentsOfFile: logFile, encoding: .utf8)) ?? "")")
        let log = (try? String(contentsOfFile: logFile, encoding: .utf8)) ?? ""
        XCTAssertTrue(log.contains(" debug "), "-vv logs at debug")
        XCTAssertTrue(log.contains("poll-interval: "), log)
    }

    /// `--rc-addr 127.0.0.1:0` picks a free port and says which, as rclone does: what a
    /// script hands `rclone rc --url`.
    func testAPortChosenByTheSystemIsPrintedAndAnswers() throws {
        port = 0
        let m = try mount([])
        XCTAssertEqual(m.status, 0, m.stderr)
        let prefix = "httpcachefs: serving remote control on http://127.0.0.1:"
        let line = try XCTUnwrap(m.stderr.split(separator: "\n").first { $0.hasPrefix(prefix) }, m.stderr)
        port = try XCTUnwrap(Int(line.dropFirst(prefix.count).dropLast()), String(line))
        XCTAssertGreaterThan(port, 0)
        XCTAssertTrue(line.hasSuffix("/"), String(line))
        let noop = try rc(["rc/noop", "x=1"])
        XCTAssertEqual(noop.status, 0, noop.stderr)
    }

    func testARemoteControlPortInUseFailsTheMountWithTheWayOut() throws {
        let blocker = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(blocker) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = in_port_t(UInt16(port).bigEndian)
        let bound = withUnsafePointer(to: &addr) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(blocker, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(blocker, 1) == 0 else { throw XCTSkip("cannot hold port \(port)") }
        let m = try mount([])
        XCTAssertNotEqual(m.status, 0)
        XCTAssertTrue(m.stderr.contains("the remote control cannot listen on 127.0.0.1:\(port): the port is in use"), m.stderr)
        XCTAssertTrue(m.stderr.contains("--rc-addr localhost:N"), m.stderr)
        XCTAssertFalse(isMounted(mountpoint), "nothing mounted")
    }
}
