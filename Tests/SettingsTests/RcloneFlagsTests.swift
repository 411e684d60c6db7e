import XCTest
@testable import Settings

/// rclone mount's flags as people carry them in unit files (issue 50): taken with their meaning
/// here, or with a note of what does their job, or refused with why; each a config key too.
final class RcloneFlagsTests: XCTestCase {
    func testRclonesMountFlagsAreTakenNotRefused() throws {
        for arguments in [["mount", "/m", "--vfs-cache-mode", "full"], ["mount", "/m", "--poll-interval", "1m"],
                          ["mount", "/m", "--vfs-read-chunk-size=32M"], ["mount", "/m", "--rc", "--rc-addr", "localhost:5572"]] {
            XCTAssertNoThrow(try FstabWords.expandingMountArguments(arguments), "\(arguments)")
        }
    }

    func testTheRemoteControlsPasswordIsNoFstabWord() throws {
        XCTAssertEqual(try FstabWords.split(["rc", "rc_addr=localhost:5572", "vfs_cache_mode=full", "allow_other"]).arguments,
                       ["--rc", "--rc-addr", "localhost:5572", "--vfs-cache-mode", "full"])
        XCTAssertThrowsError(try FstabWords.split(["rc", "rc_pass=s3cret"])) { error in
            XCTAssertEqual("\(error)", "mount option 'rc_pass' would put a password in /etc/fstab, which every user can read: put rc-pass in the config file (--config, mode 0600)")
        }
    }

    /// The config file takes every name the command line takes: each setting that is a key, and
    /// each alias (rclone's names among them) as its setting.
    func testEveryOptionNameAndAliasIsAConfigKey() throws {
        let names = SettingsTable.all.filter(\.inConfig).map(\.name) + SettingsTable.aliases.keys.sorted()
        for name in names {
            let file = try ConfigFile.parse("\(name) = 1\n", path: "c")
            let key = SettingsTable.named(name)!.name
            XCTAssertTrue(file[key] == "1" || file.list(key) == ["1"], name)
        }
        for name in ["buffer-size", "daemon", "read-only", "vfs-cache-max-age", "vfs-cache-mode", "no-modtime", "attr-timeout",
                     "poll-interval", "vfs-read-chunk-size", "vfs-read-chunk-size-limit", "rc", "rc-addr", "rc-user", "rc-pass",
                     "verbose", "quiet", "log-level"] {
            XCTAssertNoThrow(try ConfigFile.parse("\(name.replacingOccurrences(of: "-", with: "_")) = yes\n", path: "c"), name)
        }
    }

    func testVfsCacheModeFullIsTakenTheOthersRefusedWithWhy() throws {
        XCTAssertNoThrow(try RcloneNames.checkCacheMode("full", option: "--vfs-cache-mode"))
        XCTAssertNoThrow(try RcloneNames.checkCacheMode("FULL", option: "--vfs-cache-mode"))
        for mode in ["off", "minimal", "writes"] {
            XCTAssertThrowsError(try RcloneNames.checkCacheMode(mode, option: "--vfs-cache-mode")) { error in
                XCTAssertTrue("\(error)".contains("--vfs-cache-mode \(mode) (--vfs-cache-mode) is not possible here: httpcachefs always keeps what it reads"), "\(error)")
                XCTAssertTrue("\(error)".contains("give full or drop it"), "\(error)")
            }
        }
        XCTAssertThrowsError(try RcloneNames.checkCacheMode("fulll", option: "'vfs-cache-mode' at c:1")) { error in
            XCTAssertEqual("\(error)", "invalid value 'fulll' for 'vfs-cache-mode' at c:1: rclone's cache modes are off, minimal, writes and full; httpcachefs always works as full")
        }
    }

    func testChunkSizesAreCheckedThoughTheyChangeNothing() throws {
        for text in ["32M", "off", "-1", "128k", "0"] { XCTAssertNoThrow(try RcloneNames.checkChunkSize(text, option: "--vfs-read-chunk-size"), text) }
        XCTAssertThrowsError(try RcloneNames.checkChunkSize("lots", option: "--vfs-read-chunk-size")) { error in
            XCTAssertTrue("\(error)".hasPrefix("invalid size 'lots' for --vfs-read-chunk-size"), "\(error)")
        }
        XCTAssertNotNil(RcloneNames.acceptedNotes["vfs-read-chunk-size"]?.range(of: "--read-ahead-max"))
        XCTAssertNotNil(RcloneNames.acceptedNotes["no-modtime"])
    }

    func testVerboseAndQuietAreLogLevels() throws {
        let cases: [(Int, Bool, String?)] = [(0, false, nil), (1, false, "info"), (2, false, "debug"), (3, false, "debug"), (0, true, "error")]
        for (verbose, quiet, level) in cases {
            XCTAssertEqual(try RcloneNames.logLevelName(verbose: verbose, quiet: quiet), level, "-v×\(verbose) -q \(quiet)")
        }
        XCTAssertThrowsError(try RcloneNames.logLevelName(verbose: 1, quiet: true)) { error in
            XCTAssertEqual("\(error)", "-v and -q contradict each other: give one")
        }
        XCTAssertEqual(try RcloneNames.verboseCount("2", option: "v"), 2)
        XCTAssertEqual(try RcloneNames.verboseCount("yes", option: "v"), 1)
        XCTAssertEqual(try RcloneNames.verboseCount("no", option: "v"), 0)
        XCTAssertThrowsError(try RcloneNames.verboseCount("loud", option: "'verbose' at c:2")) { error in
            XCTAssertEqual("\(error)", "invalid value 'loud' for 'verbose' at c:2: expected 0, 1 (-v), 2 (-vv), yes or no")
        }
    }

    /// `--rc-addr`: loopback only; rclone's spellings of it taken.
    func testTheRemoteControlListensOnLoopbackOnly() throws {
        let taken: [(String, RcAddress)] = [
            ("localhost:5572", RcAddress(host: "127.0.0.1", port: 5572)), ("127.0.0.1:0", RcAddress(host: "127.0.0.1", port: 0)),
            ("[::1]:5573", RcAddress(host: "::1", port: 5573)), ("127.0.1.1:80", RcAddress(host: "127.0.1.1", port: 80)),
            ("LOCALHOST:1", RcAddress(host: "127.0.0.1", port: 1)),
        ]
        for (text, address) in taken { XCTAssertEqual(try RcAddress.parse(text, option: "--rc-addr"), address, text) }
        let refused: [(String, String)] = [
            (":5572", "the remote control listens on loopback only here (':5572' for --rc-addr is every interface): give localhost:5572"),
            ("0.0.0.0:5572", "is not loopback): give localhost:5572"),
            ("192.168.1.2:5572", "is not loopback"),
            ("127.0.0.1.evil.test:5572", "is not loopback"),
            ("localhost", "expected HOST:PORT"),
            ("localhost:99999", "invalid port '99999'"),
            ("localhost:", "invalid port ''"),
            ("[::1]", "expected HOST:PORT"),
        ]
        for (text, message) in refused {
            XCTAssertThrowsError(try RcAddress.parse(text, option: "--rc-addr"), text) { error in
                XCTAssertTrue("\(error)".contains(message), "\(text): \(error)")
            }
        }
    }
}
