/// At most `limit` holders at once; the others wait, in the order they came.
///
/// The proxy rewrites at most two HLS playlists at a time: a rewrite holds the playlist, its text
/// and the rewritten copy (about three times the input, up to 8 MiB in), so eight clients asking
/// for a hostile 300,000-segment playlist at once took the daemon to 414 MB. Waiting costs a
/// client time, not memory.
actor AsyncGate {
    private let limit: Int
    private var holders = 0
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(limit: Int) { self.limit = max(1, limit) }

    /// How many wait for a place now.
    var waitingCount: Int { waiting.count }

    func enter() async {
        if holders < limit {
            holders += 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    /// Gives the place to the first waiter, if any.
    func leave() {
        if waiting.isEmpty { holders -= 1 } else { waiting.removeFirst().resume() }
    }

    /// Runs `body` holding a place.
    nonisolated func run<T: Sendable>(_ body: @Sendable () throws -> T) async rethrows -> T {
        await enter()
        do {
            let result = try body()
            await leave()
            return result
        } catch {
            await leave()
            throw error
        }
    }
}
