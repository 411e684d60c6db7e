import Foundation

/// Receives a version sample (`VersionSample`): the few held bytes asked again before a fetch
/// with no held bytes before it, compared with `expected` (the held ones, read as it was asked).
/// It records nothing in the cache: its one outcome is the verdict, handed over once.
///
/// Threads: the source's callback thread (one callback at a time), as any sink; `verdict` runs
/// there too, with no lock held (`EngineCore.startAfterSample`: it starts the fetch's transfer
/// or ends it). Its head is compared with the entry's version under the shard lock, briefly.
/// Counted among the coordinator's sinks, so shutdown waits for it too.
final class SampleSink: FetchSink {
    let core: EngineCore
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
    }
    private let state = LockedValue(State())

    init(core: EngineCore, entry: EntryHandle, shard: Shard, generation: Int64, fetchID: Int, range: Range<Int64>,
         expected: [UInt8], url: String, verdict: @escaping @Sendable (VersionSample.Verdict) -> Void) {
        self.core = core
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
        // Another length or date than the held version's: changed, whatever its bytes.
        let differs: Bool? = shard.locked { entries in
            guard let e = entries[entry], e.isCurrent(generation) else { return nil }
            return core.differs(e.info, head)
        }
        switch differs {
        case nil:
            decide(.notHeld)
            return false
        case true?:
            decide(.differs)
            return false
        case false?:
            state.withLock { $0.position = head.bodyStart }
            return true
        }
    }

    func fetchDidReceive(_ bytes: UnsafeRawBufferPointer) -> Bool {
        let done: Bool? = state.withLock { s in
            let arrival = s.position..<(s.position + Int64(bytes.count))
            s.position = arrival.upperBound
            let part = arrival.clamped(to: range)
            if !part.isEmpty {
                let lo = Int(part.lowerBound - arrival.lowerBound)
                s.got += UnsafeRawBufferPointer(rebasing: bytes[lo..<(lo + Int(part.length))])
            }
            guard s.got.count == expected.count else { return nil }
            return s.got == expected
        }
        guard let done else { return true }
        decide(done ? .same : .differs)
        return false
    }

    func fetchDidFinish(_ error: FetchError?) {
        core.fetches.ended(fetchID)
        decide(.failed(error ?? .invalidResponse(
            url: url, message: "the answer to the version sample \(range.lowerBound)-\(range.upperBound - 1) ended short")))   // no-op once compared
        core.fetches.sinkFinished()
    }
}
