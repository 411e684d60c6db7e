import XCTest
import CoreTypes
@testable import EntryMachine

/// Every reader but a player pays for what it reads (`EarnedReadAhead`): a run's first read gets
/// nothing ahead, then the window starts small, doubles while it reads on, and never exceeds half
/// of what it has read since its last seek. The rule as tables of reads and the window after each.
final class EarnedReadAheadTests: XCTestCase {
    let kib: Int64 = 1 << 10
    let mib: Int64 = 1 << 20

    /// One read of a run: a seek (or the first read) starts one.
    enum Read { case start(Range<Int64>), on(Range<Int64>) }

    /// The windows after each of `reads`.
    func windows(_ reads: [Read], limit: Int64 = 64 << 20) -> [Int64] {
        var earned = EarnedReadAhead()
        return reads.map { read in
            switch read {
            case let .start(r): earned.started(by: r)
            case let .on(r): earned.continued(by: r, limit: limit)
            }
            return earned.window
        }
    }

    /// `count` reads of `size` in a row from `from`.
    func inARow(_ count: Int, of size: Int64, from: Int64 = 0) -> [Read] {
        (0..<count).map { i in
            let r = (from + Int64(i) * size)..<(from + Int64(i + 1) * size)
            return i == 0 ? .start(r) : .on(r)
        }
    }

    func testTheWindowAfterEachRead() {
        let table: [(reads: [Read], limit: Int64, windows: [Int64], why: String)] = [
            ([.start(0..<(16 * kib))], 64 * mib, [0],
             "`head -c 1` through the page cache: the kernel's 16 KiB, nothing ahead"),
            (inARow(6, of: 32 * kib), 64 * mib, [0, 16, 32, 64, 80, 96].map { $0 * kib },
             "a probe reading on in 32 KiB reads: from nothing, doubling, then half of what it read"),
            ([.start(0..<(128 * kib)), .on((128 * kib)..<(384 * kib)), .on((384 * kib)..<(896 * kib)),
              .on((896 * kib)..<(1920 * kib))], 64 * mib, [0, 16, 32, 64].map { $0 * kib },
             "reads that grow fast (the kernel's own read-ahead): the window doubles per read, no faster"),
            (inARow(3, of: mib, from: 5 * mib), 64 * mib, [0, 16 * kib, 32 * kib],
             "big reads past byte 0 too: it starts small"),
            (inARow(4, of: mib), 24 * kib, [0, 16 * kib, 24 * kib, 24 * kib],
             "never past the limit (`maxReadAhead`, what the reader consumes in a few seconds)"),
            (inARow(4, of: 32 * kib) + [.start((100 * mib)..<(100 * mib + 32 * kib))], 64 * mib, [0, 16, 32, 64, 0].map { $0 * kib },
             "a seek starts a new run: what was read before it earns nothing after it"),
            ([.start(0..<(64 * kib)), .start((8 * mib)..<(8 * mib + 64 * kib)), .start((3 * mib)..<(3 * mib + 64 * kib))], 64 * mib,
             [0, 0, 0], "a random reader, every read a seek, gets exactly what it reads"),
            ([.start(0..<(32 * kib)), .on(0..<(32 * kib)), .on((16 * kib)..<(48 * kib))], 64 * mib, [0, 16, 24].map { $0 * kib },
             "bytes read again count once: half of 32 KiB, then of 48 KiB"),
        ]
        for row in table {
            XCTAssertEqual(windows(row.reads, limit: row.limit), row.windows, row.why)
        }
    }

    /// Whatever a reader reads, in whatever sizes, a reader that stops after any read has had at
    /// most half of what it read in its run fetched ahead: it costs at most 1.5x what it read.
    func testWhatIsFetchedAheadNeverExceedsHalfOfWhatTheRunRead() {
        let sizes: [Int64] = [1, 4 * kib, 32 * kib, 7 * kib + 3, 128 * kib, mib, 64 * kib, 992 * kib, 16 * kib]
        for first in sizes.indices {
            var earned = EarnedReadAhead()
            var at: Int64 = 5 * mib
            var read: Int64 = 0
            for (i, size) in (sizes[first...] + sizes[..<first]).enumerated() {
                let r = at..<(at + size)
                if i == 0 { earned.started(by: r) } else { earned.continued(by: r, limit: 64 * mib) }
                at += size
                read += size
                XCTAssertLessThanOrEqual(earned.window, read / 2, "after \(i + 1) reads from size \(sizes[first])")
                XCTAssertEqual(earned.consumed, read)
            }
        }
    }

    func testAReaderThatReadsOnGetsGrowingRequestsNotAStreamOfSmallOnes() {
        // A scanner reading a `.ts` from its start in 32 KiB reads, as ffprobe does: the window
        // doubles until half of what it read bounds it, then grows with every read.
        let w = windows(inARow(64, of: 32 * kib))
        XCTAssertEqual(w.last, 1024 * kib, "after 2 MiB read, 1 MiB ahead")
        XCTAssertEqual(w, w.sorted(), "never shrinks while it reads on")
    }
}
