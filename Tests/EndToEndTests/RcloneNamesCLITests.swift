import Foundation
import XCTest

/// rclone's option names as the binary takes them: the same meaning works and is listed in
/// `--help` as "rclone name"; another meaning is refused in one line that says what to use.
/// (A mount with them, as a normal user: `UnprivilegedUserTests.testAMountWithRclonesNames`.)
extension CLITests {
    func testRclonesNamesForTheSameSettingsWork() throws {
        origin.setGeneratedFile("/r.bin", length: 1000, seed: 61)
        let r = try run(["cat", origin.url("/r.bin"), "--vfs-cache-max-size", "1G", "--buffer-size", "16M",
                         "--vfs-read-ahead", "8M", "--vfs-cache-max-age", "30d"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout.count, 1000)
        let help = try run(["help", "mount"], cacheDirectory: nil)
        for name in ["--vfs-cache-max-size", "--dir-cache-time", "--buffer-size", "--vfs-read-ahead", "--max-read-ahead",
                     "--allow-other", "--read-only", "--daemon", "--file-perms", "--dir-perms", "--vfs-cache-mode", "--no-modtime",
                     "--attr-timeout", "--poll-interval", "--vfs-read-chunk-size", "--vfs-read-chunk-size-limit", "--rc", "--rc-addr",
                     "--rc-user", "--rc-pass", "-v", "-q", "--log-level"] {
            XCTAssertTrue(help.text.contains(name), "help mount lists \(name)")
        }
        XCTAssertTrue(help.text.contains("rclone name"), help.text)

        // rclone's log levels: -v, -vv, -q and its upper-case level names.
        for flags in [["-v"], ["-vv"], ["-q"], ["--log-level", "DEBUG"], ["--log-level", "NOTICE"], ["--verbose", "--verbose"]] {
            let r = try run(["cat", origin.url("/r.bin")] + flags)
            XCTAssertEqual(r.status, 0, "\(flags): \(r.stderr)")
            XCTAssertEqual(r.stdout.count, 1000, "\(flags)")
        }

        // A --bwlimit timetable as rclone writes it (the limit itself: BandwidthTimetableTests).
        let timed = try run(["cat", origin.url("/r.bin"), "--bwlimit", "00:00,64M 12:00,off"])
        XCTAssertEqual(timed.status, 0, timed.stderr)
        let bare = try run(["cat", origin.url("/r.bin"), "--bwlimit", "512"])
        XCTAssertEqual(bare.status, 64)
        XCTAssertOneLineError(bare, contains: "has no unit: write 512K for KiB/s")
    }

    func testRclonesNamesThatMeanSomethingElseAreOneLineWithTheWayOut() throws {
        let mountpoint = temp.appending("m")
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let url = origin.url("/r.bin")
        let cases: [([String], String)] = [
            (["mount", mountpoint, url, "--vfs-cache-mode", "writes"], "--vfs-cache-mode writes (--vfs-cache-mode) is not possible here"),
            (["mount", mountpoint, url, "--vfs-read-chunk-streams", "4"], "--max-connections"),
            (["mount", mountpoint, url, "--vfs-read-chunk-size", "lots"], "invalid size 'lots' for --vfs-read-chunk-size"),
            (["mount", mountpoint, url, "--poll-interval", "500ms"], "poll interval '500ms' for --poll-interval is too short: at least 1s (0 is off)"),
            (["mount", mountpoint, url, "--attr-timeout", "soon"], "invalid duration 'soon' for --attr-timeout"),
            (["mount", mountpoint, url, "-v", "-q"], "-v and -q contradict each other"),
            (["mount", mountpoint, url, "--rc", "--rc-addr", "0.0.0.0:5572"], "the remote control listens on loopback only here"),
            (["mount", mountpoint, url, "--rc-addr", ":5572"], "is every interface"),
            (["mount", mountpoint, url, "--rc", "--rc-user", "u"], "--rc-user needs --rc-pass too"),
            (["mount", mountpoint, url, "--rc-user", "u", "--rc-pass", "p"], "--rc-user is for the remote control: give --rc too"),
            (["mount", mountpoint, url, "--rc", "--no-proxy"], "give --rc-user and --rc-pass"),
            (["mount", mountpoint, url, "--rc", "--rc-no-auth"], "always asks for a login"),
            (["mount", mountpoint, url, "--daemon", "--foreground"], "--daemon and --foreground contradict each other"),
            (["mount", mountpoint, url, "--file-perms", "0444", "--dir-perms", "0550"], "different read bits"),
            (["mount", mountpoint, url, "--umask", "022", "--file-perms", "0444"], "give one of them"),
        ]
        for (args, message) in cases {
            let r = try run(args)
            XCTAssertEqual(r.status, 64, "\(args): \(r.stderr)")
            XCTAssertOneLineError(r, contains: message)
        }
    }

    /// The config file takes rclone's names as the command line does, and names file and line
    /// when a value is refused.
    func testRclonesNamesInTheConfigFile() throws {
        origin.setGeneratedFile("/r.bin", length: 1000, seed: 62)
        let config = temp.appending("rclone-style.conf")
        try "buffer_size = 16M\nvfs-cache-max-age = 30d\ndaemon = yes\nread-only = yes\nverbose = 2\n".write(toFile: config, atomically: true, encoding: .utf8)
        let r = try run(["cat", origin.url("/r.bin"), "--config", config])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout.count, 1000)

        let mountpoint = temp.appending("m")
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        try "vfs_cache_mode = full\nrc = yes\nrc-addr = 0.0.0.0:5572\n".write(toFile: config, atomically: true, encoding: .utf8)
        let addr = try run(["mount", mountpoint, origin.url("/r.bin"), "--config", config])
        XCTAssertEqual(addr.status, 64)
        XCTAssertOneLineError(addr, contains: "('0.0.0.0:5572' for 'rc-addr' at \(config):3 is not loopback)")
        try "vfs_cache_mode = minimal\n".write(toFile: config, atomically: true, encoding: .utf8)
        let mode = try run(["mount", mountpoint, origin.url("/r.bin"), "--config", config])
        XCTAssertEqual(mode.status, 64)
        XCTAssertOneLineError(mode, contains: "--vfs-cache-mode minimal ('vfs-cache-mode' at \(config):1) is not possible here")
    }
}
