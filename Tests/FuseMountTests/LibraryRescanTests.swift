import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest

/// Issue 47, "a scan is paid once": a library probed through the mount, then other files read
/// through it until the cap turned over three times, then probed again. With the scan share the
/// second probe sends no request for file bytes; with `--scan-share 0` (plain LRU) it pays again,
/// which shows the turnover really pushed the first probe's bytes out of an unshared cap.
///
/// The probe is the real `ffprobe` of real films when ffmpeg is installed, else a scanner-class
/// reader of our own: `dd` copied under the name `ffprobe` (classified by its process name),
/// reading a film's first and last 64 KiB.
final class LibraryRescanTests: XCTestCase {
    nonisolated(unsafe) static var films: [String: [UInt8]] = [:]
    nonisolated(unsafe) static var realProbe: String?
    var h: DaemonHarness!
    /// Played files: 6 × 16 MiB through a 32 MiB cap.
    private let others = 6
    private let otherSize = 16 << 20

    override class func setUp() {
        guard let ffmpeg = ExternalTool.find("ffmpeg"), let ffprobe = ExternalTool.find("ffprobe") else {
            print("NOTE LibraryRescanTests: ffmpeg or ffprobe not installed: probing with a scripted scanner-class reader instead")
            films = ["mkv": randomBytes(6 << 20, seed: 1), "mp4": randomBytes(6 << 20, seed: 2)]
            return
        }
        // Several MiB each, the MP4 with its index after the media: a probe reads head and tail.
        for ext in ["mkv", "mp4"] {
            switch TestFilm.make(ffmpeg: ffmpeg, ext: ext, seconds: 40, size: "640x360", videoBitrate: "900k") {
            case let .success(film): films[ext] = film
            case let .failure(why):
                films = ["mkv": randomBytes(6 << 20, seed: 1), "mp4": randomBytes(6 << 20, seed: 2)]
                print("NOTE LibraryRescanTests: \(why.message): probing with a scripted reader")
                return
            }
        }
        realProbe = ffprobe
    }

    override func setUpWithError() throws {
        h = try DaemonHarness()
        var names = Self.films.keys.sorted().map { "film.\($0)" }
        for i in 0..<others {
            names.append("other\(i).bin")
            h.origin.setFile("/lib/other\(i).bin", data: randomBytes(otherSize, seed: UInt64(100 + i)), contentType: "application/octet-stream")
        }
        h.origin.setAutoindex("/lib/", names)
        for (ext, data) in Self.films { h.origin.setFile("/lib/film.\(ext)", data: data, contentType: "video/\(ext)") }
    }

    override func tearDown() {
        h?.cleanup()
    }

    func testARescanAfterTheCapTurnedOverSendsNoRequestForFileBytes() throws {
        XCTAssertEqual(try rescanRequests(share: "6M"), [], "the second probe is served from the scan share")
    }

    func testWithoutAShareTheSameRescanPaysAgain() throws {
        XCTAssertNotEqual(try rescanRequests(share: "0"), [], "plain LRU: playback pushed the probe's bytes out")
    }

    /// Probes the films, reads every other file whole, drops the films' pages from the kernel's
    /// cache, probes again: the origin's GETs of film bytes during the second probe.
    private func rescanRequests(share: String) throws -> [String] {
        let m = try h.mount(["--index", h.origin.url("/lib/"), "--cache-size", "32M", "--slice-size", "1M",
                             "--scan-share", share])
        XCTAssertEqual(m.status, 0, m.stderr + h.log)
        let probe = try scanner()
        for ext in Self.films.keys.sorted() { try run(probe, film: "film.\(ext)") }
        for i in 0..<others {
            let out = try h.run("/bin/dd", ["if=" + h.path("other\(i).bin"), "of=/dev/null", "bs=1M"], timeout: 120)
            XCTAssertEqual(out.status, 0, out.stderr)
        }
        for ext in Self.films.keys.sorted() { dropPageCache(h.path("film.\(ext)")) }
        h.origin.resetLog()
        for ext in Self.films.keys.sorted() { try run(probe, film: "film.\(ext)") }
        return h.origin.requests.filter { $0.method == "GET" && $0.path.hasPrefix("/lib/film.") }
            .map { "\($0.method) \($0.path) \($0.range ?? "whole")" }
    }

    /// The real ffprobe, or `dd` under the name `ffprobe` (a scanner by its process name).
    private func scanner() throws -> String {
        if let real = Self.realProbe { return real }
        let copy = h.directory.appending("ffprobe")
        try FileManager.default.copyItem(atPath: "/bin/dd", toPath: copy)
        return copy
    }

    private func run(_ probe: String, film: String) throws {
        if Self.realProbe != nil {
            // Jellyfin's probe, as its logs show it.
            let out = try h.run(probe, ["-i", h.path(film), "-threads", "0", "-v", "warning", "-print_format", "json",
                                        "-show_streams", "-show_chapters", "-show_format"], timeout: 120)
            XCTAssertEqual(out.status, 0, out.stderr)
            XCTAssertTrue(out.stdout.contains("\"codec_name\": \"h264\""), out.stdout)
            return
        }
        let blocks = Int64(Self.films[String(film.split(separator: ".").last!)]!.count) / (64 << 10)
        for skip in [0, blocks - 1] {
            let out = try h.run(probe, ["if=" + h.path(film), "of=/dev/null", "bs=64K", "count=1", "skip=\(skip)"])
            XCTAssertEqual(out.status, 0, out.stderr)
        }
    }

    /// Drops what the kernel cached of `path`'s pages, so the next reads reach the daemon.
    private func dropPageCache(_ path: String) {
        let fd = open(path, O_RDONLY)
        XCTAssertGreaterThanOrEqual(fd, 0, path)
        XCTAssertEqual(posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED), 0)
        close(fd)
    }
}
