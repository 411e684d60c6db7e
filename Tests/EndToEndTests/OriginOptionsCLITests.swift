import Foundation
import TestSupport
import XCTest

/// `--user-agent`, `--ca-certificate`, netrc, `--user`/`--password-file`, `--cache-max-age` and
/// `--read-ahead-max` through the binary: what the origin's log shows, and one clear line for
/// each bad value, from the command line and from the config file alike.
extension CLITests {
    private func write(_ text: String, _ name: String) throws -> String {
        let path = temp.appending(name)
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    private func basic(_ user: String, _ password: String) -> String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    func testCatSendsTheUserAgentAndTheUserWithThePasswordFromAFile() throws {
        origin.setGeneratedFile("/u.bin", length: 5000, seed: 61)
        let password = try write("correct horse\n", "password")
        let r = try run(["cat", origin.url("/u.bin"), "--user-agent", "MediaBox/3.1 (tv)", "--user", "alice",
                         "--password-file", password], environment: ["HOME": temp.path])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout == OriginServer.generatedBytes(seed: 61, offset: 0, count: 5000))
        XCTAssertFalse(origin.requests.isEmpty)
        for request in origin.requests {
            XCTAssertEqual(request.header("user-agent"), "MediaBox/3.1 (tv)")
            XCTAssertEqual(request.header("authorization"), basic("alice", "correct horse"))
        }
    }

    func testCatsCredentialsStayWithItsURLsOriginAcrossARedirectToAnotherOne() throws {
        let canary = try OriginServer()
        defer { canary.stop() }
        canary.setFile("/c.bin", data: Array(repeating: 7, count: 5000))
        origin.setFaults("/go", Faults(redirectTo: canary.url("/c.bin")))
        let password = try write("pw\n", "pw")
        let r = try run(["cat", origin.url("/go"), "--user", "alice", "--password-file", password,
                         "--header", "X-Api-Key: key-1", "--header", "Cookie: s=1"])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(r.stdout.count, 5000)
        XCTAssertEqual(origin.requests.first?.header("x-api-key"), "key-1", "the URL given is a credential origin")
        XCTAssertEqual(origin.requests.first?.header("authorization"), basic("alice", "pw"))
        XCTAssertFalse(canary.requests.isEmpty)
        for request in canary.requests {
            for name in ["authorization", "x-api-key", "cookie"] {
                XCTAssertNil(request.header(name), "\(name) followed the redirect to another origin")
            }
        }
    }

    func testTheDefaultUserAgentStaysAndNoCredentialsGoUnasked() throws {
        origin.setGeneratedFile("/d.bin", length: 100, seed: 62)
        let r = try run(["cat", origin.url("/d.bin")], environment: ["HOME": temp.path])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(origin.requests.first?.header("user-agent")?.hasPrefix("httpcachefs/") ?? false)
        XCTAssertNil(origin.requests.first?.header("authorization"))
    }

    func testNetrcCredentialsComeFromHomeOrFromNETRC() throws {
        origin.setGeneratedFile("/n.bin", length: 100, seed: 63)
        _ = try write("machine 127.0.0.1 login home password from-home\n", ".netrc")
        XCTAssertEqual(try run(["cat", origin.url("/n.bin")], environment: ["HOME": temp.path]).status, 0)
        XCTAssertEqual(origin.requests.last?.header("authorization"), basic("home", "from-home"))

        let other = try write("machine 127.0.0.1 login env password from-env\n", "other-netrc")
        origin.resetLog()
        try FileManager.default.removeItem(atPath: cacheDir)
        XCTAssertEqual(try run(["cat", origin.url("/n.bin")], environment: ["HOME": temp.path, "NETRC": other]).status, 0)
        XCTAssertEqual(origin.requests.last?.header("authorization"), basic("env", "from-env"))
    }

    func testOriginSettingsFromTheConfigFile() throws {
        origin.setGeneratedFile("/c.bin", length: 100, seed: 64)
        let password = try write("from-file\n", "password")
        let config = try write("user-agent = ConfiguredAgent/1\nuser = bob\npassword-file = \(password)\n", "config")
        let r = try run(["cat", origin.url("/c.bin"), "--config", config], environment: ["HOME": temp.path])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertEqual(origin.requests.last?.header("user-agent"), "ConfiguredAgent/1")
        XCTAssertEqual(origin.requests.last?.header("authorization"), basic("bob", "from-file"))
    }

    func testAnHTTPSOriginWithAPrivateCANeedsItsCertificate() throws {
        origin.setGeneratedFile("/tls.bin", length: 70_000, seed: 65)
        let front: TLSFront
        do { front = try TLSFront(origin: origin) } catch let e as TLSFront.Unavailable {
            throw XCTSkip("SKIPPED LOUDLY: no TLS origin for this test: \(e)")
        }
        defer { front.stop() }
        let refused = try run(["cat", front.url("/tls.bin")])
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertOneLineError(refused, contains: "certificate")
        XCTAssertEqual(origin.requests.count, 0)

        let r = try run(["cat", front.url("/tls.bin"), "--ca-certificate", front.caCertificate])
        XCTAssertEqual(r.status, 0, r.stderr)
        XCTAssertTrue(r.stdout == OriginServer.generatedBytes(seed: 65, offset: 0, count: 70_000))
        XCTAssertFalse(origin.requests.isEmpty, "the origin behind the TLS door served it")
    }

    func testBadOriginAndLimitValuesGiveOneLine() throws {
        let notPEM = try write("hello\n", "not.pem")
        let empty = try write("\n", "empty-password")
        let config = try write("cache-max-age = forever\n", "config")
        let cases: [([String], String)] = [
            (["--user", "alice", "--password-file", temp.appending("missing")], "password file \(temp.appending("missing")) for --password-file does not exist"),
            (["--password-file", empty], "--password-file needs a user"),
            (["--user", "al:ice"], "invalid user 'al:ice' for --user"),
            (["--user", "alice", "--password-file", empty], "is empty: its first line is the password"),
            (["--user", "alice", "--password-file", "/dev/null"], "must be a regular file"),
            (["--user-agent", ""], "invalid user agent '' for --user-agent"),
            (["--ca-certificate", notPEM], "holds no PEM certificate"),
            (["--netrc-file", temp.appending("nope")], "netrc file \(temp.appending("nope")) for --netrc-file does not exist"),
            (["--cache-max-age", "soon"], "invalid duration 'soon' for --cache-max-age"),
            (["--cache-max-age", "0s"], "must be at least 1s"),
            (["--read-ahead-max", "lots"], "invalid size 'lots' for --read-ahead-max"),
            (["--scan-share", "-2%"], "scan share '-2%' for --scan-share is negative"),
            (["--scan-share", "150%"], "scan share '150%' for --scan-share is more than the whole cache: at most 100%"),
            (["--scan-share", "a lot"], "invalid scan share 'a lot' for --scan-share: expected a percentage"),
            (["--cache-size", "1G", "--scan-share", "2G"], "scan share '2G' for --scan-share is larger than the cache size"),
            (["--config", try write("scan-share = 2 percent\n", "config-share")], "invalid scan share '2 percent' for 'scan-share' at "),
            (["--entry-memory", "-16M"], "invalid size '-16M' for --entry-memory"),
            (["--entry-memory", "1T"], "entry memory '1T' for --entry-memory is too large: at most 16G"),
            (["--config", try write("entry-memory = plenty\n", "config-entry-memory")], "invalid size 'plenty' for 'entry-memory' at "),
            (["--config", try write("ignore-etag = maybe\n", "config-etag")], "invalid value 'maybe' for 'ignore-etag' at "),
            (["--config", config], "invalid duration 'forever' for 'cache-max-age' at \(config)"),
            (["--credential-host", "https://media.test/"], "invalid host 'https://media.test/' for --credential-host"),
            (["--config", try write("credential-host = a b\n", "config-host")], "invalid host 'a b' for 'credential-host' at "),
        ]
        for (args, fragment) in cases {
            let r = try run(["cat", origin.url("/x.bin")] + args)
            XCTAssertEqual(r.status, 64, "\(args): \(r.stderr)")
            XCTAssertOneLineError(r, contains: fragment)
        }
    }

    func testIgnoreETagFromTheCommandLineOrTheConfigFileSendsLastModifiedAsIfRange() throws {
        let length = 3 << 20
        origin.setGeneratedFile("/e.bin", length: Int64(length), seed: 65)
        let config = try write("ignore-etag = yes\n", "config-ignore-etag")
        for args in [["--ignore-etag"], ["--config", config]] {
            origin.resetLog()
            try? FileManager.default.removeItem(atPath: cacheDir)
            let r = try run(["cat", origin.url("/e.bin")] + args, environment: ["HOME": temp.path])
            XCTAssertEqual(r.status, 0, r.stderr)
            XCTAssertTrue(r.stdout == OriginServer.generatedBytes(seed: 65, offset: 0, count: length))
            let ifRanges = origin.requests.compactMap(\.ifRange)
            XCTAssertFalse(ifRanges.isEmpty, "\(args): ranges after the first were asked with If-Range")
            XCTAssertTrue(ifRanges.allSatisfy { !$0.hasPrefix("\"") }, "\(args): no ETag as If-Range: \(ifRanges)")
        }
    }

    func testHelpListsTheNewOptions() throws {
        let r = try run(["help", "mount"], cacheDirectory: nil)
        for option in ["--user-agent", "--ca-certificate", "--netrc-file", "--user ", "--password-file", "--cache-max-age",
                       "--read-ahead-max", "--uid", "--gid", "--umask", "--ignore-etag", "--credential-host"] {
            XCTAssertTrue(r.text.contains(option), "\(option) missing from help:\n\(r.text)")
        }
    }
}

extension CLITests {
    /// The issue's first attack: a proxy URL naming another host made the daemon send it Basic
    /// auth and the API key. Whatever the proxy answers, no credential reaches that host.
    func testAProxyURLForAnotherHostGetsNoneOfTheDaemonsCredentials() throws {
        let canary = try OriginServer()
        defer { canary.stop() }
        canary.setFile("/steal", data: Array("loot".utf8))
        let password = temp.appending("pw")
        try "pw\n".write(toFile: password, atomically: true, encoding: .utf8)
        let proxy = try start(["proxy", "--proxy-port", "0", "--bind", "127.0.0.1", "--user", "alice", "--password-file", password,
                               "--header", "X-Api-Key: key-1", "--header", "Authorization: Bearer bearer-1",
                               "--credential-host", "127.0.0.1:\(origin.port)"])
        defer { proxy.terminate(); proxy.waitUntilExit() }
        let port: Int? = try waitForRuntimeFile(cacheDir)
        let target = canary.url("/steal").addingPercentEncoding(withAllowedCharacters: .alphanumerics)!
        _ = try? RawHTTP.request(port: try XCTUnwrap(port), path: "/?url=" + target)
        for request in canary.requests {
            XCTAssertNil(request.header("authorization"), "the daemon's Basic auth or bearer token reached another host")
            XCTAssertNil(request.header("x-api-key"), "the daemon's API key reached another host")
        }
    }

    func testTheProxysTokenAndCredentialHeadersAreMaskedInItsPSLine() throws {
        let proxy = try start(["proxy", "--proxy-port", "0", "--bind", "127.0.0.1", "--token", "tok-secret",
                               "--header", "Authorization: Bearer bearer-secret", "--header", "X-Auth-Password: pw-secret",
                               "--header=X-Tenant: tenant-secret"])
        defer {
            // Bounded: a stop that was lost must fail the test, not hang it.
            proxy.terminate()
            if !ProcessExit.wait(proxy.processIdentifier, timeout: 30) {
                XCTFail("the proxy did not stop within 30 s of SIGTERM"); kill(proxy.processIdentifier, SIGKILL)
            }
            proxy.waitUntilExit()
        }
        let cmdline = { String(decoding: FileManager.default.contents(atPath: "/proc/\(proxy.processIdentifier)/cmdline") ?? Data(), as: UTF8.self) }
        // The proxy masks its arguments first thing, before it opens the cache: once it has
        // written its runtime file, its command line is the masked one.
        try waitForRuntimeFile(cacheDir)
        XCTAssertTrue(cmdline().contains("--header") && !cmdline().contains("bearer-secret"), cmdline())
        XCTAssertFalse(cmdline().contains("tok-secret"), cmdline())
        XCTAssertTrue(cmdline().contains("--token\u{0}**********\u{0}"), cmdline())
        XCTAssertTrue(cmdline().contains("Authorization: ********************"), cmdline())
        XCTAssertTrue(cmdline().contains("X-Auth-Password: *********"), "every --header is a credential: \(cmdline())")
        XCTAssertTrue(cmdline().contains("--header=X-Tenant: *************"), cmdline())
    }
}
