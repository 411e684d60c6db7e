import CacheCore
import Foundation
@testable import Proxy
import XCTest

/// rclone's remote control, the pure parts: requests as rclone, curl and forms send them, who is
/// let in, and each call's answer in rclone's shape against hooks that record what they were
/// asked (the real daemon through Debian's `rclone rc`: `RcloneRcTests`).
final class RcTests: XCTestCase {
    // MARK: requests

    func testParametersFromQueryFormAndJSONAsRcloneReadsThem() throws {
        let cases: [(String, String?, String, RcRequest)] = [
            ("/vfs/refresh", "application/json", #"{"dir":"Films","recursive":"true"}"#,
             RcRequest(call: "vfs/refresh", params: ["dir": .string("Films"), "recursive": .string("true")])),
            ("/vfs/refresh?dir=Shows&dir2=a%20b+c", nil, "",
             RcRequest(call: "vfs/refresh", params: ["dir": .string("Shows"), "dir2": .string("a b c")])),
            ("/vfs/forget", "application/x-www-form-urlencoded; charset=utf-8", "file=x%2Fy.mkv&dir=z",
             RcRequest(call: "vfs/forget", params: ["file": .string("x/y.mkv"), "dir": .string("z")])),
            ("/rc/noop?a=1&a=2", "application/json", #"{"b":true,"n":3,"f":1.5,"l":[1,"x"],"o":{"k":null}}"#,
             RcRequest(call: "rc/noop", params: ["a": .string("2"), "b": .bool(true), "n": .int(3), "f": .double(1.5),
                                                 "l": .array([.int(1), .string("x")]), "o": .object(["k": .null])])),
            ("/vfs/refresh?dir=q", "application/json", #"{"dir":"j"}"#, RcRequest(call: "vfs/refresh", params: ["dir": .string("j")])),
            ("/core/stats", "text/plain", "ignored", RcRequest(call: "core/stats", params: [:])),
        ]
        for (target, type, body, expected) in cases {
            XCTAssertEqual(try RcRequest.parse(method: "POST", target: target, contentType: type, body: Array(body.utf8)).get(), expected, target)
        }
    }

    func testBadRequestsAreRclonesErrorShape() {
        let cases: [(String, String, String?, String, Int, String)] = [
            ("GET", "/vfs/stats", nil, "", 404, "the remote control takes POST requests only"),
            ("PUT", "/vfs/stats", nil, "", 405, "method \"PUT\" not allowed"),
            ("POST", "/vfs/refresh", "application/json", "[1]", 400, "failed to read input JSON"),
            ("POST", "/vfs/refresh", "application/json", "{", 400, "failed to read input JSON"),
        ]
        for (method, target, type, body, status, message) in cases {
            guard case let .failure(f) = RcRequest.parse(method: method, target: target, contentType: type, body: Array(body.utf8)) else {
                return XCTFail("\(method) \(target) \(body) parsed")
            }
            XCTAssertEqual(f.status, status, "\(method) \(body)")
            XCTAssertTrue(f.message.contains(message), f.message)
            XCTAssertEqual(f.call, "vfs/" + target.split(separator: "/").last!)
        }
        let failure = RcFailure(call: "x/y", input: ["a": .string("1")], status: 404, message: "couldn't find method \"x/y\"")
        XCTAssertEqual(failure.body.json(), "{\n\t\"error\": \"couldn't find method \\\"x/y\\\"\",\n\t\"input\": {\n\t\t\"a\": \"1\"\n\t},\n\t\"path\": \"x/y\",\n\t\"status\": 404\n}")
    }

    func testJSONTextEscapesWhatItMust() {
        XCTAssertEqual(RcValue.string("a\"b\\c\n\u{1}\u{2028}é").json(), "\"a\\\"b\\\\c\\n\\u0001\\u2028é\"")
        XCTAssertEqual(RcValue.object([:]).json(), "{}")
        XCTAssertEqual(RcValue.array([]).json(), "[]")
        XCTAssertEqual(RcValue.double(.nan).json(), "null")
        for (value, bool) in [(RcValue.string("true"), true), (.string("0"), false), (.bool(true), true), (.int(0), false)] {
            XCTAssertEqual(value.bool, bool, "\(value)")
        }
        XCTAssertNil(RcValue.string("yes").bool, "strconv.ParseBool does not take yes")
    }

    // MARK: access

    private func headers(_ pairs: [String: String]) -> (String) -> String? {
        { name in pairs.first { $0.key.lowercased() == name.lowercased() }?.value }
    }

    private func basic(_ user: String, _ password: String) -> String {
        "Basic " + Data("\(user):\(password)".utf8).base64EncodedString()
    }

    func testOnlyTheOwnersLoginAndNoWebPageGetsIn() {
        let key = RcAccess(login: nil, controlKey: "K3y", bindAddress: "127.0.0.1")
        let own = RcAccess(login: ("u", "p:w"), controlKey: "K3y", bindAddress: "127.0.0.1")
        let cases: [(RcAccess, [String: String], Int?, String)] = [
            (key, ["Authorization": basic("httpcachefs", "K3y"), "Host": "127.0.0.1:5572"], nil, "the key as password"),
            (key, [ControlRequest.keyHeader: "K3y"], nil, "the key as the control header"),
            (key, ["Authorization": basic("httpcachefs", "K3x")], 401, "a wrong key"),
            (key, ["Authorization": basic("u", "K3y")], 401, "another user name"),
            (key, [:], 401, "no login"),
            (key, ["Authorization": "Bearer K3y"], 401, "not basic"),
            (own, ["Authorization": basic("u", "p:w"), "Host": "localhost:5572"], nil, "--rc-user/--rc-pass, a colon in the password"),
            (own, ["Authorization": basic("httpcachefs", "K3y")], 401, "the key is not taken when a login is given"),
            (own, [ControlRequest.keyHeader: "K3y"], 401, "nor its header"),
            (own, ["Authorization": basic("u", "p:w"), "Origin": "http://127.0.0.1:5572"], 403, "a browser, even from itself"),
            (own, ["Authorization": basic("u", "p:w"), "Sec-Fetch-Site": "cross-site"], 403, "a browser's fetch"),
            (own, ["Authorization": basic("u", "p:w"), "Sec-Fetch-Site": "none"], nil, "typed into the address bar by the user"),
            (own, ["Authorization": basic("u", "p:w"), "Host": "evil.example:5572"], 403, "DNS rebinding"),
            (own, ["Authorization": basic("u", "p:w"), "Host": "127.0.0.1:5573"], 403, "another port"),
            (own, ["Authorization": basic("u", "p:w"), "Host": "[::1]:5572"], nil, "IPv6 loopback"),
        ]
        for (access, pairs, status, why) in cases {
            XCTAssertEqual(access.refusal(header: headers(pairs), port: 5572)?.status, status, why)
        }
        XCTAssertTrue(key.refusal(header: headers([:]), port: nil)!.message.contains("user httpcachefs, password the controlKey of the daemon's proxy.json"))
    }

    // MARK: calls

    /// Hooks over one mountpoint `/mnt/m` whose tree has `Films/a.mkv`; every refresh and
    /// removal recorded.
    private final class Recorder: Sendable {
        let asked = LockedValue<[String]>([])
        let mountpoints: [String]
        init(_ mountpoints: [String] = ["/mnt/m"]) { self.mountpoints = mountpoints }

        var hooks: RcHooks {
            RcHooks(mountpoints: { self.mountpoints },
                    refresh: { mountpoint, dir, recursive in
                        self.asked.withLock { $0.append("refresh \(mountpoint) '\(dir)'\(recursive ? " recursive" : "")") }
                        return dir == "Nope" ? ControlAnswer(status: 404, text: "not in the mount: /Nope") : ControlAnswer(status: 200, text: "re-read 1 listing")
                    },
                    remove: { urls in
                        self.asked.withLock { $0.append("remove \(urls.joined(separator: " "))") }
                        return ControlAnswer(status: 200, text: "")
                    },
                    fileURL: { _, path in path == "Films/a.mkv" ? "http://h/Films/a.mkv" : nil },
                    mountStats: { _ in (openFiles: 2, files: 5, dirs: 1) },
                    cache: { ("/c", CacheUsage(bytes: 100, capacity: 1000, entries: 3), CacheMetrics(clock: .realTime).totals,
                              RcTests.now - 90) },
                    version: "1.2.3")
        }
    }

    /// The rc's clock here: the cache started 90 s before it.
    static let now = Date(timeIntervalSince1970: 1_700_000_000)

    private func answer(_ call: String, _ params: [String: RcValue], _ recorder: Recorder = Recorder()) async -> Result<RcValue, RcFailure> {
        await RcCalls.answer(RcRequest(call: call, params: params), hooks: recorder.hooks, jobs: RcJobs(clock: { RcTests.now }))
    }

    func testRefreshReReadsEachDirAndSaysOKOrWhyPerDir() async throws {
        let recorder = Recorder()
        let result = try await answer("vfs/refresh", ["dir": .string("/Films/"), "dir2": .string("Nope"), "recursive": .string("true"),
                                                      "_group": .string("g")], recorder).get()
        XCTAssertEqual(result, .object(["result": .object(["/Films/": .string("OK"), "Nope": .string("not in the mount: /Nope")])]))
        XCTAssertEqual(recorder.asked.withLock { $0 }, ["refresh /mnt/m 'Films' recursive", "refresh /mnt/m 'Nope' recursive"])

        let root = Recorder()
        let rootResult = try await answer("vfs/refresh", [:], root).get()
        XCTAssertEqual(rootResult, .object(["result": .object(["": .string("OK")])]))
        XCTAssertEqual(root.asked.withLock { $0 }, ["refresh /mnt/m ''"], "no dir: the root")
    }

    func testForgetDropsAFilesCopyAndReReadsADir() async throws {
        let recorder = Recorder()
        let result = try await answer("vfs/forget", ["file": .string("Films/a.mkv"), "file2": .string("Films/none.mkv"), "dir": .string("Shows/")], recorder).get()
        XCTAssertEqual(result, .object(["forgotten": .array([.string("Films/a.mkv"), .string("Films/none.mkv"), .string("Shows")])]))
        XCTAssertEqual(recorder.asked.withLock { $0 }, ["remove http://h/Films/a.mkv", "refresh /mnt/m 'Shows'"])
        let all = Recorder()
        let allResult = try await answer("vfs/forget", [:], all).get()
        XCTAssertEqual(allResult, .object(["forgotten": .array([])]))
        XCTAssertEqual(all.asked.withLock { $0 }, ["refresh /mnt/m ''"], "nothing named: every listing")
    }

    func testWrongParametersAndUnknownCallsAreRclonesErrors() async {
        let cases: [(String, [String: RcValue], [String], Int, String)] = [
            ("vfs/refresh", ["path": .string("x")], ["/mnt/m"], 500, "unknown key \"path\""),
            ("vfs/refresh", ["recursive": .string("maybe")], ["/mnt/m"], 500, "invalid value \"recursive\"=\"maybe\""),
            ("vfs/refresh", ["dir": .int(3)], ["/mnt/m"], 500, "value must be string \"dir\"=3"),
            ("vfs/forget", ["name": .string("x")], ["/mnt/m"], 500, "unknown key \"name\""),
            ("vfs/stats", ["x": .string("1")], ["/mnt/m"], 500, "invalid parameter: x"),
            ("vfs/refresh", [:], ["/a", "/b"], 500, "more than one VFS active - need \"fs\" parameter (one of: /a, /b)"),
            ("vfs/refresh", [:], [], 500, "no VFS active"),
            ("vfs/refresh", ["fs": .string("gdrive:")], ["/mnt/m"], 500, "no VFS found with name \"gdrive:\""),
            ("job/status", [:], ["/mnt/m"], 400, "Didn't find key \"jobid\""),
            ("job/status", ["jobid": .string("7")], ["/mnt/m"], 500, "job not found"),
            ("operations/purge", ["fs": .string("/")], ["/mnt/m"], 404, "couldn't find method \"operations/purge\""),
        ]
        for (call, params, mountpoints, status, message) in cases {
            guard case let .failure(f) = await answer(call, params, Recorder(mountpoints)) else { XCTFail("\(call) \(params) answered"); continue }
            XCTAssertEqual(f.status, status, "\(call) \(params)")
            XCTAssertTrue(f.message.contains(message), "\(call): \(f.message)")
            XCTAssertEqual(f.call, call)
            XCTAssertEqual(f.input, params, "the input as given")
        }
    }

    func testFsNamesAMountpointOfSeveral() async throws {
        let recorder = Recorder(["/a", "/b"])
        _ = try await answer("vfs/refresh", ["fs": .string("/b/"), "dir": .string("x")], recorder).get()
        XCTAssertEqual(recorder.asked.withLock { $0 }, ["refresh /b 'x'"])
    }

    func testStatsListVersionAndNoopInRclonesFields() async throws {
        guard case let .object(stats) = try await answer("vfs/stats", [:]).get(), case let .object(disk)? = stats["diskCache"] else {
            return XCTFail("vfs/stats is no object")
        }
        XCTAssertEqual(stats["fs"], .string("/mnt/m"))
        XCTAssertEqual(stats["inUse"], .int(2))
        XCTAssertEqual(stats["metadataCache"], .object(["dirs": .int(1), "files": .int(5)]))
        XCTAssertEqual(disk["bytesUsed"], .int(100))
        XCTAssertEqual(disk["files"], .int(3))
        XCTAssertEqual(disk["uploadsQueued"], .int(0))
        guard case let .object(core) = try await answer("core/stats", [:]).get() else { return XCTFail("core/stats is no object") }
        for key in ["bytes", "checks", "deletes", "elapsedTime", "errors", "eta", "fatalError", "renames", "retryError", "speed",
                    "totalBytes", "totalChecks", "totalTransfers", "transferTime", "transfers"] {
            XCTAssertNotNil(core[key], key)
        }
        XCTAssertEqual(core["elapsedTime"], .double(90), "since the cache's start, by the rc's clock")
        let list = try await answer("vfs/list", [:], Recorder(["/a", "/b"])).get()
        XCTAssertEqual(list, .object(["vfses": .array([.string("/a"), .string("/b")])]))
        guard case let .object(version) = try await answer("core/version", [:]).get() else { return XCTFail("core/version is no object") }
        XCTAssertEqual(version["version"], .string("httpcachefs 1.2.3"))
        XCTAssertEqual(version["decomposed"], .array([.int(1), .int(2), .int(3)]))
        let noop = try await answer("rc/noop", ["a": .string("1"), "b": .int(2)]).get()
        XCTAssertEqual(noop, .object(["a": .string("1"), "b": .int(2)]))
    }

    func testJobsTellHowAnAsyncCallWent() throws {
        let now = LockedValue(Date(timeIntervalSince1970: 1_700_000_000))
        let jobs = RcJobs(keep: 2, clock: { now.withLock { $0 } })
        let first = jobs.start("vfs/refresh")
        guard case let .object(running)? = jobs.status(first) else { return XCTFail("no job \(first)") }
        XCTAssertEqual(running["finished"], .bool(false))
        XCTAssertEqual(running["success"], .bool(false))
        now.withLock { $0 += 2 }
        jobs.finish(first, .success(.object(["result": .object(["": .string("OK")])])))
        guard case let .object(done)? = jobs.status(first) else { return XCTFail("no job \(first)") }
        XCTAssertEqual(done["finished"], .bool(true))
        XCTAssertEqual(done["success"], .bool(true))
        XCTAssertEqual(done["duration"], .double(2))
        XCTAssertEqual(done["output"], .object(["result": .object(["": .string("OK")])]))
        XCTAssertEqual(done["startTime"], .string("2023-11-14T22:13:20.000Z"))
        let second = jobs.start("vfs/forget")
        jobs.finish(second, .failure(RcFailure(call: "vfs/forget", input: [:], status: 500, message: "unknown key \"x\"")))
        guard case let .object(failed)? = jobs.status(second) else { return XCTFail("no job \(second)") }
        XCTAssertEqual(failed["error"], .string("unknown key \"x\""))
        XCTAssertEqual(failed["success"], .bool(false))
        _ = jobs.start("rc/noop")
        XCTAssertEqual(jobs.ids(), [2, 3], "the last two kept")
        XCTAssertNil(jobs.status(first))
    }
}
