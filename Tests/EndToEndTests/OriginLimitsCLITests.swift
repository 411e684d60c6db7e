import Foundation
import XCTest

/// The per-origin limits as the binary takes them (`--max-connections-per-host`, `--tpslimit`,
/// `--tpslimit-burst`): a good value works, a bad one is one line that names it. (What each does:
/// `RequestRateTests`.)
extension CLITests {
    func testPerOriginLimitsAreTakenAndBadOnesAreOneLine() throws {
        origin.setGeneratedFile("/l.bin", length: 100_000, seed: 71)
        let r = try run(["cat", origin.url("/l.bin"), "--tpslimit", "50", "--tpslimit-burst", "4",
                         "--max-connections-per-host", "2"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout.count, 100_000)
        let off = try run(["cat", origin.url("/l.bin"), "--tpslimit", "0", "--tpslimit-burst", "0"])
        XCTAssertEqual(off.status, 0, "rclone's 0: no limit, and a burst below 1 is 1: \(off.stderr)")
        let url = origin.url("/l.bin")
        let cases: [([String], String)] = [
            (["cat", url, "--tpslimit", "-1"], "invalid request rate '-1' for --tpslimit"),
            (["cat", url, "--tpslimit", "fast"], "invalid request rate 'fast' for --tpslimit"),
            (["cat", url, "--tpslimit", "nan"], "invalid request rate 'nan' for --tpslimit"),
            (["cat", url, "--tpslimit-burst", "1.5"], "invalid burst '1.5' for --tpslimit-burst"),
            (["cat", url, "--max-connections-per-host", "0"], "invalid connection count '0' for --max-connections-per-host"),
        ]
        for (args, message) in cases {
            let r = try run(args)
            XCTAssertEqual(r.status, 64, "\(args): \(r.stderr)")
            XCTAssertOneLineError(r, contains: message)
        }
    }
}
