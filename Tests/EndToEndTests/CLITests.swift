import Foundation
import TestSupport
import XCTest

/// The `httpcachefs` binary end to end: run as a subprocess against a loopback origin, each test
/// with its own cache directory, checking bytes, exit codes and the one-line error messages.
final class CLITests: XCTestCase {
    var origin: OriginServer!
    var temp: TemporaryDirectory!
    var cacheDir: String { temp.appending("cache") }

    override func setUpWithError() throws {
        origin = try OriginServer()
        temp = TemporaryDirectory(prefix: "httpcachefs-cli")
    }

    override func tearDown() {
        origin.stop()
        temp.remove()
    }

    // MARK: cat

    func testCatWritesTheWholeFileByteExact() throws {
        origin.setGeneratedFile("/movie.mp4", length: 3 << 20 + 123, seed: 7)
        let r = try run(["cat", origin.url("/movie.mp4")])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout.count, 3 << 20 + 123)
        XCTAssertTrue(r.stdout == OriginServer.generatedBytes(seed: 7, offset: 0, count: 3 << 20 + 123),
                      "cat output differs from the origin's bytes")
        XCTAssertEqual(r.stderr, "")
    }

    func testCatRangeFormsAreInclusiveLikeHTTP() throws {
        origin.setGeneratedFile("/a.bin", length: 10_000, seed: 3)
        let expected = OriginServer.generatedBytes(seed: 3, offset: 0, count: 10_000)
        let cases: [(String, Range<Int>)] = [
            ("0-99", 0 ..< 100),
            ("100-100", 100 ..< 101),
            ("9000-", 9000 ..< 10_000),
            ("-50", 9950 ..< 10_000),
            ("9990-20000", 9990 ..< 10_000),   // clipped to the end, as HTTP does
            ("-20000", 0 ..< 10_000),
            ("9990-9223372036854775807", 9990 ..< 10_000),   // the largest last offset, no overflow
        ]
        for (range, slice) in cases {
            let r = try run(["cat", origin.url("/a.bin"), "--range", range])
            XCTAssertEqual(r.status, 0, "--range \(range): \(r.stderr)")
            XCTAssertEqual(r.stdout.count, slice.count, "--range \(range)")
            XCTAssertTrue(r.stdout == Array(expected[slice]), "--range \(range): wrong bytes")
        }
    }

    func testSecondCatIsServedFromTheCache() throws {
        origin.setGeneratedFile("/b.bin", length: 2 << 20, seed: 11)
        XCTAssertEqual(try run(["cat", origin.url("/b.bin")]).status, 0)
        origin.resetLog()
        let r = try run(["cat", origin.url("/b.bin")])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout == OriginServer.generatedBytes(seed: 11, offset: 0, count: 2 << 20), "wrong bytes from the cache")
        XCTAssertEqual(origin.bytesServed(path: "/b.bin"), 0, "the second cat went to the origin: \(origin.requests.map(\.range))")
    }

    func testCatIntoAClosedPipeStopsQuietly() throws {
        origin.setGeneratedFile("/big.bin", length: 8 << 20, seed: 5)
        let r = try run(["/bin/sh", "-c", "\"$0\" cat \"$1\" --cache-dir \"$2\" | head -c 10 >/dev/null",
                         try binary().path, origin.url("/big.bin"), cacheDir], raw: true)
        XCTAssertEqual(r.status, 0)
        XCTAssertEqual(r.stderr, "", "a reader going away is not an error")
    }

    // MARK: errors

    func testMissingFileFailsWithOneLine() throws {
        let r = try run(["cat", origin.url("/nope.mp4")])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertEqual(r.stdout, [])
        XCTAssertOneLineError(r, contains: "not found (HTTP 404)")
    }

    func testUnreachableOriginFailsWithOneLine() throws {
        let url = origin.url("/x")
        origin.stop()
        let r = try run(["cat", url, "--read-timeout", "20s"])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertOneLineError(r, contains: "/x")
    }

    func testBadInputsAreOneLineUsageErrors() throws {
        let url = origin.url("/f")
        let cases: [([String], String)] = [
            (["cat", url, "--range", "5-3"], "invalid range '5-3'"),
            (["cat", url, "--range", "abc"], "invalid range 'abc'"),
            (["cat", url, "--range", "-0"], "invalid range '-0'"),
            (["cat", url, "--cache-size", "5X"], "invalid size '5X' for --cache-size"),
            (["cat", url, "--cache-size=-1G"], "invalid size '-1G' for --cache-size"),
            (["cat", url, "--slice-size", "16M"], "must be between 1M and 8M"),
            (["cat", url, "--revalidate-after", "soon"], "invalid duration 'soon' for --revalidate-after"),
            (["cat", url, "--header", "NoColon"], "invalid header 'NoColon'"),
            (["cat", url, "--log-level", "loud"], "invalid log level 'loud'"),
            (["cat", "ftp://example.com/f"], "only http and https URLs are supported"),
            (["preload", url, "--variant", "worst"], "invalid variant 'worst'"),
            (["cat", url, "--max-connections", "0"], "invalid connection count '0' for --max-connections"),
            (["cat", url, "--bwlimit", "fast"], "invalid size 'fast' for --bwlimit"),
        ]
        for (args, message) in cases {
            let r = try run(args)
            XCTAssertEqual(r.status, 64, "\(args): \(r.stderr)")
            XCTAssertOneLineError(r, contains: message)
        }
    }

    func testRangePastTheEndFails() throws {
        origin.setGeneratedFile("/s.bin", length: 100, seed: 1)
        let r = try run(["cat", origin.url("/s.bin"), "--range", "100-200"])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertOneLineError(r, contains: "past the end")
    }

    func testSecondProcessOnTheSameCacheIsToldWhoHoldsIt() throws {
        origin.setGeneratedFile("/slow.bin", length: 4 << 20, seed: 2)
        origin.setFaults("/slow.bin", Faults(bytesPerSecond: 64 << 10))
        let holder = try start(["cat", origin.url("/slow.bin")])
        defer { holder.terminate(); holder.waitUntilExit() }
        try waitForOriginRequest("/slow.bin", "the first process reached the origin")
        // No daemon proxy to go through: writers are refused with the holder's name...
        for command in [["cache", "clear"], ["cat", origin.url("/slow.bin")]] {
            let r = try run(command)
            XCTAssertEqual(r.status, 1, "\(command)")
            XCTAssertOneLineError(r, contains: "is in use by process \(holder.processIdentifier)")
        }
        // ...while listing reads the index without the lock.
        let ls = try run(["cache", "ls"])
        XCTAssertEqual(ls.status, 0, ls.stderr)
    }

    // MARK: cache ls / info / rm / clear

    func testCacheLsInfoRmClear() throws {
        origin.setGeneratedFile("/one.bin", length: 8 << 20, seed: 21)
        origin.setGeneratedFile("/two.bin", length: 1 << 20, seed: 22)
        XCTAssertEqual(try run(["cat", origin.url("/one.bin"), "--range", "0-1048575"]).status, 0)
        XCTAssertEqual(try run(["cat", origin.url("/two.bin")]).status, 0)

        let ls = try run(["cache", "ls"])
        XCTAssertEqual(ls.status, 0, ls.stderr)
        let lines = ls.text.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.first?.split(separator: " ", omittingEmptySubsequences: true).first, "URL")
        let one = try XCTUnwrap(lines.first { $0.hasPrefix(origin.url("/one.bin")) })
        let two = try XCTUnwrap(lines.first { $0.hasPrefix(origin.url("/two.bin")) })
        XCTAssertTrue(one.contains("8.00 MiB"), one)
        XCTAssertFalse(one.contains("100%"), "only part of one.bin was read: \(one)")
        XCTAssertTrue(two.contains("100%"), two)
        XCTAssertTrue(lines.last?.hasPrefix("2 files") ?? false, ls.text)

        let info = try run(["cache", "info", origin.url("/two.bin")])
        XCTAssertEqual(info.status, 0, info.stderr)
        XCTAssertEqual(field("Length:", in: info.text), "1048576 bytes (1.00 MiB)")
        XCTAssertEqual(field("Cached ranges:", in: info.text), "0-1048575")
        XCTAssertEqual(field("ETag:", in: info.text), "\"gen-16-1048576\"")
        XCTAssertNotNil(field("Hits / misses:", in: info.text), info.text)

        let rm = try run(["cache", "rm", origin.url("/two.bin")])
        XCTAssertEqual(rm.status, 0, rm.stderr)
        XCTAssertFalse(try run(["cache", "ls"]).text.contains(origin.url("/two.bin")))
        let gone = try run(["cache", "info", origin.url("/two.bin")])
        XCTAssertEqual(gone.status, 1)
        XCTAssertOneLineError(gone, contains: "not in the cache: \(origin.url("/two.bin"))")
        let rmAgain = try run(["cache", "rm", origin.url("/two.bin")])
        XCTAssertEqual(rmAgain.status, 1)
        XCTAssertOneLineError(rmAgain, contains: "not in the cache")

        let clear = try run(["cache", "clear"])
        XCTAssertEqual(clear.status, 0, clear.stderr)
        XCTAssertTrue(clear.text.hasPrefix("cleared 1 file"), clear.text)
        XCTAssertTrue(try run(["cache", "ls"]).text.hasPrefix("no cached files"))
    }

    /// An origin may claim any length up to 2^62 bytes: `cache info` draws the coverage map of
    /// such a file (it once multiplied the length by a cell's number and trapped past 128 PiB).
    func testCacheInfoDrawsTheMapOfAFileClaimingTheLargestLength() throws {
        let largest = Int64(1) << 62
        origin.setLengthClaim("/huge.bin", .contentRangeTotal(String(largest)))
        let cat = try run(["cat", origin.url("/huge.bin"), "--range", "0-9"])
        XCTAssertEqual(cat.status, 0, cat.stderr)
        let info = try run(["cache", "info", origin.url("/huge.bin")])
        XCTAssertEqual(info.status, 0, info.stderr)
        XCTAssertEqual(field("Length:", in: info.text)?.hasPrefix("\(largest) bytes"), true, info.text)
        XCTAssertEqual(field("Coverage map:", in: info.text), "[+" + String(repeating: ".", count: 63) + "]", info.text)
    }

    /// What an origin sends is quoted by `cache info` (its ETag and Content-Type) and by error
    /// messages (a Content-Range that does not parse): an ESC or BEL in it used to reach the
    /// terminal as is, so a hostile origin could retitle or clear the user's terminal. Control
    /// characters are now written as `\u{1B}`.
    func testAnOriginsControlCharactersNeverReachTheTerminal() throws {
        origin.setFile("/esc.bin", data: Array(repeating: 7, count: 1000), etag: "\"v\u{1B}]0;owned\u{07}\"",
                       contentType: "video/mp4\u{1B}[2J")
        XCTAssertEqual(try run(["cat", origin.url("/esc.bin")]).status, 0)
        let info = try run(["cache", "info", origin.url("/esc.bin")])
        XCTAssertEqual(info.status, 0, info.stderr)
        XCTAssertFalse(info.stdout.contains { ($0 < 0x20 && $0 != 0x0A) || $0 == 0x7F }, info.text.debugDescription)
        XCTAssertEqual(field("ETag:", in: info.text), "\"v\\u{1B}]0;owned\\u{7}\"")
        XCTAssertEqual(field("Content type:", in: info.text), "video/mp4\\u{1B}[2J")

        origin.setResponse("/bad206.bin", status: 206, headers: [("Content-Range", "bytes \u{1B}[31m0-9/10")],
                           body: Array(repeating: 1, count: 10))
        let bad = try run(["cat", origin.url("/bad206.bin")])
        XCTAssertNotEqual(bad.status, 0)
        XCTAssertFalse(bad.stderr.unicodeScalars.contains { $0.value == 0x1B }, bad.stderr.debugDescription)
        XCTAssertOneLineError(bad, contains: "bytes \\u{1B}[31m0-9/10")
    }

    // MARK: export

    func testExportNeedsAFullyCachedFileUnlessFetching() throws {
        origin.setGeneratedFile("/e.bin", length: 5 << 20 + 7, seed: 31)
        let expected = OriginServer.generatedBytes(seed: 31, offset: 0, count: 5 << 20 + 7)
        let out = temp.appending("e.out")
        XCTAssertEqual(try run(["cat", origin.url("/e.bin"), "--range", "0-99"]).status, 0)

        let partial = try run(["cache", "export", origin.url("/e.bin"), out])
        XCTAssertEqual(partial.status, 1)
        XCTAssertOneLineError(partial, contains: "not fully cached")
        XCTAssertFalse(FileManager.default.fileExists(atPath: out), "a failed export left a file behind")

        let fetched = try run(["cache", "export", origin.url("/e.bin"), out, "--fetch"])
        XCTAssertEqual(fetched.status, 0, fetched.stderr)
        XCTAssertTrue(Array(try Data(contentsOf: URL(fileURLWithPath: out))) == expected, "exported bytes differ")

        try FileManager.default.removeItem(atPath: out)
        origin.resetLog()
        let cached = try run(["cache", "export", origin.url("/e.bin"), out])
        XCTAssertEqual(cached.status, 0, cached.stderr)
        XCTAssertTrue(Array(try Data(contentsOf: URL(fileURLWithPath: out))) == expected, "exported bytes differ")
        XCTAssertEqual(origin.bytesServed(path: "/e.bin"), 0)
    }

    /// An export to something other than a regular file is written into it: the rename into
    /// place replaced a device node or a link with a regular file (as root, `cache export URL
    /// /dev/full` made `/dev/full` a 5 MB file and said "exported").
    func testExportToADeviceWritesIntoItAndLeavesItInPlace() throws {
        origin.setGeneratedFile("/d.bin", length: 100_000, seed: 32)
        XCTAssertEqual(try run(["cat", origin.url("/d.bin")]).status, 0)
        let link = temp.appending("null")
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: "/dev/null")
        let r = try run(["cache", "export", origin.url("/d.bin"), link])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(try FileManager.default.destinationOfSymbolicLink(atPath: link), "/dev/null", "the link was replaced")
        var st = stat()
        XCTAssertEqual(stat("/dev/null", &st), 0)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFCHR, "/dev/null is still a device")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: temp.path).filter { $0.contains(".partial-") }, [])

        let dir = try run(["cache", "export", origin.url("/d.bin"), temp.path])
        XCTAssertEqual(dir.status, 1)
        XCTAssertOneLineError(dir, contains: "it is a directory")
    }

    func testExportOfAnUnknownURLFails() throws {
        let r = try run(["cache", "export", origin.url("/never.bin"), temp.appending("x")])
        XCTAssertEqual(r.status, 1)
        XCTAssertOneLineError(r, contains: "not in the cache")
    }

    // MARK: preload

    func testPreloadFillsTheCacheAndSummarises() throws {
        origin.setGeneratedFile("/p1.bin", length: 3 << 20, seed: 41)
        origin.setGeneratedFile("/p2.bin", length: 1 << 20, seed: 42)
        let r = try run(["preload", origin.url("/p1.bin"), origin.url("/p2.bin")])
        XCTAssertEqual(r.status, 0, r.stderr)
        let lines = r.text.split(separator: "\n").map(String.init)
        XCTAssertEqual(lines.count, 2, r.text)
        XCTAssertTrue(lines[0].hasPrefix("preloaded \(origin.url("/p1.bin")): 3145728 bytes in "), lines[0])
        XCTAssertTrue(lines[0].hasSuffix(", 0 bytes from cache"), lines[0])

        origin.resetLog()
        let again = try run(["preload", origin.url("/p1.bin")])
        XCTAssertTrue(again.text.hasSuffix(", 3145728 bytes from cache\n"), again.text)
        let cat = try run(["cat", origin.url("/p1.bin")])
        XCTAssertTrue(cat.stdout == OriginServer.generatedBytes(seed: 41, offset: 0, count: 3 << 20), "wrong bytes after preload")
        XCTAssertEqual(origin.bytesServed(path: "/p1.bin"), 0)
    }

    func testPreloadKeepsToTheConnectionCapAndTheBandwidthLimit() throws {
        for (i, path) in ["/l1.bin", "/l2.bin", "/l3.bin"].enumerated() {
            origin.setGeneratedFile(path, length: 6 << 20, seed: UInt64(60 + i))
        }
        let urls = ["/l1.bin", "/l2.bin", "/l3.bin"].map { origin.url($0) }
        let r = try run(["preload"] + urls + ["--max-connections", "1", "--bwlimit", "64M/s"])
        XCTAssertEqual(r.status, 0, r.stderr)
        // The origin notices a connection curl closed (a transfer stopped at its end) a moment
        // after curl opened the next: one allowed, plus at most one closing.
        XCTAssertLessThanOrEqual(origin.peakConnections, 2, "never more than the one connection allowed")
        for (i, path) in ["/l1.bin", "/l2.bin", "/l3.bin"].enumerated() {
            XCTAssertEqual(origin.bytesServed(path: path), 6 << 20, "each byte once: \(path)")
            let cat = try run(["cat", urls[i]])
            XCTAssertTrue(cat.stdout == OriginServer.generatedBytes(seed: UInt64(60 + i), offset: 0, count: 6 << 20), path)
        }
    }

    func testPreloadReportsEachFailureAndGoesOn() throws {
        origin.setGeneratedFile("/ok.bin", length: 1000, seed: 43)
        let r = try run(["preload", origin.url("/missing.bin"), origin.url("/ok.bin")])
        XCTAssertEqual(r.status, 1)
        XCTAssertOneLineError(r, contains: "not found (HTTP 404)")
        XCTAssertTrue(r.text.hasPrefix("preloaded \(origin.url("/ok.bin")): 1000 bytes"), r.text)
    }

    func testPreloadRange() throws {
        origin.setGeneratedFile("/r.bin", length: 4 << 20, seed: 44)
        let r = try run(["preload", origin.url("/r.bin"), "--range", "-1000"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.text.hasPrefix("preloaded \(origin.url("/r.bin")): 1000 bytes"), r.text)
    }

    func testRangePositionsMayBeSizes() throws {
        origin.setGeneratedFile("/sizes.bin", length: 10_000, seed: 5)
        let expected = OriginServer.generatedBytes(seed: 5, offset: 0, count: 10_000)
        let cases: [(String, Range<Int>)] = [
            ("1K-2K", 1024 ..< 2048),      // a size ends the range before that offset
            ("1K-2047", 1024 ..< 2048),    // a plain last offset is inclusive, as in HTTP
            ("-1K", 8976 ..< 10_000),
            ("9K-", 9216 ..< 10_000),
            ("bytes=0-1KiB", 0 ..< 1024),
        ]
        for (range, slice) in cases {
            let r = try run(["cat", origin.url("/sizes.bin"), "--range", range])
            XCTAssertEqual(r.status, 0, "--range \(range): \(r.stderr)")
            XCTAssertTrue(r.stdout == Array(expected[slice]), "--range \(range): \(r.stdout.count) bytes, wrong ones")
        }
        let empty = try run(["cat", origin.url("/sizes.bin"), "--range", "1K-1K"])
        XCTAssertEqual(empty.status, 64, empty.stderr)
        XCTAssertTrue(empty.stderr.contains("invalid range '1K-1K' for --range: it ends before it starts"), empty.stderr)
    }

    /// The origin sends the range and nothing past it (read-ahead used to pull up to 45 MiB for a
    /// 10 MiB range, bytes the process then dropped). The open of a file the cache does not know
    /// yet asks one byte (byte 0, which is kept) for the length and validators.
    func testPreloadAndCatFetchExactlyTheirRange() throws {
        origin.setGeneratedFile("/exact.bin", length: 64 << 20, seed: 8)
        let preload = try run(["preload", origin.url("/exact.bin"), "--range", "20M-30M"])
        XCTAssertEqual(preload.status, 0, preload.stderr)
        XCTAssertTrue(preload.text.hasPrefix("preloaded \(origin.url("/exact.bin")): 10485760 bytes"), preload.text)
        XCTAssertEqual(origin.bytesServed(path: "/exact.bin"), (10 << 20) + 1,
                       "origin requests: \(origin.requests.map(\.range))")

        origin.resetLog()
        let cat = try run(["cat", origin.url("/exact.bin"), "--range", "29M-32M"])
        XCTAssertEqual(cat.status, 0, cat.stderr)
        XCTAssertTrue(cat.stdout == OriginServer.generatedBytes(seed: 8, offset: 29 << 20, count: 3 << 20), "wrong bytes")
        XCTAssertEqual(origin.bytesServed(path: "/exact.bin"), 2 << 20,
                       "only the 2 MiB not preloaded: \(origin.requests.map(\.range))")
    }

    func testPreloadOfAnHLSPlaylistFetchesTheChosenVariant() throws {
        let playlistType = "application/vnd.apple.mpegurl"
        origin.setFile("/hls/master.m3u8", data: Array("""
            #EXTM3U
            #EXT-X-STREAM-INF:BANDWIDTH=800000
            low/index.m3u8
            #EXT-X-STREAM-INF:BANDWIDTH=2500000
            high/index.m3u8
            """.utf8), contentType: playlistType)
        for variant in ["low", "high"] {
            origin.setFile("/hls/\(variant)/index.m3u8", data: Array("""
                #EXTM3U
                #EXT-X-TARGETDURATION:4
                #EXTINF:4,
                seg0.ts
                #EXTINF:4,
                seg1.ts
                #EXT-X-ENDLIST
                """.utf8), contentType: playlistType)
            origin.setGeneratedFile("/hls/\(variant)/seg0.ts", length: 300_000, seed: 60, contentType: "video/mp2t")
            origin.setGeneratedFile("/hls/\(variant)/seg1.ts", length: 200_000, seed: 61, contentType: "video/mp2t")
        }
        let r = try run(["preload", origin.url("/hls/master.m3u8")])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.text.hasPrefix("preloaded \(origin.url("/hls/master.m3u8")) (HLS, variant best): 2 playlists, 2 segments"), r.text)
        XCTAssertTrue(r.text.contains(" 500000 bytes in "), r.text)
        XCTAssertEqual(origin.requestCount(path: "/hls/low/seg0.ts"), 0, "only the best variant is preloaded")

        origin.resetLog()
        let cat = try run(["cat", origin.url("/hls/high/seg1.ts")])
        XCTAssertTrue(cat.stdout == OriginServer.generatedBytes(seed: 61, offset: 0, count: 200_000), "wrong segment bytes")
        XCTAssertEqual(origin.bytesServed(path: "/hls/high/seg1.ts"), 0, "the segment was not preloaded")
    }

    func testPreloadOfAnHLSStreamWithAMissingSegmentFails() throws {
        origin.setFile("/live/index.m3u8", data: Array("#EXTM3U\n#EXTINF:4,\nok.ts\n#EXTINF:4,\ngone.ts\n#EXT-X-ENDLIST\n".utf8))
        origin.setGeneratedFile("/live/ok.ts", length: 1000, seed: 62)
        let r = try run(["preload", origin.url("/live/index.m3u8")])
        XCTAssertEqual(r.status, 1)
        let errors = r.stderr.split(separator: "\n")
        XCTAssertEqual(errors.count, 2, r.stderr)
        XCTAssertTrue(errors.first?.contains("gone.ts") ?? false, r.stderr)
        XCTAssertTrue(errors.last?.contains("1 resource failed") ?? false, r.stderr)
    }

    // MARK: verify

    func testVerifyRemoteFindsBytesThatDifferFromTheOrigin() throws {
        let original = (0 ..< 300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        origin.setFile("/v.bin", data: original, etag: "\"v1\"")
        XCTAssertEqual(try run(["cat", origin.url("/v.bin")]).status, 0)

        let good = try run(["cache", "verify", "--remote"])
        XCTAssertEqual(good.status, 0, good.stderr + good.text)
        XCTAssertTrue(good.text.contains("ok: \(origin.url("/v.bin")): 3 samples match the origin"), good.text)

        var changed = original
        changed[150_000] ^= 0xFF
        origin.setFile("/v.bin", data: changed, etag: "\"v1\"")   // same validator, other bytes
        let bad = try run(["cache", "verify", "--remote"])
        XCTAssertEqual(bad.status, 1)
        XCTAssertTrue(bad.text.contains("MISMATCH"), bad.text)
        XCTAssertTrue(bad.text.contains("first difference at offset 150000"), bad.text)
        XCTAssertOneLineError(bad, contains: "verify found 1 problem")

        origin.setFile("/v.bin", data: changed, etag: "\"v2\"")
        let stale = try run(["cache", "verify", "--remote"])
        XCTAssertEqual(stale.status, 0, stale.text)
        XCTAssertTrue(stale.text.contains("stale: changed on the origin: ETag"), stale.text)
    }

    // MARK: options and config file

    func testConfigFileSetsOptionsAndFlagsWin() throws {
        origin.setGeneratedFile("/c.bin", length: 1000, seed: 51)
        let configured = temp.appending("from-config")
        let config = temp.appending("config")
        try "# test config\ncache-dir = \(configured)\ncache-size = 1G\n\nheader = X-Test: yes\n"
            .write(toFile: config, atomically: true, encoding: .utf8)

        let r = try run(["cat", origin.url("/c.bin"), "--config", config], cacheDirectory: nil)
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: configured + "/index.sqlite"))
        XCTAssertEqual(origin.requests.last?.header("X-Test"), "yes")

        let flagWins = try run(["cat", origin.url("/c.bin"), "--config", config, "--header", "X-Test: no",
                                "--revalidate-after", "0s"])
        XCTAssertEqual(flagWins.status, 0, flagWins.stderr)
        XCTAssertTrue(FileManager.default.fileExists(atPath: cacheDir + "/index.sqlite"))
        XCTAssertEqual(origin.requests.last?.header("X-Test"), "no")

        try "cache-size = lots\n".write(toFile: config, atomically: true, encoding: .utf8)
        let bad = try run(["cache", "ls", "--config", config])
        XCTAssertEqual(bad.status, 64)
        XCTAssertOneLineError(bad, contains: "invalid size 'lots' for 'cache-size' at \(config):1")
    }

    func testDefaultConfigFileIsReadFromXDGConfigHome() throws {
        let xdg = temp.appending("xdg")
        try FileManager.default.createDirectory(atPath: xdg + "/httpcachefs", withIntermediateDirectories: true)
        try "bogus-key = 1\n".write(toFile: xdg + "/httpcachefs/config", atomically: true, encoding: .utf8)
        let r = try run(["cache", "ls"], environment: ["XDG_CONFIG_HOME": xdg])
        XCTAssertEqual(r.status, 64)
        XCTAssertOneLineError(r, contains: "unknown setting 'bogus-key'")
    }

    func testLogFileGetsTimestampedLines() throws {
        origin.setGeneratedFile("/l.bin", length: 1000, seed: 52)
        let log = temp.appending("log.txt")
        let r = try run(["cat", origin.url("/l.bin"), "--log-level", "trace", "--log-file", log])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stderr, "", "logs belong in the log file")
        let text = try String(contentsOfFile: log, encoding: .utf8)
        let first = try XCTUnwrap(text.split(separator: "\n").first.map(String.init), "no log lines written")
        XCTAssertNotNil(first.range(of: #"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ (trace|debug|info|notice|warning|error|critical) httpcachefs[.a-z]*: "#,
                                    options: .regularExpression), first)
    }

    // MARK: running the binary

    typealias Result = CLIRunner.Result

    /// The binary under test: `$HTTPCACHEFS_BINARY` (CI sets it to the release build), else the
    /// `httpcachefs` built next to this test bundle (`swift test` builds every product).
    func binary() throws -> URL { try CLIRunner.binary() }

    /// What runs the binary for this test (a value: reader threads may each use it).
    var runner: CLIRunner { CLIRunner(temp: temp) }

    /// Runs `httpcachefs args... --cache-dir <this test's cache>` (see `CLIRunner.run`).
    func run(_ args: [String], cacheDirectory: String?? = .some(nil), environment: [String: String] = [:],
             raw: Bool = false) throws -> Result {
        try runner.run(args, cacheDirectory: cacheDirectory, environment: environment, raw: raw)
    }

    /// Starts `httpcachefs args...` in the background (output discarded).
    func start(_ args: [String]) throws -> Process { try runner.start(args) }

    // The waits below sleep until what they wait for tells them; the 30 s only bounds a hang
    // (a failure), never a timing a test asserts.

    /// Waits until the proxy holding `cache` has written its runtime file (`proxy.json`, written
    /// once it listens): inotify on the cache folder says when (`FileEvents`). Its port.
    @discardableResult
    func waitForRuntimeFile(_ cache: String, _ what: String = "the proxy wrote its proxy.json") throws -> Int {
        var port: Int?
        guard FileEvents.wait(in: cache, timeout: 30, until: { port = Self.runtimePort(cache); return port != nil }), let port else {
            XCTFail("gave up waiting after 30s: \(what)")
            throw CocoaError(.userCancelled)
        }
        return port
    }

    /// Waits until `condition` over the files in `folder` holds, looking again at each change
    /// inotify reports there (`FileEvents`): a program's output, a server's access log.
    func waitForFiles(in folder: String, _ what: String, _ condition: () -> Bool) throws {
        guard FileEvents.wait(in: folder, timeout: 30, until: condition) else {
            XCTFail("gave up waiting after 30s: \(what)")
            throw CocoaError(.userCancelled)
        }
    }

    /// Waits until the in-test origin has been asked for `path` (it tells each request it logs).
    func waitForOriginRequest(_ path: String, _ what: String) throws {
        guard origin.waitForRequests(path: path, timeout: 30) else {
            XCTFail("gave up waiting after 30s: \(what)")
            throw CocoaError(.userCancelled)
        }
    }

    /// The value of a `Label:  value` line of `cache info`.
    func field(_ label: String, in text: String) -> String? {
        text.split(separator: "\n").first { $0.hasPrefix(label + " ") }
            .map { $0.dropFirst(label.count).trimmingCharacters(in: .whitespaces) }
    }

    func XCTAssertOneLineError(_ r: Result, contains fragment: String, file: StaticString = #filePath, line: UInt = #line) {
        let lines = r.stderr.split(separator: "\n", omittingEmptySubsequences: false).filter { !$0.isEmpty }
        XCTAssertEqual(lines.count, 1, "expected one error line, got:\n\(r.stderr)", file: file, line: line)
        XCTAssertTrue(lines.first?.hasPrefix("httpcachefs: error: ") ?? false, r.stderr, file: file, line: line)
        XCTAssertTrue(r.stderr.contains(fragment), "'\(fragment)' not in: \(r.stderr)", file: file, line: line)
    }
}
