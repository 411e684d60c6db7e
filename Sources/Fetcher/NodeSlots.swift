import CacheCore
import Dispatch
import NIOConcurrencyHelpers

/// The node client's share of the fetch policy, the same two rules the libcurl loop follows:
/// which requests may go now and which wait (`TransferAdmission`: `--max-connections` per node,
/// the rest in class order), and which running ones yield to a read that is behind
/// (`TransferScheduler`: lower classes of that node stop reading their answer; a scan or warm-up
/// while a higher class asks the node). One for the source, shared by its loops.
///
/// Design note: a lock around both policies and each member's wake-ups; taken when a transfer
/// starts, changes class or ends and when a waiting read becomes behind, never per byte. Wake-ups
/// run after the lock is released; they only hop onto their transfer's loop, where the transfer
/// asks `isHeld` (so hold changes told out of order cannot leave a stale one). Time comes from
/// `clock` (uptime ns) and the re-check at `TransferScheduler.Decision.nextCheck` is `schedule`d.
final class NodeSlots: Sendable {
    private struct Member {
        /// Called once its slot is granted, if it had to wait.
        var wake: (@Sendable () -> Void)?
        /// Called when it becomes held or is let go (it asks `isHeld`).
        let holdChanged: @Sendable () -> Void
        var held = false
    }

    private struct State {
        var admission: TransferAdmission
        var scheduler: TransferScheduler
        var members: [Int: Member] = [:]
        /// A re-check is scheduled for this time.
        var checkAt: UInt64?
    }

    private let state: NIOLockedValueBox<State>
    private let clock: @Sendable () -> UInt64
    /// Runs the closure `delay` ns from now (on any thread).
    private let schedule: @Sendable (_ delay: UInt64, _ work: @escaping @Sendable () -> Void) -> Void

    init(limits: TransferAdmission.Limits, patience: UInt64,
         clock: @escaping @Sendable () -> UInt64 = { DispatchTime.now().uptimeNanoseconds },
         schedule: @escaping @Sendable (_ delay: UInt64, _ work: @escaping @Sendable () -> Void) -> Void) {
        state = NIOLockedValueBox(State(admission: TransferAdmission(limits: limits),
                                        scheduler: TransferScheduler(patience: patience)))
        self.clock = clock
        self.schedule = schedule
    }

    /// Takes a slot to `node` now (true), or queues `wake`, called (on the releasing thread) once
    /// a slot passed to this transfer (false). From now until `release` (or `withdraw`) the
    /// transfer counts for the scheduler, and `holdChanged` tells it when to ask `isHeld`.
    func acquire(id: Int, node: String, priority: FetchPriority, owner: Int?,
                 wake: @escaping @Sendable () -> Void, holdChanged: @escaping @Sendable () -> Void) -> Bool {
        let now = clock()
        var granted = false
        let calls: Calls = state.withLockedValue { s in
            s.admission.arrive(id, origin: node, priority: priority)
            s.scheduler.add(id, origin: node, priority: priority, owner: owner, now: now)
            s.members[id] = Member(wake: wake, holdChanged: holdChanged)
            var calls = Self.admit(&s, granting: id, &granted)
            calls.merge(decide(&s, now: now))
            return calls
        }
        calls.run(self)
        return granted
    }

    /// Takes a waiting transfer out of the queue; false if it was not waiting (its slot may
    /// already be on its way to it).
    func withdraw(id: Int) -> Bool {
        let now = clock()
        let (withdrawn, calls): (Bool, Calls) = state.withLockedValue { s in
            guard s.admission.withdraw(id) else { return (false, Calls()) }
            s.members.removeValue(forKey: id)
            s.scheduler.remove(id)
            return (true, decide(&s, now: now))
        }
        calls.run(self)
        return withdrawn
    }

    /// A read began or stopped waiting on transfer `id` (see `FetchHandle.setPriority`).
    func setPriority(id: Int, _ priority: FetchPriority, waitedSeconds: Double) {
        let now = clock()
        let waited = UInt64(max(0, min(waitedSeconds, 1e6)) * 1e9)
        var none = false
        let calls: Calls = state.withLockedValue { s in
            guard s.members[id] != nil else { return Calls() }
            s.admission.reclass(id, priority)
            s.scheduler.setPriority(id, priority, waited: waited, now: now)
            var calls = Self.admit(&s, granting: -1, &none)
            calls.merge(decide(&s, now: now))
            return calls
        }
        calls.run(self)
    }

    /// Transfer `id` is done with its slot: it passes to the first waiting transfer that may go.
    func release(id: Int) {
        let now = clock()
        var none = false
        let calls: Calls = state.withLockedValue { s in
            s.admission.leave(id)
            s.scheduler.remove(id)
            s.members.removeValue(forKey: id)
            var calls = Self.admit(&s, granting: -1, &none)
            calls.merge(decide(&s, now: now))
            return calls
        }
        calls.run(self)
    }

    /// Whether the scheduler holds transfer `id` now: it reads no more of its answer until let go.
    func isHeld(id: Int) -> Bool { state.withLockedValue { $0.members[id]?.held ?? false } }

    /// A waiting read may have become behind: decide again.
    private func recheck() {
        let now = clock()
        let calls: Calls = state.withLockedValue { s in
            s.checkAt = nil
            return decide(&s, now: now)
        }
        calls.run(self)
    }

    /// What to call once the lock is released.
    private struct Calls {
        var wakes: [@Sendable () -> Void] = []
        /// When to decide again (delay in ns), if a new re-check is due.
        var recheckIn: UInt64?

        mutating func merge(_ other: Calls) {
            wakes += other.wakes
            if let r = other.recheckIn { recheckIn = min(recheckIn ?? .max, r) }
        }

        func run(_ slots: NodeSlots) {
            for w in wakes { w() }
            if let delay = recheckIn { slots.schedule(delay) { [weak slots] in slots?.recheck() } }
        }
    }

    /// Starts what the admission lets go: the wake-ups to call, except `granting`'s own (it takes
    /// its slot at once: `granted`). The node client never preempts (`next`'s default).
    private static func admit(_ s: inout State, granting: Int, _ granted: inout Bool) -> Calls {
        var calls = Calls()
        while let step = s.admission.next() {
            guard case let .start(id) = step else { continue }
            let wake = s.members[id]?.wake
            s.members[id]?.wake = nil
            if id == granting {
                granted = true
            } else if let wake {
                calls.wakes.append(wake)
            }
        }
        return calls
    }

    /// Applies the scheduler's decision: the members whose hold changed are told, and a re-check
    /// is asked for when a waiting read will become behind.
    private func decide(_ s: inout State, now: UInt64) -> Calls {
        let decision = s.scheduler.decide(now: now)
        var calls = Calls()
        for (id, m) in s.members {
            let hold = decision.held.contains(id)
            guard hold != m.held else { continue }
            s.members[id]!.held = hold
            calls.wakes.append(m.holdChanged)
        }
        if let at = decision.nextCheck, at < (s.checkAt ?? .max) {
            s.checkAt = at
            calls.recheckIn = at > now ? at - now : 0
        }
        return calls
    }

    /// Requests in flight and waiting, to all nodes (tests).
    var counts: (active: Int, waiting: Int) {
        state.withLockedValue { let c = $0.admission.counts; return (c.running, c.queued) }
    }
}
