import CacheCore
import NIOConcurrencyHelpers

/// The cap on tier requests in flight at once (`--max-connections`), with the rest waiting in
/// class order (`FetchPriority`), then in order of arrival, as the libcurl loop queues its own.
final class NodeSlots: Sendable {
    private struct Waiter {
        let id: Int
        var priority: FetchPriority
        let order: Int
        let wake: @Sendable () -> Void
    }

    private struct State {
        var active = 0
        var waiting: [Waiter] = []
        var arrivals = 0
    }

    let limit: Int
    private let state = NIOLockedValueBox(State())

    init(limit: Int) { self.limit = max(1, limit) }

    /// Takes a slot now (true), or queues `wake`, called (on the releasing thread) once a slot
    /// passed to this transfer (false).
    func acquire(id: Int, priority: FetchPriority, wake: @escaping @Sendable () -> Void) -> Bool {
        state.withLockedValue { s in
            if s.active < limit && s.waiting.isEmpty {
                s.active += 1
                return true
            }
            s.arrivals += 1
            s.waiting.append(Waiter(id: id, priority: priority, order: s.arrivals, wake: wake))
            return false
        }
    }

    /// Takes a waiting transfer out of the queue; false if it was not waiting (its slot may
    /// already be on its way to it).
    func withdraw(id: Int) -> Bool {
        state.withLockedValue { s in
            guard let i = s.waiting.firstIndex(where: { $0.id == id }) else { return false }
            s.waiting.remove(at: i)
            return true
        }
    }

    func setPriority(id: Int, _ priority: FetchPriority) {
        state.withLockedValue { s in
            if let i = s.waiting.firstIndex(where: { $0.id == id }) { s.waiting[i].priority = priority }
        }
    }

    /// A transfer is done with its slot: it passes to the first waiting one, if any.
    func release() {
        let next: Waiter? = state.withLockedValue { s in
            guard let first = s.waiting.indices.min(by: {
                (s.waiting[$0].priority, s.waiting[$0].order) < (s.waiting[$1].priority, s.waiting[$1].order)
            }) else {
                s.active -= 1
                return nil
            }
            return s.waiting.remove(at: first)
        }
        next?.wake()
    }

    /// Requests in flight and waiting (tests).
    var counts: (active: Int, waiting: Int) { state.withLockedValue { ($0.active, $0.waiting.count) } }
}
