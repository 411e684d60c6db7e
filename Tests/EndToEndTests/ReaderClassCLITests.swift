import Foundation
import TestSupport
import XCTest

/// `--scanner` and `--background-reader`, and their config keys: a name that cannot be a
/// process's is one line naming it, where it was given and what to give instead.
extension CLITests {
    func testAScannerGivenAsAPathIsOneLine() throws {
        let mountpoint = temp.appending("mnt-scanner")
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let r = try run(["mount", mountpoint, "http://127.0.0.1:9/film.mkv", "--scanner", "mediainfo,/usr/bin/ffprobe"])
        XCTAssertEqual(r.status, 64)
        XCTAssertOneLineError(r, contains: "process name '/usr/bin/ffprobe' for --scanner is a path: give the program's name as `ps -o comm` shows it (e.g. ffprobe)")
        let empty = try run(["mount", mountpoint, "http://127.0.0.1:9/film.mkv", "--background-reader", "a,,b"])
        XCTAssertOneLineError(empty, contains: "empty process name in 'a,,b' for --background-reader")
    }

    func testABadScannerInTheConfigFileNamesItsLine() throws {
        let mountpoint = temp.appending("mnt-scanner-config")
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let config = temp.appending("scan.conf")
        try "scanner = my-probe\nscanner = ./probe\n".write(toFile: config, atomically: true, encoding: .utf8)
        let r = try run(["mount", mountpoint, "http://127.0.0.1:9/film.mkv", "--config", config])
        XCTAssertEqual(r.status, 64)
        XCTAssertOneLineError(r, contains: "process name './probe' for 'scanner' at \(config):2")
    }
}

extension CLITests {
    func testAnOnChangeProgramThatDoesNotExistIsOneLine() throws {
        let mountpoint = temp.appending("mnt-on-change")
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let r = try run(["mount", mountpoint, "http://127.0.0.1:9/film.mkv", "--on-change", "/nonexistent/tell-jellyfin --now"])
        XCTAssertEqual(r.status, 64)
        XCTAssertOneLineError(r, contains: "--on-change command '/nonexistent/tell-jellyfin' does not exist: give a program that exists, or one on PATH")
    }
}
