import Foundation

/// Receives a version sample (`VersionSample`): the few held bytes asked again before a fetch
/// with no held bytes before it, compared with `expected` (the held ones, read as it was asked).
/// It records nothing in the cache: its one outcome is the verdict, handed over once.
///
/// Threads: the source's callback thread (one callback at a time), as any sink; `verdict` runs
/// there too, with no lock held (`TransferStarts.startAfterSample`: it starts the fetch's transfer
/// or ends it). Its head is compared with the entry's version under the shard lock, briefly.
/// Counted among the coordinator's sinks, so shutdown waits for it too.
final class SampleSink: FetchSink {
    let engine: any TransferEngine
    let entry: EntryHandle
    let shard: Shard
    let generation: Int64
    let fetchID: Int
    let range: Range<Int64>
    let expected: [UInt8]
    let url: String
    private let verdict: @Sendable (VersionSample.Verdict) -> Void

    private struct State {
        var position: Int64 = 0
        var got: [UInt8] = []
        var decided = false
        /// The answer is the asked range (a 206): once compared, it is let end by itself, so its
        /// connection serves the fetch next (a transfer stopped mid-body loses its connection).
        var exact = false
    }
    private let state = LockedValue(State())

    init(engine: any TransferEngine, entry: EntryHandle, shard: Shard, generation: Int64, fetchID: Int, range: Range<Int64>,
         expected: [UInt8], url: String, verdict: @escaping @Sendable (VersionSample.Verdict) -> Void) {
        self.engine = engine
        self.entry = entry
        self.shard = shard
        self.generation = generation
        self.fetchID = fetchID
        self.range = range
        self.expected = expected
        self.url = url
        self.verdict = verdict
    }

    /// Hands the verdict over, the first time only.
    private func decide(_ v: VersionSample.Verdict) {
        let first = state.withLock { s in
            defer { s.decided = true }
            return !s.decided
        }
        if first { verdict(v) }
    }

    func fetchDidReceiveHead(_ head: ResponseHead) -> Bool {
        enum Seen { case gone, distrusted(String), differs, same }
        let seen: Seen = shard.locked { entries in
            guard let e = entries[entry], e.isCurrent(generation) else { return .gone }
            // A page of another media type that names no version (a captive portal's login
            // page) is not a new version of this file: the fetch fails, the cached bytes stay.
            if let why = HeadDecision.Provenance(head: head, entry: e.info, rangeAsked: false).distrust { return .distrusted(why) }
            // Another length or date than the held version's: changed, whatever its bytes.
            return engine.versions.differs(e.info, head) ? .differs : .same
        }
        switch seen {
        case .gone:
            decide(.notHeld)
            return false
        case let .distrusted(why):
            decide(.failed(.invalidResponse(url: url, message: "the version sample's answer is not this file (\(why)); a captive portal or login page?")))
            return false
        case .differs:
            decide(.differs)
            return false
        case .same:
            state.withLock { s in
                s.position = head.bodyStart
                s.exact = head.status == 206 && head.bodyStart == range.lowerBound
            }
            return true
        }
    }

    func fetchDidReceive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let (done, exact): (Bool?, Bool) = state.withLock { s in
            let arrival = s.position..<(s.position + Int64(bytes.count))
            s.position = arrival.upperBound
            let part = arrival.clamped(to: range)
            if !part.isEmpty {
                let lo = Int(part.lowerBound - arrival.lowerBound)
                s.got += UnsafeRawBufferPointer(rebasing: bytes[lo..<(lo + Int(part.length))])
            }
            guard !s.decided, s.got.count == expected.count else { return (nil, s.exact) }
            return (s.got == expected, s.exact)
        }
        guard let done else { return true }
        decide(done ? .same : .differs)
        return exact   // a whole answer stops here; the asked range ends by itself
    }

    func fetchDidFinish(_ error: FetchError?) {
        engine.fetches.ended(fetchID)
        // No-op once compared. A body that ended cleanly before the sample's last byte (one with
        // no length: its end is the file's) is shorter than the held version: another one.
        decide(error.map { .failed($0) } ?? .differs)
        engine.fetches.sinkFinished()
    }
}
