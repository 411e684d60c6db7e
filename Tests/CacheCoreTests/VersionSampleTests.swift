import XCTest
@testable import CacheCore

/// Issue 46, item 8, the pure part: which fetches of a version without validators ask for a
/// sample of the held bytes before they start, which bytes (`VersionSample.plan`), and what the
/// sample's answer does (`VersionSample.outcome`).
final class VersionSampleTests: XCTestCase {
    private let url = "http://origin.test/plain.bin"
    private let date = "Mon, 01 Jan 2024 00:00:00 GMT"

    private func info(etag: String?, lastModified: String?) -> EntryInfo {
        EntryInfo(key: CacheKey(rawValue: "k"), url: url, finalURL: url, length: 32 << 20, contentType: nil, etag: etag,
                  lastModified: lastModified, acceptsRanges: true, generation: 2, validatedAt: Date())
    }

    func testOnlyAFetchOfASavedVersionWithoutAStrongETagPlansASample() {
        let head = RangeSet([0..<(1 << 20)])
        let seek: Int64 = 20 << 20
        let before = [(seek - 4096)..<seek]   // its overlap check, not held
        let rows: [(String, EntryInfo, persisted: Bool, ignoringETag: Bool, Range<Int64>?)] = [
            ("neither ETag nor Last-Modified", info(etag: nil, lastModified: nil), true, false, 0..<4096),
            ("Last-Modified only (a file replaced with its date kept)", info(etag: nil, lastModified: date), true, false, 0..<4096),
            ("a weak ETag", info(etag: "W/\"a\"", lastModified: nil), true, false, 0..<4096),
            ("a strong ETag whose origin's ETags are ignored", info(etag: "\"a\"", lastModified: date), true, true, 0..<4096),
            ("a strong ETag: If-Range says, no sample", info(etag: "\"a\"", lastModified: nil), true, false, nil),
            ("not saved yet (its first answer): nothing to mix with", info(etag: nil, lastModified: nil), false, false, nil),
        ]
        for (name, info, persisted, ignoringETag, expected) in rows {
            XCTAssertEqual(VersionSample.plan(info, persisted: persisted, ignoringETag: ignoringETag, start: seek, checks: before,
                                              coverage: head, pending: RangeSet()), expected, name)
        }
    }

    func testOnlyAFetchWithNoHeldBytesBeforeItAsksASample() {
        let plain = info(etag: nil, lastModified: nil)
        let mib: Int64 = 1 << 20
        typealias Row = (String, start: Int64, checks: [Range<Int64>], coverage: [Range<Int64>], pending: [Range<Int64>], Range<Int64>?)
        let rows: [Row] = [
            ("a seek past an uncached stretch", 20 * mib, [(20 * mib - 4096)..<(20 * mib), (21 * mib)..<(21 * mib + 4096)],
             [0..<mib], [], 0..<4096),
            ("the next range after cached bytes: its overlap compares them", mib, [(mib - 4096)..<mib], [0..<mib], [], nil),
            ("after bytes still in memory: compared as well", mib, [(mib - 4096)..<mib], [], [0..<mib], nil),
            ("a read-ahead launched before the 4 KiB before it came", 2 * mib, [(2 * mib - 4096)..<(2 * mib)],
             [0..<mib], [mib..<(mib + 512 << 10)], 0..<4096),
            ("held bytes only after the range: compared after it delivered, so a sample",
             0, [mib..<(mib + 4096)], [mib..<(2 * mib)], [], mib..<(mib + 4096)),
            ("a read from byte 0 over held bytes compares its own first ones", 0, [0..<4096], [0..<mib], [], nil),
            ("nothing held (a new version after a change): nothing to mix with", 20 * mib, [(20 * mib - 4096)..<(20 * mib)],
             [], [], nil),
        ]
        for (name, start, checks, coverage, pending, expected) in rows {
            XCTAssertEqual(VersionSample.plan(plain, persisted: true, ignoringETag: false, start: start, checks: checks,
                                              coverage: RangeSet(coverage), pending: RangeSet(pending)), expected, name)
        }
        // An open's probe samples whenever bytes are held: its head answers the opens before its
        // own first byte is compared. A listing page never does (read whole; a changed page is a
        // new version by its probe's head).
        XCTAssertEqual(VersionSample.plan(plain, persisted: true, ignoringETag: false, isProbe: true, start: 0, checks: [0..<1],
                                          coverage: RangeSet([0..<mib]), pending: RangeSet()), 0..<4096, "a revalidating probe")
        XCTAssertNil(VersionSample.plan(plain, persisted: true, ignoringETag: false, isProbe: true, start: 0, checks: [],
                                        coverage: RangeSet(), pending: RangeSet()), "a probe with nothing held")
        XCTAssertNil(VersionSample.plan(plain, persisted: true, ignoringETag: false, isProbe: true, listingPage: true, start: 0,
                                        checks: [], coverage: RangeSet([0..<mib]), pending: RangeSet()), "a listing page")
        XCTAssertNil(VersionSample.plan(plain, persisted: true, ignoringETag: false, listingPage: true, start: 20 * mib,
                                        checks: [], coverage: RangeSet([0..<mib]), pending: RangeSet()), "a listing page's range")
    }

    func testTheSampledBytesAreTheFirstHeld4KiBOnDiskBeforeInMemory() {
        let k: Int64 = 1024
        let rows: [(String, coverage: [Range<Int64>], pending: [Range<Int64>], Range<Int64>?)] = [
            ("nothing held: no sample", [], [], nil),
            ("the cached head", [0..<(1 << 20)], [], 0..<(4 * k)),
            ("a cached middle only", [(8 << 20)..<(9 << 20)], [], (8 << 20)..<((8 << 20) + 4 * k)),
            ("a short first stretch skipped for one that is 4 KiB long",
             [0..<(1 * k), (2 << 20)..<(3 << 20)], [], (2 << 20)..<((2 << 20) + 4 * k)),
            ("on disk before pending", [(5 << 20)..<(6 << 20)], [0..<(1 << 20)], (5 << 20)..<((5 << 20) + 4 * k)),
            ("only pending (just arrived, not written yet)", [], [0..<(64 * k)], 0..<(4 * k)),
            ("nothing 4 KiB long: the first held bytes there are", [(10 * k)..<(11 * k)], [(20 * k)..<(22 * k)], (10 * k)..<(11 * k)),
        ]
        for (name, coverage, pending, expected) in rows {
            XCTAssertEqual(VersionSample.plan(coverage: RangeSet(coverage), pending: RangeSet(pending)), expected, name)
        }
    }

    func testTheSamplesAnswerStartsTheFetchOrEndsIt() {
        let refused = FetchError.network(url: url, message: "refused")
        let rows: [(String, VersionSample.Verdict, probe: Bool, VersionSample.Outcome)] = [
            ("the same bytes: the fetch starts", .same, false, .start(knownChanged: false)),
            ("other bytes, or another length or date in its head: a new version, the fetch ends unstarted",
             .differs, false, .changed),
            ("an open's probe that differed starts, its head taken as the new version (the opens get it)",
             .differs, true, .start(knownChanged: true)),
            ("the held bytes went meanwhile: starts as it would without a sample", .notHeld, false, .start(knownChanged: false)),
            ("the sample failed: the fetch fails with its cause, having delivered nothing", .failed(refused), false, .fail(refused)),
            ("a probe's sample failed: so does the probe (its opens get the cached copy, as when the origin is down)",
             .failed(refused), true, .fail(refused)),
        ]
        for (name, verdict, probe, outcome) in rows {
            XCTAssertEqual(VersionSample.outcome(of: verdict, probe: probe), outcome, name)
        }
    }
}
