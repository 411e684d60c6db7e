import Foundation
import TestSupport
import XCTest

/// `kill -9` at random moments never leaves a cache that serves a wrong byte.
extension CLITests {
    func testKillNineDuringPreloadLeavesAVerifiableCache() throws {
        let paths = (0..<4).map { "/crash\($0).bin" }
        let length: Int64 = 12 << 20
        for (i, p) in paths.enumerated() {
            origin.setGeneratedFile(p, length: length, seed: UInt64(100 + i))
            origin.setFaults(p, Faults(bytesPerSecond: 16 << 20))   // slow enough to be killed mid-fetch
        }
        let urls = paths.map { origin.url($0) }
        var generator = SystemRandomNumberGenerator()
        let served = { paths.reduce(Int64(0)) { $0 + self.origin.bytesServed(path: $1) } }
        for round in 0..<6 {
            // Killed while bytes flow, at a random point of the transfer: once the origin has
            // handed out a random amount more (256 KiB to 4 MiB; the origin's own count, so no
            // sleep decides where the kill lands, however loaded the machine is).
            let before = served(), more = Int64.random(in: (256 << 10)...(4 << 20), using: &generator)
            let child = try start(["preload"] + urls)
            XCTAssertTrue(origin.wait(timeout: 60) { served() >= before + more }, "round \(round): the preload fetched nothing")
            kill(child.processIdentifier, SIGKILL)
            child.waitUntilExit()
            XCTAssertEqual(child.terminationReason, .uncaughtSignal, "round \(round): killed while fetching, not finished")
        }
        let verify = try run(["cache", "verify"])
        XCTAssertEqual(verify.status, 0, "verify after kill -9: \(verify.text) \(verify.stderr)")
        for (i, url) in urls.enumerated() {
            origin.setFaults(paths[i], Faults())
            let r = try run(["cat", url])
            XCTAssertEqual(r.status, 0, r.stderr)
            XCTAssertTrue(r.stdout == OriginServer.generatedBytes(seed: UInt64(100 + i), offset: 0, count: Int(length)),
                          "wrong bytes for \(url) after kill -9")
        }
    }
}
