import CacheCore
import Foundation
import Logging
import TestSupport
import XCTest
@testable import FuseMount

/// `--on-change`: the command gets exactly the changed paths on its standard input, once per
/// refresh; one that hangs is ended at its timeout (short here), one that fails is reported;
/// a program that does not exist is refused at mount time.
final class ChangeCommandTests: XCTestCase {
    let logger = Logger(label: "test.on-change")

    func run(_ command: ChangeCommand, _ paths: [String]) -> ChangeCommand.Outcome? {
        let done = DispatchSemaphore(value: 0)
        let outcome = LockedValue<ChangeCommand.Outcome?>(nil)
        command.run(paths: paths) { o in outcome.withLock { $0 = o }; done.signal() }
        XCTAssertEqual(done.wait(timeout: .now() + 30), .success, "the run ended")
        return outcome.withLock { $0 }
    }

    func testTheCommandGetsThePathsOnItsInputOneALine() throws {
        let dir = TemporaryDirectory(prefix: "httpcachefs-on-change")
        defer { dir.remove() }
        let out = dir.path + "/paths"
        let command = ChangeCommand(command: "cat > '\(out)'", timeout: .seconds(30), timers: EngineClock.realTime.scheduler, logger: logger)
        XCTAssertEqual(run(command, ["/mnt/media/films/a b.mkv", "/mnt/media/shows/s01/e01.mkv"]), .exited(0))
        XCTAssertEqual(try String(contentsOfFile: out, encoding: .utf8), "/mnt/media/films/a b.mkv\n/mnt/media/shows/s01/e01.mkv\n")
    }

    func testAHangingCommandIsEndedAtItsTimeoutWithWhatItStarted() throws {
        let command = ChangeCommand(command: "sleep 300 & sleep 300", timeout: .milliseconds(200), timers: EngineClock.realTime.scheduler, logger: logger)
        XCTAssertEqual(run(command, ["/mnt/a.mkv"]), .timedOut)
        let other = ChangeCommand(command: "exec sleep 300", timeout: .milliseconds(200), timers: EngineClock.realTime.scheduler, logger: logger)
        XCTAssertEqual(run(other, ["/mnt/a.mkv"]), .timedOut)
    }

    func testAFailingCommandIsReportedAndTheNextRunStillHappens() throws {
        let command = ChangeCommand(command: "read line; test \"$line\" = /mnt/ok", timeout: .seconds(30), timers: EngineClock.realTime.scheduler, logger: logger)
        XCTAssertEqual(run(command, ["/mnt/bad"]), .exited(1))
        XCTAssertEqual(run(command, ["/mnt/ok"]), .exited(0))
    }

    func testAProgramThatDoesNotExistIsRefusedAtOnce() {
        XCTAssertThrowsError(try ChangeCommand.check("no-such-program-xyz --now", option: "--on-change")) { e in
            XCTAssertEqual((e as? ChangeCommandError)?.message, "--on-change command 'no-such-program-xyz' is not on PATH: give its full path")
        }
        XCTAssertThrowsError(try ChangeCommand.check("/nonexistent/tell-jellyfin", option: "--on-change")) { e in
            XCTAssertEqual((e as? ChangeCommandError)?.message,
                           "--on-change command '/nonexistent/tell-jellyfin' does not exist: give a program that exists, or one on PATH")
        }
        XCTAssertThrowsError(try ChangeCommand.check("  ", option: "--on-change"))
        XCTAssertNoThrow(try ChangeCommand.check("curl -s -X POST http://127.0.0.1:8096/Library/Media/Updated", option: "--on-change"))
        XCTAssertNoThrow(try ChangeCommand.check("/bin/sh -c true", option: "--on-change"))
    }
}

/// The mount tells the command exactly what a refresh changed.
final class RefreshChangesTests: XCTestCase {
    private func list(_ o: OriginServer, _ path: String, _ rows: [(name: String, size: Int)]) {
        let html = "<html><body><h1>Index of \(path)</h1><hr><pre><a href=\"../\">../</a>\n"
            + rows.map { "<a href=\"\($0.name)\">\($0.name)</a>                 01-Jan-2024 00:00    \($0.name.hasSuffix("/") ? "-" : String($0.size))\n" }.joined()
            + "</pre><hr></body></html>\n"
        o.setResponse(path, status: 200, headers: [("Content-Type", "text/html")], body: Array(html.utf8))   // no validators, as nginx's autoindex
    }

    func testARefreshReportsExactlyTheFilesAddedRemovedAndResizedOnce() throws {
        let m = try EngineMount(tree: { o in try MountTreeSpec.build(indexes: [try MountTreeSpec.parseIndex(o.url("/lib/"))]) },
                                setup: { o in
                                    self.list(o, "/lib/", [("a.mkv", 100), ("b.mkv", 200), ("c.mkv", 300), ("show/", 0)])
                                    self.list(o, "/lib/show/", [("e1.mkv", 10)])
                                })
        defer { m.stop() }
        let heard = LockedValue<[[String]]>([])
        m.mount.fs.onChange { paths in heard.withLock { $0.append(paths) } }
        XCTAssertEqual(try POSIX.list(m.mount.mountpoint), ["a.mkv", "b.mkv", "c.mkv", "show"])
        XCTAssertEqual(try POSIX.list(m.mount.path("show")), ["e1.mkv"])
        XCTAssertEqual(heard.withLock { $0 }, [], "first listings change nothing")

        list(m.origin, "/lib/", [("a.mkv", 100), ("b.mkv", 2000), ("d.mkv", 400), ("show/", 0)])
        list(m.origin, "/lib/show/", [("e1.mkv", 10), ("e2.mkv", 20)])
        let done = DispatchSemaphore(value: 0)
        m.mount.fs.core.refreshListings(under: []) { _ in done.signal() }
        XCTAssertEqual(done.wait(timeout: .now() + 20), .success)
        let root = m.mount.mountpoint
        let runs = heard.withLock { $0 }
        XCTAssertEqual(runs.count, 1, "one refresh, one run: \(runs)")
        XCTAssertEqual(Set(runs.first ?? []), Set(["c.mkv", "b.mkv", "d.mkv", "show/e2.mkv"].map { root + "/" + $0 }))
        XCTAssertEqual(runs.first?.count, 4, "each once")
    }
}

extension RefreshChangesTests {
    func testAReloadedURLListReportsTheFilesAddedRemovedOrMoved() throws {
        let old = try treeFromList("a.mkv = http://o.test/a.mkv\nfilms/b.mkv = http://o.test/b.mkv\nfilms/c.mkv = http://o.test/c.mkv")
        let new = try treeFromList("a.mkv = http://o.test/a.mkv\nfilms/b.mkv = http://o.test/b2.mkv\nfilms/d.mkv = http://o.test/d.mkv")
        XCTAssertEqual(FileSystemCore.changedPaths(from: old, to: new), ["films/b.mkv", "films/c.mkv", "films/d.mkv"])
        XCTAssertEqual(FileSystemCore.changedPaths(from: new, to: new), [])
    }
}
