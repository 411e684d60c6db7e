import CacheCore
import Foundation

/// rclone's jobs for `_async=true` calls: the call answers `{"jobid": N}` at once and runs on;
/// `job/status jobid=N` tells how it went, in rclone's fields. The last `keep` jobs are kept.
/// Any thread; one lock, held only to copy a record in or out.
public final class RcJobs: Sendable {
    struct Job {
        var id: Int64
        var call: String
        var started: Date
        var ended: Date?
        var result: Result<RcValue, RcFailure>?
    }

    private let state = LockedValue<(next: Int64, jobs: [Job])>((1, []))
    let keep: Int
    /// The rc's wall clock, given by whoever builds it (the executable: the engine's): what jobs
    /// are stamped with and `core/stats` counts its elapsed time to, times users see in JSON.
    let clock: @Sendable () -> Date

    public init(keep: Int = 100, clock: @escaping @Sendable () -> Date) {
        self.keep = keep
        self.clock = clock
    }

    /// A new job for `call`, running; its id.
    public func start(_ call: String) -> Int64 {
        let now = clock()
        return state.withLock { s in
            let id = s.next
            s.next += 1
            s.jobs.append(Job(id: id, call: call, started: now))
            if s.jobs.count > keep { s.jobs.removeFirst(s.jobs.count - keep) }
            return id
        }
    }

    public func finish(_ id: Int64, _ result: Result<RcValue, RcFailure>) {
        let now = clock()
        state.withLock { s in
            guard let i = s.jobs.firstIndex(where: { $0.id == id }) else { return }
            s.jobs[i].ended = now
            s.jobs[i].result = result
        }
    }

    public func ids() -> [Int64] { state.withLock { $0.jobs.map(\.id) } }

    /// rclone's `job/status` answer; nil: no such job (or one long gone).
    public func status(_ id: Int64) -> RcValue? {
        guard let job = state.withLock({ $0.jobs.first { $0.id == id } }) else { return nil }
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        var error = "", output: RcValue = .null, success = false
        switch job.result {
        case let .success(value)?: output = value; success = true
        case let .failure(failure)?: error = failure.message
        case nil: break
        }
        let end = job.ended ?? clock()
        return .object([
            "id": .int(job.id), "group": .string("job/\(job.id)"), "finished": .bool(job.ended != nil),
            "success": .bool(success), "error": .string(error), "output": output,
            "startTime": .string(formatter.string(from: job.started)),
            "endTime": job.ended.map { .string(formatter.string(from: $0)) } ?? .string("0001-01-01T00:00:00Z"),
            "duration": .double(end.timeIntervalSince(job.started)),
        ])
    }
}
