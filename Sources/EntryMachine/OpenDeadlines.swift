import CoreTypes

/// The sweeper's tick for opens not answered yet (`EngineCore.waitingOpens`) and for entries
/// whose every open timed out (`EngineCore.abandonedOpens`): which opens fail now, and which
/// transfers without a length are stopped now. Pure: the engine holds both tables under their
/// locks, calls `tick`, and answers and stops what it returns after.
///
/// An open waits for the end of a body without a length, so a slow one (a generated file) fails
/// its first open while its download goes on; an open again within `grace` finds it done or
/// nearer; an endless one (a radio station) is stopped `grace` after its last open timed out,
/// instead of downloading up to half the cache's capacity for nobody. By key, not URL: an open
/// of another URL of the same file (a rotating token left out with `--ignore-query`) waits on
/// the same transfer.
package enum OpenDeadlines {
    /// - Parameters:
    ///   - opens: the opens waiting, each with its deadline; those answered meanwhile and those
    ///     past their deadline leave it.
    ///   - abandoned: by key, the URL last asked and when its transfer is stopped.
    ///   - now: the engine clock's monotonic time, which every deadline here is on.
    ///   - isAnswered: whether an open was answered meanwhile.
    ///   - key: the cache key of a URL (nil: none; such an open is never abandoned).
    /// - Returns: the opens that fail now (`late`, in order), and the URLs whose transfers stop.
    package static func tick<Answer>(opens: inout [(deadline: MonotonicInstant, url: String, answer: Answer)],
                             abandoned: inout [CacheKey: (url: String, at: MonotonicInstant)],
                             now: MonotonicInstant, grace: Duration,
                             isAnswered: (Answer) -> Bool,
                             key: (String) -> CacheKey?) -> (late: [(url: String, answer: Answer)], stop: [String]) {
        var late: [(url: String, answer: Answer)] = []
        opens.removeAll { open in
            if isAnswered(open.answer) { return true }
            guard open.deadline <= now else { return false }
            late.append((open.url, open.answer))
            return true
        }
        guard !late.isEmpty || !abandoned.isEmpty else { return (late, []) }
        let waiting = Set(opens.compactMap { key($0.url) })
        for open in late {
            guard let k = key(open.url), !waiting.contains(k), abandoned[k] == nil else { continue }
            abandoned[k] = (open.url, now + grace)
        }
        var stop: [String] = []
        for (k, a) in abandoned where waiting.contains(k) || a.at <= now {
            abandoned[k] = nil
            if !waiting.contains(k) { stop.append(a.url) }
        }
        return (late, stop)
    }
}
