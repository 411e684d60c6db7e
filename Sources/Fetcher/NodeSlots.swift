import CacheCore
import NIOConcurrencyHelpers

/// The node client's requests in flight: which may go now and which wait, as `TransferAdmission`
/// decides for both clients (`--max-connections` per node, the rest in class order, as the
/// libcurl loop starts its own). One for the source, shared by its loops.
///
/// Design note: a lock around the policy and the wake-ups of the waiting transfers; taken once
/// when a transfer starts, changes class or ends, never per byte. Wake-ups run after the lock is
/// released, on the thread that freed the slot (they only hop onto their transfer's loop).
final class NodeSlots: Sendable {
    private struct State {
        var admission: TransferAdmission
        var wakes: [Int: @Sendable () -> Void] = [:]
    }

    private let state: NIOLockedValueBox<State>

    init(limits: TransferAdmission.Limits) {
        state = NIOLockedValueBox(State(admission: TransferAdmission(limits: limits)))
    }

    /// Takes a slot to `node` now (true), or queues `wake`, called (on the releasing thread) once
    /// a slot passed to this transfer (false).
    func acquire(id: Int, node: String, priority: FetchPriority, wake: @escaping @Sendable () -> Void) -> Bool {
        var granted = false
        let woken: [@Sendable () -> Void] = state.withLockedValue { s in
            s.admission.arrive(id, origin: node, priority: priority)
            s.wakes[id] = wake
            return Self.admit(&s, granting: id, &granted)
        }
        for w in woken { w() }
        return granted
    }

    /// Takes a waiting transfer out of the queue; false if it was not waiting (its slot may
    /// already be on its way to it).
    func withdraw(id: Int) -> Bool {
        state.withLockedValue { s in
            guard s.admission.withdraw(id) else { return false }
            s.wakes.removeValue(forKey: id)
            return true
        }
    }

    func setPriority(id: Int, _ priority: FetchPriority) {
        state.withLockedValue { $0.admission.reclass(id, priority) }
    }

    /// Transfer `id` is done with its slot: it passes to the first waiting transfer that may go.
    func release(id: Int) {
        var none = false
        let woken: [@Sendable () -> Void] = state.withLockedValue { s in
            s.admission.leave(id)
            return Self.admit(&s, granting: -1, &none)
        }
        for w in woken { w() }
    }

    /// Starts what the policy lets go: the wake-ups to call, except `granting`'s own (it takes
    /// its slot at once: `granted`). The node client never preempts (`next`'s default).
    private static func admit(_ s: inout State, granting: Int, _ granted: inout Bool) -> [@Sendable () -> Void] {
        var woken: [@Sendable () -> Void] = []
        while let step = s.admission.next() {
            guard case let .start(id) = step else { continue }
            let wake = s.wakes.removeValue(forKey: id)
            if id == granting {
                granted = true
            } else if let wake {
                woken.append(wake)
            }
        }
        return woken
    }

    /// Requests in flight and waiting, to all nodes (tests).
    var counts: (active: Int, waiting: Int) {
        state.withLockedValue { let c = $0.admission.counts; return (c.running, c.queued) }
    }
}
