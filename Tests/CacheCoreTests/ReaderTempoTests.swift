@testable import CacheCore
import XCTest

/// Watched or bulk, from scripted read times alone (`ReaderTempo`): a player that is ahead idles
/// between its reads, a trickplay job asks again as soon as it is answered, and a film that
/// starves after keeping pace is still watched for a while.
final class ReaderTempoTests: XCTestCase {
    /// A stretch of reading: for `seconds`, a read every `every` seconds (or as soon as the last
    /// was answered, when that is later), each answered `wait` seconds after it was asked;
    /// `overlap`: the next read is asked just before the last is answered (the kernel's async
    /// read-ahead of a reader that keeps up with the bytes).
    struct Phase {
        var seconds: Double
        var every: Double
        var wait: Double
        var overlap = false

        /// A program reading as fast as it is given: each read waits for the link, the next is
        /// asked half a millisecond after the answer (the kernel and the program between them).
        static func bulk(_ seconds: Double, wait: Double = 0.1) -> Phase { Phase(seconds: seconds, every: 0, wait: wait + 0.0005) }
        /// A player that is ahead: its reads come from the read-ahead at once, one every `every`.
        static func ahead(_ seconds: Double, every: Double = 0.25) -> Phase { Phase(seconds: seconds, every: every, wait: 0.001) }
        /// Nothing read (paused).
        static func pause(_ seconds: Double) -> Phase { Phase(seconds: seconds, every: seconds, wait: 0.001) }
    }

    /// Runs the phases from time 100; returns the verdict at the end of each.
    func verdicts(_ phases: [Phase]) -> [ReaderTempo.Verdict] {
        var tempo = ReaderTempo(now: 100)
        var t = 100.0
        var out: [ReaderTempo.Verdict] = []
        for phase in phases {
            let end = t + phase.seconds
            while t < end {
                tempo.asked(now: t)
                if phase.overlap {
                    // The next read is asked before this one's answer: never idle.
                    tempo.asked(now: t + phase.wait * 0.9)
                    tempo.answered(now: t + phase.wait)
                    tempo.answered(now: t + phase.wait * 1.9)
                    t += phase.wait * 1.9
                } else {
                    tempo.answered(now: t + phase.wait)
                    t += max(phase.every, phase.wait)
                }
            }
            out.append(tempo.asked(now: t))
            tempo.answered(now: t + 0.001)
        }
        return out
    }

    func testTheVerdictFollowsHowTheReaderSpacesItsReads() {
        let rows: [(String, [Phase], [ReaderTempo.Verdict])] = [
            ("a player ahead of its bitrate idles: watched", [.ahead(60)], [.watched]),
            ("a trickplay job reads back to back: bulk once it has for bulkAfter seconds",
             [.bulk(4), .bulk(4), .bulk(60)], [.watched, .bulk, .bulk]),
            ("reads that overlap (the kernel's async read-ahead) are never idle: bulk",
             [Phase(seconds: 20, every: 0, wait: 0.05, overlap: true)], [.bulk]),
            ("a film that opens on a busy link waits a few seconds, then keeps pace: watched throughout",
             [.bulk(3), .ahead(60)], [.watched, .watched]),
            ("a film that starves after a minute of keeping pace is watched while its credit lasts",
             [.ahead(60), .bulk(20)], [.watched, .watched]),
            ("... and bulk once it has waited its credit and bulkAfter more",
             [.ahead(60), .bulk(ReaderTempo.maxCredit + ReaderTempo.bulkAfter + 3)], [.watched, .bulk]),
            ("a short pause earns little credit: a bulk reader that paused is bulk again soon",
             [.bulk(10), .pause(2.5), .bulk(ReaderTempo.bulkAfter + 6)], [.bulk, .watched, .bulk]),
            ("a paused film earns credit like a playing one", [.ahead(5), .pause(20), .bulk(15)], [.watched, .watched, .watched]),
            ("a bulk reader that starts keeping pace is watched again", [.bulk(20), .ahead(5)], [.bulk, .watched]),
            ("a program slowed by its own work (5% idle or more) keeps pace", [Phase(seconds: 30, every: 0.11, wait: 0.1)], [.watched]),
        ]
        for (name, phases, expected) in rows {
            XCTAssertEqual(verdicts(phases), expected, name)
        }
    }

    func testAReaderThatJustOpenedIsWatched() {
        var tempo = ReaderTempo(now: 0)
        XCTAssertEqual(tempo.asked(now: 0), .watched, "no time to judge yet: as players always were")
        XCTAssertEqual(tempo.outstanding, 1)
        tempo.answered(now: 0.5)
        XCTAssertEqual(tempo.outstanding, 0)
    }

    func testAnAnswerWithoutAnAskIsIgnored() {
        var tempo = ReaderTempo(now: 0)
        tempo.answered(now: 1)
        XCTAssertEqual(tempo.outstanding, 0)
    }

    func testBulkReadersFetchBelowEveryWatchedClass() {
        for watched in [FetchPriority.waiting, .waitedScan, .near, .far, .scan] {
            XCTAssertLessThan(watched, ReaderTempo.bulkFetchClass, "\(watched)")
        }
    }
}
