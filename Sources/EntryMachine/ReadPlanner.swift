import CoreTypes

/// Turns a byte range into an ordered plan of local reads, waits on fetches already running, and
/// new fetches. Pure: no I/O, no clock, no locks; the engine applies the plan.
///
/// Example (no read-ahead): 0..<1000 with 200..<500 and 700..<800 cached becomes
/// net 0..<200, disk 200..<500, net 500..<700, disk 700..<800, net 800..<1000.
///
/// Rules:
/// - Cached bytes are never fetched again: every new fetch stops at the next cached byte.
/// - Bytes that a running fetch will deliver soon are waited for (single flight). "Soon" means
///   within `seekThreshold` of that fetch's cursor, or within what it delivers in `catchUp`
///   seconds at its rate so far (kernel read-ahead runs megabytes ahead of a fast stream; that
///   is no seek). Past that, a seek starts a new fetch at the request and the old fetch is
///   truncated there, so it stops instead of downloading twice.
/// - The last fetch of a request extends past it by `readAhead` (clipped at the next cached byte,
///   the next running fetch, the end of the file and where the reader says it stops). A gap that lies wholly in the read-ahead
///   window is only fetched once it is at least half a window long, so a sequential reader keeps
///   one fetch ahead instead of spawning a stream of tiny ones.
/// - With `streamSize`, read-ahead is split into fetches of about that size, started together
///   (parallel streams): one reader can then fill a link that caps each connection. The bytes the
///   request itself needs stay in the first fetch, so a read never waits on more than one.
public struct ReadPlanner: Sendable {
    public var readAhead: Int64
    public var seekThreshold: Int64
    /// A running fetch that will reach the request within this many seconds is waited for: a
    /// new request costs a round trip and often a new connection.
    public var catchUp: Double
    /// Size of each parallel stream of read-ahead; nil: one fetch.
    public var streamSize: Int64?
    /// Where the reader stops reading (`cat --range`, a proxy response's last byte): read-ahead
    /// never runs past it, since nobody would read those bytes. nil: to the end of the file.
    public var readerEnd: Int64?

    public init(readAhead: Int64, seekThreshold: Int64 = 2 << 20, catchUp: Double = 0.5, streamSize: Int64? = nil,
                readerEnd: Int64? = nil) {
        self.readAhead = readAhead
        self.seekThreshold = seekThreshold
        self.catchUp = catchUp
        self.streamSize = streamSize
        self.readerEnd = readerEnd
    }

    /// A fetch that is already running: it will deliver `cursor..<end` (end nil: to EOF).
    public struct RunningFetch: Sendable, Equatable {
        public var id: Int
        public var cursor: Int64
        public var end: Int64?
        /// Its rate so far, if it has delivered anything.
        public var bytesPerSecond: Double?
        public init(id: Int, cursor: Int64, end: Int64?, bytesPerSecond: Double? = nil) {
            self.id = id
            self.cursor = cursor
            self.end = end
            self.bytesPerSecond = bytesPerSecond
        }
        package func covers(_ p: Int64) -> Bool { p >= cursor && (end.map { p < $0 } ?? true) }
    }

    /// A new fetch to start: `start..<end` (end nil: to EOF).
    public struct Fetch: Sendable, Equatable, CustomStringConvertible {
        public var start: Int64
        public var end: Int64?
        public init(start: Int64, end: Int64?) { self.start = start; self.end = end }
        public var description: String { "fetch \(start)..<\(end.map(String.init) ?? "EOF")" }
    }

    public enum Step: Sendable, Equatable, CustomStringConvertible {
        case disk(Range<Int64>)
        case net(Range<Int64>)
        case wait(Range<Int64>, fetch: Int)
        public var description: String {
            switch self {
            case let .disk(r): return "disk \(r.lowerBound)-\(r.upperBound - 1)"
            case let .net(r): return "net \(r.lowerBound)-\(r.upperBound - 1)"
            case let .wait(r, id): return "wait#\(id) \(r.lowerBound)-\(r.upperBound - 1)"
            }
        }
    }

    public struct Plan: Sendable, Equatable {
        /// Covers the request in order.
        public var steps: [Step] = []
        /// Fetches to start, in order.
        public var fetches: [Fetch] = []
        /// Running fetches to stop early: (fetch id, new end).
        public var truncations: [Truncation] = []
        /// True when every byte of the request is on disk already.
        public var isHit: Bool { steps.allSatisfy { if case .disk = $0 { return true } else { return false } } }
    }

    public struct Truncation: Sendable, Equatable {
        public var fetch: Int
        public var end: Int64
    }

    /// Plans `request` (clipped to `length` when known) against what is cached and running.
    public func plan(request: Range<Int64>, length: Int64?, cached: RangeSet,
                     running: [RunningFetch]) -> Plan {
        var plan = Plan()
        let request = length.map { request.clamped(to: 0..<max($0, 0)) } ?? request
        guard !request.isEmpty else { return plan }
        var running = running
        var p = request.lowerBound
        /// For net steps created by a seek past a running fetch: the end that fetch had.
        var inheritedEnd: [Int: Int64?] = [:]

        while p < request.upperBound {
            if cached.contains(p..<(p + 1)) {
                let end = min(request.upperBound, endOfPresent(cached, from: p))
                plan.steps.append(.disk(p..<end))
                p = end
                continue
            }
            let nextCached = cached.nextPresent(atOrAfter: p) ?? Int64.max
            if let i = running.firstIndex(where: { $0.covers(p) }) {
                let f = running[i]
                let reach = max(seekThreshold, Self.bytes(catchingUpAt: f.bytesPerSecond, for: catchUp))
                if p - f.cursor <= reach {
                    let end = min(request.upperBound, nextCached, f.end ?? Int64.max)
                    plan.steps.append(.wait(p..<end, fetch: f.id))
                    p = end
                    continue
                }
                // Too far ahead of that fetch: take over from here and stop it at p.
                plan.truncations.append(Truncation(fetch: f.id, end: p))
                inheritedEnd[plan.steps.count] = f.end
                running[i].end = p
            }
            let nextRunning = running.filter { $0.cursor > p }.map(\.cursor).min() ?? Int64.max
            let end = min(request.upperBound, nextCached, nextRunning)
            plan.steps.append(.net(p..<end))
            p = end
        }

        // Turn net steps into fetches; extend the last one (and inherited ones) past the request.
        let windowEnd: Int64? = {
            // Clamped: a request may end near Int64.max (a hostile Range, an unknown length).
            var w = request.upperBound.addingClamped(readAhead)
            if let readerEnd { w = min(w, max(readerEnd, request.upperBound)) }
            if let length { return min(w, length) }
            return w
        }()
        for (index, step) in plan.steps.enumerated() {
            guard case let .net(r) = step else { continue }
            var end: Int64? = r.upperBound
            let touchesEnd = r.upperBound == request.upperBound
            if touchesEnd || inheritedEnd[index] != nil {
                var target: Int64? = touchesEnd ? windowEnd : r.upperBound
                if let inherited = inheritedEnd[index] {
                    target = (inherited == nil || target == nil) ? nil : max(target!, inherited!)
                    if target == nil, let length { target = length }
                }
                let limit = min(cached.nextPresent(atOrAfter: r.upperBound) ?? Int64.max,
                                running.filter { $0.cursor >= r.upperBound }.map(\.cursor).min() ?? Int64.max)
                if let t = target { end = min(t, limit) } else { end = limit == Int64.max ? nil : limit }
                if let e = end, e < r.upperBound { end = r.upperBound }
            }
            plan.fetches.append(Fetch(start: r.lowerBound, end: end))
        }

        // Read-ahead beyond a request that needed no new fetch at its end.
        if readAhead > 0, plan.fetches.last?.end.map({ $0 < request.upperBound }) ?? (plan.fetches.isEmpty) {
            plan.fetches += readAheadFetches(after: request.upperBound, windowEnd: windowEnd, length: length,
                                             cached: cached, running: running)
        }
        if let streamSize, streamSize > 0 {
            plan.fetches = plan.fetches.flatMap { Self.streams(of: $0, keepingWhole: request.upperBound, size: streamSize) }
        }
        return plan
    }

    /// `fetch` cut into streams of about `size` bytes; the part before `keepingWhole` (what the
    /// request needs) stays in the first. A remainder under half a stream joins the last one.
    package static func streams(of fetch: Fetch, keepingWhole requestEnd: Int64, size: Int64) -> [Fetch] {
        guard let end = fetch.end else { return [fetch] }
        var out: [Fetch] = []
        var start = fetch.start
        var cut = min(end, max(requestEnd, start.addingClamped(size)))
        while true {
            if end - cut < size / 2 { cut = end }
            out.append(Fetch(start: start, end: cut))
            if cut >= end { return out }
            start = cut
            cut = min(end, start.addingClamped(size))
        }
    }

    private func readAheadFetches(after start: Int64, windowEnd: Int64?, length: Int64?, cached: RangeSet,
                                  running: [RunningFetch]) -> [Fetch] {
        guard let windowEnd, windowEnd > start else { return [] }
        var missing = RangeSet([start..<windowEnd])
        for r in cached.intersection(start..<windowEnd) { missing.remove(r) }
        for f in running { missing.remove(f.cursor..<max(f.cursor, f.end ?? Int64.max)) }
        return missing.ranges
            .filter { $0.length >= readAhead / 2 || $0.upperBound == length }
            .map { Fetch(start: $0.lowerBound, end: $0.upperBound) }
    }

    /// Whether a read at `request` continues a reader whose reads so far ended at `lastEnd`
    /// (negative: none yet). Near `lastEnd` it does: within `slack` ahead, within `behind`
    /// behind (the kernel's readahead has many reads in flight, answered by several threads, so
    /// they arrive out of order by up to its window). So does a jump forward over bytes that are
    /// all cached or coming in a running fetch: readers of one file share the kernel's page cache,
    /// so a reader's own reads skip the pages other readers brought in. Taking that for a seek
    /// would stop the fetches ahead that the others are about to read, and the origin would send
    /// again what was in flight when they stopped.
    public static func continuesSequentially(_ request: Range<Int64>, lastEnd: Int64, slack: Int64, behind: Int64 = 0,
                                             cached: RangeSet, running: [RunningFetch]) -> Bool {
        guard lastEnd >= 0 else { return false }
        let p = request.lowerBound
        if p <= lastEnd.addingClamped(slack) && p >= lastEnd - max(slack, behind) { return true }
        guard request.lowerBound > lastEnd else { return false }
        var skipped = RangeSet([lastEnd..<request.lowerBound])
        for r in cached.intersection(lastEnd..<request.lowerBound) { skipped.remove(r) }
        for f in running { skipped.remove(f.cursor..<max(f.cursor, f.end ?? Int64.max)) }
        return skipped.isEmpty
    }

    /// What a fetch delivers in `seconds` at `bytesPerSecond`, as a byte count that cannot trap
    /// (a rate measured over a tiny interval can be absurdly large).
    package static func bytes(catchingUpAt bytesPerSecond: Double?, for seconds: Double) -> Int64 {
        let n = (bytesPerSecond ?? 0) * seconds
        guard n.isFinite, n > 0 else { return n == .infinity ? FileLength.limit : 0 }
        return n >= Double(FileLength.limit) ? FileLength.limit : Int64(n)
    }

    private func endOfPresent(_ set: RangeSet, from p: Int64) -> Int64 {
        set.intersection(p..<Int64.max).first?.upperBound ?? p
    }
}
