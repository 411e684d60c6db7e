import Foundation
import TestSupport
import XCTest

/// The per-origin limits as the binary takes them (`--max-connections-per-host`, `--tpslimit`,
/// `--tpslimit-burst`, `--egress-budget`): a good value works, a bad one is one line that names
/// it. (What each does: `RequestRateTests`, `EgressLedgerTests`, `EgressBudgetMountTests`.)
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
            (["cat", url, "--egress-budget", "0/day"], "an egress budget of 0 for --egress-budget would refuse every fetch"),
            (["cat", url, "--egress-budget", "-1G/day"], "invalid size '-1G' for --egress-budget"),
            (["cat", url, "--egress-budget", "1G/fortnight"], "invalid period 'fortnight' in '1G/fortnight' for --egress-budget"),
            (["cat", url, "--egress-budget", "1G"], "invalid egress budget '1G' for --egress-budget: expected SIZE/PERIOD"),
            (["cat", url, "--egress-budget", "1G/day", "--egress-budget", "2G/day"], "two egress budgets for every origin in --egress-budget"),
            (["cat", url, "--egress-budget", "http://a.example 1G/day", "--egress-budget", "http://A.example:80 2G/day"],
             "two egress budgets for http://a.example:80 in --egress-budget"),
        ]
        for (args, message) in cases {
            let r = try run(args)
            XCTAssertEqual(r.status, 64, "\(args): \(r.stderr)")
            XCTAssertOneLineError(r, contains: message)
        }
    }

    func testThePerHostCapHoldsForARealCopy() throws {
        origin.setGeneratedFile("/p.bin", length: 24 << 20, seed: 73)
        let r = try run(["cat", origin.url("/p.bin"), "--max-connections", "8", "--max-connections-per-host", "1"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout == OriginServer.generatedBytes(seed: 73, offset: 0, count: 24 << 20))
        XCTAssertEqual(origin.peakConnections, 1, "one connection to the origin at a time")
    }

    func testARequestPastTheRateIsNotSent() throws {
        // One request every 1000 s: the open's request goes, the rest of the file waits for a
        // token that does not come in this test, and the read times out with nothing more sent.
        origin.setGeneratedFile("/t.bin", length: 4 << 20, seed: 74)
        let r = try run(["cat", origin.url("/t.bin"), "--tpslimit", "0.001", "--read-timeout", "2s"])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertOneLineError(r, contains: "timed out")
        XCTAssertEqual(origin.requestCount(path: "/t.bin"), 1, "one request, the burst")
    }

    func testAnEgressBudgetInTheConfigFileIsTakenAndABadOneNamesTheFile() throws {
        origin.setGeneratedFile("/e.bin", length: 1000, seed: 72)
        let config = temp.appending("budget.conf")
        try "egress-budget = 1G/month@15\negress_budget = https://cdn.example.com 10G/week\n".write(toFile: config, atomically: true, encoding: .utf8)
        let r = try run(["cat", origin.url("/e.bin"), "--config", config])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout.count, 1000)
        let saved = try String(contentsOfFile: cacheDir + "/egress-budget.json", encoding: .utf8)
        XCTAssertTrue(saved.contains(origin.url("")), "the use is kept: \(saved)")
        try "egress-budget = 0/day\n".write(toFile: config, atomically: true, encoding: .utf8)
        let bad = try run(["cat", origin.url("/e.bin"), "--config", config])
        XCTAssertEqual(bad.status, 64)
        XCTAssertOneLineError(bad, contains: "an egress budget of 0 for 'egress-budget' in \(config) would refuse every fetch")
    }
}
