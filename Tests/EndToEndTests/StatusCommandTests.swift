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
        try waitForRuntimeFile(cacheDir)
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

/// `cache info` and `cache ls` while a daemon holds the cache agree with its status page: a read
/// answered wholly from the cache changes the daemon's figures without any fetch writing the
/// file's row to the index.
extension CLITests {
    func testCacheInfoShowsTheDaemonsLiveHitsAndLastAccess() throws {
        origin.setGeneratedFile("/live.bin", length: 100_000, seed: 9)
        let daemon = try start(["proxy", "--proxy-port", "0"])
        defer { daemon.terminate(); daemon.waitUntilExit() }
        try waitForRuntimeFile(cacheDir)
        XCTAssertEqual(try run(["cat", origin.url("/live.bin")]).status, 0)
        XCTAssertEqual(try run(["cat", origin.url("/live.bin")]).status, 0)   // every byte a hit now

        let json = try run(["status", "--json"], cacheDirectory: nil)
        let daemons = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [[String: Any]], json.text)
        let mine = try XCTUnwrap(daemons.first { ($0["pid"] as? Int) == Int(daemon.processIdentifier) }, json.text)
        let file = try XCTUnwrap(((mine["status"] as? [String: Any])?["files"] as? [[String: Any]])?.first, json.text)
        let hits = try XCTUnwrap(file["hits"] as? Int), misses = try XCTUnwrap(file["misses"] as? Int)
        XCTAssertGreaterThan(hits, 0, json.text)

        let info = try run(["cache", "info", origin.url("/live.bin")])
        XCTAssertEqual(info.status, 0, info.stderr)
        XCTAssertEqual(field("Hits / misses:", in: info.text), "\(hits) / \(misses)", info.text)
        let access = try XCTUnwrap(file["lastAccess"] as? String)   // 2026-11-22T17:48:24Z
        XCTAssertEqual(field("Last access:", in: info.text), access.replacingOccurrences(of: "T", with: " "), info.text)
        XCTAssertTrue(try run(["cache", "ls"]).text.contains(access.replacingOccurrences(of: "T", with: " ")))
    }
}

extension CLITests {
    /// A fetch held open by a trickling origin shows in `status` as "1 transfer", with its range.
    func testStatusCountsTheFetchInFlight() throws {
        origin.setGeneratedFile("/trickle.bin", length: 2_000_000, seed: 10)
        let daemon = try start(["proxy", "--proxy-port", "0"])
        defer { daemon.terminate(); daemon.waitUntilExit() }
        try waitForRuntimeFile(cacheDir)
        XCTAssertEqual(try run(["cat", origin.url("/trickle.bin"), "--range", "0-0"]).status, 0)   // the length is known (and 256 KiB cached)
        origin.setFaults("/trickle.bin", Faults(bytesPerSecond: 1))
        let asked = origin.requestCount(path: "/trickle.bin")
        let reader = try start(["cat", origin.url("/trickle.bin"), "--range", "1000000-1000999"])
        defer { reader.terminate(); reader.waitUntilExit() }
        // The origin tells when the daemon's fetch reached it; the daemon lists a fetch from
        // before it starts it.
        XCTAssertTrue(origin.waitForRequests(path: "/trickle.bin", count: asked + 1), "the daemon's fetch reached the origin")

        // `status` lists every daemon on the machine: this test reads its own daemon's part.
        let all = try run(["status"], cacheDirectory: nil).text
        let text = all.components(separatedBy: "\n\n").first { $0.hasPrefix("pid \(daemon.processIdentifier):") } ?? ""
        XCTAssertTrue(text.contains(origin.url("/trickle.bin")), all)
        XCTAssertTrue(text.contains("fetching:  1 transfer"), text)
        XCTAssertFalse(text.contains("1 transfers"), text)
        XCTAssertTrue(text.contains(" 1000000-1000999 "), text)
    }
}

extension CLITests {
    /// A cache of many files (an HLS stream is a file per segment) makes a status document of
    /// several MiB: `status` still reads it whole.
    func testStatusReadsTheDocumentOfACacheWithManyFiles() throws {
        origin.setGeneratedFile("/seg.ts", length: 10, seed: 11)
        let pad = String(repeating: "p", count: 600)
        let urls = (0..<1000).map { origin.url("/seg.ts?pad=\(pad)&n=\($0)") }   // 1000 cache keys
        XCTAssertEqual(try run(["preload"] + urls).status, 0)
        let daemon = try start(["proxy", "--proxy-port", "0"])
        defer { daemon.terminate(); daemon.waitUntilExit() }
        try waitForRuntimeFile(cacheDir)

        let json = try run(["status", "--json"], cacheDirectory: nil)
        XCTAssertEqual(json.status, 0, json.stderr)
        XCTAssertGreaterThan(json.stdout.count, 1 << 20, "the document is bigger than the old 1 MiB read limit")
        let daemons = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [[String: Any]])
        let mine = try XCTUnwrap(daemons.first { ($0["pid"] as? Int) == Int(daemon.processIdentifier) })
        XCTAssertNil(mine["note"], "\(mine["note"] ?? "")")
        XCTAssertEqual(((mine["status"] as? [String: Any])?["files"] as? [Any])?.count, 1000)
    }
}

extension CLITests {
    /// The daemon's engine runs in Fetcher's layers (`openEngine`): an origin that cannot be
    /// reached is marked down at its first failure, and `status` lists it, with the last error.
    func testStatusListsAnOriginThatIsDown() throws {
        let daemon = try start(["proxy", "--proxy-port", "0"])
        defer { daemon.terminate(); daemon.waitUntilExit() }
        try waitForRuntimeFile(cacheDir)
        let url = origin.url("/never.bin")
        origin.stop()
        let failed = try run(["cat", url])
        XCTAssertNotEqual(failed.status, 0, "a file never cached cannot be read while its origin is away")

        let json = try run(["status", "--json"], cacheDirectory: nil)
        XCTAssertEqual(json.status, 0, json.stderr)
        let daemons = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [[String: Any]], json.text)
        let mine = try XCTUnwrap(daemons.first { ($0["pid"] as? Int) == Int(daemon.processIdentifier) }, json.text)
        let down = try XCTUnwrap((mine["status"] as? [String: Any])?["originsDown"] as? [[String: Any]], json.text)
        XCTAssertEqual(down.map { $0["origin"] as? String }, [origin.url("")], json.text)
        XCTAssertEqual((down.first?["lastError"] as? String)?.isEmpty, false, json.text)
    }
}

extension CLITests {
    /// A process that looks like a daemon of this user (it holds `DIR/lock` open beside an
    /// `index.sqlite`, its `proxy.json` names its pid and a loopback port it listens on) and
    /// accepts every connection without ever answering. Writes `DIR/ready` once set up.
    private static let silentDaemon = """
        import json, os, socket, sys, time
        d = sys.argv[1]
        lock = os.open(d + "/lock", os.O_RDONLY)
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        status = {"service": "httpcachefs", "version": "fake", "port": s.getsockname()[1], "bindAddress": "127.0.0.1",
                  "tokenRequired": False, "pid": os.getpid(), "controlKey": "silent-key"}
        fd = os.open(d + "/proxy.json.tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, json.dumps(status).encode())
        os.close(fd)
        os.rename(d + "/proxy.json.tmp", d + "/proxy.json")
        open(d + "/ready", "w").close()
        held = []
        while True:
            c, _ = s.accept()
            held.append(c)
        """

    /// `status` asked each daemon in turn, a minute each for `--json`: one that accepts and says
    /// nothing held it that long, several for minutes. Now all are asked at once under one
    /// deadline, and the silent one is listed as not answering, in JSON and in text.
    func testStatusEndsAndSaysWhichDaemonDidNotAnswer() throws {
        let dir = temp.appending("silent-cache")
        XCTAssertEqual(mkdir(dir, 0o700), 0)
        for name in ["lock", "index.sqlite"] { XCTAssertTrue(FileManager.default.createFile(atPath: dir + "/" + name, contents: Data())) }
        let fake = Process()
        fake.executableURL = URL(fileURLWithPath: "/usr/bin/python3")
        fake.arguments = ["-c", Self.silentDaemon, dir]
        fake.standardOutput = FileHandle.nullDevice
        try fake.run()
        defer { fake.terminate(); fake.waitUntilExit() }
        XCTAssertTrue(FileEvents.wait(in: dir, orExitOf: fake.processIdentifier) { FileManager.default.fileExists(atPath: dir + "/ready") },
                      "the fake daemon never got ready")

        let json = try run(["status", "--json", "--answer-timeout", "2"], cacheDirectory: nil)
        XCTAssertEqual(json.status, 0, json.stderr)
        let daemons = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(json.stdout)) as? [[String: Any]], json.text)
        let silent = try XCTUnwrap(daemons.first { ($0["pid"] as? Int) == Int(fake.processIdentifier) }, json.text)
        XCTAssertEqual(silent["cacheDirectory"] as? String, dir)
        XCTAssertEqual(silent["answered"] as? Bool, false, json.text)
        XCTAssertEqual(silent["error"] as? String, "no answer within 2 s", json.text)
        XCTAssertNil(silent["status"])

        let text = try run(["status", "--answer-timeout", "2"], cacheDirectory: nil)
        XCTAssertEqual(text.status, 0, text.stderr)
        let block = text.text.components(separatedBy: "\n\n").first { $0.hasPrefix("pid \(fake.processIdentifier): ") }
        XCTAssertTrue(block?.contains("error:") == true && block?.contains("no answer within 2 s") == true, text.text)
    }
}
