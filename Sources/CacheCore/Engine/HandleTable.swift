import Foundation

/// Handles of running transfers by fetch id, kept apart from the pure in-flight table.
final class HandleTable: Sendable {
    private let boxes = LockedValue<[Int: FetchHandleBox]>([:])

    func box(_ id: Int) -> FetchHandleBox {
        boxes.withLock { boxes in
            if let b = boxes[id] { return b }
            let b = FetchHandleBox()
            boxes[id] = b
            return b
        }
    }

    /// The box of a transfer still running, without creating one.
    func existing(_ id: Int) -> FetchHandleBox? {
        boxes.withLock { $0[id] }
    }

    func remove(_ id: Int) -> FetchHandleBox? {
        boxes.withLock { $0.removeValue(forKey: id) }
    }
}

/// The handle of one transfer, which may be asked to cancel or resume before `start` has
/// returned it (its first bytes can arrive, and pause it, before that).
final class FetchHandleBox: Sendable {
    private struct State {
        var handle: FetchHandle?
        var cancelled = false
        var resumed = false
        /// The last class asked for before the handle was there.
        var priority: (FetchPriority, Double)?
    }
    private let state = LockedValue(State())

    var handle: FetchHandle? { state.withLock { $0.handle } }

    func set(_ h: FetchHandle) {
        let (c, r, p) = state.withLock { s in
            s.handle = h
            return (s.cancelled, s.resumed, s.priority)
        }
        if c { h.cancel() }
        if r { h.resume() }
        if let (p, waited) = p { h.setPriority(p, waitedSeconds: waited) }
    }

    /// Passed on in the order asked (callers hold the entry's shard lock).
    func setPriority(_ p: FetchPriority, waitedSeconds: Double) {
        let h = state.withLock { s in
            if s.handle == nil { s.priority = (p, waitedSeconds) }
            return s.handle
        }
        h?.setPriority(p, waitedSeconds: waitedSeconds)
    }

    func resume() {
        state.withLock { s in
            s.resumed = true
            return s.handle
        }?.resume()
    }

    func cancel() {
        state.withLock { s in
            s.cancelled = true
            return s.handle
        }?.cancel()
    }
}
