import CacheCore
import Foundation
import TestSupport
import XCTest

/// `preload --head/--tail` fills the cap's scan share (issue 47): what it warmed stays through
/// pressure that turns the cap over, in the next process too (the marks are in the index), and
/// through a running daemon the marks are made by the daemon.
extension LibraryPreloadTests {
    func testHeadsAndTailsPreloadedStayInTheScanShareThroughPressure() throws {
        let warm = try preload(["--recursive", h.origin.url("/lib/"), "--head", "256K", "--tail", "512K",
                                "--cache-size", "16M", "--scan-share", "4M"])
        XCTAssertEqual(warm.status, 0, warm.stderr)
        // Pressure: 15 MiB more through the 16 MiB cap, by another process of the same cache.
        h.origin.setGeneratedFile("/big.bin", length: 15 << 20, seed: 9)
        let cat = try h.run(h.binary, ["cat", h.origin.url("/big.bin"), "--cache-dir", h.cacheDirectory, "--cache-size", "16M",
                                       "--scan-share", "4M"])
        XCTAssertEqual(cat.status, 0, cat.stderr)
        let info = try cache(["info", h.origin.url("/lib/a.mp4"), "--cache-size", "16M"])
        XCTAssertTrue(info.stdout.contains("0-262143, 4718592-5242879"), info.stdout)
        h.origin.resetLog()
        let again = try preload(["--recursive", h.origin.url("/lib/"), "--head", "256K", "--tail", "512K",
                                 "--cache-size", "16M", "--scan-share", "4M"])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertEqual(files.map { fetched($0.0) }.flatMap { $0 }, [], "every preloaded head and tail stayed")
    }

    func testWithoutAShareTheSamePressureEvictsThePreloadedBytes() throws {
        let warm = try preload(["--recursive", h.origin.url("/lib/"), "--head", "256K", "--tail", "512K",
                                "--cache-size", "16M", "--scan-share", "0"])
        XCTAssertEqual(warm.status, 0, warm.stderr)
        h.origin.setGeneratedFile("/big.bin", length: 15 << 20, seed: 9)
        let cat = try h.run(h.binary, ["cat", h.origin.url("/big.bin"), "--cache-dir", h.cacheDirectory, "--cache-size", "16M",
                                       "--scan-share", "0"])
        XCTAssertEqual(cat.status, 0, cat.stderr)
        h.origin.resetLog()
        let again = try preload(["--recursive", h.origin.url("/lib/"), "--head", "256K", "--tail", "512K",
                                 "--cache-size", "16M", "--scan-share", "0"])
        XCTAssertEqual(again.status, 0, again.stderr)
        XCTAssertNotEqual(files.map { fetched($0.0) }.flatMap { $0 }, [], "plain LRU: the oldest, the preloaded, went")
    }

    func testThroughARunningDaemonThePreloadedSlicesAreScanSlices() throws {
        let m = try h.mount(["--index", h.origin.url("/lib/"), "--proxy-port", "0", "--scan-share", "8M"], proxy: true)
        XCTAssertEqual(m.status, 0, m.stderr + h.log)
        let r = try preload(["--recursive", h.origin.url("/lib/"), "--head", "64K", "--tail", "64K"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout.contains("through the running daemon"), r.stdout)
        // `status --json`: an array, one object per daemon of this user; ours by its cache.
        let status = try h.run(h.binary, ["status", "--json"])
        XCTAssertEqual(status.status, 0, status.stderr)
        let daemons = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(status.stdout.utf8)) as? [[String: Any]], status.stdout)
        let ours = try XCTUnwrap(daemons.first { $0["cacheDirectory"] as? String == h.cacheDirectory }, status.stdout)
        let share = try XCTUnwrap(((ours["status"] as? [String: Any])?["cache"] as? [String: Any])?["scanShare"] as? [String: Any], "\(ours)")
        // 64 KiB at each end of a.mp4, b.mkv and c.mp4, and small.txt whole: all of it in the share.
        XCTAssertEqual(share["limitBytes"] as? Int, 8 << 20)
        XCTAssertEqual(share["usedBytes"] as? Int, 6 * (64 << 10) + 100)
    }
}
