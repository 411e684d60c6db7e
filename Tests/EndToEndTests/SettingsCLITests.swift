import Foundation
import Settings
import TestSupport
import XCTest

/// The one table of settings against the binary's own options, and the errors a new user meets
/// first: each one line, naming the value or path and what to do.
extension CLITests {
    /// Every long option `mount` takes (it has every shared group) is a row of `SettingsTable`,
    /// and every row is an option of the same kind.
    func testEveryLongOptionIsASettingOfTheTableAndBack() throws {
        let r = try run(["mount", "--experimental-dump-help"], cacheDirectory: nil)
        XCTAssertEqual(r.status, 0, r.stderr)
        let json = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(r.stdout)) as? [String: Any])
        let arguments = try XCTUnwrap((json["command"] as? [String: Any])?["arguments"] as? [[String: Any]])
        var options: [String: Setting.Kind] = [:]
        for argument in arguments {
            let longs = (argument["names"] as? [[String: Any]] ?? []).filter { $0["kind"] as? String == "long" }
                .compactMap { $0["name"] as? String }
            guard let name = longs.first, !["help", "version"].contains(name) else { continue }
            // A hidden option is what a joining mount hands its daemon (`--s3-given-only`), no setting.
            if argument["shouldDisplay"] as? Bool == false { continue }
            let kind: Setting.Kind = argument["kind"] as? String == "flag" ? .flag
                : (argument["isRepeating"] as? Bool == true ? .list : .value)
            options[name] = kind
            for alias in longs.dropFirst() { XCTAssertEqual(SettingsTable.aliases[alias], name, "alias --\(alias)") }
        }
        let table = Dictionary(uniqueKeysWithValues: SettingsTable.all.map { ($0.name, $0.kind) })
        XCTAssertEqual(Set(options.keys).subtracting(table.keys).sorted(), [], "options missing from SettingsTable")
        XCTAssertEqual(Set(table.keys).subtracting(options.keys).sorted(), [], "settings that are no option")
        for (name, kind) in options { XCTAssertEqual(table[name], kind, "--\(name)") }
    }

    func testACacheDirectoryThatIsAFileIsNamed() throws {
        let file = temp.appending("afile")
        try "x".write(toFile: file, atomically: true, encoding: .utf8)
        let r = try run(["cache", "ls"], cacheDirectory: file)
        XCTAssertEqual(r.status, 64)
        XCTAssertOneLineError(r, contains: "cache directory \(file) for --cache-dir is a file, not a directory")
        let below = try run(["cache", "ls"], cacheDirectory: file + "/sub")
        XCTAssertOneLineError(below, contains: "cannot create cache directory \(file)/sub for --cache-dir: \(file) is a file")
    }

    /// Issue 50: a bad value names where it came from: the command line's flag, the config
    /// file's line, or the environment variable.
    func testABadValueNamesItsSource() throws {
        let file = temp.appending("afile")
        try "x".write(toFile: file, atomically: true, encoding: .utf8)
        let config = temp.appending("c.conf")
        try "# mine\n\ncache-dir = \(file)\n".write(toFile: config, atomically: true, encoding: .utf8)
        let cases: [(args: [String], env: [String: String], source: String)] = [
            (["cache", "ls", "--cache-dir", file], [:], "for --cache-dir is a file"),
            (["cache", "ls", "--config", config], [:], "for 'cache-dir' at \(config):3 is a file"),
            (["cache", "ls"], ["HTTPCACHEFS_CACHE_DIR": file], "for $HTTPCACHEFS_CACHE_DIR from the environment is a file"),
        ]
        for c in cases {
            let r = try run(c.args, cacheDirectory: nil, environment: c.env)
            XCTAssertEqual(r.status, 64, "\(c.args)")
            XCTAssertOneLineError(r, contains: c.source)
        }
    }

    func testANegativeSizeIsAnInvalidSizeNotAMissingValue() throws {
        let r = try run(["cache", "ls", "--cache-size", "-1"])
        XCTAssertEqual(r.status, 64)
        XCTAssertOneLineError(r, contains: "invalid size '-1' for --cache-size")
        let port = try run(["proxy", "--proxy-port", "-5"])
        XCTAssertOneLineError(port, contains: "invalid port '-5' for --proxy-port")
    }

    func testATooSmallListingMemoryIsOneLine() throws {
        let mountpoint = temp.appending("mnt-lm")
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let r = try run(["mount", mountpoint, "--index", "http://127.0.0.1:1/", "--listing-memory", "64K"])
        XCTAssertEqual(r.status, 64)
        XCTAssertOneLineError(r, contains: "listing memory '64K' for --listing-memory is too small: at least 1M")
    }

    func testMountWithNothingToMountIsOneLine() throws {
        let mountpoint = temp.appending("mnt")
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let r = try run(["mount", mountpoint])
        XCTAssertEqual(r.status, 64)
        XCTAssertOneLineError(r, contains: "nothing to mount on \(mountpoint): give URLs, --url-list FILE, --index URL or --by-url")
        let missing = try run(["mount"], cacheDirectory: nil)
        XCTAssertOneLineError(missing, contains: "Missing expected argument '<mountpoint>' (see 'httpcachefs mount --help')")
    }

    func testTyposGetTheSettingMeant() throws {
        let mountpoint = temp.appending("mnt")
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let fstab = try run(["mount", mountpoint, "http://127.0.0.1:9/a", "-o", "allow_other,cache_sise=1G"])
        XCTAssertEqual(fstab.status, 64)
        XCTAssertOneLineError(fstab, contains: "unknown mount option 'cache_sise'; did you mean 'cache_size'?")

        let option = try run(["cache", "ls", "--cache-sise", "1G"])
        XCTAssertEqual(option.status, 64)
        XCTAssertOneLineError(option, contains: "Unknown option '--cache-sise'. Did you mean '--cache-size'?")

        let config = temp.appending("media.conf")
        try "# media\ncache_size = 1G\ncache_sise = 1G\n".write(toFile: config, atomically: true, encoding: .utf8)
        let file = try run(["cache", "ls", "--config", config])
        XCTAssertEqual(file.status, 64)
        XCTAssertOneLineError(file, contains: "unknown setting 'cache_sise' at \(config):3; did you mean 'cache_size'?")
    }

    /// The settings that used to be "unknown" are read from the file (checked through their errors:
    /// nothing is mounted here).
    func testMountAndProxySettingsComeFromTheConfigFile() throws {
        let mountpoint = temp.appending("mnt")
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let config = temp.appending("media.conf")
        try "index = http://127.0.0.1:9/films/\nproxy_port = 99999\n".write(toFile: config, atomically: true, encoding: .utf8)
        let port = try run(["mount", mountpoint, "--config", config])
        XCTAssertEqual(port.status, 64)
        XCTAssertOneLineError(port, contains: "invalid port '99999' for 'proxy-port' at \(config):2")

        try "url-list = \(temp.appending("none.list"))\nstop_timeout = soon\n".write(toFile: config, atomically: true, encoding: .utf8)
        let timeout = try run(["mount", mountpoint, "--config", config])
        XCTAssertOneLineError(timeout, contains: "invalid duration 'soon' for 'stop-timeout' at \(config):2")

        try "url-list = \(temp.appending("none.list"))\nfuse_spin = 2ms\n".write(toFile: config, atomically: true, encoding: .utf8)
        let spin = try run(["mount", mountpoint, "--config", config])
        XCTAssertEqual(spin.status, 64)
        XCTAssertOneLineError(spin, contains: "FUSE spin '2ms' for 'fuse-spin' at \(config):2 is too long: at most 1ms")
    }
}

extension CLITests {
    /// `$HTTPCACHEFS_CACHE_DIR` is the default cache directory (the systemd unit sets it per
    /// instance); `--cache-dir` and the config file's `cache-dir` win over it.
    func testTheCacheDirectoryEnvironmentVariableIsTheDefault() throws {
        origin.setGeneratedFile("/env.bin", length: 1000, seed: 3)
        let directory = temp.appending("from-env")
        let r = try run(["cat", origin.url("/env.bin")], cacheDirectory: nil, environment: ["HTTPCACHEFS_CACHE_DIR": directory])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: directory + "/index.sqlite"), "cached under $HTTPCACHEFS_CACHE_DIR")
        let config = temp.appending("c.conf")
        try "cache-dir = \(temp.appending("from-config"))\n".write(toFile: config, atomically: true, encoding: .utf8)
        XCTAssertEqual(try run(["cat", origin.url("/env.bin"), "--config", config], cacheDirectory: nil,
                               environment: ["HTTPCACHEFS_CACHE_DIR": directory]).status, 0)
        XCTAssertTrue(FileManager.default.fileExists(atPath: temp.appending("from-config") + "/index.sqlite"), "the config file wins")
    }
}
