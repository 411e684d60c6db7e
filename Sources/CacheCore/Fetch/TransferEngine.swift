import Foundation
import Logging

/// What a transfer's sink (`EntrySink`, `SampleSink`) reaches of the engine, and nothing more:
/// the sink carries out its entry's machine's actions with these parts, never through the
/// engine's wiring. `TransferStarts` is the one in use; a sink is handed it when launched.
///
/// By what a sink does with them:
/// - a head: `versions` (`differs`, `adopt`, `startNewGeneration`, `answer` the opens),
///   `noteRangeAnswers`, `makeID` for a new probe, `launch` what the machine asks;
/// - an arrival: `store.buffer` from the queued share, `answers.wakeWaiters`, `versions.heldBytes`
///   and `versions.overlapDiffered` for the overlap check, `unknownLengthLimit`, `metrics`;
/// - a write (`EntrySink+Writer`): `store` (data files, extents), `evictor` (`makeRoom`, `space`,
///   `addBytes`, `countingScanBytes`), `fetches.noRoomWarnings`, `testHook`;
/// - the end: `answers.replanWaiters`, `memory.forget`, `fetches` (`ended`, `sinkFinished`,
///   `resume`), `launch`;
/// - every step: `now()` (the engine's clock), `logger`.
protocol TransferEngine: AnyObject, Sendable {
    var versions: Versions { get }
    var answers: ReadAnswers { get }
    var store: SliceStore { get }
    var evictor: Evictor { get }
    var memory: MemoryBudget { get }
    var fetches: FetchCoordinator { get }
    var metrics: CacheMetrics { get }
    var logger: Logger { get }
    var unknownLengthLimit: Int64 { get }
    var testHook: (@Sendable (EngineCore.Step) -> Void)? { get }
    func now() -> Date
    func makeID() -> Int
    func noteRangeAnswers(_ answers: ResponseHead.RangeAnswers, url: String)
    func launch(_ l: Launch)
    func launch(fetchID: Int, entry handle: EntryHandle, fetch: ReadPlanner.Fetch)
}
