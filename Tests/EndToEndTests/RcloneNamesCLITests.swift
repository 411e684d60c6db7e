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
                     "--allow-other", "--read-only", "--daemon", "--file-perms", "--dir-perms"] {
            XCTAssertTrue(help.text.contains(name), "help mount lists \(name)")
        }
        XCTAssertTrue(help.text.contains("rclone name"), help.text)

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
            (["mount", mountpoint, url, "--vfs-cache-mode", "full"], "drop --vfs-cache-mode"),
            (["cat", url, "--vfs-read-chunk-size", "32M"], "--slice-size"),
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
}
