import Foundation

/// A fetch whose version has no strong validator and no held bytes before its range starts
/// only after a sample of the held ones compared equal (`VersionSample`).
///
/// Threads: `startAfterSample` on the launching thread, with no lock held (it reads the 4 KiB
/// held, from memory or a data file, as `heldBytes` does); the sample's answer on its
/// transfer's callback thread, with no lock held, where the fetch's transfer is started (a
/// source's `start` only queues it) or its sink told that it ended unstarted.
extension TransferStarts {
    /// Asks for the sample `range` of `generation`, then starts `request` into a sink made by
    /// `sink` (told whether the sample differed) if it compared equal, or if it differed and the
    /// fetch is an open's probe (whose head then starts the new version and answers the opens
    /// with it); otherwise the fetch ends unstarted (a new version when it differed).
    func startAfterSample(_ range: Range<Int64>, request: FetchRequest, sink: @escaping @Sendable (_ knownChanged: Bool) -> EntrySink,
                          fetchID: Int, entry handle: EntryHandle, shard: Shard, generation: Int64) {
        guard let expected = versions.heldBytes(handle, shard: shard, generation: generation, range: range) else {
            // Gone since the launch read the facts (evicted, or a new version): as without.
            return fetches.start(request, sink: sink(false), fetchID: fetchID)
        }
        var sample = request
        sample.start = range.lowerBound
        sample.end = range.upperBound
        // A probe's sample goes to the origin itself, as the probe does: a cache tier may still
        // hold the old version. (`isProbe` stays as the fetch's.)
        sample.requireRange = false   // its bytes are found where they come, in a whole answer too
        let id = makeID()
        logger.debug("version sample before a fetch with no held bytes before it", metadata: [
            "url": "\(request.url)", "sample": "\(range.lowerBound)-\(range.upperBound - 1)",
            "fetch": "\(request.start)-\(request.end.map { String($0 - 1) } ?? "")"])
        let sampleSink = SampleSink(engine: self, entry: handle, shard: shard, generation: generation, fetchID: id, range: range,
                                    expected: expected, url: request.url) { [self] verdict in
            switch VersionSample.outcome(of: verdict, probe: request.isProbe) {
            case let .start(knownChanged):
                // Dropped meanwhile (its reads went, a new version): a cancel found no transfer
                // to stop, so none starts.
                let wanted = shard.locked { $0[handle]?.inflight.fetches[fetchID] != nil }
                if wanted {
                    fetches.start(request, sink: sink(knownChanged), fetchID: fetchID)
                } else {
                    fetches.endUnstarted(sink(false), .cancelled)
                }
            case .changed:
                let (cancels, launches) = versions.overlapDiffered(handle, shard: shard, generation: generation, fetchID: fetchID,
                                                          at: range, by: "a sample of the cached bytes, before a fetch with none held before it")
                cancels.forEach { $0.cancel() }
                launches.forEach(launch)
                fetches.endUnstarted(sink(false), .remoteChanged(url: request.url))
            case let .fail(error):
                fetches.endUnstarted(sink(false), error)
            }
        }
        fetches.start(sample, sink: sampleSink, fetchID: id)
    }
}
