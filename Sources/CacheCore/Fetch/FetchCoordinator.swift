import Foundation
import Logging

/// The fetch coordinator: every transfer the engine runs, from the launch an entry's machine asked
/// for to its end.
///
/// *What it owns.* The source transfers start on (`source`: the real one inside the layers
/// whoever built the engine wrapped it in, `FetchLayers`), the running transfers' handles by fetch id (`HandleTable`), and the count of sinks not
/// finished yet (`activeSinks`, which shutdown waits for so their last extents reach the index).
/// An entry's machine decides what to fetch, cancel and reprioritize (its in-flight table is its
/// own, pure state); the engine turns a `Launch` into a request and an `EntrySink`
/// (`TransferStarts`), and this part carries it out: `start` calls `source.start` and keeps
/// the handle, `cancel`/`stop` reach the handles, `prioritize` passes new classes on. It knows
/// no entry and no engine.
///
/// *Which thread runs it.* The caller's: a reader's (launches, cancels, priorities), the fetch
/// thread's (a sink's launches and its end), the sweeper's (transfers without a length nobody
/// waits for), shutdown. `prioritize` is called under the entry's shard lock, so the fetcher
/// hears an entry's changes in the order they were made (a handle only queues them for its loop).
///
/// *What it may block on.* The handle table's leaf lock. `start` must be called with no lock
/// held: `source.start` may call back into the sink. `waitForSinks` blocks (shutdown only).
///
/// Map of this folder (`Fetch/`): transfers, from launch to bytes written.
/// - `FetchCoordinator.swift` (this file): the part that runs transfers: launches, handles,
///   cancels, priorities, the sinks shutdown waits for.
/// - `EntrySink.swift`: one transfer's source side: arrivals, waiters answered.
/// - `EntrySink+Writer.swift`: its writer side: jobs on a `WriteQueue` lane, room, checksums.
/// - `TransferStarts+Sample.swift`, `SampleSink.swift`: a version sample asked before a fetch with
///   no held bytes before it, its few bytes compared (`VersionSample`).
/// - `TransferStarts.swift`: `Launch` (a fetch the in-flight table registered), the entry's
///   facts read for it under the shard lock, and the request and sink built from them.
/// - `TransferEngine.swift`: what a sink reaches of the engine (`TransferStarts` gives it).
/// - `RangeSource.swift`: the protocol the cache fetches through (libcurl, tests' sources).
/// - `FetchLayers.swift`: what the engine knows of the layers around its source (the transfer
///   list, offline mode) and the status page's records of them; the layers themselves are
///   Fetcher's (`FetchTracker`, `OriginHealthSource`), wired in by whoever builds the engine.
/// - `NoRoomWarnings.swift`: a full disk warned of once a minute among all transfers.
/// - `TierStatus.swift`: what a cache tier did, for the status document.
/// Neighbours: feeds `Entry/` (arrival, head, finish events) under the shard lock; writes through
/// `Storage/` (`SliceStore`: writer lanes, data files, index) after `Eviction/` makes room;
/// buffers from `Memory/`; handles by fetch id in `Engine/HandleTable.swift`. Started by `Read/`
/// and `Engine/`; the executable plugs the real `RangeSource` in, wrapped in Fetcher's layers.
final class FetchCoordinator: Sendable {
    /// The source every transfer starts on: the outermost of the engine's `FetchLayers` (with
    /// the standard ones, Fetcher's `FetchTracker` around its `OriginHealthSource`).
    let source: RangeSource
    let logger: Logger
    /// Running transfers' handles, by fetch id.
    let handles = HandleTable()
    /// Transfers whose sink has not finished yet, so shutdown can wait for their last extents
    /// (broadcast when one finishes). Not a `DispatchGroup`: one freed while a sink that never
    /// finished had entered it ends the process. (Tests wait on it too.)
    let activeSinks = ConditionLock(0)
    /// Sinks finished so far (broadcast at each): what tests wait on for "all of it cached".
    let sinkEnds = ConditionLock(0)
    /// Whether a transfer that cannot cache warns now (once a minute among all of them).
    let noRoomWarnings = NoRoomWarnings()

    /// - Parameter source: what transfers start on (the outermost layer around the real source).
    init(source: RangeSource, logger: Logger) {
        self.source = source
        self.logger = logger
    }

    // MARK: Launches

    /// Starts `request` on the source, its bytes going to `sink`, and keeps its handle under
    /// `fetchID`. The engine built both from the entry's facts (`TransferStarts.launch`); this part
    /// knows no entry. Call with no lock held: `source.start` may call back into the sink.
    func start(_ request: FetchRequest, sink: FetchSink, fetchID: Int) {
        activeSinks.withLock { $0 += 1 }
        let box = handles.box(fetchID)
        logger.debug("fetch", metadata: ["url": "\(request.url)", "range": "\(request.rangeHeader ?? "all")"])
        box.set(source.start(request, sink: sink))
    }

    /// Ends a fetch whose transfer never started (its version sample differed or failed,
    /// `VersionSample`): its sink hears `error` as from a transfer, and is counted as one.
    func endUnstarted(_ sink: EntrySink, _ error: FetchError) {
        activeSinks.withLock { $0 += 1 }
        sink.fetchDidFinish(error)
    }

    // MARK: Running transfers

    /// Cancels the running transfers among `ids` (their fetches stay in the entry's table until
    /// they end). Call after the shard lock.
    func cancel(_ ids: some Sequence<Int>) {
        for id in ids { handles.existing(id)?.cancel() }
    }

    /// The handles of the running transfers among `ids`.
    func running(_ ids: some Sequence<Int>) -> [FetchHandleBox] {
        ids.compactMap { handles.existing($0) }
    }

    /// Takes the handles of `ids` out of the table (their entry dropped the fetches: a removal, a
    /// new version, shutdown), for the caller to cancel once it let go of the shard lock.
    func stop(_ ids: some Sequence<Int>) -> [FetchHandleBox] {
        ids.compactMap { handles.remove($0) }
    }

    /// A transfer ended (its sink's last callback): its handle goes.
    func ended(_ id: Int) {
        _ = handles.remove(id)
    }

    /// Resumes a transfer paused for room (the writer lanes drained).
    func resume(_ id: Int) {
        handles.existing(id)?.resume()
    }

    /// Passes changes of class on to the transfers. Call under the entry's shard lock, so that the
    /// fetcher hears them in the order they were made (a handle only queues them for its loop).
    func prioritize(_ changes: [InFlightTable.PriorityChange]) {
        for change in changes {
            handles.existing(change.id)?.setPriority(change.priority, waitedSeconds: change.waitedSeconds)
        }
    }

    // MARK: Sinks

    /// A sink finished: its last extent is with the index (shutdown waits for all of them).
    func sinkFinished() {
        activeSinks.withLock { $0 -= 1 }
        activeSinks.broadcast()   // shutdown, waiting for the last ones
        sinkEnds.withLock { $0 += 1 }
        sinkEnds.broadcast()
    }

    /// Tests: true once `condition` holds, looked at again each time a sink finishes (its last
    /// extent with the index); false if the next one does not come within `timeout` seconds,
    /// which bounds a hang. `condition` runs with no lock of this part held.
    func waitForSinkEnds(timeout: Double, until condition: () -> Bool) -> Bool {
        var seen = sinkEnds.withLock { $0 }
        while !condition() {
            guard sinkEnds.wait(until: { $0 != seen }, timeout: timeout) else { return condition() }
            seen = sinkEnds.withLock { $0 }
        }
        return true
    }

    /// Waits up to `timeout` seconds for every sink to finish (shutdown). False if some did not.
    @discardableResult
    func waitForSinks(timeout: Double) -> Bool {
        activeSinks.wait(until: { $0 == 0 }, timeout: timeout)
    }
}
