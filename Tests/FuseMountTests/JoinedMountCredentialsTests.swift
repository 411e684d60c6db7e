import Foundation
import FuseMount
import Glibc
import TestSupport
import XCTest

/// Credentials belong to the origins of the mount that was given them (issue 46, item 3): a
/// mount joining a daemon without the daemon's `--header` / netrc names its own origins without
/// them, and those origins never see the daemon's credentials. Real mounts of the real binary,
/// origin servers recording every request's headers.
final class JoinedMountCredentialsTests: XCTestCase {
    private var h: DaemonHarness!
    /// The second host (another port: another origin), which only the joining mount names.
    private var other: OriginServer!
    private var joined: [String] = []
    private var netrc: String { h.directory.appending("netrc") }
    /// No `~/.netrc` of the machine's takes part.
    private var environment: [String: String] { ["HOME": h.directory.path, "NETRC": ""] }

    override func setUpWithError() throws {
        h = try DaemonHarness()
        other = try OriginServer()
        h.origin.setGeneratedFile("/movies/film.mkv", length: 1 << 20, seed: 91)
        h.origin.setGeneratedFile("/movies/public.mkv", length: 1 << 20, seed: 93)
        other.setGeneratedFile("/tv/episode.mkv", length: 1 << 20, seed: 92)
        other.setGeneratedFile("/tv/given.mkv", length: 1 << 20, seed: 94)
        // netrc names the host (127.0.0.1) of both origins: libcurl alone would send it to both.
        try "machine 127.0.0.1 login carol password from-netrc\n".write(toFile: netrc, atomically: true, encoding: .utf8)
    }

    override func tearDown() {
        guard h != nil else { return }
        for path in joined where Mountpoint.isMounted(path) { _ = umount2(path, Int32(MNT_DETACH)) }
        h.cleanup()
        other?.stop()
    }

    private func mountpoint(_ name: String) throws -> String {
        let path = h.directory.appending(name)
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        joined.append(path)
        return path
    }

    /// `mount PATH URL ARGS...` on the daemon's cache, as a user types it.
    private func join(_ path: String, _ url: String, _ extra: [String] = []) throws -> DaemonHarness.Outcome {
        try h.run(h.binary, ["mount", path, url, "--cache-dir", h.cacheDirectory, "--log-file", h.logFile, "--proxy-port", "0"] + extra,
                  environment: environment)
    }

    private let secrets = ["--header", "X-Api-Key: key-a", "--header", "Authorization: Bearer bearer-a"]

    func testAJoiningMountWithoutTheDaemonsCredentialsNeverSendsThemToItsHost() throws {
        let first = try h.run(h.binary, ["mount", h.mountpoint, h.origin.url("/movies/film.mkv"), "--cache-dir", h.cacheDirectory,
                                         "--log-file", h.logFile, "--proxy-port", "0", "--netrc-file", netrc] + secrets,
                              environment: environment)
        XCTAssertEqual(first.status, 0, first.stderr + h.log)
        let b = try mountpoint("b")
        let r = try join(b, other.url("/tv/episode.mkv"))
        XCTAssertEqual(r.status, 0, r.stderr + h.log)
        XCTAssertTrue(r.stderr.contains("this mount was not given the daemon's --header, netrc file: its origins go without them"), r.stderr)
        XCTAssertFalse(r.stderr.contains("key-a"), r.stderr)

        XCTAssertTrue(try POSIX.readAll(b + "/episode.mkv") == OriginServer.generatedBytes(seed: 92, offset: 0, count: 1 << 20))
        XCTAssertFalse(other.requests.isEmpty)
        for request in other.requests {
            XCTAssertNil(request.header("x-api-key"), "mount A's API key reached mount B's host: \(request.path)")
            XCTAssertNil(request.header("authorization"), "mount A's bearer token or netrc login reached mount B's host: \(request.path)")
        }
        // Mount A's own origin still gets them.
        XCTAssertTrue(try POSIX.readAll(h.path("film.mkv")) == OriginServer.generatedBytes(seed: 91, offset: 0, count: 1 << 20))
        XCTAssertTrue(h.origin.requests.contains { $0.header("x-api-key") == "key-a" }, "mount A's host gets its key")
    }

    /// The same origin as the daemon's, named by a mount given no credentials: one origin has one
    /// set of credentials in a daemon (its bytes are cached under them), the daemon's. A mount
    /// given the same ones brings its own origins to them; one given other ones is refused.
    func testAJoiningMountGivenTheSameCredentialsBringsItsOriginsAndOtherOnesAreRefused() throws {
        let first = try h.run(h.binary, ["mount", h.mountpoint, h.origin.url("/movies/film.mkv"), "--cache-dir", h.cacheDirectory,
                                         "--log-file", h.logFile, "--proxy-port", "0"] + secrets, environment: environment)
        XCTAssertEqual(first.status, 0, first.stderr + h.log)

        let sameOrigin = try mountpoint("same-origin")
        XCTAssertEqual(try join(sameOrigin, h.origin.url("/movies/public.mkv")).status, 0, h.log)
        h.origin.resetLog()
        XCTAssertTrue(try POSIX.readAll(sameOrigin + "/public.mkv") == OriginServer.generatedBytes(seed: 93, offset: 0, count: 1 << 20))
        XCTAssertTrue(h.origin.requests.allSatisfy { $0.header("x-api-key") == "key-a" }, "the daemon's origin keeps its credentials")

        let given = try mountpoint("given")
        XCTAssertEqual(try join(given, other.url("/tv/given.mkv"), secrets).status, 0, h.log)
        XCTAssertTrue(try POSIX.readAll(given + "/given.mkv") == OriginServer.generatedBytes(seed: 94, offset: 0, count: 1 << 20))
        XCTAssertTrue(other.requests.contains { $0.header("x-api-key") == "key-a" }, "a mount given the key sends it to its origins")

        let refused = try mountpoint("refused")
        let r = try join(refused, h.origin.url("/movies/public.mkv"), ["--header", "X-Api-Key: key-b"])
        XCTAssertNotEqual(r.status, 0)
        XCTAssertTrue(r.stderr.contains("asks for another --header"), r.stderr)
        XCTAssertFalse(r.stderr.contains("key-b") || h.log.contains("key-b"), r.stderr)
        XCTAssertFalse(Mountpoint.isMounted(refused))
    }
}
