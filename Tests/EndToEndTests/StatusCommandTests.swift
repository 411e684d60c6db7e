import CacheCore
import Foundation
import TestSupport
import XCTest

/// `httpcachefs status` finds a running daemon by the cache directory it holds open and shows
/// what its proxy's status document says.
extension CLITests {
    func testStatusFindsTheRunningDaemonAndItsCache() throws {
        origin.setGeneratedFile("/a.bin", length: 1 << 20, seed: 5)
        let daemon = try start(["proxy", "--proxy-port", "0"])
        defer { daemon.terminate(); daemon.waitUntilExit() }
        let runtimeFile = cacheDir + "/proxy.json"
        try waitUntil("the proxy wrote its runtime file") { FileManager.default.fileExists(atPath: runtimeFile) }
        // Through the daemon's proxy: the bytes land in its cache.
        XCTAssertEqual(try run(["cat", origin.url("/a.bin"), "--range", "0-65535"]).status, 0)

        let json = try run(["status", "--json"], cacheDirectory: nil)
        XCTAssertEqual(json.status, 0, json.stderr)
        let daemons = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [[String: Any]], json.text)
        let mine = try XCTUnwrap(daemons.first { ($0["pid"] as? Int) == Int(daemon.processIdentifier) }, json.text)
        XCTAssertEqual(mine["cacheDirectory"] as? String, cacheDir)
        XCTAssertEqual((mine["command"] as? String)?.contains(" proxy "), true)
        XCTAssertNotNil(mine["proxy"] as? String)
        let status = try XCTUnwrap(mine["status"] as? [String: Any], json.text)
        let files = try XCTUnwrap(status["files"] as? [[String: Any]])
        XCTAssertEqual(files.map { $0["url"] as? String }, [origin.url("/a.bin")])
        XCTAssertEqual((status["doors"] as? [[String: Any]])?.first?["kind"] as? String, "proxy")

        let text = try run(["status"], cacheDirectory: nil)
        XCTAssertEqual(text.status, 0, text.stderr)
        XCTAssertTrue(text.text.contains("pid \(daemon.processIdentifier): "), text.text)
        XCTAssertTrue(text.text.contains("proxy:"), text.text)
        XCTAssertTrue(text.text.contains("1 file,"), text.text)
    }
}
