import CacheCore
import Foundation
import Glibc
import TestSupport
import XCTest
@testable import FuseMount

/// Issue 46, item 5: the command starts clean (no descriptor of the daemon but 0, 1, 2) and
/// ends with the mountpoint, what it started in its group with it.
extension ChangeCommandTests {
    func testTheCommandHoldsNoDescriptorOfTheDaemon() throws {
        let dir = TemporaryDirectory(prefix: "httpcachefs-on-change-fds")
        defer { dir.remove() }
        // What a daemon holds without close-on-exec: a listening socket and a pipe.
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(pipe(&fds), 0)
        defer { [listener, fds[0], fds[1]].forEach { _ = close($0) } }
        XCTAssertEqual(fcntl(listener, F_GETFD) & FD_CLOEXEC, 0)

        func target(_ path: String) -> String {
            (try? FileManager.default.destinationOfSymbolicLink(atPath: path)) ?? "?"
        }
        let ours = [listener, fds[0], fds[1]].map { target("/proc/self/fd/\($0)") }
        XCTAssertTrue(ours.allSatisfy { $0.hasPrefix("socket:[") || $0.hasPrefix("pipe:[") }, "\(ours)")

        // The shell's own descriptors, as `ls -l` shows them (`; true`: it forks for `ls`, so $$
        // stays the shell). dash keeps one of its own (fd 10, a copy of its input).
        let out = dir.path + "/fds"
        let command = ChangeCommand(command: "ls -l /proc/$$/fd > '\(out)'; true", timeout: .seconds(30), timers: EngineClock.realTime.scheduler, logger: logger)
        XCTAssertEqual(run(command, ["/mnt/a.mkv"]), .exited(0))
        let listing = try String(contentsOfFile: out, encoding: .utf8)
        for held in ours {
            XCTAssertFalse(listing.contains(held), "the command holds the daemon's \(held):\n\(listing)")
        }
    }

    func testStopEndsTheRunUnderWayAndWhatItStarted() throws {
        let dir = TemporaryDirectory(prefix: "httpcachefs-on-change-stop")
        defer { dir.remove() }
        let fifo = dir.path + "/up"
        XCTAssertEqual(mkfifo(fifo, 0o600), 0)
        // The shell and its background child both hold the fifo's write end: its reader sees
        // the end of it only once both are gone.
        let command = ChangeCommand(command: "exec 3>'\(fifo)'; sleep 300 & echo up >&3; wait", timeout: .seconds(600), timers: EngineClock.realTime.scheduler, logger: logger)
        let ended = DispatchSemaphore(value: 0)
        let outcome = LockedValue<ChangeCommand.Outcome?>(nil)
        command.run(paths: ["/mnt/a.mkv"]) { o in outcome.withLock { $0 = o }; ended.signal() }
        let reader = open(fifo, O_RDONLY | O_CLOEXEC)   // returns once the command opened it
        XCTAssertGreaterThanOrEqual(reader, 0)
        defer { close(reader) }
        var buf = [UInt8](repeating: 0, count: 16)
        XCTAssertEqual(read(reader, &buf, buf.count), 3, "the command is up")

        command.stop()
        XCTAssertEqual(read(reader, &buf, buf.count), 0, "every writer is gone: the shell and its child")
        XCTAssertEqual(ended.wait(timeout: .now() + 30), .success)
        XCTAssertEqual(outcome.withLock { $0 }, .stopped)

        XCTAssertEqual(run(command, ["/mnt/b.mkv"]), .stopped, "after stop, no run starts")
    }
}
