import Foundation

/// The daemon's timers, on one thread: the sweeper's 4 Hz tick, origin health's probes, the
/// mount's read and listing deadlines, the stop and mount-check timeouts, `--on-change`
/// commands' kill timers and the index's batched flushes (docs/threads.md).
///
/// Design: a deadline heap (`DeadlineHeap`, a pure value type) under one lock, and one thread
/// (`timers`) that sleeps on the lock's condition until the earliest deadline, takes what is due
/// and runs it outside the lock. The thread starts with the first timer and ends after
/// `idleTime` with none. One thread for every timer: GCD gives each queue or timer that fires a
/// thread of its own (docs/design-history.md).
///
/// What runs here must be brief and must not block: it fails a reply, submits a job to a
/// `BlockingIOPool`, or hands a probe to the curl loop. A slow action delays every timer after it.
///
/// Time is a monotonic clock (`MonotonicInstant`, with `Duration`s for delays and periods, as
/// NIO's `NIODeadline` and `TimeAmount`), given: a scheduler made `manual` has no
/// thread, and `advance(by:)` moves its clock and runs what came due on the caller's thread, in
/// deadline order, each at its own deadline (a repeating timer fires once per period passed), so
/// tests of timers need no sleeps.
public final class Scheduler: Sendable {
    /// A scheduled action; `cancel()` keeps it from running if it has not started.
    public struct Timer: Sendable {
        let scheduler: Scheduler
        let id: UInt64
        public func cancel() { scheduler.cancel(id) }
    }

    /// The process's scheduler (a daemon's and every command's timers).
    public static let shared = Scheduler(name: "timers", clock: EngineClock.machineMonotonic)

    private struct State {
        var heap = DeadlineHeap()
        var nextID: UInt64 = 1
        /// The manual clock's time (`manual` schedulers only).
        var manualNow = MonotonicInstant(nanoseconds: 0)
        var threadRunning = false
        /// Bumped when a deadline earlier than the one the thread sleeps for comes in.
        var changes: UInt64 = 0
    }
    private let state: ConditionLock<State>
    private let name: String
    /// The clock of a scheduler with a thread; nil for a manual one.
    private let clock: (@Sendable () -> MonotonicInstant)?
    private let idleTime: Duration

    /// A scheduler with its own thread, named `name`, on the monotonic `clock` (the process's
    /// is `shared`, on the machine's).
    public init(name: String, idleTime: Duration = .seconds(30), clock: @escaping @Sendable () -> MonotonicInstant) {
        self.name = name
        self.idleTime = idleTime
        self.clock = clock
        state = ConditionLock(State())
    }

    private init(manualAt start: MonotonicInstant) {
        name = "manual"
        idleTime = .zero
        clock = nil
        var s = State()
        s.manualNow = start
        state = ConditionLock(s)
    }

    /// A scheduler with no thread: time moves only with `advance(by:)` (tests).
    public static func manual(at start: MonotonicInstant = MonotonicInstant(nanoseconds: 0)) -> Scheduler {
        Scheduler(manualAt: start)
    }

    /// Now, by this scheduler's clock.
    public var now: MonotonicInstant {
        if let clock { return clock() }
        return state.withLock { $0.manualNow }
    }

    /// Runs `action` once, `delay` from now (a negative delay: as soon as it can).
    @discardableResult
    public func after(_ delay: Duration, _ action: @escaping @Sendable () -> Void) -> Timer {
        schedule(delay: delay, every: nil, action)
    }

    /// Runs `action` every `interval`, the first time `interval` from now. A thread that
    /// falls behind skips the periods it missed (as a GCD timer does); a manual clock runs each.
    @discardableResult
    public func every(_ interval: Duration, _ action: @escaping @Sendable () -> Void) -> Timer {
        precondition(interval > .zero, "a repeating timer needs a period")
        return schedule(delay: interval, every: interval, action)
    }

    private func schedule(delay: Duration, every interval: Duration?, _ action: @escaping @Sendable () -> Void) -> Timer {
        let deadline = now + delay
        enum Wake { case none, thread, start }
        let (id, wake): (UInt64, Wake) = state.withLock { s in
            let id = s.nextID
            s.nextID += 1
            let earliest = s.heap.nextDeadline
            s.heap.insert(.init(deadline: deadline, id: id, interval: interval, action: action))
            guard clock != nil else { return (id, .none) }
            guard s.threadRunning else {
                s.threadRunning = true
                return (id, .start)
            }
            guard earliest.map({ deadline < $0 }) ?? true else { return (id, .none) }
            s.changes &+= 1
            return (id, .thread)
        }
        switch wake {
        case .none: break
        case .thread: state.signal()
        case .start: startThread()
        }
        return Timer(scheduler: self, id: id)
    }

    func cancel(_ id: UInt64) {
        state.withLock { $0.heap.cancel(id) }
    }

    /// Timers not yet run or cancelled (tests).
    public var pending: Int { state.withLock { $0.heap.count } }

    // MARK: The manual clock

    /// Moves a manual scheduler's clock `amount` on, running on this thread every action that
    /// comes due, in deadline order, with the clock at each one's deadline while it runs.
    public func advance(by amount: Duration) {
        precondition(clock == nil, "advance(by:) is for a manual scheduler")
        let end = state.withLock { $0.manualNow + amount }
        while let action = state.withLock({ s -> (@Sendable () -> Void)? in
            guard let item = s.heap.popDue(by: end, catchUp: false) else { return nil }
            s.manualNow = max(s.manualNow, item.deadline)
            return item.action
        }) {
            action()
        }
        state.withLock { $0.manualNow = max($0.manualNow, end) }
    }

    // MARK: The thread

    private func startThread() {
        let thread = Thread { [self] in
            BlockingIOPool.nameCurrentThread(name)   // as `top -H` shows it
            run()
        }
        thread.name = "httpcachefs-\(name)"
        thread.start()
    }

    private func run() {
        guard let clock else { return }
        while true {
            enum Step { case run(@Sendable () -> Void), sleep(Duration, UInt64), idle(UInt64) }
            let step: Step = state.withLock { s in
                let now = clock()
                if let item = s.heap.popDue(by: now, catchUp: true) { return .run(item.action) }
                if let next = s.heap.nextDeadline { return .sleep(next - now, s.changes) }
                return .idle(s.changes)
            }
            switch step {
            case let .run(action):
                action()
            case let .sleep(wait, seen):
                _ = state.wait(until: { $0.changes != seen }, timeout: wait.timeInterval)
            case let .idle(seen):
                guard !state.wait(until: { $0.changes != seen || $0.heap.count > 0 }, timeout: idleTime.timeInterval) else { continue }
                let ends = state.withLock { s in
                    guard s.heap.count == 0 else { return false }
                    s.threadRunning = false   // the next timer starts a thread again
                    return true
                }
                if ends { return }
            }
        }
    }
}

/// Timers by deadline: a binary min-heap on (deadline, id), so timers due at the same moment run
/// in the order they were made. Cancelling only forgets the id; the item is dropped when it
/// reaches the top. A pure value: no lock, no clock.
struct DeadlineHeap {
    struct Item {
        var deadline: MonotonicInstant
        var id: UInt64
        /// Repeating: the period (the item goes back in after it is taken).
        var interval: Duration?
        var action: @Sendable () -> Void
    }

    private var items: [Item] = []
    private var live: Set<UInt64> = []

    /// Timers not yet taken or cancelled.
    var count: Int { live.count }

    /// The earliest deadline of a timer not cancelled.
    var nextDeadline: MonotonicInstant? {
        mutating get {
            dropCancelled()
            return items.first?.deadline
        }
    }

    mutating func insert(_ item: Item) {
        live.insert(item.id)
        push(item)
    }

    mutating func cancel(_ id: UInt64) {
        live.remove(id)
        dropCancelled()
    }

    /// The earliest timer due by `now`, if any, taken out (a repeating one goes back in, one
    /// period later; with `catchUp` true a period already past is skipped, so the next comes
    /// after `now`).
    mutating func popDue(by now: MonotonicInstant, catchUp: Bool) -> Item? {
        dropCancelled()
        guard let first = items.first, first.deadline <= now else { return nil }
        pop()
        if var next = first.interval.map({ period in Item(deadline: first.deadline + period, id: first.id,
                                                          interval: period, action: first.action) }) {
            if catchUp, next.deadline <= now, let period = next.interval {
                let missed = (now - next.deadline).nanoseconds / max(1, period.nanoseconds)
                next.deadline = next.deadline + period * (missed + 1)
            }
            push(next)
        } else {
            live.remove(first.id)
        }
        return first
    }

    private mutating func dropCancelled() {
        while let first = items.first, !live.contains(first.id) { pop() }
    }

    private static func before(_ a: Item, _ b: Item) -> Bool {
        a.deadline < b.deadline || (a.deadline == b.deadline && a.id < b.id)
    }

    private mutating func push(_ item: Item) {
        items.append(item)
        var i = items.count - 1
        while i > 0 {
            let parent = (i - 1) / 2
            guard Self.before(items[i], items[parent]) else { break }
            items.swapAt(i, parent)
            i = parent
        }
    }

    private mutating func pop() {
        items.swapAt(0, items.count - 1)
        items.removeLast()
        var i = 0
        while true {
            let l = 2 * i + 1, r = l + 1
            var least = i
            if l < items.count, Self.before(items[l], items[least]) { least = l }
            if r < items.count, Self.before(items[r], items[least]) { least = r }
            guard least != i else { return }
            items.swapAt(i, least)
            i = least
        }
    }
}
