import XCTest
@testable import CacheCore
import TestSupport

/// Who has read-ahead from its open (`readsAheadFromOpen`) and who earns it by reading
/// (`EarnedReadAhead`): a player and the engine's own warm-up (`preload`) have it; a program
/// nobody listed and a background reader through the mount (a thumbnailer) earn half of what
/// they read, unless their first read is a copy's (`earnsAtOnce`: big blocks from byte 0); a
/// player that lost it at a seek on an unreliable origin earns it back with such a read. The rules as tables, then replayed on a `GatedSource`.
final class ReadAheadEarningTests: GatedEngineTestCase {
    func testWhichFirstReadsEarnReadAheadAtOnce() {
        let kib: Int64 = 1 << 10
        let table: [(read: Range<Int64>, earns: Bool, why: String)] = [
            (0..<(1024 * kib), true, "a copy's first 1 MiB block (the kernel's first request, cut to max_read)"),
            (0..<(512 * kib), true, "half a MiB from the start"),
            (0..<(512 * kib - 1), false, "just under half a MiB"),
            (0..<(128 * kib), false, "a probe's 32 KiB read, as the kernel's initial read-ahead asks it"),
            (0..<(32 * kib), false, "a probe's read with direct I/O"),
            ((1 << 20)..<(2 << 20), false, "a big read past byte 0: a jump, not a stream from the start"),
            (0..<0, false, "nothing"),
        ]
        for row in table {
            XCTAssertEqual(ReaderClass.earnsAtOnce(firstRead: row.read), row.earns, row.why)
        }
    }

    func testWhichReadersHaveReadAheadFromTheirOpen() {
        let table: [(ReaderClass, ReadDoor, Bool)] = [
            (.player, .fuse, true), (.player, .proxy, true), (.player, .cli, true),
            (.unknown, .fuse, false),
            (.scanner, .fuse, false),
            (.background, .fuse, false),   // a thumbnailer through the mount earns it
            (.background, .cli, true),     // preload, through the engine
            (.background, .proxy, true),
        ]
        for (readerClass, door, has) in table {
            XCTAssertEqual(readerClass.readsAheadFromOpen(door: door), has, "\(readerClass) through \(door)")
        }
    }

    /// What the transfer a read started asked for (nil: the read was a hit).
    private func read(_ reader: CacheReader, _ offset: Int64, _ count: Int64, _ source: GatedSource) throws -> Range<Int64>? {
        try readServing(reader, offset, count, source).map { $0.request.start..<$0.request.end! }
    }

    func testAnUnknownReaderWhoseFirstReadIsACopysReadsAheadAsAPlayer() throws {
        let source = GatedSource()
        let cache = try oneStreamEngine(source)
        defer { source.finishAll(); cache.shutdown() }
        let reader = cache.makeReader(for: try open(cache, source), door: .fuse, readerClass: .unknown)
        let first = try XCTUnwrap(try read(reader, 0, 1 << 20, source))
        XCTAssertEqual(first, (256 << 10)..<((1 << 20) + (256 << 10)), "a player's first window, from the first round trip")
        let jump = try XCTUnwrap(try read(reader, 3 << 20, 32 << 10, source))
        XCTAssertGreaterThan(jump.upperBound, (3 << 20) + (48 << 10), "a copy keeps read-ahead after a seek, as a player")
    }

    func testAReaderNobodyListedPaysForWhatItReadsWhereverItStarts() throws {
        let source = GatedSource()
        let cache = try oneStreamEngine(source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let probe = cache.makeReader(for: info, door: .fuse, readerClass: .unknown)
        XCTAssertNil(try read(probe, 0, 128 << 10, source), "the open's first bytes are cached")
        XCTAssertEqual(try read(probe, 2 << 20, 32 << 10, source), (2 << 20)..<((2 << 20) + (32 << 10)),
                       "a probe that jumps after its first 128 KiB costs what it reads")
        let jumper = cache.makeReader(for: info, door: .fuse, readerClass: .unknown)
        XCTAssertEqual(try read(jumper, 3 << 20, 512 << 10, source), (3 << 20)..<((3 << 20) + (512 << 10)),
                       "a big first read past byte 0 too")
    }

    func testABackgroundReaderThroughTheMountEarnsReadAheadLikeAnUnknownOne() throws {
        let source = GatedSource()
        let cache = try oneStreamEngine(source)
        defer { source.finishAll(); cache.shutdown() }
        let reader = cache.makeReader(for: try open(cache, source), door: .fuse, readerClass: .background)
        let chunk: Int64 = 32 << 10, at: Int64 = 1 << 20
        XCTAssertEqual(try read(reader, at, chunk, source), at..<(at + chunk), "a thumbnailer's jump costs what it reads")
        XCTAssertEqual(try read(reader, at + chunk, chunk, source), (at + chunk)..<(at + 2 * chunk + chunk / 2),
                       "reading on, it earns a little")
        XCTAssertEqual(try read(reader, at + 2 * chunk, chunk, source), (at + 2 * chunk + chunk / 2)..<(at + 4 * chunk),
                       "and twice that with its third read")
        let t = try XCTUnwrap(source.transfers.last)
        XCTAssertEqual(t.request.priority, .preload, "its fetches still take only what the link has left")
    }

    func testAPinsWarmUpThroughTheMountEarnsReadAheadWithItsFirstMebibyte() throws {
        let source = GatedSource()
        let cache = try oneStreamEngine(source)
        defer { source.finishAll(); cache.shutdown() }
        // `setfattr -n user.httpcachefs.pin` warms the head through the mount's backend, a
        // background reader reading 1 MiB chunks from byte 0: a copy's reads, read ahead as a player's.
        let reader = cache.makeReader(for: try open(cache, source), door: .fuse, readerClass: .background)
        let first = try XCTUnwrap(try read(reader, 0, 1 << 20, source))
        XCTAssertGreaterThanOrEqual(first.upperBound, (1 << 20) + (256 << 10), "its chunks are fetched ahead")
    }

    func testPreloadThroughTheEngineHasReadAheadFromItsFirstRead() throws {
        let source = GatedSource()
        let cache = try oneStreamEngine(source)
        defer { source.finishAll(); cache.shutdown() }
        let reader = cache.makeReader(for: try open(cache, source), background: true)
        let at: Int64 = 1 << 20
        let first = try XCTUnwrap(try read(reader, at, 256 << 10, source))
        XCTAssertGreaterThanOrEqual(first.upperBound, at + (512 << 10), "its chunks are fetched ahead, as before")
    }
}
