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
        var killedMidway = 0
        for _ in 0..<6 {
            let child = try start(["preload"] + urls)
            usleep(UInt32.random(in: 50_000...400_000, using: &generator))
            kill(child.processIdentifier, SIGKILL)
            child.waitUntilExit()
            if child.terminationReason == .uncaughtSignal { killedMidway += 1 }
        }
        XCTAssertGreaterThanOrEqual(killedMidway, 3, "most preloads should have been killed while fetching")
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
