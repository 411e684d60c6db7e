import Foundation
import Glibc
import TestSupport
import XCTest

/// A FUSE mount as one host of a fleet: `mount --tier` reads through a real nginx tier node
/// (started with `mount-helpers/tier.sh`); a second mount (another host, its own cache) then reads
/// the same file without costing the origin its bytes again.
final class FleetMountTests: XCTestCase {
    var h: DaemonHarness!
    var tierDirectory: String?
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent("mount-helpers/tier.sh").path

    override func setUpWithError() throws {
        h = try DaemonHarness()
        guard FileManager.default.isExecutableFile(atPath: "/usr/sbin/nginx") else {
            throw XCTSkip("nginx is not installed (mount-helpers/setup-debian.sh --test installs nginx-light)")
        }
    }

    override func tearDown() {
        if let tierDirectory { _ = try? h.run(script, ["--stop", "--cache-dir", tierDirectory]) }
        h?.cleanup()
    }

    func testAMountReadsThroughTheTierAndASecondHostCostsTheOriginNothingMore() throws {
        let length = 6 << 20
        h.origin.setGeneratedFile("/film.mkv", length: Int64(length), seed: 2131)
        let dir = h.directory.appending("tier")
        tierDirectory = dir
        let port = try LoopbackPort.free()
        let user = geteuid() == 0 ? ["--user", "root"] : []
        let started = try h.run(script, ["--origin", h.origin.url(""), "--port", String(port), "--cache-dir", dir,
                                         "--bind", "127.0.0.1", "--slice", "1M"] + user)
        XCTAssertEqual(started.status, 0, started.stderr)
        let tier = "\(h.origin.url(""))=http://127.0.0.1:\(port),slice=1M"

        XCTAssertEqual(try h.mount([h.origin.url("/film.mkv"), "--tier", tier]).status, 0, h.log)
        XCTAssertTrue(try POSIX.readAll(h.path("film.mkv")) == OriginServer.generatedBytes(seed: 2131, offset: 0, count: length),
                      "wrong bytes through the mount")
        let access = (try? String(contentsOfFile: dir + "/access.log", encoding: .utf8)) ?? ""
        XCTAssertTrue(access.contains("cache=MISS"), "the mount's misses went to the tier: \(access)")
        let first = h.origin.bytesServed(path: "/film.mkv")
        XCTAssertLessThanOrEqual(first, Int64(length) + (256 << 10) + (1 << 20), "about the file once")

        // Another host: a proxy daemon with its own cache reads the file the tier now holds.
        let other = h.directory.appending("other-cache")
        let r = try h.run(h.binary, ["cat", h.origin.url("/film.mkv"), "--cache-dir", other, "--tier", tier])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertLessThanOrEqual(h.origin.bytesServed(path: "/film.mkv") - first, Int64(256 << 10),
                                 "the second host asked the origin only to check the version")
    }

}
