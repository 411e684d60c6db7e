import XCTest
@testable import CacheCore
import TestSupport

/// Issue 46 item 9: the engine remembers per origin that its ranges were lately answered 200 (the
/// whole file), and its reads then ask for less (`RangeReliability`, `ReaderClass.earnedAfterRestart`).
/// The rules as tables, then replayed on a `GatedSource`.
final class RangeReliabilityTests: GatedEngineTestCase {
    /// Answers to required ranges, oldest first ("2" a 200, "6" a 206), and the verdict after them.
    func testRange200WhenAnOriginsRangesAreUnreliable() {
        let good30 = String(repeating: "6", count: 30), good31 = good30 + "6", good32 = good31 + "6"
        let table: [(answers: String, unreliable: Bool, why: String)] = [
            ("", false, "nothing heard"),
            ("2", false, "one stray 200 is no pattern"),
            ("6662666", false, "still one"),
            ("22", true, "two 200s"),
            ("2666666662", true, "one range request in ten, twice"),
            ("2" + good30 + "2", true, "two within the last 32 answers"),
            ("2" + good31 + "2", false, "33 answers: the first 200 left the window"),
            ("22" + good31, false, "31 good answers pushed all but one 200 out of the window"),
            ("22" + good32, false, "and with 32 none is left"),
            ("2666666662" + good31, false, "decayed after the fault stopped"),
        ]
        for row in table {
            var r = RangeReliability()
            for c in row.answers { r.note(ignored: c == "2") }
            XCTAssertEqual(r.unreliable, row.unreliable, "\(row.why): \(row.answers)")
            XCTAssertLessThanOrEqual(r.recent.count, RangeReliability.window)
        }
    }

    /// The table by origin: which notes change an origin's standing, and that it keeps only
    /// origins with a 200 in their window.
    func testRange200TheTableByOriginChangesAndForgets() {
        var t = RangeReliabilityTable()
        let steps: [(origin: String, ignored: Int, served: Bool, change: RangeReliabilityTable.Change, kept: Int, why: String)] = [
            ("a", 0, true, .none, 0, "a good answer of an origin never seen: nothing kept"),
            ("a", 1, true, .none, 1, "one 200 (cut), then a 206: kept, not marked"),
            ("b", 2, true, .becameUnreliable, 2, "two 200s in one transfer mark at once"),
            ("a", 1, false, .becameUnreliable, 2, "a's second 200, used as the whole file"),
            ("a", 0, true, .none, 2, "a good answer does not unmark"),
        ]
        for s in steps {
            XCTAssertEqual(t.note(origin: s.origin, ignored: s.ignored, served: s.served), s.change, s.why)
            XCTAssertEqual(t.origins.count, s.kept, s.why)
        }
        XCTAssertTrue(t.unreliable("a"))
        XCTAssertFalse(t.unreliable("c"), "an origin never seen serves ranges")
        XCTAssertEqual(t.unreliableCount, 2)
        var changes: [RangeReliabilityTable.Change] = []
        for _ in 0..<RangeReliability.window { changes.append(t.note(origin: "b", ignored: 0, served: true)) }
        XCTAssertEqual(changes.firstIndex(of: .becameReliable), RangeReliability.window - 3,
                       "reliable again once one 200 is left in the window: 31 good answers after the two (one in their transfer, 30 more)")
        XCTAssertNil(t.origins["b"], "a window without a 200 is forgotten")
        XCTAssertEqual(t.unreliableCount, 1)
    }

    /// Whether a read that starts anew (a reader's first, or a seek) keeps read-ahead.
    func testRange200WhichReadsThatStartAnewKeepReadAhead() {
        let mib: Int64 = 1 << 20
        let table: [(earned: Bool, first: Bool, read: Range<Int64>, unreliable: Bool, keeps: Bool, why: String)] = [
            (true, false, (8 * mib)..<(8 * mib + 65536), false, true, "a player's seek keeps what it had"),
            (true, false, (8 * mib)..<(8 * mib + 65536), true, false, "on an unreliable origin a seek asks only its bytes"),
            (true, true, (8 * mib)..<(8 * mib + 65536), true, false, "so does a player's first read there"),
            (false, true, 0..<mib, true, true, "a copy's first 1 MiB from byte 0 earns it at once, even there"),
            (false, false, 0..<mib, false, false, "a big read that is no first read earns nothing"),
            (false, true, (8 * mib)..<(8 * mib + 65536), false, false, "an unknown reader's jump earns nothing, as before"),
        ]
        for row in table {
            XCTAssertEqual(ReaderClass.earnedAfterRestart(earned: row.earned, first: row.first, request: row.read,
                                                          rangesUnreliable: row.unreliable), row.keeps, row.why)
        }
    }

    /// Replayed: once a transfer's head says its range was answered 200 twice, a player's seek
    /// asks only for its read; reading on, it earns read-ahead back; 31 good answers later, a seek
    /// reads ahead again. Another origin is not concerned.
    func testRange200AfterTwo200sASeekAsksOnlyForItsReadUntilTheOriginServesRangesAgain() throws {
        let source = GatedSource()
        let cache = try oneStreamEngine(source)
        defer { source.finishAll(); cache.shutdown() }
        let info = try open(cache, source)
        let chunk: Int64 = 32 << 10, ahead: Int64 = 256 << 10
        func read(_ reader: CacheReader, _ offset: Int64, answers: ResponseHead.RangeAnswers?) throws -> Range<Int64>? {
            let answered = expectation(description: "read at \(offset)")
            let box = ResultBox<[UInt8]>()
            let before = source.transfers.count
            reader.read(offset: offset, length: Int(chunk)) { box.set($0); answered.fulfill() }
            let t = source.transfers.count > before ? source.transfers.last : nil
            if let t {
                var head = ResponseHead(status: 206, finalURL: url, bodyStart: t.request.start, totalLength: length,
                                        etag: "\"a\"", acceptsRanges: true)
                head.rangeAnswers = answers
                _ = t.sink.fetchDidReceiveHead(head)
                t.send(data[Int(t.request.start)..<Int(t.request.end!)])
                t.finish()
            }
            wait(for: [answered], timeout: 5)
            XCTAssertEqual(try box.get(), Array(bytes(offset, chunk)))
            return t.map { $0.request.start..<$0.request.end! }
        }
        let first = cache.makeReader(for: info)
        let before = try XCTUnwrap(try read(first, 1 << 20, answers: .init(ignored: 2, served: true)))
        XCTAssertGreaterThanOrEqual(before.upperBound, (1 << 20) + chunk + ahead,
                                    "before the origin is known: read-ahead as usual (this transfer's range got two 200s)")
        XCTAssertTrue(cache.core.originRanges.unreliable(url: url))
        XCTAssertFalse(cache.core.originRanges.unreliable(url: "http://other.test/a.bin"), "per origin")
        let player = cache.makeReader(for: info)
        let at: Int64 = 2 << 20
        XCTAssertEqual(try read(player, at, answers: .init(ignored: 0, served: true)), at..<(at + chunk), "a seek asks for its read")
        XCTAssertEqual(try read(player, at + chunk, answers: .init(ignored: 0, served: true)), (at + chunk)..<(at + 2 * chunk))
        let third = try XCTUnwrap(try read(player, at + 2 * chunk, answers: .init(ignored: 0, served: true)))
        XCTAssertGreaterThanOrEqual(third.upperBound, at + 3 * chunk + ahead, "reading on, it earns read-ahead back")
        // 28 good answers more (32 after the two 200s): the origin serves ranges again.
        for _ in 0..<28 { _ = cache.core.originRanges.note(url: url, .init(ignored: 0, served: true)) }
        XCTAssertFalse(cache.core.originRanges.unreliable(url: url))
        let later = cache.makeReader(for: info)
        let jump: Int64 = 3 << 20
        let again = try XCTUnwrap(try read(later, jump, answers: .init(ignored: 0, served: true)))
        XCTAssertGreaterThanOrEqual(again.upperBound, jump + chunk + ahead, "a seek reads ahead again")
    }
}
