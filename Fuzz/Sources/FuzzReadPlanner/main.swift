import CacheCore
import FuzzSupport

/// The read planner with whatever lengths, requests, cached ranges and running fetches an
/// origin's answers and a reader's offsets can produce (a Content-Length and a FUSE offset are
/// both outside input; the planner's own settings and measured rates stay in their real
/// ranges). Invariants: the steps cover the clipped request in order with no gap, disk steps
/// read only cached bytes, and no new fetch starts on a cached byte.
@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzReadPlanner(_ data: UnsafePointer<UInt8>, _ size: Int) -> CInt {
    var input = FuzzInput(data, size)
    let planner = ReadPlanner(readAhead: input.offset() % (64 << 20), seekThreshold: input.offset() % (64 << 20),
                              catchUp: Double(input.byte()) / 64)
    let length: Int64? = input.bool() ? input.offset() : nil
    let a = input.offset(), b = input.offset()
    let request = min(a, b)..<max(a, b)
    var cached = RangeSet()
    for _ in 0..<Int(input.byte() % 8) {
        let x = input.offset(), y = input.offset()
        cached.insert(min(x, y)..<max(x, y))
    }
    var running: [ReadPlanner.RunningFetch] = []
    for id in 0..<Int(input.byte() % 4) {
        let cursor = input.offset()
        let end: Int64? = input.bool() ? max(cursor, input.offset()) : nil
        let rate: Double? = input.bool() ? Double(input.offset() % (1 << 40)) : nil  // up to 1 TB/s
        running.append(ReadPlanner.RunningFetch(id: id, cursor: cursor, end: end, bytesPerSecond: rate))
    }

    let plan = planner.plan(request: request, length: length, cached: cached, running: running)
    let clipped = length.map { request.clamped(to: 0..<max($0, 0)) } ?? request
    var p = clipped.lowerBound
    for step in plan.steps {
        let r: Range<Int64>
        switch step {
        case let .disk(x):
            r = x
            fuzzCheck(cached.contains(x), "disk step \(x) reads uncached bytes (cached: \(cached))")
        case let .net(x): r = x
        case let .wait(x, _): r = x
        }
        fuzzCheck(r.lowerBound == p && !r.isEmpty, "step \(step) does not continue at \(p)")
        p = r.upperBound
    }
    fuzzCheck(clipped.isEmpty ? plan.steps.isEmpty : p == clipped.upperBound, "steps end at \(p), not \(clipped.upperBound)")
    for fetch in plan.fetches {
        fuzzCheck(fetch.start == Int64.max || !cached.contains(fetch.start..<(fetch.start + 1)), "\(fetch) starts on a cached byte")
        if let end = fetch.end { fuzzCheck(end > fetch.start, "\(fetch) is empty") }
    }
    return 0
}
