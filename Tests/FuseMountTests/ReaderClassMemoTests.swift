import XCTest
@testable import FuseMount
import CacheCore
#if canImport(Glibc)
import Glibc
#endif

/// A reader's class is looked up in /proc once per process, not at every open: remembered by
/// pid, start time and `comm`, so a pid the kernel gave to a new process, or a process that
/// ran another program (`exec`), is looked up again.
final class ReaderClassMemoTests: XCTestCase {
    private func identity(_ start: UInt64, _ comm: String) -> ReaderClassMemo.Identity {
        .init(startTime: start, comm: comm)
    }

    func testAProcessIsLookedUpOnceAndAReusedPidOrAnExecAgain() {
        let memo = ReaderClassMemo()
        var lookups = 0
        func open(_ pid: Int32, _ id: ReaderClassMemo.Identity?, is c: ReaderClass) -> ReaderClass {
            memo.readerClass(pid: pid, identity: id) {
                lookups += 1
                return c
            }
        }
        let table: [(what: String, pid: Int32, identity: ReaderClassMemo.Identity?, classified: ReaderClass, answer: ReaderClass, lookups: Int)] = [
            ("a scanner's first open: looked up", 100, identity(5000, "ffprobe"), .scanner, .scanner, 1),
            ("its next opens: remembered", 100, identity(5000, "ffprobe"), .player, .scanner, 1),
            ("another process: looked up", 200, identity(5100, "cat"), .player, .player, 2),
            ("the first still remembered", 100, identity(5000, "ffprobe"), .unknown, .scanner, 2),
            ("pid 100 reused by a later process: looked up again", 100, identity(9000, "cat"), .player, .player, 3),
            ("a shell's child that ran another program (same start, new comm)", 200, identity(5100, "ffprobe"), .scanner, .scanner, 4),
            ("a process gone before its stat was read: looked up, not remembered", 300, nil, .unknown, .unknown, 5),
            ("and looked up again next time", 300, nil, .unknown, .unknown, 6),
        ]
        for step in table {
            XCTAssertEqual(open(step.pid, step.identity, is: step.classified), step.answer, step.what)
            XCTAssertEqual(lookups, step.lookups, step.what)
        }
        XCTAssertEqual(memo.count, 2, "pids 100 and 200; the unreadable one not kept")
    }

    func testTheTableStartsOverAtItsCapacity() {
        let memo = ReaderClassMemo(capacity: 3)
        for pid in Int32(1)...3 { _ = memo.readerClass(pid: pid, identity: identity(1, "cat")) { .player } }
        XCTAssertEqual(memo.count, 3)
        _ = memo.readerClass(pid: 4, identity: identity(1, "cat")) { .player }
        XCTAssertEqual(memo.count, 1, "a fourth process: the table started over")
        var lookedUp = false
        _ = memo.readerClass(pid: 1, identity: identity(1, "cat")) { lookedUp = true; return .player }
        XCTAssertTrue(lookedUp, "forgotten when it started over")
    }

    func testTheStatLineIsReadFromItsLastParenthesis() {
        // proc(5): pid (comm) state ppid ... field 22 starttime. A comm may hold spaces and ')'.
        let tail = " S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 123456 19 20"
        let table: [(line: String, expected: (String, UInt64)?)] = [
            ("4242 (cat)" + tail, ("cat", 123456)),
            ("4242 (Plex Media Scan)" + tail, ("Plex Media Scan", 123456)),
            ("4242 (a) b (c))" + tail, ("a) b (c)", 123456)),
            ("4242 (cat) S 1 2 3", nil),                         // cut short
            ("4242 cat" + tail, nil),                             // no parentheses
            ("", nil),
            ("4242 (cat) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 x 19", nil),   // no number
        ]
        for (line, expected) in table {
            let got = ProcessStat.parse(line)
            XCTAssertEqual(got?.comm, expected?.0, line)
            XCTAssertEqual(got?.startTime, expected?.1, line)
        }
    }

    func testThisProcessesStatIsReadFromProc() throws {
        let me = try XCTUnwrap(ProcessStat.of(pid: getpid()))
        XCTAssertFalse(me.comm.isEmpty)
        XCTAssertGreaterThan(me.startTime, 0)
        XCTAssertEqual(ProcessStat.of(pid: getpid())?.startTime, me.startTime, "the same process, the same start")
        XCTAssertNil(ProcessStat.of(pid: -1))
    }
}
