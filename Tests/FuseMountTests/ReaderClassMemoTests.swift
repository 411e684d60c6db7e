import XCTest
@testable import FuseMount
import CacheCore
#if canImport(Glibc)
import Glibc
#endif

/// A reader's class is looked up in /proc once per process, not at every open: remembered by
/// pid with a handle on the process itself (its `/proc/PID/comm`, kept open), so a pid the
/// kernel gave to a new process, or a process that ran another program (`exec`), is looked up
/// again, and an open of a process already seen reads only its `comm` through the handle.
final class ReaderClassMemoTests: XCTestCase {
    /// Processes as a test says: a pid's process now, if any, and its `comm`. A handle sees only
    /// the process it was opened on: after that one exits, it reads nothing, whoever has the pid.
    final class ScriptedProcesses: ProcessWatching, @unchecked Sendable {
        private let lock = NSLock()
        private var running: [Int32: (process: Int, comm: String)] = [:]
        private var handles: [Int32: (pid: Int32, process: Int)] = [:]
        private var started = 0
        private var nextHandle: Int32 = 100

        func start(_ pid: Int32, _ comm: String) { lock.withLock { started += 1; running[pid] = (started, comm) } }
        func exec(_ pid: Int32, _ comm: String) { lock.withLock { running[pid]?.comm = comm } }
        func exit(_ pid: Int32) { lock.withLock { running[pid] = nil } }
        var handlesOpen: Int { lock.withLock { handles.count } }

        func watch(pid: Int32) -> Int32? {
            lock.withLock {
                guard let p = running[pid] else { return nil }
                nextHandle += 1
                handles[nextHandle] = (pid, p.process)
                return nextHandle
            }
        }

        func comm(_ watch: Int32) -> String? {
            lock.withLock {
                guard let h = handles[watch], let p = running[h.pid], p.process == h.process else { return nil }
                return p.comm
            }
        }

        func close(_ watch: Int32) {
            lock.withLock { XCTAssertNotNil(handles.removeValue(forKey: watch), "handle \(watch) closed twice or never opened") }
        }
    }

    func testAProcessIsLookedUpOnceAndAReusedPidOrAnExecAgain() {
        let processes = ScriptedProcesses()
        let memo = ReaderClassMemo(source: processes)
        var lookups = 0
        func open(_ pid: Int32, classifiedAs c: ReaderClass) -> ReaderClass {
            memo.readerClass(pid: pid) {
                lookups += 1
                return c
            }
        }
        let table: [(what: String, before: () -> Void, pid: Int32, classified: ReaderClass, answer: ReaderClass, lookups: Int)] = [
            ("a scanner's first open: looked up", { processes.start(100, "ffprobe") }, 100, .scanner, .scanner, 1),
            ("its next opens: remembered", {}, 100, .player, .scanner, 1),
            ("another process: looked up", { processes.start(200, "sh") }, 200, .player, .player, 2),
            ("the first still remembered", {}, 100, .unknown, .scanner, 2),
            ("pid 100 reused by a later process: looked up again", { processes.exit(100); processes.start(100, "cat") }, 100, .player, .player, 3),
            ("and remembered", {}, 100, .scanner, .player, 3),
            ("a shell's child that ran another program (same process, new comm)", { processes.exec(200, "ffprobe") }, 200, .scanner, .scanner, 4),
            ("remembered as what it runs now", {}, 200, .player, .scanner, 4),
            ("a process gone before it could be watched: looked up, not remembered", {}, 300, .unknown, .unknown, 5),
            ("and looked up again next time", {}, 300, .unknown, .unknown, 6),
        ]
        for step in table {
            step.before()
            XCTAssertEqual(open(step.pid, classifiedAs: step.classified), step.answer, step.what)
            XCTAssertEqual(lookups, step.lookups, step.what)
        }
        XCTAssertEqual(memo.count, 2, "pids 100 and 200; the unreadable one not kept")
        XCTAssertEqual(processes.handlesOpen, 2, "the handle on pid 100's first process was closed")
    }

    /// A process checked less than a millisecond ago is not read again (a `cat` of a folder of
    /// small files opens one every few dozen microseconds); past that it is, and sees an `exec`.
    func testAProcessCheckedWithinAMillisecondIsNotReadAgain() {
        final class CountingReads: ProcessWatching, @unchecked Sendable {
            let inner: ScriptedProcesses
            var reads = 0
            init(_ inner: ScriptedProcesses) { self.inner = inner }
            func watch(pid: Int32) -> Int32? { inner.watch(pid: pid) }
            func comm(_ watch: Int32) -> String? { reads += 1; return inner.comm(watch) }
            func close(_ watch: Int32) { inner.close(watch) }
        }
        let processes = ScriptedProcesses()
        let source = CountingReads(processes)
        let memo = ReaderClassMemo(source: source, trustFor: 1_000_000)
        let ms: UInt64 = 1_000_000
        processes.start(100, "cat")
        XCTAssertEqual(memo.readerClass(pid: 100, now: 10 * ms) { .player }, .player)
        let readsAfterFirst = source.reads
        for i in 1...30 {
            XCTAssertEqual(memo.readerClass(pid: 100, now: 10 * ms + UInt64(i) * 40_000) { .unknown }, .player)
        }
        XCTAssertEqual(source.reads, readsAfterFirst + 1, "opens 40 µs apart: read again once, at the first past the millisecond")
        processes.exec(100, "ffprobe")
        XCTAssertEqual(memo.readerClass(pid: 100, now: 11 * ms + 900_000) { .scanner }, .player, "within the millisecond of its last check")
        XCTAssertEqual(memo.readerClass(pid: 100, now: 13 * ms) { .scanner }, .scanner, "past it: the exec is seen")
        processes.start(200, "sh")
        XCTAssertEqual(memo.readerClass(pid: 200, now: 13 * ms + 1) { .player }, .player, "another process is looked up at once")
        XCTAssertEqual(memo.readerClass(pid: 100) { .player }, .scanner, "without a clock: read every time, as before")
    }

    func testTheTableStartsOverAtItsCapacityClosingItsHandles() {
        let processes = ScriptedProcesses()
        let memo = ReaderClassMemo(capacity: 3, source: processes)
        for pid in Int32(1)...4 { processes.start(pid, "cat") }
        for pid in Int32(1)...3 { _ = memo.readerClass(pid: pid) { .player } }
        XCTAssertEqual(memo.count, 3)
        _ = memo.readerClass(pid: 4) { .player }
        XCTAssertEqual(memo.count, 1, "a fourth process: the table started over")
        XCTAssertEqual(processes.handlesOpen, 1, "and closed the handles it held")
        var lookedUp = false
        _ = memo.readerClass(pid: 1) { lookedUp = true; return .player }
        XCTAssertTrue(lookedUp, "forgotten when it started over")
    }

    /// The handle of the real source is `/proc/TID/comm` kept open: read again at offset 0 it
    /// says the thread's name now (an `exec` renames a process the same way), and once its
    /// process is gone it reads nothing.
    func testAProcHandleReadsTheNameNowAndNothingOnceTheProcessIsGone() throws {
        let source = ProcessWatch()
        // "PID/task/TID": this thread's id. Its name is set by writing its own comm (as
        // prctl(PR_SET_NAME) does), and set back after.
        let tid = try XCTUnwrap(Int32(try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/thread-self").split(separator: "/").last ?? ""))
        func name(_ text: String) throws {
            let fd = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
            guard fd >= 0 else { throw POSIX.Failure(errno: errno) }
            defer { close(fd) }
            guard write(fd, text, text.utf8.count) == text.utf8.count else { throw POSIX.Failure(errno: errno) }
        }
        let saved = try String(contentsOfFile: "/proc/thread-self/comm", encoding: .utf8).trimmingCharacters(in: .newlines)
        defer { try? name(saved) }
        let mine = try XCTUnwrap(source.watch(pid: tid))
        defer { source.close(mine) }
        XCTAssertEqual(source.comm(mine), saved)
        try name("renamed-reader")
        XCTAssertEqual(source.comm(mine), "renamed-reader", "the name now, through the same descriptor")

        let child = Process()
        child.executableURL = URL(fileURLWithPath: "/bin/sleep")
        child.arguments = ["60"]
        try child.run()
        let theirs = try XCTUnwrap(source.watch(pid: child.processIdentifier))
        defer { source.close(theirs) }
        XCTAssertNotNil(source.comm(theirs), "running")
        child.terminate()
        child.waitUntilExit()   // reaped: its pid is free
        XCTAssertNil(source.comm(theirs), "a process gone reads nothing, whoever gets its pid")
        XCTAssertNil(source.watch(pid: -1))
    }
}
