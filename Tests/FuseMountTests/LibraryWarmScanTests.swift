import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest

/// Issue 38: "a library warmed with `preload --recursive --head … --tail …` scans with no request
/// for file bytes". Real films (an MKV, and an MP4 with its index at the end, each several times
/// the head and tail) in an autoindex folder, warmed through the running mount daemon, then probed
/// through the mount as Jellyfin probes them: the origin sees no request for a film's bytes.
final class LibraryWarmScanTests: XCTestCase {
    nonisolated(unsafe) static var films: [String: [UInt8]] = [:]
    nonisolated(unsafe) static var skipReason: String?
    var h: DaemonHarness!

    override class func setUp() {
        guard let ffmpeg = ExternalTool.find("ffmpeg"), ExternalTool.find("ffprobe") != nil else {
            skipReason = "ffmpeg or ffprobe not installed (apt-get install ffmpeg)"
            return
        }
        // About 7 MB each: far more than the 1 MiB head and 2 MiB tail warmed below.
        for ext in ["mkv", "mp4"] {
            switch TestFilm.make(ffmpeg: ffmpeg, ext: ext, seconds: 60, size: "640x360", videoBitrate: "900k") {
            case let .success(film): films[ext] = film
            case let .failure(why): skipReason = why.message; return
            }
        }
    }

    override func setUpWithError() throws {
        if let reason = Self.skipReason { throw XCTSkip(reason) }
        h = try DaemonHarness()
        let names = Self.films.keys.sorted().map { "film.\($0)" }
        h.origin.setAutoindex("/lib/", names)
        for (ext, data) in Self.films { h.origin.setFile("/lib/film.\(ext)", data: data, contentType: "video/\(ext)") }
    }

    override func tearDown() {
        h?.cleanup()
    }

    func testAWarmedLibraryIsProbedWithNoRequestForFileBytes() throws {
        let m = try h.mount(["--index", h.origin.url("/lib/"), "--proxy-port", "0"], proxy: true)
        XCTAssertEqual(m.status, 0, m.stderr + h.log)
        let warm = try h.run(h.binary, ["preload", "--recursive", h.origin.url("/lib/"), "--head", "1M", "--tail", "2M",
                                        "--cache-dir", h.cacheDirectory])
        XCTAssertEqual(warm.status, 0, warm.stderr)
        XCTAssertTrue(warm.stdout.contains("2 of 2 files"), warm.stdout)

        for (ext, data) in Self.films {
            XCTAssertGreaterThan(data.count, 4 << 20, "the \(ext) must be larger than its warmed head and tail")
        }
        h.origin.resetLog()
        for ext in Self.films.keys.sorted() {
            // Jellyfin's probe, as its logs show it.
            let out = try h.run(ExternalTool.find("ffprobe")!, [
                "-i", h.path("film.\(ext)"), "-threads", "0", "-v", "warning", "-print_format", "json",
                "-show_streams", "-show_chapters", "-show_format"], timeout: 120)
            XCTAssertEqual(out.status, 0, out.stderr)
            XCTAssertTrue(out.stdout.contains("\"codec_name\": \"h264\""), out.stdout)
        }
        let filmRequests = h.origin.requests.filter { $0.path.hasPrefix("/lib/film.") }
        XCTAssertEqual(filmRequests.map { "\($0.method) \($0.path) \($0.range ?? "whole")" }, [],
                       "the probes read only the warmed head and tail")
    }
}
