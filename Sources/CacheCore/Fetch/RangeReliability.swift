import Atomics

/// Per origin (`OriginVersions.originName`): whether its answers to range requests lately included
/// 200s (the whole file: a CDN node that now and then ignores `Range`), and so whether the reads
/// of its files should ask for less. Pure; the engine keeps one table under a leaf lock
/// (`OriginRangeMemory`), fed by every head of a transfer that required a range
/// (`ResponseHead.rangeAnswers`, in `EntrySink`), asked by every read (`Reader.read`, for
/// `updateReadAhead`).
///
/// Why: each 200 to a range costs what the origin pushed before the cut reached it (a receive
/// window on a fresh connection, up to a bandwidth-delay product on a warm one; the origin's own
/// queue, megabytes, by its count), whatever the request asked. What the reads ask beyond what
/// they want is what can be saved: on an unreliable origin a reader that seeks (or starts) gets
/// no read-ahead until it reads on (`ReaderClass.earnAfter` reads in a row), so a random read
/// asks its own bytes only, and a 200 used from near the start (`usableLead`) ends at the
/// read's end. A reader that streams earns its read-ahead back after two reads.
///
/// The rule: unreliable while at least `unreliableAt` (2) of the origin's last `window` (32)
/// answers to required ranges were 200s. One stray 200 is no pattern; an origin at one in ten
/// stays marked; it is reliable again once 31 good answers in a row pushed all but one 200 out.
/// The fetcher keeps its own windows (`OriginRangeAnswers`) for another question: whether an
/// origin served most of its ranges lately, so that a transfer's 200s in a row are bad luck.
public struct RangeReliability: Sendable, Equatable {
    public static let window = 32
    public static let unreliableAt = 2

    /// The last answers, oldest first: true for a 200 to a required range.
    private(set) var recent: [Bool] = []

    public init() {}

    /// 200s among the last `window` answers.
    public var ignoredInWindow: Int { recent.lazy.filter { $0 }.count }

    /// 206s among the last `window` answers.
    public var servedInWindow: Int { recent.count - ignoredInWindow }

    public var unreliable: Bool { ignoredInWindow >= Self.unreliableAt }

    /// Nothing to remember: no 200 in the window (the table drops such records).
    public var isClean: Bool { !recent.contains(true) }

    /// One answer to a required range: a 200 (`ignored`) or a 206.
    public mutating func note(ignored: Bool) {
        recent.append(ignored)
        if recent.count > Self.window { recent.removeFirst(recent.count - Self.window) }
    }
}

/// The engine's table of `RangeReliability` by origin. Holds only origins with a 200 in their
/// window (a clean record is dropped), so its size is the number of origins that ignored a range
/// within their last 32 answers, not of all origins ever fetched from.
struct RangeReliabilityTable: Sendable, Equatable {
    private(set) var origins: [String: RangeReliability] = [:]

    init() {}

    /// How `note` changed an origin's standing (for the log).
    enum Change: Equatable { case none, becameUnreliable, becameReliable }

    /// A transfer's answers to a required range at `origin`: `ignored` 200s (cut and asked
    /// again, or used), then a 206 if `served`.
    mutating func note(origin: String, ignored: Int, served: Bool) -> Change {
        guard ignored > 0 || origins[origin] != nil else { return .none }   // a good answer of a clean origin
        var r = origins[origin] ?? RangeReliability()
        let before = r.unreliable
        for _ in 0..<max(0, ignored) { r.note(ignored: true) }
        if served { r.note(ignored: false) }
        origins[origin] = r.isClean ? nil : r
        switch (before, r.unreliable) {
        case (false, true): return .becameUnreliable
        case (true, false): return .becameReliable
        default: return .none
        }
    }

    func unreliable(_ origin: String) -> Bool { origins[origin]?.unreliable ?? false }

    /// Origins marked unreliable now.
    var unreliableCount: Int { origins.values.lazy.filter(\.unreliable).count }
}

/// The engine's `RangeReliabilityTable` under its own leaf lock, with a count of the origins
/// marked so that a read asks the table only while some origin is (`unreliable` is on the read
/// path: one relaxed atomic load otherwise). Any thread.
final class OriginRangeMemory: Sendable {
    private let table = LockedValue(RangeReliabilityTable())
    private let marked = ManagedAtomic<Int>(0)

    /// Whether reads of `url`'s origin ask for less now.
    func unreliable(url: String) -> Bool {
        guard marked.load(ordering: .relaxed) > 0 else { return false }
        let origin = OriginVersions.originName(url)
        return table.withLock { $0.unreliable(origin) }
    }

    /// Records a head's `rangeAnswers`; returns how the origin's standing changed.
    func note(url: String, _ answers: ResponseHead.RangeAnswers) -> RangeReliabilityTable.Change {
        let origin = OriginVersions.originName(url)
        return table.withLock { t in
            let change = t.note(origin: origin, ignored: answers.ignored, served: answers.served)
            marked.store(t.unreliableCount, ordering: .relaxed)
            return change
        }
    }
}
