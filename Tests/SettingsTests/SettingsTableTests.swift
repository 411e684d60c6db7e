import XCTest
@testable import Settings

/// The one table of settings: config keys and fstab words are made from it, with the few
/// exceptions it names (the binary's own option list is checked against it in `CLITests`).
final class SettingsTableTests: XCTestCase {
    func testEverySettingIsAConfigKeyAndAnFstabWordUnlessItSaysWhyNot() {
        for setting in SettingsTable.all {
            XCTAssertEqual(ConfigFile.knownKeys.contains(setting.name), setting.inConfig, setting.name)
            if !setting.inConfig || setting.fstab == .none {
                XCTAssertNotNil(setting.why, "\(setting.name) is left out somewhere without a reason")
            }
        }
        let exceptions = SettingsTable.all.filter { !$0.inConfig || $0.fstab == .none }.map(\.name).sorted()
        XCTAssertEqual(exceptions, ["allow-other", "config", "daemon", "foreground", "rc-pass", "read-only", "s3-secret-access-key", "s3-session-token", "tier", "user"], "the listed few")
        XCTAssertEqual(Set(SettingsTable.all.map(\.name)).count, SettingsTable.all.count, "no setting twice")
    }

    func testTheSettingsThatWereUnknownAreConfigKeysNow() throws {
        let file = try ConfigFile.parse("""
        proxy_port = 0
        allow-host = *.example.com
        index = films=http://h/films/
        index = http://h/shows/
        index_ttl = 5m
        url-list = /etc/httpcachefs/media.list
        by-url = yes
        bind = 0.0.0.0
        token = abc
        no_proxy = no
        no-passthrough = true
        stop-timeout = 30s
        """, path: "cfg")
        XCTAssertEqual(file.list("index"), ["films=http://h/films/", "http://h/shows/"])
        XCTAssertEqual(file["proxy-port"], "0")
        XCTAssertEqual(file.list("allow-host"), ["*.example.com"])
        XCTAssertEqual(file["no-passthrough"], "true")
        XCTAssertEqual(try ConfigFile.parse("port = 8000\n", path: "cfg")["proxy-port"], "8000", "an alias is its setting")
    }

    func testATypoInTheConfigFileNamesFileLineAndTheSettingMeant() {
        XCTAssertThrowsError(try ConfigFile.parse("# media\ncache_size = 1G\ncache_sise = 1G\n", path: "/etc/httpcachefs/media.conf")) { error in
            XCTAssertEqual("\(error)", "unknown setting 'cache_sise' at /etc/httpcachefs/media.conf:3; did you mean 'cache_size'?")
        }
        XCTAssertThrowsError(try ConfigFile.parse("frobnicate = 1\n", path: "cfg")) { error in
            XCTAssertTrue("\(error)".hasPrefix("unknown setting 'frobnicate' at cfg:1 (known: allow-host, "), "\(error)")
        }
        XCTAssertThrowsError(try ConfigFile.parse("foreground = yes\n", path: "cfg"), "not a config key")
    }

    func testFstabWordsBecomeOptionsAndTheRestStaysForLibfuse() throws {
        let (arguments, fuse) = try FstabWords.split([
            "rw", "noauto", "_netdev", "nofail", "x-systemd.automount", "comment=x", "user", "defaults",
            "cache_size=20G", "index=http://h/films/", "by_url", "no-proxy=yes", "insecure=no", "allow_other", "uid=1000", "umask=027",
        ])
        XCTAssertEqual(arguments, ["--cache-size", "20G", "--index", "http://h/films/", "--by-url", "--no-proxy"])
        XCTAssertEqual(fuse, ["allow_other", "uid=1000", "umask=027"], "ownership words are read from -o by the mount itself")
    }

    func testAnFstabTypoGetsTheWordMeantAndAMissingValueIsNamed() {
        XCTAssertThrowsError(try FstabWords.split(["allow_other", "cache_sise=1G"])) { error in
            XCTAssertEqual("\(error)", "unknown mount option 'cache_sise'; did you mean 'cache_size'?")
        }
        XCTAssertThrowsError(try FstabWords.split(["revalidate-afte=1h"])) { error in
            XCTAssertEqual("\(error)", "unknown mount option 'revalidate-afte'; did you mean 'revalidate-after'?", "spelled as written")
        }
        XCTAssertThrowsError(try FstabWords.split(["cache_size"])) { error in
            XCTAssertEqual("\(error)", "mount option 'cache_size' needs a value: cache_size=...")
        }
        XCTAssertEqual(try FstabWords.split(["bogus_opt", "default_permissions"]).fuseOptions, ["bogus_opt", "default_permissions"],
                       "a word close to no setting is libfuse's to judge")
    }

    func testMountArgumentsHaveTheirSettingWordsExpandedInPlace() throws {
        XCTAssertEqual(try FstabWords.expandingMountArguments(["mount", "/mnt/m", "-o", "cache_size=1G,allow_other", "-oby_url", "http://h/a"]),
                       ["mount", "/mnt/m", "--cache-size", "1G", "--by-url", "http://h/a", "-o", "allow_other"])
        XCTAssertEqual(try FstabWords.expandingMountArguments(["cat", "-o", "x"]), ["cat", "-o", "x"], "other commands are left alone")
    }

    func testSuggestionsAreForNearMissesOnly() {
        let keys = SettingsTable.all.map(\.name)
        XCTAssertEqual(SettingsTable.suggestion(for: "cache-szie", among: keys), "cache-size")
        XCTAssertEqual(SettingsTable.suggestion(for: "readtimeout", among: keys), "read-timeout")
        XCTAssertNil(SettingsTable.suggestion(for: "xyz", among: keys))
        XCTAssertNil(SettingsTable.suggestion(for: "noatime", among: keys))
    }

    // MARK: rclone's names

    func testRcloneNamesThatMeanTheSameAreAliasesEverywhere() throws {
        for (rclone, ours) in [("vfs-cache-max-size", "cache-size"), ("vfs-cache-max-age", "cache-max-age"),
                               ("dir-cache-time", "index-ttl"), ("buffer-size", "read-ahead-max"),
                               ("vfs-read-ahead", "read-ahead-max"), ("max-read-ahead", "read-ahead-max")] {
            XCTAssertEqual(SettingsTable.named(rclone)?.name, ours, rclone)
            XCTAssertEqual(SettingsTable.aliases[rclone], ours, rclone)
        }
        let file = try ConfigFile.parse("vfs_cache_max_size = 20G\ndir-cache-time = 5m\n", path: "c")
        XCTAssertEqual(file["cache-size"], "20G")
        XCTAssertEqual(file["index-ttl"], "5m")
        XCTAssertEqual(try FstabWords.expandingMountArguments(["mount", "/m", "-o", "vfs_cache_max_size=1G,allow_other", "http://h/a"]),
                       ["mount", "/m", "--cache-size", "1G", "http://h/a", "-o", "allow_other"])
        XCTAssertEqual(SettingsTable.named("allow_other")?.name, "allow-other")
    }

    func testRcloneNamesThatMeanSomethingElseAreRefusedWithTheWayOut() {
        let cases: [([String], String)] = [
            (["cat", "http://h/a", "--timeout", "5m"], "--read-timeout"),
            (["mount", "/m", "--vfs-read-chunk-streams", "4"], "--max-connections"),
            (["mount", "/m", "--rc", "--rc-no-auth"], "always asks for a login"),
            (["mount", "/m", "--max-transfer", "750G"], "--egress-budget SIZE/PERIOD"),
        ]
        for (arguments, message) in cases {
            XCTAssertThrowsError(try FstabWords.expandingMountArguments(arguments), "\(arguments)") { error in
                XCTAssertTrue("\(error)".contains(message), "\(error)")
                XCTAssertFalse("\(error)".contains("\n"))
            }
        }
        XCTAssertNoThrow(try FstabWords.expandingMountArguments(["cat", "--", "--timeout"]), "after --, an argument")
    }
}

/// `--bwlimit` as one rate or as rclone's timetables.
final class BandwidthLimitValueTests: XCTestCase {
    func testOneRateOrATimetableAsRcloneWritesIt() throws {
        XCTAssertEqual(try BandwidthLimitValue.parse("10M", option: "--bwlimit"), .constant(10 << 20))
        XCTAssertEqual(try BandwidthLimitValue.parse("500K/s", option: "--bwlimit"), .constant(500 << 10))
        XCTAssertEqual(try BandwidthLimitValue.parse("off", option: "--bwlimit"), .constant(0))
        XCTAssertEqual(try BandwidthLimitValue.parse("08:00,512k 23:00,off", option: "--bwlimit"),
                       .timetable(weekly: false, entries: [.init(minute: 480, bytesPerSecond: 512 << 10), .init(minute: 1380, bytesPerSecond: 0)]))
        XCTAssertEqual(try BandwidthLimitValue.parse("Sat-00:00,off Mon-08:00,10M:2M", option: "--bwlimit"),
                       .timetable(weekly: true, entries: [.init(minute: 480, bytesPerSecond: 2 << 20),
                                                          .init(minute: 5 * 1440, bytesPerSecond: 0)]),
                       "sorted; UP:DOWN takes the download side")
    }

    func testBadTimetablesSayWhatIsWrong() {
        let cases: [(String, String)] = [
            ("08:00,512K 23:00", "expected HH:MM,RATE"),
            ("25:00,1M", "invalid time '25:00'"),
            ("Fun-08:00,1M", "invalid day 'Fun'"),
            ("Mon-08:00,1M 09:00,off", "mixes entries with and without a day"),
            ("08:00,1M 08:00,2M", "gives '08:00' twice"),
            ("512", "has no unit: write 512K for KiB/s (rclone's reading) or 512B"),
            ("08:00,fast", "invalid size 'fast'"),
        ]
        for (text, message) in cases {
            XCTAssertThrowsError(try BandwidthLimitValue.parse(text, option: "--bwlimit"), text) { error in
                XCTAssertTrue("\(error)".contains(message), "\(text): \(error)")
            }
        }
    }
}
