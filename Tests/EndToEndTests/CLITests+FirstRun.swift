import Foundation
import TestSupport
import XCTest

/// What a new user meets first: help texts, the config file's spellings, `url` finding the right
/// proxy, the install script and the sample origin of `try-it.sh`.
extension CLITests {
    // MARK: help

    func testEveryHelpTextShowsEachDefaultOnce() throws {
        let commands = [[], ["mount"], ["proxy"], ["url"], ["cat"], ["preload"], ["cache"], ["cache", "ls"],
                        ["cache", "info"], ["cache", "rm"], ["cache", "clear"], ["cache", "verify"], ["cache", "export"]]
        for command in commands {
            let r = try run(command + ["--help"], cacheDirectory: nil)
            XCTAssertEqual(r.status, 0, "\(command): \(r.stderr)")
            let text = r.text.split(whereSeparator: \.isWhitespace).joined(separator: " ")
            XCTAssertNil(text.range(of: #"\(default: ([^)]*)\)\.? \(default: \1\)"#, options: .regularExpression),
                         "\(command) --help repeats a default: \(text)")
        }
    }

    /// Issue 50: `--help` prints the help and exits 0 whatever a command's checks would say (a
    /// bad value, a config file that does not load, several daemons to choose from), and says
    /// nothing on stderr; without `--help` the same check still fails with its one line.
    func testHelpIsPrintedWhateverTheChecksWouldSay() throws {
        let config = temp.appending("bad-config")
        try "slice-size = 99M\n".write(toFile: config, atomically: true, encoding: .utf8)
        let cases: [[String]] = [
            ["cache", "ls", "--slice-size", "99M", "--help"],
            ["cache", "ls", "--config", config, "--help"],
            ["cat", "http://x/", "--cache-size", "lots", "-h"],
            ["cache", "rm", "--help", "--slice-size", "99M"],
        ]
        for args in cases {
            let r = try run(args, cacheDirectory: nil)
            XCTAssertEqual(r.status, 0, "\(args): \(r.stderr)")
            XCTAssertEqual(r.stderr, "", "\(args)")
            XCTAssertTrue(r.text.contains("USAGE:"), "\(args): \(r.text)")
        }
        let r = try run(["cache", "ls", "--slice-size", "99M"], cacheDirectory: nil)
        XCTAssertEqual(r.status, 64)
        XCTAssertOneLineError(r, contains: "slice size '99M' for --slice-size is out of range")
    }

    // MARK: config file

    func testTheConfigFileTakesTheFstabSpellingOfKeys() throws {
        origin.setGeneratedFile("/u.bin", length: 1000, seed: 53)
        let configured = temp.appending("underscored")
        let config = temp.appending("config")
        try "cache_dir = \(configured)\ncache_size = 1G\nread-timeout = 30s\n".write(toFile: config, atomically: true, encoding: .utf8)
        let r = try run(["cat", origin.url("/u.bin"), "--config", config], cacheDirectory: nil)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: configured + "/index.sqlite"), "cache_dir was not applied")
    }

    // MARK: url finds the proxy of the daemon that holds the cache

    func testURLUsesTheProxyOfTheDaemonHoldingTheCacheAndNeverAnother() throws {
        origin.setGeneratedFile("/m.mp4", length: 1000, seed: 54)
        let url = origin.url("/m.mp4")
        let cacheA = temp.appending("cache-a")
        let daemon = try startInBackground(["proxy", "--proxy-port", "0", "--cache-dir", cacheA])
        defer { daemon.terminate(); daemon.waitUntilExit() }
        let port = try waitForRuntimeFile(cacheA)

        let found = try run(["url", url, "--cache-dir", cacheA], cacheDirectory: nil)
        XCTAssertEqual(found.status, 0, found.stderr)
        XCTAssertTrue(found.text.hasPrefix("http://127.0.0.1:\(port)/s/"), "signed: \(found.text)")
        XCTAssertTrue(found.text.hasSuffix("/m.mp4\n"), found.text)

        // Cache B: nobody holds it, though a proxy.json (copied from A) names A's live proxy.
        let cacheB = temp.appending("cache-b")
        try FileManager.default.createDirectory(atPath: cacheB, withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: cacheA + "/proxy.json", toPath: cacheB + "/proxy.json")
        let stale = try run(["url", url, "--cache-dir", cacheB], cacheDirectory: nil)
        XCTAssertEqual(stale.status, 1)
        XCTAssertEqual(stale.stdout, [], "no URL on another daemon's port")
        XCTAssertOneLineError(stale, contains: "no httpcachefs proxy serves the cache \(cacheB): no daemon holds it")

        // Cache B held by a process that runs no proxy: that file is still not its proxy.
        origin.setGeneratedFile("/slow.bin", length: 4 << 20, seed: 55)
        origin.setFaults("/slow.bin", Faults(bytesPerSecond: 64 << 10))
        let holder = try startInBackground(["cat", origin.url("/slow.bin"), "--cache-dir", cacheB])
        defer { holder.terminate(); holder.waitUntilExit() }
        try waitForOriginRequest("/slow.bin", "the holder reached the origin")
        let held = try run(["url", url, "--cache-dir", cacheB], cacheDirectory: nil)
        XCTAssertEqual(held.status, 1)
        XCTAssertEqual(held.stdout, [])
        XCTAssertOneLineError(held, contains: "process \(holder.processIdentifier), which holds it, runs no proxy")
        // Nor does cat send its requests to that proxy: the cache is busy, and it says who holds it.
        origin.resetLog()
        let cat = try run(["cat", url, "--cache-dir", cacheB], cacheDirectory: nil)
        XCTAssertEqual(cat.status, 1)
        XCTAssertOneLineError(cat, contains: "is in use by process \(holder.processIdentifier)")
        XCTAssertEqual(origin.requestCount(path: "/m.mp4"), 0, "nothing went through cache A's proxy")
    }

    /// Root naming a user's cache: its runtime file and key are that user's and never read, so
    /// the user's running daemon was reported as one that "runs no proxy".
    func testURLOfAnotherUsersCacheSaysWhoseItIs() throws {
        let other = temp.appending("others-cache")
        try FileManager.default.createDirectory(atPath: other, withIntermediateDirectories: true)
        guard geteuid() == 0 else { throw XCTSkip("needs root to give the directory away") }
        XCTAssertEqual(chown(other, 65534, 65534), 0)
        let r = try run(["url", origin.url("/m.mp4"), "--cache-dir", other], cacheDirectory: nil)
        XCTAssertEqual(r.status, 1)
        XCTAssertEqual(r.stdout, [])
        XCTAssertOneLineError(r, contains: "the cache \(other) is uid 65534's, not yours (uid 0)")
        // The cache's own refusal said it "cannot create" the directory that is there.
        let ls = try run(["cache", "ls", "--cache-dir", other], cacheDirectory: nil)
        XCTAssertOneLineError(ls, contains: "cannot use the cache directory: it belongs to uid 65534")
    }

    /// An error quoting a URL with a line break printed it on three lines, and an escape in it
    /// reached the terminal as it was.
    func testAnErrorQuotingALineBreakOrAnEscapeIsOneLine() throws {
        for bad in ["http://127.0.0.1:1/a b\nc.mp4", "http://127.0.0.1:1/a\u{1B}]0;title\u{7}\r\n.mp4"] {
            let r = try run(["cat", bad])
            XCTAssertEqual(r.status, 64, r.stderr)
            XCTAssertOneLineError(r, contains: "\\u{A}")
            XCTAssertFalse(r.stderr.contains("\u{1B}") || r.stderr.contains("\r"), r.stderr)
        }
    }

    func testAProxyOnAPortInUseSaysWhichAndHowToPickAnother() throws {
        let r = try run(["proxy", "--proxy-port", String(origin.port)])
        XCTAssertEqual(r.status, 1)
        XCTAssertOneLineError(r, contains: "cannot listen on 127.0.0.1:\(origin.port): the port is in use; pick another with --proxy-port N")
    }

    /// `httpcachefs args...` in the background with exactly these arguments (output discarded).
    func startInBackground(_ args: [String]) throws -> Process {
        let process = Process()
        process.executableURL = try binary()
        process.arguments = args
        process.environment = ProcessInfo.processInfo.environment.merging(["XDG_CONFIG_HOME": temp.appending("no-config")]) { _, new in new }
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        return process
    }

    /// The port in `<cache>/proxy.json`, once a proxy wrote it.
    /// The control key goes only to a port the daemon itself listens on: a `proxy.json` that
    /// names another program's port (the daemon's proxy gone, the port taken) gets an error, and
    /// that program gets nothing.
    func testCacheClearSendsTheControlKeyOnlyToTheDaemonsOwnPort() throws {
        let daemon = try start(["proxy", "--proxy-port", "0"])
        defer { daemon.terminate(); daemon.waitUntilExit() }
        let port: Int? = try waitForRuntimeFile(cacheDir)
        let path = cacheDir + "/proxy.json"
        var object = try XCTUnwrap(try JSONSerialization.jsonObject(with: try XCTUnwrap(FileManager.default.contents(atPath: path))) as? [String: Any])
        XCTAssertEqual(object["port"] as? Int, port)
        object["port"] = origin.port   // the in-test origin listens there: another program
        try JSONSerialization.data(withJSONObject: object).write(to: URL(fileURLWithPath: path))
        XCTAssertEqual(Self.runtimePort(cacheDir), origin.port)
        origin.resetLog()
        let r = try run(["cache", "clear"])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("is not the daemon's") && r.stderr.contains("control key was not sent"), r.stderr)
        XCTAssertEqual(origin.requests.count, 0, "the other program was sent nothing")
    }

    static func runtimePort(_ cache: String) -> Int? {
        guard let data = FileManager.default.contents(atPath: cache + "/proxy.json"),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any] else { return nil }
        return object["port"] as? Int
    }

    /// The control key of the daemon holding `cache`, from its runtime file: what an owner's
    /// request for status.json or /metrics carries.
    static func runtimeKeyHeader(_ cache: String) -> [(String, String)] {
        guard let data = FileManager.default.contents(atPath: cache + "/proxy.json"),
              let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
              let key = object["controlKey"] as? String else { return [] }
        return [("X-Httpcachefs-Control", key)]
    }

    // MARK: install

    func testInstallPutsEachFileWhereItsToolLooksAndUninstallRemovesThem() throws {
        let script = Self.repository.appendingPathComponent("mount-helpers/install.sh").path
        let destdir = temp.appending("destdir")
        let env = ["DESTDIR": destdir, "PREFIX": "/usr/local"]
        let install = try run(["/bin/sh", script, "--binary", try binary().path], environment: env, raw: true)
        XCTAssertEqual(install.status, 0, install.stderr)

        let fm = FileManager.default
        func mode(_ path: String) -> Int? { (try? fm.attributesOfItem(atPath: destdir + path))?[.posixPermissions] as? Int }
        XCTAssertEqual(mode("/usr/local/bin/httpcachefs"), 0o755)
        XCTAssertEqual(mode("/sbin/mount.httpcachefs"), 0o755)
        XCTAssertEqual(try fm.destinationOfSymbolicLink(atPath: destdir + "/sbin/mount.fuse.httpcachefs"), "mount.httpcachefs")
        XCTAssertEqual(mode("/etc/systemd/system/httpcachefs@.service"), 0o644)
        XCTAssertEqual(mode("/usr/local/bin/httpcachefs-tier"), 0o755)
        XCTAssertEqual(mode("/usr/local/share/httpcachefs/tier-nginx.conf.in"), 0o644)
        XCTAssertTrue(fm.contentsEqual(atPath: destdir + "/usr/local/bin/httpcachefs", andPath: try binary().path))
        let helper = try String(contentsOfFile: destdir + "/sbin/mount.httpcachefs", encoding: .utf8)
        XCTAssertTrue(helper.contains("\ninstalled_binary=/usr/local/bin/httpcachefs\n"), "the helper runs the installed binary")
        let unit = try String(contentsOfFile: destdir + "/etc/systemd/system/httpcachefs@.service", encoding: .utf8)
        XCTAssertTrue(unit.contains("ExecStart=/usr/local/bin/httpcachefs mount --foreground"), unit)

        // Another PREFIX is written into the unit and the helper, with no DESTDIR left in them.
        let prefixed = temp.appending("prefixed")
        let other = try run(["/bin/sh", script, "--binary", try binary().path], environment: [
            "PREFIX": prefixed + "/usr", "SBINDIR": prefixed + "/sbin", "UNITDIR": prefixed + "/units"], raw: true)
        XCTAssertEqual(other.status, 0, other.stderr)
        let otherUnit = prefixed + "/units/httpcachefs@.service"
        XCTAssertTrue(try String(contentsOfFile: otherUnit, encoding: .utf8).contains("ExecStart=\(prefixed)/usr/bin/httpcachefs mount"))
        if let analyze = ["/usr/bin/systemd-analyze", "/bin/systemd-analyze"].first(where: fm.isExecutableFile(atPath:)) {
            // An instance of the template, as systemd would load it; its binary exists under this prefix.
            let instance = temp.appending("httpcachefs@media.service")
            try fm.copyItem(atPath: otherUnit, toPath: instance)
            let verify = try run([analyze, "verify", "--man=no", instance], raw: true)
            XCTAssertEqual(verify.status, 0, "systemd-analyze verify: \(verify.stderr)\(verify.text)")
        } else {
            print("⚠️  systemd-analyze is not installed: the unit was not verified")
        }

        // An instance enabled as `systemctl enable httpcachefs@media` leaves it: a link in a .wants directory.
        let wants = destdir + "/etc/systemd/system/multi-user.target.wants"
        try fm.createDirectory(atPath: wants, withIntermediateDirectories: true)
        try fm.createSymbolicLink(atPath: wants + "/httpcachefs@media.service",
                                  withDestinationPath: "/etc/systemd/system/httpcachefs@.service")
        let uninstall = try run(["/bin/sh", script, "--uninstall"], environment: env, raw: true)
        XCTAssertEqual(uninstall.status, 0, uninstall.stderr)
        for path in ["/usr/local/bin/httpcachefs", "/sbin/mount.httpcachefs", "/sbin/mount.fuse.httpcachefs",
                     "/etc/systemd/system/httpcachefs@.service",
                     "/etc/systemd/system/multi-user.target.wants/httpcachefs@media.service",
                     "/usr/local/bin/httpcachefs-tier", "/usr/local/share/httpcachefs/tier-nginx.conf.in"] {
            XCTAssertNil(try? fm.attributesOfItem(atPath: destdir + path), "\(path) is still there")
        }
    }

    func testInstallWithoutABuildSaysHowToBuild() throws {
        let script = Self.repository.appendingPathComponent("mount-helpers/install.sh").path
        let r = try run(["/bin/sh", script, "--binary", temp.appending("missing")],
                        environment: ["DESTDIR": temp.appending("d")], raw: true)
        XCTAssertEqual(r.status, 1)
        XCTAssertTrue(r.stderr.contains("swift build -c release"), r.stderr)
        XCTAssertFalse(FileManager.default.fileExists(atPath: temp.appending("d")), "nothing half-installed")
    }

    static var repository: URL {
        URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
    }

    // MARK: the sample origin (httpcachefs-bench serve)

    func testBenchServeServesSubdirectoriesNamesWithSpacesAndListings() throws {
        let bench = try binary().deletingLastPathComponent().appendingPathComponent("httpcachefs-bench").path
        guard FileManager.default.isExecutableFile(atPath: bench) else {
            print("⚠️  SKIPPING: no httpcachefs-bench next to \(try binary().path)")
            throw XCTSkip("no httpcachefs-bench next to the binary under test")
        }
        let root = temp.appending("served")
        try FileManager.default.createDirectory(atPath: root + "/sub dir", withIntermediateDirectories: true)
        try Data("top\n".utf8).write(to: URL(fileURLWithPath: root + "/a.txt"))
        try Data("inner\n".utf8).write(to: URL(fileURLWithPath: root + "/sub dir/My Movie #1.mp4"))
        try Data("secret\n".utf8).write(to: URL(fileURLWithPath: temp.appending("outside.txt")))

        let stdout = temp.appending("serve.out")
        _ = FileManager.default.createFile(atPath: stdout, contents: nil)
        let serve = Process()
        serve.executableURL = URL(fileURLWithPath: bench)
        serve.arguments = ["serve", root, "--port", "0"]
        serve.standardOutput = try FileHandle(forWritingTo: URL(fileURLWithPath: stdout))
        serve.standardError = FileHandle.nullDevice
        try serve.run()
        defer { serve.terminate(); serve.waitUntilExit() }
        var lines: [String] = []
        try waitForFiles(in: temp.path, "serve printed its URLs") {
            lines = ((try? String(contentsOfFile: stdout, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
            return lines.last?.hasPrefix("listing: ") ?? false
        }
        let listing = try XCTUnwrap(URLComponents(string: String(lines.last!.dropFirst("listing: ".count))))
        let port = try XCTUnwrap(listing.port)
        XCTAssertTrue(lines.contains { $0.hasSuffix("/sub%20dir/My%20Movie%20%231.mp4") }, "\(lines)")

        let get = { (path: String) in try RawHTTP.request(port: port, path: path) }
        XCTAssertEqual(try get("/sub%20dir/My%20Movie%20%231.mp4").body, Array("inner\n".utf8))
        XCTAssertEqual(try get("/a.txt").body, Array("top\n".utf8))
        let index = try get("/sub%20dir/")
        XCTAssertEqual(index.status, 200)
        XCTAssertTrue(String(decoding: index.body, as: UTF8.self).contains("<a href=\"My%20Movie%20%231.mp4\">My Movie #1.mp4</a>"))
        XCTAssertTrue(String(decoding: try get("/").body, as: UTF8.self).contains("<a href=\"sub%20dir/\">sub dir/</a>"))
        let redirect = try get("/sub%20dir")
        XCTAssertEqual(redirect.status, 301)
        XCTAssertEqual(redirect.header("Location"), "/sub%20dir/")
        for escape in ["/../outside.txt", "/sub%20dir/../../outside.txt", "/%2e%2e/outside.txt"] {
            XCTAssertEqual(try get(escape).status, 404, escape)
        }
    }
}

extension CLITests {
    /// A mount that `try-it.sh` cannot start shows the mount's own reason, then how options
    /// reach the mount through the script (the reason names `--proxy-port`, a flag of the binary).
    func testTryItSaysWhereMountOptionsGoWhenTheMountFails() throws {
        // The build under test, not whatever release build lies in the checkout (a stale one
        // would test old code): try-it.sh takes its directory.
        let binDir = try binary().deletingLastPathComponent().path
        guard FileManager.default.isExecutableFile(atPath: binDir + "/httpcachefs-bench") else {
            print("⚠️  SKIPPING try-it.sh test: no httpcachefs-bench next to the binary under test in \(binDir)")
            throw XCTSkip("try-it.sh needs httpcachefs-bench next to httpcachefs in \(binDir)")
        }
        let holder = try start(["proxy", "--proxy-port", "0"])   // holds a port, in this test's cache
        defer { holder.terminate(); holder.waitUntilExit() }
        let port: Int? = try waitForRuntimeFile(cacheDir)
        let mountpoint = temp.appending("try-mnt")
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let script = Self.repository.appendingPathComponent("mount-helpers/try-it.sh").path
        let r = try run([script, origin.url("/x.mp4")], environment: [
            "MOUNTPOINT": mountpoint, "CACHE_DIR": temp.appending("try-cache"), "XDG_STATE_HOME": temp.appending("state"),
            "HTTPCACHEFS_OPTS": "--proxy-port \(port!)", "HTTPCACHEFS_BIN_DIR": binDir,
        ], raw: true)
        XCTAssertEqual(r.status, 1, r.stderr)
        XCTAssertTrue(r.stderr.contains("the port is in use"), r.stderr)
        XCTAssertTrue(r.stderr.contains("more mount options go in HTTPCACHEFS_OPTS"), r.stderr)
    }
}

extension CLITests {
    /// A `sample.mp4` left by an earlier run that is no valid MP4 (an interrupted ffmpeg, random
    /// bytes) is made afresh, so the script's own ffprobe and the player find a film.
    func testTryItMakesItsSampleAfreshWhenTheOneThereIsNoValidMP4() throws {
        let binDir = try binary().deletingLastPathComponent().path
        let fm = FileManager.default
        guard fm.isExecutableFile(atPath: binDir + "/httpcachefs-bench"),
              fm.isExecutableFile(atPath: "/usr/bin/ffmpeg"), fm.isExecutableFile(atPath: "/usr/bin/ffprobe") else {
            print("⚠️  SKIPPING try-it.sh sample test: it needs ffmpeg, ffprobe and httpcachefs-bench next to \(binDir)")
            throw XCTSkip("try-it.sh sample test needs ffmpeg, ffprobe and httpcachefs-bench")
        }
        let samples = temp.appending("samples")
        try fm.createDirectory(atPath: samples, withIntermediateDirectories: true)
        try "not a film".write(toFile: samples + "/sample.mp4", atomically: true, encoding: .utf8)
        let mountpoint = temp.appending("try-mnt")
        try fm.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let script = Self.repository.appendingPathComponent("mount-helpers/try-it.sh").path
        // The mount is made to fail (a bad size): the sample and the origin are what this is about,
        // and the script stops its origin when the mount fails.
        let r = try run([script], environment: [
            "MOUNTPOINT": mountpoint, "CACHE_DIR": temp.appending("try-cache"), "SAMPLES_DIR": samples, "ORIGIN_PORT": "0",
            "XDG_STATE_HOME": temp.appending("state"), "HTTPCACHEFS_OPTS": "--cache-size lots", "HTTPCACHEFS_BIN_DIR": binDir,
        ], raw: true)
        XCTAssertEqual(r.status, 1, r.stderr)
        XCTAssertTrue(r.stderr.contains("invalid size 'lots' for --cache-size"), r.stderr)
        let probe = try ExternalTool.run("/usr/bin/ffprobe", ["-v", "error", "-show_entries", "format=format_name", "-of", "csv=p=0",
                                                               samples + "/sample.mp4"])
        XCTAssertTrue(probe.stdout.contains("mp4"), "the sample is an MP4 again: \(probe.stdout)\(probe.stderr)")
    }
}

extension CLITests {
    /// The unit reads /etc/httpcachefs/NAME.conf (no URL list is required any more), keeps the
    /// cache in /var/cache/httpcachefs/NAME and logs to its journal; systemd accepts it.
    func testTheSystemdUnitTakesItsInstanceFromTheConfigFile() throws {
        let unitPath = Self.repository.appendingPathComponent("mount-helpers/httpcachefs@.service").path
        let unit = try String(contentsOfFile: unitPath, encoding: .utf8)
        let exec = try XCTUnwrap(unit.split(separator: "\n").first { $0.hasPrefix("ExecStart=") })
        XCTAssertTrue(exec.contains("mount --foreground /mnt/%i --config /etc/httpcachefs/%i.conf"), String(exec))
        XCTAssertFalse(exec.contains("--url-list"), String(exec))
        XCTAssertFalse(exec.contains("--cache-dir"), "a cache_dir in NAME.conf must be able to win: \(exec)")
        XCTAssertTrue(unit.contains("Environment=HTTPCACHEFS_CACHE_DIR=/var/cache/httpcachefs/%i"))
        XCTAssertTrue(unit.contains("ConditionPathExists=/etc/httpcachefs/%i.conf"))
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/systemd-analyze") else {
            print("⚠️  not verifying the unit: no systemd-analyze")
            return
        }
        let instance = temp.appending("httpcachefs@media.service")
        try unit.replacingOccurrences(of: "/usr/local/bin/httpcachefs", with: try binary().path)
            .write(toFile: instance, atomically: true, encoding: .utf8)
        let verify = try ExternalTool.run("/usr/bin/systemd-analyze", ["verify", "--man=no", instance])
        XCTAssertEqual(verify.status, 0, verify.stdout + verify.stderr)
    }
}

/// Issue 50: `cache ls` on a terminal fits its width and shows names decoded; piped, the lines
/// are what they were (full, percent-encoded URLs that `cache rm` takes back).
extension CLITests {
    func testCacheLsFitsTheTerminalAndShowsNamesDecoded() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/script") else { throw XCTSkip("no script(1) for a terminal") }
        let long = "/library/" + String(repeating: "deep-folder/", count: 12) + "My%20Film%20%C3%A9t%C3%A9%0A%1B%5B2J.bin"
        origin.setGeneratedFile(long, length: 1000, seed: 61)
        XCTAssertEqual(try run(["cat", origin.url(long)]).status, 0)

        let piped = try run(["cache", "ls"])
        XCTAssertEqual(piped.status, 0, piped.stderr)
        XCTAssertTrue(piped.text.contains(origin.url(long) + "  "), "a pipe gets the encoded URL in full: \(piped.text)")

        // script(1) runs the command on a terminal 100 columns wide.
        let command = "stty cols 100 rows 24; exec \"$0\" cache ls --cache-dir \"$1\""
        let tty = try run(["/usr/bin/script", "-qec", "/bin/sh -c '\(command)' \(try binary().path) \(cacheDir)", "/dev/null"],
                          environment: ["COLUMNS": "300"], raw: true)
        XCTAssertEqual(tty.status, 0, tty.stderr)
        let lines = tty.text.replacingOccurrences(of: "\r", with: "").split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first?.hasPrefix("URL"), true, tty.text)
        for line in lines { XCTAssertLessThanOrEqual(line.count, 100, "wider than the terminal: \(line)") }
        let row = try XCTUnwrap(lines.first { $0.contains("1000 B") }, tty.text)
        XCTAssertTrue(row.contains("…"), row)
        XCTAssertTrue(row.contains(#"été\u{A}\u{1B}[2J.bin"#), "decoded, controls escaped: \(row)")
        XCTAssertFalse(tty.text.contains("\u{1B}[2J"), "an escape reached the terminal")
    }
}
